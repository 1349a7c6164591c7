"""The uv binary the ``uv`` package ships, looked up once per process.

uv's own ``find_uv_bin`` reads ``sysconfig``, whose first use is not thread-safe on
Python 3.11: two threads initialising it at once, and one of them gets ``TypeError``
(``gpuenv lock`` exited 70 when its background look at the index and the resolution
asked for uv together). Callers look uv up on the main thread before any background
work starts (``lock.uv.UvResolver`` does it when it is made); the look-up is also
serialised here, and its answer kept, so a later call from any thread reads no
``sysconfig`` at all.
"""

from __future__ import annotations

import threading

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
            path = str(finder())
        except FileNotFoundError as exc:  # uv's UvNotFound
            raise ExternalToolError(
                f"the uv binary is missing: {exc}",
                hint="reinstall gpuenv (its 'uv' dependency ships the binary)",
            ) from None
        _FOUND.clear()
        _FOUND[finder] = path
        return path
