"""The compatibility knowledge base: data files with provenance, and queries over them.

``knowledge_base()`` loads and validates ``data/*.toml`` once per process. Adding a
CUDA release or a torch release is a data-only change; ``tests/unit/compat`` holds
the invariants that guard it.
"""

from __future__ import annotations

from functools import lru_cache

from gpuenv.compat.model import (
    Architecture,
    CudaFamily,
    CudaRelease,
    DriverCompat,
    GpuModel,
    KnowledgeBase,
    TorchBuild,
    TorchRelease,
    gpu_tokens,
)

__all__ = [
    "Architecture",
    "CudaFamily",
    "CudaRelease",
    "DriverCompat",
    "GpuModel",
    "KnowledgeBase",
    "TorchBuild",
    "TorchRelease",
    "gpu_tokens",
    "knowledge_base",
]


@lru_cache(maxsize=1)
def knowledge_base() -> KnowledgeBase:
    """The knowledge base, loaded once per process (its parsed data files kept in
    gpuenv's cache when the CLI configured one: ``gpuenv._settings``)."""
    from gpuenv import _settings
    from gpuenv.compat._load import load_knowledge_base

    return load_knowledge_base(_settings.cache_dir)
