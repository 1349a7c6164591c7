"""What one lock run is told: which targets, which pins move, index overrides, the
cache, this machine's hardware and the mirrors (the lock, install and add commands
build it; ``lock.inputs``, ``lock.target`` and ``lock.project`` read it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv._network import Mirrors

if TYPE_CHECKING:
    from gpuenv.hardware import HardwareFacts


@dataclass(frozen=True)
class LockOptions:
    targets: tuple[str, ...] | None = None  # None: every target
    upgrade: bool = False  # False: keep existing pins that still fit
    upgrade_packages: tuple[str, ...] = ()  # normalised names whose pins move (the rest stay)
    torch_index: str | None = None  # overrides [pip] torch-index (GPUENV_TORCH_INDEX)
    index_url: str | None = None  # overrides [pip] index-url (GPUENV_INDEX_URL)
    cache_dir: Path | None = None
    detected: HardwareFacts | None = None
    mirrors: Mirrors = field(default_factory=Mirrors)  # from outside the project
