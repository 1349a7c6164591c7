"""The torch builds a torch index serves, as ``gpuenv lock`` last saw them.

The knowledge base records the builds PyTorch publishes for each release, but an index
can serve more: builds outside the release's official matrix, Pythons the data does not
list. ``plan`` has no network; ``lock`` does. While it resolves, ``lock`` reads the torch
index's project page for torch (``<torch-index>/torch/``, which lists every build's
wheels on the PyTorch index and its mirrors) once an hour at most, and keeps the builds
and Python tags it lists in gpuenv's cache (``<cache>/index/builds.json``, per index,
credentials removed). ``plan`` then considers a build the index serves that the data
lacks. The lock file never holds it: relocking an unchanged spec must give the same
bytes whatever the index published since.

Only the standard library at import: ``gpuenv plan`` reads the cache.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuenv.lock.torch_page import fetch_torch_page, load_cache, parse_torch_page

# version -> build tag -> platform -> Pythons ("3.12"), each sorted
Builds = dict[str, dict[str, dict[str, list[str]]]]

_TAG = re.compile(r"^(cpu|cu\d{2,4})$")
_PYTHONS = frozenset(f"{major}.{minor}" for major in (2, 3, 4) for minor in range(100))
FRESH_SECONDS = 3600.0
LIMIT = 4 << 20  # the cache file; a FIFO or a huge planted file is a miss


def platform_of(wheel_platform: str) -> str | None:
    """gpuenv's platform name for a wheel platform tag (None: not one gpuenv plans)."""
    if wheel_platform.endswith("_x86_64") and "linux" in wheel_platform:
        return "linux-64"
    if wheel_platform.endswith("_aarch64") and "linux" in wheel_platform:
        return "linux-aarch64"
    if wheel_platform == "win_amd64":
        return "win-64"
    if wheel_platform.startswith("macosx_") and wheel_platform.endswith("_arm64"):
        return "osx-arm64"
    return None


def builds_on_page(body: bytes) -> Builds:
    """Every torch build a simple-API page lists (JSON or HTML): final releases only, by
    the build tag of their local label (``+cu129``; an unlabelled macOS wheel is a CPU
    build), with the CPython versions of their wheels (free-threaded ones left out)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion

    found: dict[str, dict[str, dict[str, set[str]]]] = {}
    for name in parse_torch_page(body)[1]:
        try:
            _, version, _, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if version.is_prerelease or version.is_devrelease:
            continue
        for tag in tags:
            platform = platform_of(tag.platform)
            local = version.local or ("cpu" if platform == "osx-arm64" else None)
            interp = tag.interpreter
            if platform is None or local is None or not _TAG.match(local):
                continue
            # macOS torch wheels are cpXY-none (no ABI tag); cpXYt is free-threaded
            abi_ok = tag.abi in (interp, "none")
            if not (interp.startswith("cp") and abi_ok and interp[2:].isdigit()):
                continue
            python = f"{interp[2]}.{interp[3:]}"
            slot = found.setdefault(version.public, {}).setdefault(local, {})
            slot.setdefault(platform, set()).add(python)
    return {
        v: {t: {p: sorted(py, key=_py_key) for p, py in plats.items()} for t, plats in tags.items()}
        for v, tags in found.items()
    }


def _py_key(python: str) -> tuple[int, ...]:
    return tuple(int(p) for p in python.split("."))


def builds_on_index(base: str, *, timeout: float = 30.0) -> Builds | None:
    """The builds ``<base>/torch/`` lists; None when it cannot be read."""
    body = fetch_torch_page(base, timeout=timeout)
    return None if body is None else builds_on_page(body)


def _path(cache_dir: Path) -> Path:
    return cache_dir / "index" / "builds.json"


def _load(cache_dir: Path) -> dict[str, Any]:
    return load_cache(_path(cache_dir), limit=LIMIT, what="index builds cache")


def _key(base: str) -> str:
    from gpuenv._redact import redact_url

    return redact_url(base.rstrip("/"))


def recently_read(cache_dir: Path, base: str, now: float) -> bool:
    entry = _load(cache_dir).get(_key(base))
    at = entry.get("at") if isinstance(entry, dict) else None
    return isinstance(at, (int, float)) and 0 <= now - at < FRESH_SECONDS


def record_builds(cache_dir: Path, base: str, builds: Builds, now: float) -> None:
    from gpuenv._fs import atomic_write_text

    data = _load(cache_dir)
    data[_key(base)] = {"at": now, "builds": builds}
    with contextlib.suppress(OSError):  # the cache is a courtesy
        atomic_write_text(_path(cache_dir), json.dumps(data, sort_keys=True) + "\n", mode=0o600)


def seen_builds(cache_dir: Path, base: str) -> Builds:
    """The builds the last ``gpuenv lock`` saw on ``base`` (empty: none known). Entries
    of the wrong shape are dropped: the cache is read on every ``plan``."""
    entry = _load(cache_dir).get(_key(base))
    builds = entry.get("builds") if isinstance(entry, dict) else None
    if not isinstance(builds, dict):
        return {}
    out: Builds = {}
    for version, tags in builds.items():
        if not isinstance(tags, dict):
            continue
        for tag, platforms in tags.items():
            if not (isinstance(tag, str) and _TAG.match(tag) and isinstance(platforms, dict)):
                continue
            for platform, pythons in platforms.items():
                if isinstance(pythons, list) and _PYTHONS.issuperset(pythons):
                    slot = out.setdefault(str(version), {}).setdefault(tag, {})
                    slot[str(platform)] = pythons
    return out


def remember_index_builds(
    base: str | None,
    cache_dir: Path | None,
    now: float,
    *,
    keep: Callable[[Builds], Builds] | None = None,
) -> None:
    """Read ``base``'s torch page and keep what it lists (``keep``: only what that
    returns, e.g. what the knowledge base lacks), unless read within the hour (run beside
    the resolution; every failure is silent: the cache is a courtesy). An index read
    with nothing to keep is recorded too, and so is one whose page could not be read (a
    mirror without the flat ``torch/`` page, an index this machine cannot reach), with
    the builds seen before kept: the next lock within the hour asks nothing (each ask
    cost every lock an HTTP client's imports and a request)."""
    if base is None or cache_dir is None or recently_read(cache_dir, base, now):
        return
    try:
        builds = builds_on_index(base)
    except (OSError, ValueError):  # a cache or page problem: the cache is a courtesy
        return
    if builds is None:
        record_builds(cache_dir, base, seen_builds(cache_dir, base), now)
    else:
        record_builds(cache_dir, base, keep(builds) if keep else builds, now)
