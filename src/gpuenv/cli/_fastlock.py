"""``gpuenv lock``'s head start (``lock.headstart``), begun before argparse and the
command modules load.

A lock's time is mostly its uv runs, and the head start begins them from what the last
lock of the same bytes ran; begun from ``lock_cmd`` it starts some 30 ms after the
process, 20 of them spent importing the parser and the command modules. A command
line that is ``lock`` and flags that change nothing the lock asks of uv (``--json``,
``-q``, ``-v``) begins it here instead, with the spec found and the cache named as the
full path finds and names them. Anything else (``-t``, ``--upgrade``, ``--check``,
``-f``, ``--help``) is left to ``lock_cmd``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

_PLAIN = frozenset({"--json", "-q", "--quiet", "-v", "--verbose"})


def wanted(argv: Sequence[str]) -> bool:
    """``argv`` is a plain ``gpuenv lock`` (see the module doc)."""
    return argv[:1] == ["lock"] and set(argv[1:]) <= _PLAIN


def begin() -> None:
    """The head start of a plain ``gpuenv lock`` in this directory (nothing without a
    cache). Never raises for what it cannot do: ``lock_cmd`` then says it."""
    import os

    from gpuenv._settings import default_cache_dir
    from gpuenv.errors import GpuenvError
    from gpuenv.lock import headstart
    from gpuenv.runtime import find_spec

    try:
        cache = default_cache_dir(os.environ)
        spec = find_spec(None, os.getcwd())  # noqa: PTH109 - no pathlib before uv starts
    except (OSError, GpuenvError):  # a removed working directory: the full path says so
        return
    if cache is not None:
        options = headstart.lock_options(None, False, None)
        headstart.begin(headstart.recipe_path(cache, spec, options))
