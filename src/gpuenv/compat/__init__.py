"""The compatibility knowledge base: data files with provenance, and queries over them.

``knowledge_base()`` loads and validates ``data/*.toml`` once per process. Adding a
CUDA release or a torch release is a data-only change; ``tests/unit/compat`` holds
the invariants that guard it.
"""

from __future__ import annotations

from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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


def __getattr__(name: str) -> Any:
    # The model loads on first use: importing gpuenv.compat (for the data digest, say)
    # must not cost the model's imports.
    if name in __all__:
        from gpuenv.compat import model

        return getattr(model, name)
    raise AttributeError(f"module 'gpuenv.compat' has no attribute {name!r}")


@lru_cache(maxsize=1)
def knowledge_base() -> KnowledgeBase:
    """The knowledge base, loaded once per process (its parsed data files kept in
    gpuenv's cache when the CLI configured one: ``gpuenv._settings``)."""
    from gpuenv import _settings
    from gpuenv.compat._load import load_knowledge_base

    return load_knowledge_base(_settings.cache_dir)
