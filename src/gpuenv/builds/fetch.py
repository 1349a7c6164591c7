"""Getting a build's source, exactly as locked: an sdist downloaded once into the store
(by its sha256, checked while it is written), or a git checkout of the locked commit.

This module is where builds talk to the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

from gpuenv import _proc
from gpuenv.builds.model import BuildSource
from gpuenv.errors import BuildError, ExternalToolError

DOWNLOAD_TIMEOUT = 120.0
GIT_TIMEOUT = 1800.0
_CHUNK = 1 << 20


def _filename(url: str) -> str:
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    return name if name and name not in (".", "..") and "/" not in name else "source.tar.gz"


def _download(url: str, sha256: str, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=destination.parent)
    digest = hashlib.sha256()
    try:
        with (
            os.fdopen(fd, "wb") as out,
            urllib.request.urlopen(  # noqa: S310 - lock URLs only
                url, timeout=DOWNLOAD_TIMEOUT
            ) as response,
        ):
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != sha256:
            raise BuildError(
                f"refused: {url} does not match the sha256 in gpuenv.lock "
                f"(got {digest.hexdigest()}, locked {sha256}): tampered with or corrupted",
                hint="nothing was built or marked installed; check the index or mirror serving it",
            )
        Path(tmp).replace(destination)
    except (OSError, urllib.error.URLError) as exc:
        raise BuildError(f"cannot download {url}: {exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sdist(source: BuildSource, sources_dir: Path, fetch_url: str | None = None) -> Path:
    """The sdist of ``source``, from the store when it is there and still matches; else
    downloaded from ``fetch_url`` (the locked URL, or a local copy of it: install --from)."""
    assert source.sha256 is not None
    path = sources_dir / source.sha256 / _filename(source.url)
    if path.is_file():
        if _hash_file(path) == source.sha256:
            return path
        path.unlink()  # damaged: fetch it again
    _download(fetch_url or source.url, source.sha256, path)
    return path


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
