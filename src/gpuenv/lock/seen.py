"""The newest torch an index offers, as ``gpuenv lock`` last saw it.

``plan`` has no network, so it cannot see that the index has a torch release newer than
gpuenv's knowledge base. ``lock`` can: while it resolves, it reads the default index's
torch project page once (PEP 691 JSON, or the PEP 503 HTML page) and remembers the newest
final release in gpuenv's cache (``<cache>/index/torch.json``). ``lock`` warns about it
at once; ``plan`` reads the remembered version and says so plainly. The lock file itself
never holds it: relocking an unchanged spec must give the same bytes whatever the index
published since.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

# Only the standard library at import: ``gpuenv plan`` reads the remembered version.
from gpuenv.lock.torch_page import Pages, fetch_torch_page, load_cache, parse_torch_page


def newest_final(versions: list[str]) -> str | None:
    from packaging.version import InvalidVersion, Version

    found = []
    for text in versions:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if not (version.is_prerelease or version.is_devrelease):
            found.append(Version(version.public))
    return str(max(found)) if found else None


def versions_on_page(body: bytes) -> list[str]:
    """Every torch version a simple-API project page lists (JSON or HTML)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion

    data, names = parse_torch_page(body)
    listed = data.get("versions")
    if isinstance(listed, list):
        return [str(v) for v in listed]
    out = []
    for name in names:
        try:
            out.append(str(parse_wheel_filename(name)[1]))
        except (InvalidWheelFilename, InvalidVersion):
            continue
    return out


def newest_torch_on(index: str, *, timeout: float = 15.0, pages: Pages | None = None) -> str | None:
    """The newest final torch on the simple index at ``index``; None when unreadable."""
    body = fetch_torch_page(index, timeout=timeout, pages=pages)
    return None if body is None else newest_final(versions_on_page(body))


def _path(cache_dir: Path) -> Path:
    return cache_dir / "index" / "torch.json"


# How long a look at the index stays good: a lock within the hour does not ask again.
FRESH_SECONDS = 3600.0


def _load(cache_dir: Path) -> dict[str, Any]:
    return load_cache(_path(cache_dir), limit=1 << 20, what="index cache")


def recently_seen(cache_dir: Path, index: str, now: float) -> str | None:
    """The newest torch seen on ``index`` within the last hour, if any."""
    from gpuenv._redact import redact_url

    entry = _load(cache_dir).get(redact_url(index))
    if not isinstance(entry, dict) or not isinstance(entry.get("at"), (int, float)):
        return None
    fresh = 0 <= now - entry["at"] < FRESH_SECONDS
    return str(entry.get("version")) if fresh and entry.get("version") else None


def record_newest_torch(cache_dir: Path, index: str, version: str, now: float) -> None:
    from gpuenv._fs import atomic_write_text
    from gpuenv._redact import redact_url

    path = _path(cache_dir)
    data = _load(cache_dir)
    data[redact_url(index)] = {"version": version, "at": now}
    with contextlib.suppress(OSError):  # the cache is a courtesy
        atomic_write_text(path, json.dumps(data, sort_keys=True, indent=1) + "\n")


def read_newest_torch(cache_dir: Path) -> str | None:
    """The newest torch any index showed the last ``gpuenv lock`` (None: not known)."""
    entries = _load(cache_dir).values()
    versions = [str(e["version"]) for e in entries if isinstance(e, dict) and e.get("version")]
    return newest_final(versions)
