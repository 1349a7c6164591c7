"""`gpuenv detect`: this machine's GPUs, driver and CUDA version, and where each came from."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _hardware, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.hardware.model import HardwareFacts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.hardware import facts_to_json

    facts = _hardware.machine_facts()
    if args.json:
        _output.emit_json(facts_to_json(facts))
    else:
        _render(facts)
    return 0


def _gib(size: int | None) -> str:
    return f"{size / (1 << 30):.1f} GiB" if size else "?"


def _fact(facts: HardwareFacts, key: str, value: object) -> str:
    source = facts.sources.get(key)
    return f"{value if value is not None else 'unknown'}" + (f"  ({source})" if source else "")


def _render(facts: HardwareFacts) -> None:
    if facts.gpus:
        rows = [
            [
                str(g.index),
                g.name,
                str(g.compute_capability or "?"),
                _gib(g.memory_total_bytes),
                g.uuid or "?",
            ]
            for g in facts.gpus
        ]
        _output.out(_output.table(["#", "GPU", "compute capability", "memory", "UUID"], rows))
        _output.out()
    else:
        _output.out(f"no NVIDIA GPU ({facts.no_gpu_reason or 'none found'})")
    lines = [
        ("driver", _fact(facts, "driver_version", facts.driver_version)),
        ("CUDA (driver max)", _fact(facts, "cuda_driver_version", facts.cuda_driver_version)),
    ]
    if facts.min_compute_capability is not None:
        cc = facts.min_compute_capability
        lines.append(("lowest compute cap", _fact(facts, "compute_capability", cc)))
    if facts.wsl is not None:
        lines.append(
            (f"WSL{facts.wsl.version}", f"host driver {facts.wsl.host_driver_version or 'unknown'}")
        )
    for label, value in lines:
        _output.out(f"{label + ':':<20}{value}")
    if not facts.measured:
        _output.out("(not all measured: overrides applied)")
    for note in facts.notes:
        _output.out(f"note: {note}")
