"""``gpuenv lock``'s head start (``lock.headstart``), begun before argparse and the
command modules load.

A lock's time is mostly its uv runs, and the head start begins them from what the last
lock of the same bytes ran; begun from ``lock_cmd`` it starts some 30 ms after the
process, 20 of them spent importing the parser and the command modules. A command
line that is ``lock`` with only what ``parse`` reads here begins it here instead, with
the spec found and the cache named as the full path finds and names them:

- ``-f``/``--file PATH`` (before or after ``lock``: the spec), ``-q``, ``-v`` (either
  side), ``-t``/``--target NAME`` (repeatable) and ``--json`` (after ``lock``);
- each in its own argument, as ``gpuenv --help`` shows them: anything else
  (``--upgrade``, ``-P``, ``--check``, ``--help``, ``-fPATH``, ``--file=PATH``, an
  abbreviation argparse would take, a value that starts with ``-``, a second ``-f``) is
  left to ``lock_cmd``, which begins the same head start a moment later, or none.

What ``parse`` reads the way argparse would not can only name another recipe: its runs
are then not taken, and ``lock_cmd`` begins the right one (``headstart.begin``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

_EITHER_SIDE = frozenset({"-q", "--quiet", "-v", "--verbose"})
_SPEC = frozenset({"-f", "--file"})
_TARGET = frozenset({"-t", "--target"})


class PlainLock:
    """A plain ``gpuenv lock`` (see the module doc): its ``-f`` and its ``-t`` names."""

    __slots__ = ("file", "targets")

    def __init__(self, file: str | None, targets: tuple[str, ...] | None) -> None:
        self.file, self.targets = file, targets


def parse(argv: Sequence[str]) -> PlainLock | None:
    """``argv`` as a plain ``gpuenv lock``, or None for anything else."""
    file: str | None = None
    targets: list[str] = []
    command = False
    args = iter(argv)
    for arg in args:
        if arg in _EITHER_SIDE or (command and arg == "--json"):
            continue
        if arg in _SPEC or (command and arg in _TARGET):
            value = next(args, None)
            if value is None or value.startswith("-"):
                return None  # argparse's error (or a reading of its own): lock_cmd's
            if arg in _TARGET:
                targets.append(value)
            elif file is None:
                file = value
            else:
                return None  # a second -f: argparse keeps the last, lock_cmd decides
        elif arg == "lock" and not command:
            command = True
        else:
            return None
    return PlainLock(file, tuple(targets) or None) if command else None


def begin(plain: PlainLock) -> None:
    """The head start of the lock ``plain`` asks for, from this directory (nothing
    without a cache). Never raises for what it cannot do: ``lock_cmd`` then says it."""
    import os

    from gpuenv._settings import default_cache_dir
    from gpuenv.errors import GpuenvError
    from gpuenv.lock import headstart
    from gpuenv.runtime import find_spec

    try:
        cache = default_cache_dir(os.environ)
        spec = find_spec(plain.file, os.getcwd())  # noqa: PTH109 - no pathlib before uv starts
    except (OSError, GpuenvError):  # a removed working directory: the full path says so
        return
    if cache is not None:
        options = headstart.lock_options(plain.targets, False, None)
        headstart.begin(headstart.recipe_path(cache, spec, options))
