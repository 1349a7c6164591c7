"""The code of the methods ``dataclasses`` writes, compiled once and kept on disk.

Every ``@dataclass`` builds its ``__init__``, ``__repr__``, ``__eq__`` (and, frozen,
``__hash__``, ``__setattr__``, ``__delattr__``) as source text and runs it through
``exec``, and compiling that text is nearly all of a class's cost: 0.5 ms a frozen
class on Python 3.11, against 0.06 ms with the compiled code at hand. ``gpuenv lock``
and ``gpuenv install`` create some 80 of them before their first uv call, 40-45 ms of
a 190 ms lock. The classes stay plain dataclasses (mypy, ``fields``, ``replace`` and
frozenness unchanged); only the compile is skipped.

How: ``dataclasses`` calls ``exec`` by its global name, so ``install`` gives that
module an ``exec`` of its own that looks the source text up in a table of code
objects (``marshal``, the format of ``.pyc`` files) and compiles only what it has not
seen; ``exec(text)`` and ``exec(compile(text, "<string>", "exec", dont_inherit=True))``
run the same code, so nothing else changes. The table is keyed by the text itself (a
new gpuenv or a new class compiles its text once more) and lives in gpuenv's cache
directory, one file per command (a process reads only what its command uses:
unmarshalling costs about 2 ms per 500 texts) and per interpreter (``sys.hexversion``:
code objects are not portable across versions).

Only the console script installs it (``gpuenv.cli.entry``), in its own process, never
a program importing gpuenv. A missing, unreadable or damaged table is an empty one;
one that cannot be written is not written. The file is trusted as the interpreter
trusts ``__pycache__`` only where nobody but this user can write it or its folder: a
table in a shared, group- or world-writable cache is never read.
"""

from __future__ import annotations

import builtins
import contextlib
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

_FORMAT = 2  # 2: compiled without this module's __future__ flags
_CODE = CodeType  # not type(compile(...)): a process's first compile costs 1 ms
_table: dict[str, object] = {}
_used: set[str] = set()  # the texts this process ran
_state: dict[str, object] = {}  # "path": the table's file; "new": texts compiled here
_KEEP = 3000  # past this many texts (old gpuenv versions'), keep only this process's


def table_path(cache_dir: Path, command: str) -> Path:
    """One table per command (what ``lock`` compiles is not read by ``install``), per
    interpreter."""
    tag = sys.implementation.cache_tag or "python"
    name = command if command.isidentifier() else "other"
    # In a folder of its own, made 0700: the cache folder itself may be group-writable
    # (a umask of 002, a shared mount) without anyone else reaching the table.
    file = f"dataclass-code-{_FORMAT}-{tag}-{sys.hexversion:x}-{name}.marshal"
    return cache_dir / "classcode" / file


def _exec(
    source: object, globals_: dict[str, object] | None = None, locals_: object = None
) -> None:
    if isinstance(source, str):
        path = _state.get("path")
        if isinstance(path, Path) and "loaded" not in _state:
            _load(path)
        _used.add(source)
        code = _table.get(source)
        if not isinstance(code, _CODE):
            # dont_inherit: this module's ``from __future__ import annotations`` would
            # otherwise turn the methods' annotations into their names' strings
            code = compile(source, "<string>", "exec", dont_inherit=True)
            _table[source] = code
            _state["new"] = True
        source = code
    builtins.exec(source, globals_, locals_)  # type: ignore[arg-type]  # noqa: S102 - as stock


def install(cache_dir: Path, command: str) -> None:
    """Give ``dataclasses`` the table-backed ``exec``, its table read from
    ``cache_dir`` on first use. Neither is imported nor read before something needs
    them: ``lock --check`` of a fresh lock, say, creates no dataclass and stays without
    the module (an import of ``inspect``, ``ast``, ``dis``: 8 ms). Once per process:
    later calls change nothing."""
    if "path" in _state:
        return
    _state["path"] = table_path(cache_dir, command)
    module = sys.modules.get("dataclasses")
    if module is not None:
        module.exec = _exec  # type: ignore[attr-defined]
    else:
        sys.meta_path.insert(0, _Patcher())


class _Patcher:
    """An import finder for ``dataclasses`` only, once: the module found and loaded
    as always, by the finders after this one, and given its ``exec`` as it loads."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "dataclasses":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # not a module loaded from source: left as it is
        load = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            module.exec = _exec
            stand_in = None
            if "inspect" not in sys.modules:
                stand_in = _InspectOnUse("inspect")
                sys.modules["inspect"] = stand_in
            try:
                load(module)
            finally:
                if stand_in is not None and sys.modules.get("inspect") is stand_in:
                    del sys.modules["inspect"]  # any later ``import inspect``: the real one

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _InspectOnUse(type(sys)):  # type: ignore[misc]
    """What ``dataclasses`` binds as ``inspect`` in the console script: the real module,
    imported the first time ``dataclasses`` reaches into it. On Python 3.10 and 3.11
    ``dataclasses`` uses it only to write a docstring for a class that has none
    (``inspect.signature``), and importing it (with ``ast``, ``dis``, ``tokenize``)
    costs 6 ms, a tenth of a warm install's own time: gpuenv's classes on the install,
    run and lock paths carry docstrings, so those commands never import it. From 3.12
    ``dataclasses`` reads every class's annotations through it: the first class imports
    it, as stock. Every attribute is the real module's, so nothing else changes."""

    def __getattr__(self, name: str) -> Any:
        import importlib

        real = importlib.import_module("inspect")  # this stand-in left sys.modules
        module = sys.modules.get("dataclasses")
        if module is not None and getattr(module, "inspect", None) is self:
            module.inspect = real  # type: ignore[attr-defined]  # once: then as stock
        return getattr(real, name)


def trusted(path: Path) -> bool:
    """The table and its folder are this user's and nobody else can write them. Code
    objects run as they load, so a table another user could write (a cache directory
    shared by a team, ``GPUENV_CACHE_DIR`` on a group-writable mount) would run their
    code as this user: such a table is never read (the classes compile, as stock)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return False
    try:
        for where in (path, path.parent):
            info = where.lstat() if where is path else where.stat()
            if info.st_uid != getuid() or info.st_mode & 0o022:
                return False
        return not path.is_symlink()
    except OSError:
        return False


def read_table(path: Path) -> dict[Any, object]:
    """The table marshalled at ``path``: empty where it is missing, damaged or not
    ``trusted``."""
    if not trusted(path):
        return {}
    try:
        loaded = marshal.loads(path.read_bytes())  # noqa: S302 - gpuenv's own, as a .pyc
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _load(path: Path) -> None:
    _state["loaded"] = True
    _table.update((k, v) for k, v in read_table(path).items() if isinstance(k, str))


def save() -> None:
    """Write the table back when this process compiled text it did not hold (written
    beside, then renamed: a reader sees the old table or the new one, never half)."""
    path = _state.get("path")
    if path is None or not _state.get("new"):
        return
    assert isinstance(path, Path)
    keep = _table if len(_table) <= _KEEP else {k: _table[k] for k in _used}
    write_table(path, keep)
    _state["new"] = False
    # The same command's table in an older format (format 1 held code compiled with
    # this module's __future__ flags) is never read again: removed once this one is.
    for older in path.parent.glob(path.name.replace(f"-{_FORMAT}-", "-*-", 1)):
        if older != path:
            with contextlib.suppress(OSError):
                older.unlink()


def write_table(path: Path, table: Mapping[Any, object]) -> None:
    """``table`` marshalled to ``path``, in a folder only this user may enter and a file
    only this user may write (see ``trusted``); nothing on failure."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.parent.mkdir(mode=0o700)
        # Only this user may write it (see trusted): created 0600, whatever the umask.
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(marshal.dumps(dict(table)))
        temporary.replace(path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            temporary.unlink()
