"""The compiled form of regular expressions, kept on disk as ``_classcode`` keeps the
code of dataclass methods.

``re.compile`` parses a pattern and turns it into the regular-expression engine's
instructions in pure Python (``re._parser``, ``re._compiler``), and only the last step,
``_sre.compile``, is C. A lock compiles some 110 patterns (packaging's specifier and
marker grammars, tomllib's, gpuenv's own), 13 ms of its CPU; an install 55, 7 ms. The
engine's instructions are a list of integers: this module keeps, per pattern and flags,
the arguments ``re._compiler`` handed ``_sre.compile`` (flags, instructions, group
count and names) and hands them to ``_sre.compile`` directly the next time. The
pattern objects are the engine's own, built by the same call from the same arguments,
so nothing else changes; ``_sre.compile`` checks the instructions it is given, and one
it refuses is compiled again the usual way.

How: ``re._compile`` calls ``re._compiler.compile`` by its module attribute, which
``install`` replaces with a function that looks the pattern up first; on a miss the
original runs, with ``_sre`` seen through a copy of its namespace whose ``compile``
notes its arguments (per thread: a lock compiles patterns in two threads) before
calling the real one. Python 3.11 and later (``re._compiler``); elsewhere nothing is
installed.

Only the console script installs it, as ``_classcode``: one table per command and
interpreter, read on first use only where nobody but this user can write it.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpuenv.cli._classcode import read_table, write_table

_FORMAT = 1
_DEBUG = 128  # re.DEBUG: prints as it compiles, never cached
_table: dict[Any, object] = {}
_used: set[Any] = set()
_state: dict[str, object] = {}  # "path", "loaded", "new"
_noted = threading.local()  # .args: what _sre.compile was last called with, this thread
_KEEP = 3000


def table_path(cache_dir: Path, command: str) -> Path:
    tag = sys.implementation.cache_tag or "python"
    name = command if command.isidentifier() else "other"
    file = f"re-code-{_FORMAT}-{tag}-{sys.hexversion:x}-{name}.marshal"
    return cache_dir / "classcode" / file


def install(cache_dir: Path, command: str) -> None:
    """Put the table in front of ``re._compiler.compile`` (once per process)."""
    compiler = sys.modules.get("re._compiler")
    if "path" in _state or compiler is None:
        return
    original = getattr(compiler, "compile", None)
    engine: Any = getattr(compiler, "_sre", None)
    real = getattr(engine, "compile", None)
    if not callable(original) or not callable(real):
        return
    _state["path"] = table_path(cache_dir, command)

    def noting(*args: Any) -> Any:
        _noted.args = args
        return real(*args)

    setattr(compiler, "_sre", SimpleNamespace(**{**vars(engine), "compile": noting}))  # noqa: B010

    def compile_pattern(pattern: Any, flags: Any = 0) -> Any:
        return _compile(original, real, pattern, flags)

    setattr(compiler, "compile", compile_pattern)  # noqa: B010 - a module, not typed here


def _compile(original: Any, real: Any, pattern: Any, flags: Any) -> Any:
    if type(flags) is not int or flags & _DEBUG or type(pattern) not in (str, bytes):
        return original(pattern, flags)
    path = _state.get("path")
    if isinstance(path, Path) and "loaded" not in _state:
        _load(path)
    key = (pattern, flags)
    _used.add(key)
    args = _table.get(key)
    if isinstance(args, tuple):
        try:
            return real(pattern, *args)
        except (TypeError, ValueError, RuntimeError, OverflowError):
            pass  # refused (a damaged entry): compiled again below
    _noted.args = None
    compiled = original(pattern, flags)
    noted = getattr(_noted, "args", None)
    if isinstance(noted, tuple) and noted and noted[0] is pattern:
        _table[key] = _plain(noted[1:])
        _state["new"] = True
    return compiled


def _plain(value: Any) -> Any:
    """``value`` with plain ints for the engine's named constants (int subclasses,
    which marshal does not write): equal values, so the same instructions."""
    if isinstance(value, int) and type(value) is not int and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _load(path: Path) -> None:
    _state["loaded"] = True
    _table.update(
        (k, v)
        for k, v in read_table(path).items()
        if isinstance(k, tuple) and len(k) == 2 and isinstance(v, tuple)
    )


def save() -> None:
    """Write the table back when this process compiled a pattern it did not hold."""
    path = _state.get("path")
    if not isinstance(path, Path) or not _state.get("new"):
        return
    keep = _table if len(_table) <= _KEEP else {k: _table[k] for k in _used if k in _table}
    write_table(path, keep)
    _state["new"] = False
