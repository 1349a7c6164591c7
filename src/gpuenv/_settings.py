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


def default_state_dir(environ: Mapping[str, str]) -> str:
    """$GPUENV_STATE_DIR, else $XDG_STATE_HOME/gpuenv, else ~/.local/state/gpuenv, from
    the environment the CLI passes in (``gpuenv run`` computes it too: plain strings)."""
    explicit = environ.get("GPUENV_STATE_DIR", "").strip()
    if explicit:
        return explicit
    xdg = environ.get("XDG_STATE_HOME", "").strip()
    base = xdg or (environ.get("HOME") or "/").rstrip("/") + "/.local/state"
    return base.rstrip("/") + "/gpuenv"
