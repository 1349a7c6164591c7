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
import re
from pathlib import Path

# Only the standard library at import: ``gpuenv plan`` reads the remembered version.

_FILE = re.compile(r"torch-[^\"'<>/\s#]+?\.whl")
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


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

    text = body.decode("utf-8", "replace")
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return []
        listed = data.get("versions")
        if isinstance(listed, list):
            return [str(v) for v in listed]
        names = [str(f.get("filename", "")) for f in data.get("files", []) if isinstance(f, dict)]
    else:
        names = _FILE.findall(text)
    out = []
    for name in names:
        try:
            out.append(str(parse_wheel_filename(name.rsplit("/", 1)[-1])[1]))
        except (InvalidWheelFilename, InvalidVersion):
            continue
    return out


def newest_torch_on(index: str, *, timeout: float = 15.0) -> str | None:
    """The newest final torch on the simple index at ``index``; None when unreadable."""
    from gpuenv.lock.wheelmeta import MetadataUnavailable, fetch

    try:
        body = fetch(f"{index.rstrip('/')}/torch/", accept=_ACCEPT, timeout=timeout)
    except MetadataUnavailable:
        return None
    return newest_final(versions_on_page(body))


def _path(cache_dir: Path) -> Path:
    return cache_dir / "index" / "torch.json"


def record_newest_torch(cache_dir: Path, index: str, version: str) -> None:
    from gpuenv._fs import atomic_write_text
    from gpuenv.lock.model import strip_credentials

    path = _path(cache_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[strip_credentials(index)] = version
    with contextlib.suppress(OSError):  # the cache is a courtesy
        atomic_write_text(path, json.dumps(data, sort_keys=True, indent=1) + "\n")


def read_newest_torch(cache_dir: Path) -> str | None:
    """The newest torch any index showed the last ``gpuenv lock`` (None: not known)."""
    try:
        data = json.loads(_path(cache_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return newest_final([str(v) for v in data.values()])
