"""Where a locked artifact is fetched from: the one place where the URL a lock names
becomes the URL that is actually fetched.

The lock keeps canonical URLs (the index or channel an artifact was resolved from).
Everything that fetches an artifact (install's uv and rattler steps, ``gpuenv pack``'s
downloads) asks ``ArtifactSources.url_for`` first, so a rewrite applies everywhere at
once. Today's rewrite: an exact URL served by a local file (``install --from`` an
archive: each artifact was unpacked into the store's artifact cache and hash-checked),
else a mirror's URL (prefix rewrites configured outside the project, ``gpuenv._network``;
without the mirror's credentials, which reach uv and rattler separately). Whatever is
fetched is still checked against the lock's hashes by the step that fetches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuenv._network import Mirrors, strip_userinfo


@dataclass(frozen=True)
class ArtifactSources:
    """Rewrites of locked URLs; an empty one fetches every URL as locked."""

    files: Mapping[str, Path] = field(default_factory=dict)  # exact locked URL -> local copy
    mirrors: Mirrors = field(default_factory=Mirrors)  # canonical prefix -> mirror prefix

    def url_for(self, url: str) -> str:
        """The URL to fetch for the locked ``url``: a local copy, else through a mirror
        (credentials removed: they are written into the prefix), else ``url``."""
        local = self.files.get(url)
        if local is not None:
            return local.absolute().as_uri()
        return strip_userinfo(self.mirrors.fetch_url(url)) if self.mirrors.entries else url

    @property
    def local_only(self) -> bool:
        """True when every fetch is answered by a local file (nothing needs the network)."""
        return bool(self.files)
