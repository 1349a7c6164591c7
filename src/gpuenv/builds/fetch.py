"""Getting a build's source, exactly as locked: an sdist from the store's artifacts
(``gpuenv._fetch``: fetched once, by its sha256, checked while it is written), or a git
checkout of the locked commit.

This module is where builds talk to the network.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuenv import _proc
from gpuenv._artifacts import ArtifactSources
from gpuenv._fetch import Artifact, ArtifactStore, filename_of
from gpuenv.builds.model import BuildSource
from gpuenv.errors import BuildError, DownloadError, ExternalToolError

GIT_TIMEOUT = 1800.0


def _filename(url: str) -> str:
    name = filename_of(url)
    return name if name and name not in (".", "..") and "/" not in name else "source.tar.gz"


def sdist_artifact(source: BuildSource) -> Artifact:
    """The store's name for a build's sdist."""
    assert source.sha256 is not None
    return Artifact((source.url,), _filename(source.url), source.sha256, "pip")


def sdist(
    source: BuildSource, artifacts: ArtifactStore, sources: ArtifactSources | None = None
) -> Path:
    """The sdist of ``source`` from the store's artifacts (checked), fetched through
    ``sources`` (the locked URL, a mirror, or a local copy: install --from) when missing."""
    try:
        return artifacts.ensure(sdist_artifact(source), sources)
    except DownloadError as exc:
        raise BuildError(exc.message, hint=exc.hint) from None


def git_checkout(source: BuildSource, workdir: Path) -> Path:
    """A checkout of the locked commit (with submodules) under ``workdir``."""
    assert source.commit is not None
    checkout = workdir / "src"
    url = source.url.removeprefix("git+")
    steps: tuple[list[str | Path], ...] = (
        ["git", "init", "--quiet", checkout],
        # "--": the URL is an operand even if a lock made it look like an option.
        ["git", "-C", checkout, "fetch", "--quiet", "--depth", "1", "--", url, source.commit],
        ["git", "-C", checkout, "checkout", "--quiet", "--detach", "FETCH_HEAD"],
        ["git", "-C", checkout, "submodule", "update", "--quiet", "--init", "--recursive"],
    )
    try:
        for argv in steps:
            step = str(argv[3] if argv[1] == "-C" else argv[1])
            _proc.run(argv, timeout=GIT_TIMEOUT, what=f"git {step}")
        head = _proc.run(["git", "-C", checkout, "rev-parse", "HEAD"], timeout=60).stdout.strip()
    except ExternalToolError as exc:
        shutil.rmtree(checkout, ignore_errors=True)
        raise BuildError(f"cannot check out {url} at {source.commit}: {exc.message}") from None
    if head != source.commit:
        raise BuildError(f"{url}: checked out {head}, the lock says {source.commit}")
    return checkout
