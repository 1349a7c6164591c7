"""The user's home directory, for the defaults under it (store, cache, state, config,
netrc, Jupyter's kernels). Standard library only, nothing imported at module level:
the ``gpuenv run`` path reads it, and so does every layer (``_network`` included)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def home_dir(environ: Mapping[str, str]) -> str:
    """$HOME, else the user's passwd entry, else ``/`` (what Docker sets HOME to for a
    user the image does not know): ``Path.home()`` raised there, and every command
    ended in exit 70."""
    import os

    home = environ.get("HOME", "").strip()
    if home:
        return home
    found = os.path.expanduser("~")  # noqa: PTH111 - the passwd entry; "~" without one
    return found if found != "~" else "/"
