"""The torch project page of a simple index, which ``lock`` reads once an hour at most
for two caches under ``<cache>/index/``: the newest torch (``seen``) and the builds the
index serves (``index_builds``). One reader of the page (PEP 691 JSON, or the PEP 503
HTML page) and of those cache files.

Only the standard library at import: ``gpuenv plan`` reads the caches.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

_FILE = re.compile(r"torch-[^\"'<>/\s#]+?\.whl")  # "%2B" for "+" is unquoted after
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


def project_page(index: str, project: str) -> str:
    return f"{index.rstrip('/')}/{project}/"


def fetch_page(url: str, *, timeout: float) -> bytes | None:
    """A simple-API project page, JSON preferred; None when it cannot be read."""
    from gpuenv.lock.wheelmeta import MetadataUnavailable, fetch

    try:
        return fetch(url, accept=_ACCEPT, timeout=timeout)
    except MetadataUnavailable:
        return None


class Pages:
    """The project pages one lock has read, by URL: the torch page read ahead for its
    wheels' metadata (``lock.metadata_ahead``) is the one the look at the newest torch
    reads after the resolution (``lock.seen``), not a second request on the lock's path.
    Only pages that were read are kept; one lock's, never the next's."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._bodies: dict[str, bytes] = {}

    def fetch(self, url: str, *, timeout: float) -> bytes | None:
        with self._guard:
            body = self._bodies.get(url)
        if body is None:
            body = fetch_page(url, timeout=timeout)
            if body is not None:
                with self._guard:
                    self._bodies[url] = body
        return body


def fetch_torch_page(index: str, *, timeout: float, pages: Pages | None = None) -> bytes | None:
    """``<index>/torch/`` (through ``pages`` when given); None when it cannot be read."""
    url = project_page(index, "torch")
    return pages.fetch(url, timeout=timeout) if pages else fetch_page(url, timeout=timeout)


def parse_torch_page(body: bytes) -> tuple[dict[str, Any], list[str]]:
    """The page's JSON object (empty for an HTML page, or JSON that is not an object)
    and the names of the wheel files it lists (without any path)."""
    text = body.decode("utf-8", "replace")
    if not text.lstrip().startswith("{"):
        from urllib.parse import unquote

        return {}, [unquote(n).rsplit("/", 1)[-1] for n in _FILE.findall(text)]
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nesting planted to crash the reader
        return {}, []
    if not isinstance(data, dict):
        return {}, []
    files = data.get("files")
    files = files if isinstance(files, list) else []
    names = [str(f.get("filename", "")) for f in files if isinstance(f, dict)]
    return data, [name.rsplit("/", 1)[-1] for name in names]


def load_cache(path: Path, *, limit: int, what: str) -> dict[str, Any]:
    """A cache file's entries; nothing when it is not a small JSON object gpuenv wrote
    (read on every ``plan``: a FIFO, ``/dev/zero`` or deep nesting planted there is a
    miss)."""
    from gpuenv import _fsread
    from gpuenv.errors import InputFileError

    try:
        data = _fsread.load_json(path, limit=limit, what=what)
    except (OSError, InputFileError):
        return {}
    return data if isinstance(data, dict) else {}
