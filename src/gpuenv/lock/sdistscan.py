"""Extensions found, not declared: what an sdist's build needs, read from the sdist.

A package the resolution could only find as an sdist, that neither the spec
(``[pip.build.<name>]``) nor the knowledge base describes, used to be built isolated,
without a toolkit and without ``TORCH_CUDA_ARCH_LIST``: a ``CUDAExtension`` then failed
twice (no torch, then no nvcc) before the spec said what it needs. Its ``setup.py`` is
read here through ``ast`` (never run: ``gpuenv.spec._local.read_setup_py``) and its
members listed: ``torch.utils.cpp_extension`` makes it a build against the prefix's
torch (no isolation), ``CUDAExtension`` or ``.cu``/``.cuh`` sources a toolkit build with
the target's arch list. ``[pip.build.<name>]`` still overrides each of these.

The sdist is fetched once into gpuenv's cache (by its locked sha256, checked while it
is written); one that cannot be fetched or read is scanned as nothing (the defaults
stay, and its build says what is missing).
"""

from __future__ import annotations

import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from gpuenv.lock.model import PipPackage

SETUP_LIMIT = 1 << 20
CUDA_SUFFIXES = (".cu", ".cuh")


@dataclass(frozen=True)
class Scanned:
    torch_extension: bool  # setup.py uses torch.utils.cpp_extension
    cuda: bool  # CUDAExtension, or .cu/.cuh sources


def _members(path: Path) -> tuple[list[str], bytes | None]:
    """The archive's member names, and its top-level ``setup.py`` (None: none)."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            setup = next((n for n in names if n.count("/") == 1 and n.endswith("/setup.py")), None)
            info = archive.getinfo(setup) if setup else None
            ok = info is not None and info.file_size <= SETUP_LIMIT
            return names, archive.read(setup) if setup and ok else None
    with tarfile.open(path, "r:*") as archive:
        members = archive.getmembers()
        names = [m.name for m in members]
        found = next(
            (
                m
                for m in members
                if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/setup.py")
            ),
            None,
        )
        if found is None or found.size > SETUP_LIMIT:
            return names, None
        handle = archive.extractfile(found)
        return names, handle.read(SETUP_LIMIT) if handle else None


def scan_file(path: Path) -> Scanned | None:
    """What the sdist at ``path`` needs (None: it cannot be read)."""
    from gpuenv.spec._local import read_setup_py

    try:
        names, setup = _members(path)
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError):
        return None
    cuda = any(n.lower().endswith(CUDA_SUFFIXES) for n in names)
    torch = False
    if setup is not None:
        try:
            facts = read_setup_py(setup.decode("utf-8", errors="replace"))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            facts = None
        if facts is not None:
            torch = facts.torch_extension
            cuda = cuda or facts.cuda_extension
    return Scanned(torch, cuda)


MAX_SDIST = 1 << 30


def _fetch(url: str, sha256: str, directory: Path) -> Path | None:
    """The sdist at ``url`` in ``directory`` (named by its sha256), downloaded once (by
    the one artifact downloader, ``gpuenv._fetch``) and checked while it is written; None
    when it cannot be had or does not match."""
    import os
    import tempfile
    from urllib.parse import unquote, urlsplit

    from gpuenv._fetch import Digests, download
    from gpuenv.errors import DownloadError

    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or "source.tar.gz"
    if "/" in name or name in (".", ".."):
        return None
    path = directory / sha256 / name
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".sdist-", dir=path.parent)
    digests = Digests()
    try:
        with os.fdopen(fd, "wb") as out:  # a courtesy scan: one try, no waiting
            download(url, out, digests, max_size=MAX_SDIST, attempts=1)
        if digests.sha256 != sha256:
            return None
        Path(tmp).replace(path)
        return path
    except (OSError, ValueError, DownloadError):
        return None
    finally:
        Path(tmp).unlink(missing_ok=True)


def scan(package: PipPackage, cache_dir: Path | None) -> Scanned | None:
    """Fetch ``package``'s sdist (once, into ``cache_dir``) and scan it."""
    import tempfile

    if not package.sha256 or package.url.startswith("git+"):
        return None
    if cache_dir is not None:
        found = _fetch(package.url, package.sha256, cache_dir / "sdists")
        return scan_file(found) if found is not None else None
    with tempfile.TemporaryDirectory(prefix="gpuenv-sdist-") as tmp:
        found = _fetch(package.url, package.sha256, Path(tmp))
        return scan_file(found) if found is not None else None
