"""Flags and arguments shared by several commands (defined once, reused)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.errors import UsageError

if TYPE_CHECKING:
    from gpuenv.hardware import HardwareFacts
    from gpuenv.lock.model import Lock
    from gpuenv.lock.options import LockSettings
    from gpuenv.spec import LoadedSpec


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_target_flag(
    parser: argparse.ArgumentParser, *, what: str = "only this target", repeatable: bool = False
) -> None:
    """``-t/--target NAME``; ``repeatable``: given again, it adds a target (a list, or
    None when not given)."""
    action = "append" if repeatable else "store"
    parser.add_argument("-t", "--target", action=action, metavar="NAME", help=what)


def spec_path(args: argparse.Namespace) -> Path:
    """``-f`` when given, else the nearest gpuenv.toml here or in a parent directory."""
    from gpuenv.runtime import find_spec

    return Path(find_spec(getattr(args, "file", None), str(Path.cwd())))


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


def store() -> Any:
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
    if env_override("GPUENV_NO_CACHE") not in (None, "0"):
        return None
    explicit = env_override("GPUENV_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = env_override("XDG_CACHE_HOME")
    return Path(xdg) / "gpuenv" if xdg else Path.home() / ".cache" / "gpuenv"


def facts_file() -> Path:
    """The user's facts file: $GPUENV_FACTS, else $XDG_CONFIG_HOME/gpuenv/facts.toml, else
    ~/.config/gpuenv/facts.toml (used only when it exists)."""
    explicit = env_override("GPUENV_FACTS")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env_override("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "gpuenv" / "facts.toml"


def newest_torch_seen() -> str | None:
    """The newest torch the last ``gpuenv lock`` saw on an index (from the cache)."""
    from gpuenv.lock.seen import read_newest_torch

    cache = cache_dir()
    return read_newest_torch(cache) if cache is not None else None


def hardware_overrides() -> Any:
    """GPUENV_OVERRIDE_* variables, read once here and passed down (docs/dev/style.md R6)."""
    from gpuenv.hardware import DetectOverrides

    return DetectOverrides.from_environ(os.environ)


def detect_machine() -> HardwareFacts:
    """This machine's hardware facts, detected (with the GPUENV_OVERRIDE_* variables)."""
    from gpuenv import hardware

    return hardware.detect(overrides=hardware_overrides())


def lock_settings() -> LockSettings:
    """What every command that locks reads from the environment and the configuration,
    read here once: the index overrides (checked), the cache, the mirrors, detection."""
    from gpuenv.lock.options import LockSettings

    return LockSettings(
        torch_index=url_override("GPUENV_TORCH_INDEX"),
        index_url=url_override("GPUENV_INDEX_URL"),
        cache_dir=cache_dir(),
        mirrors=mirrors(),
        detect=detect_machine,
    )


def mirrors() -> Any:
    """Mirrors configured outside the project: GPUENV_MIRRORS, then
    $XDG_CONFIG_HOME/gpuenv/config.toml, then /etc/gpuenv/config.toml."""
    from gpuenv._network import load_mirrors

    return load_mirrors(os.environ)
