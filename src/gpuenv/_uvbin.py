"""The uv binary the ``uv`` package ships, looked up once per process.

uv's own ``find_uv_bin`` reads ``sysconfig``, whose first use is not thread-safe on
Python 3.11: two threads initialising it at once, and one of them gets ``TypeError``
(``gpuenv lock`` exited 70 when its background look at the index and the resolution
asked for uv together). Callers look uv up on the main thread before any background
work starts (``lock.uv.UvResolver`` does it when it is made); the look-up is also
serialised here, and its answer kept, so a later call from any thread reads no
``sysconfig`` at all.

Where the package sits in this interpreter's own prefix (a virtual environment, a
``pip install`` into Python's prefix), its binary is ``<prefix>/bin/uv``: what
``find_uv_bin`` answers there first, read without ``sysconfig``, whose first use costs
7-8 ms of every ``lock`` and ``install``. Anywhere else ``find_uv_bin`` decides.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from gpuenv.errors import ExternalToolError

_LOCK = threading.Lock()
# find_uv_bin -> its answer: tests replace uv.find_uv_bin with a stand-in, and a
# replaced function is asked again.
_FOUND: dict[object, str] = {}


def find_uv() -> str:
    """The path of the uv binary the ``uv`` package ships."""
    try:
        import uv as uv_package
    except ImportError as exc:  # pragma: no cover - uv is a dependency
        raise ExternalToolError("the 'uv' package is not installed") from exc
    with _LOCK:
        finder = uv_package.find_uv_bin
        if finder in _FOUND:
            return _FOUND[finder]
        try:
            path = _in_own_prefix(uv_package) if _stock(finder) else None
            path = path or str(finder())
        except FileNotFoundError as exc:  # uv's UvNotFound
            raise ExternalToolError(
                f"the uv binary is missing: {exc}",
                hint="reinstall gpuenv (its 'uv' dependency ships the binary)",
            ) from None
        _FOUND.clear()
        _FOUND[finder] = path
        return path


def _stock(finder: object) -> bool:
    """``finder`` is the ``uv`` package's own look-up (tests replace it)."""
    return getattr(finder, "__module__", None) == "uv._find_uv"


def _in_own_prefix(package: object) -> str | None:
    """``<prefix>/bin/uv`` when ``package`` is ``<prefix>/lib/pythonX.Y/site-packages/uv``
    (or ``lib64``) and ``<prefix>`` is this interpreter's ``sys.prefix``: the scripts folder of the
    scheme that installed it there, ``find_uv_bin``'s first candidate. None otherwise,
    and on Windows (``Scripts``, ``.exe``: left to ``find_uv_bin``)."""
    where = getattr(package, "__file__", None)
    if os.name != "posix" or not isinstance(where, str):
        return None
    folder = Path(os.path.abspath(where)).parent  # noqa: PTH100 - no symlinks resolved
    lib, python, site, name = folder.parts[-4:] if len(folder.parts) > 4 else ("",) * 4
    if (site, name) != ("site-packages", "uv") or lib not in ("lib", "lib64"):
        return None
    prefix = folder.parents[3]
    if not python.startswith("python") or prefix != Path(os.path.abspath(sys.prefix)):  # noqa: PTH100
        return None
    binary = prefix / "bin" / "uv"
    return str(binary) if binary.is_file() else None
