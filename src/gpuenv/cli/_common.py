"""Flags and arguments shared by several commands (defined once, reused)."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpuenv.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import TypeVar

    from gpuenv._network import Mirrors
    from gpuenv.hardware import DetectOverrides, HardwareFacts
    from gpuenv.lock.model import Lock
    from gpuenv.lock.options import LockSettings
    from gpuenv.spec import LoadedSpec
    from gpuenv.store import Store

    T = TypeVar("T")


class Settings:
    """What the environment and gpuenv's configuration tell a command, read once:
    ``_full_main`` builds it and hands it to the command's ``run``. The cache, state and
    facts paths are read at once (environment variables only); the mirrors, the index
    overrides, the hardware overrides and the store on first use, since they read files
    or refuse a bad value, which only a command that needs them should meet. Frozen: a
    value once read stays."""

    __slots__ = ("_read", "cache_dir", "facts_file", "state_dir")

    def __init__(self) -> None:
        object.__setattr__(self, "cache_dir", cache_dir())
        object.__setattr__(self, "state_dir", state_dir())
        object.__setattr__(self, "facts_file", facts_file())
        object.__setattr__(self, "_read", {})

    cache_dir: Path | None  # $GPUENV_CACHE_DIR & co.; None: GPUENV_NO_CACHE
    state_dir: str  # $GPUENV_STATE_DIR & co.
    facts_file: Path  # the user's facts file (used only when it exists)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Settings.{name} is read once and stays")

    _read: dict[str, Any]

    def _once(self, name: str, read: Callable[[], T]) -> T:
        if name not in self._read:
            self._read[name] = read()
        return cast("T", self._read[name])

    @property
    def mirrors(self) -> Mirrors:
        """Mirrors configured outside the project (``mirrors()``)."""
        return self._once("mirrors", mirrors)

    @property
    def torch_index(self) -> str | None:
        """GPUENV_TORCH_INDEX, checked (``url_override``)."""
        return self._once("torch_index", lambda: url_override("GPUENV_TORCH_INDEX"))

    @property
    def index_url(self) -> str | None:
        """GPUENV_INDEX_URL, checked (``url_override``)."""
        return self._once("index_url", lambda: url_override("GPUENV_INDEX_URL"))

    @property
    def hardware_overrides(self) -> DetectOverrides:
        """The GPUENV_OVERRIDE_* variables (docs/dev/style.md R6)."""
        return self._once("hardware_overrides", hardware_overrides)

    def detect_machine(self) -> HardwareFacts:
        """This machine's hardware facts, detected with the overrides (each call detects)."""
        from gpuenv import hardware

        return hardware.detect(overrides=self.hardware_overrides)

    @property
    def lock(self) -> LockSettings:
        """What every command that locks is told (lock, install, add, remove): the index
        overrides (checked), the cache, the mirrors, detection."""
        from gpuenv.lock.options import LockSettings

        def read() -> LockSettings:
            return LockSettings(
                torch_index=self.torch_index,
                index_url=self.index_url,
                cache_dir=self.cache_dir,
                mirrors=self.mirrors,
                detect=self.detect_machine,
            )

        return self._once("lock", read)

    def store(self) -> Store:
        """The store under $GPUENV_HOME (default $XDG_DATA_HOME/gpuenv)."""
        from gpuenv.store import Store, default_root

        return Store(default_root(os.environ), state_dir=Path(self.state_dir))


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_target_flag(
    parser: argparse.ArgumentParser, *, what: str = "only this target", repeatable: bool = False
) -> None:
    """``-t/--target NAME``; ``repeatable``: given again, it adds a target (a list, or
    None when not given)."""
    action = "append" if repeatable else "store"
    parser.add_argument("-t", "--target", action=action, metavar="NAME", help=what)


def add_group_flags(parser: argparse.ArgumentParser, *, verb: str) -> None:
    """``--group NAME`` (repeatable), ``--all-groups`` and ``--no-dev``: which dependency
    groups ``install`` installs and ``export`` writes, chosen the same way
    (``install.project.choose_groups``)."""
    parser.add_argument(
        "--group",
        action="append",
        metavar="NAME",
        help=f"also {verb} this dependency group (repeatable; 'dev' is {verb}ed by default)",
    )
    parser.add_argument("--all-groups", action="store_true", help=f"{verb} every group")
    parser.add_argument("--no-dev", action="store_true", help="leave out the 'dev' group")


def spec_path(args: argparse.Namespace) -> Path:
    """``-f`` when given, else the nearest gpuenv.toml here or in a parent directory."""
    from gpuenv.runtime import find_spec

    return Path(find_spec(getattr(args, "file", None), str(Path.cwd())))


@contextlib.contextmanager
def spec_unedited(settings: Settings, spec_file: Path) -> Iterator[None]:
    """Hold the spec's edit lock while the spec is read and locked (``lock``, and an
    ``install`` that may relock): an ``add`` that fails puts its edit back, and a lock
    that read the edit meanwhile wrote a lock of a spec that was never kept. Where no
    lock can be taken (a read-only store, and no state folder to take it in), the
    command goes on without one."""
    from gpuenv._fs import is_read_only
    from gpuenv.errors import StorageError

    store = settings.store()
    if not (store.root / "locks").is_dir():  # no add has ever run here: nothing to wait
        yield  # for, and a lock alone makes no store
        return
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store.spec_locked(spec_file))
        except StorageError as exc:  # a full disk is the news; a read-only one is not
            if not is_read_only(exc):
                raise
        yield


def load_locked(args: argparse.Namespace) -> tuple[LoadedSpec, Lock]:
    """The spec and its lock, for commands that work from the lock alone (export, pack):
    a missing lock is a usage error saying to run ``gpuenv lock`` first."""
    from gpuenv.knowledge import knowledge_base
    from gpuenv.lock.format import LOCK_FILENAME, read_lock
    from gpuenv.spec import load_spec

    spec_file = spec_path(args)
    loaded = load_spec(spec_file, kb=knowledge_base, cache_dir=cache_dir())
    lock = read_lock(spec_file.parent / LOCK_FILENAME, cache_dir=cache_dir())
    if lock is None:
        raise UsageError(f"no {LOCK_FILENAME} beside {spec_file}", hint="run 'gpuenv lock' first")
    return loaded, lock


def store() -> Store:
    """The store under $GPUENV_HOME (default $XDG_DATA_HOME/gpuenv)."""
    from gpuenv.store import Store, default_root

    return Store(default_root(os.environ), state_dir=Path(state_dir()))


def state_dir() -> str:
    """This user's state directory (records and locks of read-only stores)."""
    from gpuenv._settings import default_state_dir

    return default_state_dir(os.environ)


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """``-o -``, or a path that is this process's standard output (``/dev/stdout``,
    ``/dev/fd/1``): written to the stream, since renaming a file over it cannot work."""
    if path is None:
        return False
    if os.fspath(path) == "-":
        return True
    try:
        return os.path.samestat(Path(path).stat(), os.fstat(1))
    except (OSError, ValueError):
        return False


def check_target(name: str | None, known: list[str]) -> None:
    from gpuenv.spec import check_target

    check_target(name, known)


def env_override(name: str) -> str | None:
    """Read an override variable once, here in the CLI (empty means absent)."""
    value = os.environ.get(name, "").strip()
    return value or None


def url_override(name: str) -> str | None:
    """An override variable that names an index (``GPUENV_INDEX_URL``,
    ``GPUENV_TORCH_INDEX``), checked like the spec's own index keys."""
    from gpuenv._network import is_fetchable_url
    from gpuenv._redact import redact_url

    value = env_override(name)
    if value is not None and not is_fetchable_url(value):
        raise UsageError(
            f"{name}: {redact_url(value)!r} is not an http(s):// or file:// URL",
            hint=f"unset {name}, or give the index's URL (like https://host/simple)",
        )
    return value


def cache_dir() -> Path | None:
    """gpuenv's cache: $GPUENV_CACHE_DIR, else $XDG_CACHE_HOME/gpuenv, else
    ~/.cache/gpuenv. GPUENV_NO_CACHE=1 turns it off."""
    from gpuenv._settings import default_cache_dir, env_dir

    cache = default_cache_dir(os.environ)
    if cache is None:
        return None
    variable = next(
        (n for n in ("GPUENV_CACHE_DIR", "XDG_CACHE_HOME") if env_dir(os.environ, n)), "HOME"
    )
    _not_a_file(Path(cache), variable)
    return Path(cache)


def _not_a_file(directory: Path, variable: str) -> None:
    """A file where the cache directory (or one of its parents) should be is the
    variable's fault, said so: a lock blamed it on uv's scratch files in /tmp."""
    for path in (directory, *directory.parents):
        if path.is_dir():
            return
        if os.path.lexists(path):
            raise UsageError(
                f"gpuenv's cache {directory} cannot be a directory: {path} is a file",
                hint=f"point {variable} at a directory"
                + (" (or set GPUENV_CACHE_DIR)" if variable != "GPUENV_CACHE_DIR" else "")
                + ", or GPUENV_NO_CACHE=1 to cache nothing",
            )


def facts_file() -> Path:
    """The user's facts file: $GPUENV_FACTS, else $XDG_CONFIG_HOME/gpuenv/facts.toml, else
    ~/.config/gpuenv/facts.toml (used only when it exists)."""
    explicit = env_override("GPUENV_FACTS")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env_override("XDG_CONFIG_HOME")
    from gpuenv._home import home_dir

    return (Path(xdg) if xdg else Path(home_dir(os.environ)) / ".config") / "gpuenv" / "facts.toml"


def newest_torch_seen() -> str | None:
    """The newest torch the last ``gpuenv lock`` saw on an index (from the cache)."""
    from gpuenv.lock.seen import read_newest_torch

    cache = cache_dir()
    return read_newest_torch(cache) if cache is not None else None


def hardware_overrides() -> DetectOverrides:
    """GPUENV_OVERRIDE_* variables, read once here and passed down (docs/dev/style.md R6)."""
    from gpuenv.hardware import DetectOverrides

    return DetectOverrides.from_environ(os.environ)


def detect_machine() -> HardwareFacts:
    """This machine's hardware facts, detected (with the GPUENV_OVERRIDE_* variables)."""
    from gpuenv import hardware

    return hardware.detect(overrides=hardware_overrides())


def mirrors() -> Mirrors:
    """Mirrors configured outside the project: GPUENV_MIRRORS, then
    $XDG_CONFIG_HOME/gpuenv/config.toml, then /etc/gpuenv/config.toml."""
    from gpuenv._network import load_mirrors

    return load_mirrors(os.environ)
