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
    from gpuenv import _settings

    facts = _settings.facts_file
    stamp = None
    if facts is not None:
        try:
            info = facts.stat()
            stamp = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = None  # no such file: no facts file
    return _cached(facts if stamp else None, stamp)


@lru_cache(maxsize=4)
def _cached(facts: Path | None, stamp: tuple[int, int] | None) -> KnowledgeBase:
    from gpuenv import _settings
    from gpuenv.knowledge._load import load_knowledge_base

    return load_knowledge_base(_settings.cache_dir, facts)
