"""`gpuenv detect`: this machine's GPUs, driver and CUDA version, and where each came from."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _output

if TYPE_CHECKING:
    from gpuenv.hardware.model import HardwareFacts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _output.add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    from gpuenv import hardware
    from gpuenv.cli._overrides import detect_overrides

    facts = hardware.detect(overrides=detect_overrides())
    if args.json:
        _output.emit_json(hardware.facts_to_json(facts))
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
        from rich.table import Table

        table = Table(box=None, pad_edge=False)
        for column in ("#", "GPU", "compute capability", "memory", "UUID"):
            table.add_column(column)
        for gpu in facts.gpus:
            cc = str(gpu.compute_capability) if gpu.compute_capability else "?"
            table.add_row(
                str(gpu.index), gpu.name, cc, _gib(gpu.memory_total_bytes), gpu.uuid or "?"
            )
        console = _output.console()
        if not console.is_terminal:  # piped: rich would assume 80 columns and crop UUIDs
            console.width = 200
        console.print(table)
        _output.out()
    else:
        _output.out(f"no NVIDIA GPU ({facts.no_gpu_reason or 'none found'})")
    _output.out(f"driver:             {_fact(facts, 'driver_version', facts.driver_version)}")
    _output.out(
        f"CUDA (driver max):  {_fact(facts, 'cuda_driver_version', facts.cuda_driver_version)}"
    )
    if facts.min_compute_capability is not None:
        cc = facts.min_compute_capability
        _output.out(f"lowest compute cap: {_fact(facts, 'compute_capability', cc)}")
    if facts.wsl is not None:
        host = facts.wsl.host_driver_version or "unknown"
        _output.out(f"WSL{facts.wsl.version}:               host driver {host}")
    if not facts.measured:
        _output.out("(not all measured: overrides applied)")
    for note in facts.notes:
        _output.out(f"note: {note}")
