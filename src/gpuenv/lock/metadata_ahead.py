"""The torch family's wheel METADATA read while uv resolves.

Once uv has resolved a target, ``lock.wheelcheck`` reads the METADATA of the torch,
torchvision and torchaudio wheels it chose (their CUDA runtime, cuDNN and NCCL pins). On
a first lock that was 0.4-0.6 s after uv had finished: new TLS connections, a PEP 658
file or range requests on a 900 MB wheel. Yet the request pins each of them
(``torch==2.9.1``), and with the target's wheel tags that names one file of the index's
project page. So that file is guessed here and its METADATA read beside the resolution,
through the same per-sha256 read the check makes afterwards (``SharedPipWithMetadata``),
which then finds it done.

A guess and nothing more: the resolution still decides which wheel is locked, a wrong
guess costs one background read, and every failure here is silent (the read after the
resolution tries again and reports). A kept pin (a relock) is its own guess and needs no
page; a request through mirrors, or for a platform gpuenv does not install, is left to
the read afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import unquote, urljoin

from gpuenv.lock.model import PipPackage, PipRequest
from gpuenv.lock.torch_page import project_page
from gpuenv.names import TRIO

PAGE_TIMEOUT = 10.0
# Compiled on the first HTML page (``re`` caches them), ``html`` imported there too: a
# lock whose guesses are remembered parses no page, and both at import were 3 ms of
# every lock.
_HREF = r"""<a\s[^>]*?href\s*=\s*["']([^"']+)["']"""
_SHA256 = r"sha256=([0-9a-fA-F]{64})"
# Where uv's default index comes from when gpuenv names none (uv runs with --no-config).
_DEFAULT_FROM = ("UV_DEFAULT_INDEX", "UV_INDEX_URL")

Fetch = Callable[[str], bytes | None]  # a page's body (None: unreadable)
Read = Callable[[PipPackage, PipRequest], object]  # reads and keeps one wheel's METADATA


def pinned(request: PipRequest) -> dict[str, str]:
    """The torch family members the request pins to one version (``name==version``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    pins: dict[str, str] = {}
    for text in request.requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        specs = list(requirement.specifier)
        if requirement.name in TRIO and len(specs) == 1 and specs[0].operator == "==":
            pins[requirement.name] = specs[0].version
    return pins


def _tags(request: PipRequest) -> list[str] | None:
    """The target's wheel tags as uv ranks them (``lock.uv.target_tags``), as strings;
    None off the Linux platforms gpuenv installs, or for a target uv cannot resolve."""
    from gpuenv.errors import GpuenvError
    from gpuenv.lock._tags import ARCHES
    from gpuenv.lock.uv import target_tags

    if request.platform not in ARCHES:
        return None
    try:
        return [str(t) for t in target_tags(request)]
    except (GpuenvError, ValueError):  # a glibc older than manylinux2014, a bad Python
        return None


def page_files(body: bytes, page_url: str, prefix: str) -> Iterator[tuple[str, str, str]]:
    """(file name, absolute URL without credentials, sha256) of each file a simple-API
    project page lists with a sha256 (PEP 691 JSON, or PEP 503 HTML) whose name starts
    with ``prefix`` (a torch page lists thousands: only the candidates are joined). Only
    http(s) URLs: a ``file:`` link on a hostile page (a FIFO, ``/dev/zero``) would be
    opened by the read, and the check after the resolution would wait for it."""
    from gpuenv._network import strip_userinfo

    text = body.decode("utf-8", "replace")
    entries: list[tuple[str, str | None]] = []
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: deep nesting
            return
        files = data.get("files") if isinstance(data, dict) else None
        for entry in files if isinstance(files, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
                continue
            hashes = entry.get("hashes")
            sha = hashes.get("sha256") if isinstance(hashes, dict) else None
            entries.append((entry["url"], sha if isinstance(sha, str) else None))
    else:
        import html

        for raw in re.findall(_HREF, text, re.IGNORECASE):
            href = html.unescape(raw)
            found = re.search(_SHA256, href.partition("#")[2])
            entries.append((href, found.group(1) if found else None))
    prefix = prefix.lower()
    for href, sha in entries:
        path = href.partition("#")[0].partition("?")[0]
        filename = unquote(path.rsplit("/", 1)[-1])
        if sha is None or len(sha) != 64 or not filename.lower().startswith(prefix):
            continue
        url = strip_userinfo(urljoin(page_url, href)).split("#", 1)[0]
        if url.startswith(("https://", "http://")):  # never a local path a page names
            yield filename, url, sha.lower()


def guess(
    name: str, version: str, tags: list[str], files: Iterator[tuple[str, str, str]]
) -> PipPackage | None:
    """The file uv would pick for ``name==version`` among ``files``: the highest matching
    version (a local label such as ``+cu128`` matches ``==2.9.1``), then the target's
    most preferred tag."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    try:
        wanted = SpecifierSet(f"=={version}")
    except InvalidSpecifier:
        return None
    rank = {tag: n for n, tag in enumerate(tags)}
    best: tuple[tuple[Version, int], PipPackage] | None = None
    for filename, url, sha in files:
        if not filename.endswith(".whl"):
            continue
        try:
            file_name, file_version, _build, file_tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if file_name != name or not wanted.contains(file_version, prereleases=True):
            continue
        place = min((rank[str(t)] for t in file_tags if str(t) in rank), default=None)
        if place is None:
            continue
        key = (file_version, -place)
        if best is None or key > best[0]:
            best = (key, PipPackage(name, str(file_version), url, sha))
    return best[1] if best else None


class Guesses:
    """The guesses of earlier locks (``<cache>/wheel-metadata/guesses.json``): a lock
    of the same pins for the same target reads no page at all, and with the METADATA
    cached beside it nothing over the network (urllib's import and a page's parse were
    11 ms of a 170 ms lock of a small project, beside a 20 ms uv). Keyed by the index
    (redacted: no credential reaches the file; with none named, the variables uv's
    default comes from), the pin and the target's Python and platform; a file that is
    not one gpuenv wrote is no guesses."""

    FILE = "guesses.json"
    LIMIT = 1 << 20
    KEEP = 256

    def __init__(self, cache_dir: Path | None) -> None:
        self._path = cache_dir / "wheel-metadata" / self.FILE if cache_dir else None
        self._known: dict[str, PipPackage] | None = None
        self._new: dict[str, PipPackage] = {}

    @staticmethod
    def key(request: PipRequest, index: str | None, name: str, version: str) -> str:
        from gpuenv._redact import redact_url

        where = (
            redact_url(index)
            if index
            else "default:" + ",".join(redact_url(os.environ.get(v, "")) for v in _DEFAULT_FROM)
        )
        python = ".".join(request.python.split(".")[:2])
        return " ".join([where, f"{name}=={version}", python, request.platform, request.glibc])

    def get(self, key: str) -> PipPackage | None:
        if self._known is None:
            self._known = self._load()
        return self._known.get(key)

    def put(self, key: str, wheel: PipPackage) -> None:
        self._new[key] = wheel

    def save(self) -> None:
        """Add the new guesses to the file (the newest ``KEEP``); a failure is silent."""
        if self._path is None or not self._new:
            return
        from gpuenv._fs import atomic_write_text

        entries = self._load()
        for key, wheel in self._new.items():  # a guess made again moves to the newest end
            entries.pop(key, None)
            entries[key] = wheel
        kept = dict(list(entries.items())[-self.KEEP :])
        body = {k: [w.name, w.version, w.url, w.sha256] for k, w in kept.items()}
        with contextlib.suppress(OSError):
            atomic_write_text(self._path, json.dumps(body, indent=0) + "\n")

    def _load(self) -> dict[str, PipPackage]:
        from gpuenv import _fsread
        from gpuenv.errors import InputFileError

        if self._path is None:
            return {}
        try:
            data = _fsread.load_json(self._path, limit=self.LIMIT, what="metadata guesses")
        except (OSError, InputFileError):
            return {}
        known: dict[str, PipPackage] = {}
        for key, entry in data.items() if isinstance(data, dict) else ():
            if (
                isinstance(entry, list)
                and len(entry) == 4
                and all(isinstance(e, str) for e in entry)
                and entry[0] in TRIO
                and len(entry[3]) == 64
                and entry[2].startswith(("https://", "http://"))
            ):
                known[key] = PipPackage(entry[0], entry[1], entry[2], entry[3])
        return known


def expected_wheels(
    request: PipRequest,
    fetch: Fetch,
    default_index: Callable[[], str | None],
    guesses: Guesses | None = None,
) -> Iterator[PipPackage]:
    """The family's wheels the resolution of ``request`` will most likely return."""
    tags = _tags(request)
    if tags is None or request.mirrors.entries:
        return
    pins = pinned(request)
    kept = {p.name: p for p in request.preferences if p.url.endswith(".whl")}
    named = request.torch_index or request.default_index
    index = named
    for name, version in pins.items():
        previous = kept.get(name)
        if previous is not None and previous.version.split("+")[0] == version.split("+")[0]:
            yield previous
            continue
        key = Guesses.key(request, named, name, version)
        known = guesses.get(key) if guesses else None
        if known is not None:
            yield known
            continue
        if index is None:
            index = default_index()
            if index is None:
                return
        page = project_page(index, name)
        body = fetch(page)
        if body is not None:
            files = page_files(body, page, f"{name}-{version.split('+')[0]}")
            found = guess(name, version, tags, files)
            if found is not None:
                if guesses is not None:
                    guesses.put(key, found)
                yield found


def read_ahead(
    request: PipRequest, read: Read, default_index: Callable[[], str | None], fetch: Fetch
) -> None:
    """Start reading (``read``) the METADATA of each expected family wheel, each in a
    daemon thread; returns at once. Nothing here fails the lock."""
    from gpuenv.lock._background import Background

    def run() -> None:
        guesses = Guesses(request.cache_dir)
        for wheel in expected_wheels(request, fetch, default_index, guesses):
            # each read starts as its page is known: the next page is fetched meanwhile
            Background(lambda w=wheel: read(w, request), name="metadata-ahead")  # type: ignore[misc]
        guesses.save()

    # A failure anywhere stays in its Background, whose result nobody asks for.
    Background(run, name="metadata-ahead")
