"""The compatibility knowledge base: data files with provenance, and queries over them.

``knowledge_base()`` loads and validates ``data/*.toml`` once per process. Adding a
CUDA release or a torch release is a data-only change; ``tests/knowledge`` holds
the invariants that guard it.
"""

from __future__ import annotations

from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from gpuenv.knowledge.model import (
        Architecture,
        CudaFamily,
        CudaRelease,
        DriverCompat,
        DriverRange,
        GpuModel,
        JetPack,
        KnowledgeBase,
        Provenance,
        TorchBuild,
        TorchRelease,
        gpu_tokens,
    )

__all__ = [
    "Architecture",
    "CudaFamily",
    "CudaRelease",
    "DriverCompat",
    "DriverRange",
    "GpuModel",
    "JetPack",
    "KnowledgeBase",
    "Provenance",
    "TorchBuild",
    "TorchRelease",
    "gpu_tokens",
    "knowledge_base",
]


def __getattr__(name: str) -> Any:
    # The model loads on first use: importing gpuenv.knowledge (for the data digest, say)
    # must not cost the model's imports.
    if name in __all__:
        from gpuenv.knowledge import model

        return getattr(model, name)
    raise AttributeError(f"module 'gpuenv.knowledge' has no attribute {name!r}")


def knowledge_base() -> KnowledgeBase:
    """The knowledge base, loaded once per process and facts file (its parsed data files
    kept in gpuenv's cache when the CLI configured one, and the user's facts file merged
    over them when there is one: ``gpuenv._settings``)."""
    facts, stamp = _facts_file()
    return _cached(facts, stamp)


def _facts_file() -> tuple[Path | None, tuple[int, int] | None]:
    """The user's facts file and its (mtime, size), or (None, None) where there is none."""
    from gpuenv import _settings

    facts = _settings.facts_file
    if facts is None:
        return None, None
    try:
        info = facts.stat()
    except OSError:
        return None, None  # no such file: no facts file
    return facts, (info.st_mtime_ns, info.st_size)


def nvcc_arch_max(cuda: str | None) -> str | None:
    """The newest arch the nvcc of CUDA ``cuda`` generates code for ("9.0"; None: not
    known), as ``builds.model.nvcc_arch_max`` reads it from a given knowledge base (a
    lock's). Where the user has no facts file it is read from cuda.toml alone: an install
    of a CUDA target asks the knowledge base nothing else (its activation's
    TORCH_CUDA_ARCH_LIST, and the project's own build's), and
    building all of it, torch's series and their builds included, cost that install
    13-25 ms, against about 1.5 ms for the one file."""
    if not cuda:
        return None
    from gpuenv.versions import ComputeCapability, CudaVersion

    version = CudaVersion.parse(cuda)
    if _facts_file()[0] is not None:  # the user's entries may replace cuda.toml's
        release = knowledge_base().cuda(version)
        newest = release.arch_max if release is not None else None
    else:
        newest = next(
            (
                ComputeCapability.parse(str(entry["arch_max"]))
                for entry in _cuda_releases()
                if CudaVersion.parse(str(entry["cuda"])) == version and entry.get("arch_max")
            ),
            None,
        )
    return str(newest) if newest is not None else None


@lru_cache(maxsize=1)
def _cuda_releases() -> tuple[dict[str, Any], ...]:
    from gpuenv.knowledge._data import read_data

    return tuple(read_data("cuda.toml").get("release", []))


@lru_cache(maxsize=4)
def _cached(facts: Path | None, stamp: tuple[int, int] | None) -> KnowledgeBase:
    from gpuenv import _settings
    from gpuenv.knowledge._load import load_knowledge_base

    return load_knowledge_base(_settings.cache_dir, facts)
