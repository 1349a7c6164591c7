"""Process-wide settings the CLI decides once at start-up and the library reads.

The library never reads the environment itself (STYLE.md R1); ``gpuenv.cli`` fills
this in after parsing flags. Standard library only, and nothing imported: setting it
must cost nothing for commands that never use it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# gpuenv's cache directory (None: no caching), for caches of derived data such as the
# parsed knowledge base.
cache_dir: Path | None = None
