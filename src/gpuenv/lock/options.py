"""What one lock run is told: which targets, which pins move, index overrides, the
cache, this machine's hardware and the mirrors. The commands that lock (lock, install,
add, remove) read ``LockSettings`` once and build ``LockOptions.from_settings``;
``lock.inputs``, ``lock.target`` and ``lock.project`` read the options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv._network import Mirrors

if TYPE_CHECKING:
    from gpuenv.hardware import HardwareFacts
    from gpuenv.spec import Spec


@dataclass(frozen=True)
class LockSettings:
    """What the environment and gpuenv's configuration say to every command that locks,
    read once by the CLI: the index overrides, the cache, the mirrors, and how to detect
    this machine (asked only for a spec with "detect" targets)."""

    torch_index: str | None = None  # GPUENV_TORCH_INDEX
    index_url: str | None = None  # GPUENV_INDEX_URL
    cache_dir: Path | None = None
    mirrors: Mirrors = field(default_factory=Mirrors)  # from outside the project
    detect: Callable[[], HardwareFacts] | None = None


@dataclass(frozen=True)
class LockOptions:
    """What one lock run is told: which targets, which pins move, the index overrides, the
    cache, this machine's hardware (detected where a target asks) and the mirrors."""

    targets: tuple[str, ...] | None = None  # None: every target
    upgrade: bool = False  # False: keep existing pins that still fit
    upgrade_packages: tuple[str, ...] = ()  # normalised names whose pins move (the rest stay)
    torch_index: str | None = None  # overrides [pip] torch-index (GPUENV_TORCH_INDEX)
    index_url: str | None = None  # overrides [pip] index-url (GPUENV_INDEX_URL)
    cache_dir: Path | None = None
    detected: HardwareFacts | None = None
    mirrors: Mirrors = field(default_factory=Mirrors)  # from outside the project

    @classmethod
    def from_settings(
        cls,
        settings: LockSettings,
        spec: Spec,
        *,
        targets: tuple[str, ...] | None = None,
        upgrade: bool = False,
        upgrade_packages: tuple[str, ...] = (),
    ) -> LockOptions:
        """The options of one run of ``spec``: this machine is detected only when one of
        its targets asks (``gpu`` or ``driver = "detect"``)."""
        detect = settings.detect if spec.uses_detect else None
        return cls(
            targets=targets,
            upgrade=upgrade,
            upgrade_packages=upgrade_packages,
            torch_index=settings.torch_index,
            index_url=settings.index_url,
            cache_dir=settings.cache_dir,
            detected=detect() if detect is not None else None,
            mirrors=settings.mirrors,
        )
