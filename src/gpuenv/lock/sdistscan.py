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
    """What an sdist's build needs, as its ``setup.py`` and its file names show it."""

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
    """The sdist at ``url`` in ``directory``, an artifact store of its own (``<sha256>/
    <name>``: gpuenv's one content-addressed cache and downloader, ``gpuenv._fetch``),
    downloaded once and checked while it is written; None when it cannot be had or does
    not match."""
    from urllib.parse import unquote, urlsplit

    from gpuenv._fetch import Artifact, ArtifactStore
    from gpuenv.errors import GpuenvError

    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or "source.tar.gz"
    artifact = Artifact((url,), name, sha256, "pip")
    try:
        return ArtifactStore(directory).fetch(artifact, url, max_size=MAX_SDIST)
    except (GpuenvError, OSError):  # a courtesy scan: what cannot be had changes nothing
        return None


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
