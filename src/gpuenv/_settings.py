"""Process-wide settings the CLI decides once at start-up and the library reads.

The library never reads the environment itself (docs/dev/style.md R1); ``gpuenv.cli`` fills
this in after parsing flags. Standard library only, and nothing imported: setting it
must cost nothing for commands that never use it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

# gpuenv's cache directory (None: no caching), for caches of derived data such as the
# parsed knowledge base.
cache_dir: Path | None = None
# The user's facts file (GPUENV_FACTS, else $XDG_CONFIG_HOME/gpuenv/facts.toml), merged
# over the shipped knowledge base; None: none. A path that does not exist is no file.
facts_file: Path | None = None

# This user's state directory ($GPUENV_STATE_DIR, else $XDG_STATE_HOME/gpuenv): where
# verification records and file locks go when a store prefix is read-only here. None:
# only what the prefix itself holds counts.
state_dir: str | None = None


def env_dir(environ: Mapping[str, str], name: str) -> str | None:
    """The directory the variable ``name`` names, absolute; None when unset or empty.
    ``~`` is expanded (a quoted "~/store" in a unit file, an env file or a Dockerfile
    reaches gpuenv as written, and made a directory named '~' in the current one). A
    relative path is taken from the current directory for gpuenv's own variables, and
    ignored for the XDG ones, as the XDG base directory specification says; the store's
    prefixes must have absolute paths ('prefix: ... is not an absolute path' was all a
    relative GPUENV_HOME got)."""
    import os  # os.path, not pathlib: `gpuenv run` reads the state directory (PTH off)

    from gpuenv._home import home_dir

    value = environ.get(name, "").strip()
    if not value:
        return None
    if value.startswith("~"):
        home = home_dir(environ)
        value = home.rstrip("/") + value[1:] if value[1:2] in ("", "/") else value
    if os.path.isabs(value):  # noqa: PTH117
        return os.path.normpath(value)
    return None if name.startswith("XDG_") else os.path.abspath(value)  # noqa: PTH100


def default_cache_dir(environ: Mapping[str, str]) -> str | None:
    """gpuenv's cache: $GPUENV_CACHE_DIR, else $XDG_CACHE_HOME/gpuenv, else
    ~/.cache/gpuenv; None where GPUENV_NO_CACHE is set (to anything but 0). Plain
    strings, and nothing checked: ``cli._common.cache_dir`` refuses a file in the way,
    and ``lock``'s head start (``cli._fastlock``) reads the path before that."""
    if environ.get("GPUENV_NO_CACHE", "").strip() not in ("", "0"):
        return None
    explicit = env_dir(environ, "GPUENV_CACHE_DIR")
    if explicit:
        return explicit
    xdg = env_dir(environ, "XDG_CACHE_HOME")
    if xdg:
        return xdg.rstrip("/") + "/gpuenv"
    from gpuenv._home import home_dir

    return home_dir(environ).rstrip("/") + "/.cache/gpuenv"


def default_state_dir(environ: Mapping[str, str]) -> str:
    """$GPUENV_STATE_DIR, else $XDG_STATE_HOME/gpuenv, else ~/.local/state/gpuenv, from
    the environment the CLI passes in (``gpuenv run`` computes it too: plain strings)."""
    explicit = env_dir(environ, "GPUENV_STATE_DIR")
    if explicit:
        return explicit
    from gpuenv._home import home_dir

    xdg = env_dir(environ, "XDG_STATE_HOME") or ""
    base = xdg or home_dir(environ).rstrip("/") + "/.local/state"
    return base.rstrip("/") + "/gpuenv"
