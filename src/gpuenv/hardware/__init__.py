"""Hardware facts: what a machine has, and detecting them on this one.

Public API (names resolve lazily, so ``import gpuenv.hardware.fingerprint`` on the
``gpuenv run`` hot path loads nothing else):

- ``HardwareFacts``, ``GpuFacts``, ``WslFacts``, ``DetectOverrides``, ``HostPaths``,
  ``NoGpuReason`` (``gpuenv.hardware.model``): the values.
- ``detect(*, overrides=None, host=None) -> HardwareFacts``: this machine, with the
  order of sources documented on the function.
- ``facts_to_json(facts)`` and ``facts_from_json(path)``: the ``detect --json`` format,
  and facts files for planning other machines (``measured=False``, source "file").
- ``gpuenv.hardware.fingerprint.fingerprint()``: driver version + GPU UUIDs in
  milliseconds, without NVML where ``/proc/driver/nvidia`` can answer.
- ``gpuenv.hardware.parse`` (and ``proctext``, its standard-library-only part): the pure
  parsers for ``/proc``, nvidia-smi and WSL texts.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # keeps typing off the `gpuenv run` path (the fingerprint)
if TYPE_CHECKING:
    from typing import Any

    from gpuenv.hardware._detect import detect
    from gpuenv.hardware.facts_file import facts_from_dict, facts_from_json, facts_to_json
    from gpuenv.hardware.model import (
        DetectOverrides,
        GpuFacts,
        HardwareFacts,
        HostPaths,
        NoGpuReason,
        WslFacts,
    )

__all__ = [
    "DetectOverrides",
    "GpuFacts",
    "HardwareFacts",
    "HostPaths",
    "NoGpuReason",
    "WslFacts",
    "detect",
    "facts_from_dict",
    "facts_from_json",
    "facts_to_json",
]

_WHERE = {
    "detect": "gpuenv.hardware._detect",
    "facts_from_dict": "gpuenv.hardware.facts_file",
    "facts_from_json": "gpuenv.hardware.facts_file",
    "facts_to_json": "gpuenv.hardware.facts_file",
    "DetectOverrides": "gpuenv.hardware.model",
    "GpuFacts": "gpuenv.hardware.model",
    "HardwareFacts": "gpuenv.hardware.model",
    "HostPaths": "gpuenv.hardware.model",
    "NoGpuReason": "gpuenv.hardware.model",
    "WslFacts": "gpuenv.hardware.model",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuenv.hardware' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
