"""The environment's ``uv venv`` begun as ``gpuenv install`` starts, before the install
knows its prefix.

On a warm install uv's ``venv`` takes 13-15 ms, and gpuenv used to spend them waiting:
the prefix is named from the lock's content, the project and the groups, known only
once the spec, the lock and the install's modules are loaded (some 25 ms). The Python
the environment is made from is known sooner: every target of the lock names it. So
``begin`` reads the lock and starts ``uv venv`` in a folder of its own beside the
prefixes (``store.STAGING``, plus a random name); when the install then asks for that very
environment (``claim``: the same uv, arguments and settings, the index credentials
aside, which ``uv venv`` never uses), the folder is moved to the prefix once uv is
done, in one rename under the prefix's lock. uv writes the environment's path only into
the ``activate`` scripts, and only the folder's name differs (same parent): that name
is replaced there, as uv would have written it.

Anything else is a head start not taken: ``release`` kills uv and removes the folder
(the install's own ``finally``). Nothing is begun where the lock cannot be read simply,
where its targets differ in Python or have conda packages (rattler makes those), or
where a target asked for is installed already (a no-op install starts nothing). A
SIGKILL can leave the folder behind: its name starts with a dot, so ``gpuenv list``
and ``gc`` never take it for a prefix, and ``gc`` removes it once it is a day old.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv import _proc
from gpuenv.errors import ExternalToolError, GpuenvError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from gpuenv._network import Index, Mirrors
    from gpuenv.store import Store

LOCK_FILENAME = "gpuenv.lock"  # gpuenv.lock.format.LOCK_FILENAME, without importing it
_held: list[HeadStart] = []


def uv_settings(
    store: Store, indexes: Iterable[Index] = (), mirrors: Mirrors | None = None
) -> dict[str, str]:
    """uv's environment for an install into ``store``: isolated from the user's
    configuration but with its network settings (the function lock uses), the
    credentials of ``indexes`` and ``mirrors``, every cache in the store."""
    from gpuenv._network import uv_environment

    return uv_environment(
        os.environ,
        indexes,
        mirrors=mirrors,
        UV_CACHE_DIR=str(store.cache("uv")),
        UV_PYTHON_INSTALL_DIR=str(store.root / "python"),
        UV_LINK_MODE="hardlink",
    )


def venv_command(
    prefix: Path, python: str, uv: Path, *, allow_existing: bool = False
) -> tuple[str, ...]:
    """The ``uv venv`` command of an environment at ``prefix`` from an interpreter of the
    locked Python (``python``, e.g. "3.11"): the one running gpuenv when it is that
    version, else the minor version for uv to find (or download into the store)."""
    minor = ".".join(python.split(".")[:2])
    own = Path(sys.base_prefix) / "bin" / f"python{minor}"
    interpreter = (
        str(own)
        if f"{sys.version_info[0]}.{sys.version_info[1]}" == minor and own.exists()
        else minor
    )
    extra = ("--allow-existing",) if allow_existing else ()
    return (
        str(uv),
        "venv",
        "--no-config",
        "--quiet",
        *extra,
        "--python",
        interpreter,
        "--",
        str(prefix),
    )


def _comparable(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as ``uv venv`` reads it: the index credentials aside (it reaches no index)."""
    return {k: v for k, v in env.items() if not k.startswith("UV_INDEX_")}


class HeadStart:
    """A ``uv venv`` running (or done) in ``staging`` for a prefix not yet named."""

    def __init__(
        self, child: _proc.Started, staging: Path, argv: tuple[str, ...], env: Mapping[str, str]
    ) -> None:
        self.child, self.staging, self.argv, self.env = child, staging, argv, env

    def matches(self, argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """``argv`` and ``env`` ask for the environment this one makes, but at another path."""
        return (
            tuple(argv[:-1]) == self.argv[:-1]
            and _comparable(env) == _comparable(self.env)
            and os.path.dirname(argv[-1]) == os.path.dirname(self.argv[-1])  # noqa: PTH120
        )

    def discard(self) -> None:
        """uv killed (if it still runs) and the staging folder removed."""
        import shutil  # with its compression modules: 1.5 ms, spent only here

        self.child.abandon()
        shutil.rmtree(self.staging, ignore_errors=True)


def _lock_pythons(lock_file: Path, targets: Sequence[str]) -> dict[str, dict[str, object]] | None:
    """The tables of the lock's ``targets`` (all of them when none is named), or None
    where the lock is missing, not plain TOML, or not what a head start can use."""
    from gpuenv import _fsread, _toml

    try:  # bounded, and never a hang: a FIFO, a device or a huge file is refused
        data = _fsread.read_bytes(lock_file, limit=_fsread.LOCK_LIMIT, what="lock file")
        text = data.decode()
        document = _toml.loads(text)
    except (OSError, GpuenvError, ValueError, RecursionError):  # missing, special, not TOML
        return None
    chosen = _chosen(document, targets)
    _toml.hand_over(text, document)  # lock.format's reader parses it no more
    return chosen


def _chosen(
    document: Mapping[str, object], targets: Sequence[str]
) -> dict[str, dict[str, object]] | None:
    """The lock's tables of ``targets`` (all: none named), each a table, else None."""
    tables = document.get("targets")
    if not isinstance(tables, dict) or not tables:
        return None
    names = list(targets) or list(tables)
    chosen = {name: tables.get(name) for name in names}
    if not all(isinstance(t, dict) for t in chosen.values()):
        return None
    return chosen  # type: ignore[return-value]


def _python_of(tables: Mapping[str, Mapping[str, object]]) -> str | None:
    """The one Python the ``tables`` name, when none of them has conda packages."""
    pythons = set()
    for table in tables.values():
        stack = table.get("stack")
        python = stack.get("python") if isinstance(stack, dict) else None
        if table.get("conda") or not isinstance(python, str) or not python[:1].isdigit():
            return None  # a lock the install itself refuses, or one rattler makes
        pythons.add(python)
    return pythons.pop() if len(pythons) == 1 else None


def _installed(project: Path, tables: Mapping[str, Mapping[str, object]]) -> bool:
    """One of the targets is installed for this project as the lock has it now."""
    from gpuenv import _marker

    for name, table in tables.items():
        prefix = _marker.resolve_pointer(_marker.pointer(project, name))
        marker = _marker.read_marker(prefix) if prefix is not None else None
        if marker is not None and marker.lock_hash == table.get("content-hash"):
            return True
    return False


def begin(store: Store, project: Path, targets: Sequence[str]) -> None:
    """Start the ``uv venv`` the install of ``targets`` (all: none named) of ``project``
    will ask for, in a staging folder of ``store``'s prefixes, when the lock makes it
    plain which (see the module doc). Never raises for what it cannot do: the install
    itself then does it, and says why."""
    from gpuenv._uvbin import find_uv
    from gpuenv.store import STAGING

    if _held:
        return
    try:
        tables = _lock_pythons(project / LOCK_FILENAME, targets)
        python = _python_of(tables) if tables is not None else None
        if tables is None or python is None or _installed(project, tables):
            return
    except Exception:  # noqa: BLE001 - a lock of a shape not foreseen here: the install reads it
        return
    try:
        env = uv_settings(store)
        staging = store.prefixes / f"{STAGING}{os.urandom(6).hex()}"
        argv = venv_command(staging, python, Path(find_uv()))
        store.prefixes.mkdir(parents=True, exist_ok=True)
        child = _proc.start(argv, timeout=600, env=env, what="uv venv")
    except (GpuenvError, OSError):
        return
    head = HeadStart(child, staging, argv, env)
    try:
        _held.append(head)
    except BaseException:  # Ctrl-C before it is held: nobody would release it
        head.discard()
        raise


def claim(argv: Sequence[str], env: Mapping[str, str]) -> Claimed | None:
    """The head start, when it makes what ``argv`` and ``env`` ask for (its path aside):
    it is this caller's from now on (``Claimed``); None otherwise."""
    if not _held or not _held[0].matches(argv, env):
        return None
    return Claimed(_held.pop(), Path(argv[-1]), argv, env)


def release() -> None:
    """A head start nobody claimed: uv killed and its folder removed."""
    while _held:
        _held.pop().discard()


class Claimed:
    """A head start taken for ``prefix``: ``wait`` gives the environment at ``prefix``
    (made there by a ``uv venv`` of its own when the head start failed, so that its
    failure is said as the install says it), ``abandon`` drops it."""

    def __init__(
        self, head: HeadStart, prefix: Path, argv: Sequence[str], env: Mapping[str, str]
    ) -> None:
        self._head, self._prefix = head, prefix
        self._argv, self._env = tuple(argv), env
        self._fallback: _proc.Started | None = None
        self._moved = False

    def wait(self) -> None:
        """The environment at the prefix (a second call, after one that returned, returns
        at once: the fetch waits before its first download, the install after it)."""
        if self._fallback is not None:
            self._fallback.wait()
            return
        if self._moved:
            return
        head = self._head
        try:
            head.child.wait()
            head.staging.rename(self._prefix)  # the prefix's lock is held: nobody else
        except (ExternalToolError, OSError):
            head.discard()
            self._fallback = _proc.start(self._argv, timeout=600, env=self._env, what="uv venv")
            self._fallback.wait()
            return
        self._moved = True
        _rename_inside(self._prefix, head.staging.name, self._prefix.name)

    def abandon(self) -> None:
        self._head.discard()
        if self._fallback is not None:
            self._fallback.abandon()


def _rename_inside(prefix: Path, old: str, new: str) -> None:
    """Where uv wrote the staging folder's name into the environment's files (the
    ``activate`` scripts), the prefix's name instead. Both names are letters, digits,
    '-', '_' and '.', quoted alike in every shell."""
    from gpuenv._fs import writing

    old_bytes, new_bytes = old.encode(), new.encode()
    with writing(prefix, f"target prefix {prefix.name} (its activate scripts)"):
        for folder in (prefix, prefix / "bin"):
            for entry in os.scandir(folder):
                if not entry.is_file(follow_symlinks=False) or entry.stat().st_size > 1 << 20:
                    continue
                path = Path(entry.path)
                content = path.read_bytes()
                if old_bytes in content:
                    path.write_bytes(content.replace(old_bytes, new_bytes))
