"""``HardwareFacts`` as JSON: what ``gpuenv detect --json`` prints, and facts files.

A facts file lets ``plan`` work for a machine you are not on: run ``gpuenv detect
--json > h100-node.json`` there, plan with it here. Facts read from a file are marked
``measured=False`` and every fact's source is "file".

Reading converts by hand instead of through pydantic: ``gpuenv detect`` writes this
format on a fast path, and the reader reports every problem at once, each with its
JSON path (``gpus[1].compute_capability: ...``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpuenv.errors import FileFormatError
from gpuenv.hardware.model import SOURCE_FILE, GpuFacts, HardwareFacts, NoGpuReason, WslFacts
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion, VersionFormatError

__all__ = ["facts_from_dict", "facts_from_json", "facts_to_json"]

T = TypeVar("T")

_TOP_KEYS = frozenset(
    {
        "gpus",
        "driver_version",
        "cuda_driver_version",
        "sources",
        "measured",
        "wsl",
        "notes",
        "no_gpu_reason",
        "min_compute_capability",
    }
)
_GPU_KEYS = frozenset({"index", "name", "uuid", "compute_capability", "memory_total_bytes"})


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _wsl_to_json(wsl: WslFacts | None) -> dict[str, Any] | None:
    if wsl is None:
        return None
    return {
        "version": wsl.version,
        "kernel_release": wsl.kernel_release,
        "wsl_lib_dir": wsl.wsl_lib_dir,
        "host_driver_version": _str(wsl.host_driver_version),
        "nvml_library": wsl.nvml_library,
        "shadowing_libcuda": list(wsl.shadowing_libcuda),
        "linux_driver_files": list(wsl.linux_driver_files),
        "problems": list(wsl.problems),
    }


def facts_to_json(facts: HardwareFacts) -> dict[str, Any]:
    """One JSON object (the ``gpuenv detect --json`` contract); versions as text."""
    return {
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "uuid": g.uuid,
                "compute_capability": _str(g.compute_capability),
                "memory_total_bytes": g.memory_total_bytes,
            }
            for g in facts.gpus
        ],
        "driver_version": _str(facts.driver_version),
        "cuda_driver_version": _str(facts.cuda_driver_version),
        "min_compute_capability": _str(facts.min_compute_capability),
        "sources": dict(facts.sources),
        "measured": facts.measured,
        "wsl": _wsl_to_json(facts.wsl),
        "no_gpu_reason": facts.no_gpu_reason,
        "notes": list(facts.notes),
    }


class _Reader:
    """Checks values one by one, collecting every problem with its JSON path."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def typed(self, where: str, value: object, kind: type[T], *, optional: bool = True) -> T | None:
        if value is None and optional:
            return None
        # bool is an int in Python; a JSON true is never a count of bytes.
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        self.problem(where, f"expected {kind.__name__}, got {json.dumps(value)}")
        return None

    def version(self, where: str, value: object, parse: Callable[[str], T]) -> T | None:
        text = self.typed(where, value, str)
        if text is None:
            return None
        try:
            return parse(text)
        except VersionFormatError as exc:
            self.problem(where, str(exc))
            return None

    def keys(self, where: str, data: dict[str, Any], allowed: frozenset[str]) -> None:
        for key in sorted(set(data) - allowed):
            self.problem(f"{where}{key}", f"unknown key (known: {', '.join(sorted(allowed))})")


def _gpu(reader: _Reader, where: str, position: int, raw: object) -> GpuFacts | None:
    data = reader.typed(where, raw, dict, optional=False)
    if data is None:
        return None
    reader.keys(f"{where}.", data, _GPU_KEYS)
    name = reader.typed(f"{where}.name", data.get("name"), str, optional=False)
    index = reader.typed(f"{where}.index", data.get("index", position), int)
    memory = reader.typed(f"{where}.memory_total_bytes", data.get("memory_total_bytes"), int)
    if memory is not None and memory <= 0:
        reader.problem(f"{where}.memory_total_bytes", f"must be positive, got {memory}")
    return GpuFacts(
        index=position if index is None else index,
        name=name or "",
        uuid=reader.typed(f"{where}.uuid", data.get("uuid"), str),
        compute_capability=reader.version(
            f"{where}.compute_capability", data.get("compute_capability"), ComputeCapability.parse
        ),
        memory_total_bytes=memory,
    )


def _wsl(reader: _Reader, raw: object) -> WslFacts | None:
    data = reader.typed("wsl", raw, dict)
    if data is None:
        return None

    def strings(key: str) -> tuple[str, ...]:
        return tuple(str(s) for s in reader.typed(f"wsl.{key}", data.get(key), list) or ())

    return WslFacts(
        version=reader.typed("wsl.version", data.get("version", 2), int) or 2,
        kernel_release=reader.typed("wsl.kernel_release", data.get("kernel_release"), str),
        wsl_lib_dir=reader.typed("wsl.wsl_lib_dir", data.get("wsl_lib_dir"), str),
        host_driver_version=reader.version(
            "wsl.host_driver_version", data.get("host_driver_version"), DriverVersion.parse
        ),
        nvml_library=reader.typed("wsl.nvml_library", data.get("nvml_library"), str),
        shadowing_libcuda=strings("shadowing_libcuda"),
        linux_driver_files=strings("linux_driver_files"),
    )


def facts_from_dict(data: object, *, origin: str) -> HardwareFacts:
    """Facts from a parsed JSON object; ``origin`` names it in errors and notes."""
    reader = _Reader()
    top = reader.typed("(top level)", data, dict, optional=False)
    if top is None:
        raise FileFormatError(f"{origin}: {reader.problems[0]}")
    reader.keys("", top, _TOP_KEYS)
    raw_gpus = reader.typed("gpus", top.get("gpus"), list, optional=False) or []
    gpus = [_gpu(reader, f"gpus[{i}]", i, raw) for i, raw in enumerate(raw_gpus)]
    driver = reader.version("driver_version", top.get("driver_version"), DriverVersion.parse)
    cuda = reader.version("cuda_driver_version", top.get("cuda_driver_version"), CudaVersion.parse)
    reason = reader.typed("no_gpu_reason", top.get("no_gpu_reason"), str)
    if reason is not None and reason not in NoGpuReason.PRECEDENCE:
        reader.problem("no_gpu_reason", f"{reason!r} is not one of {NoGpuReason.PRECEDENCE}")
    notes = reader.typed("notes", top.get("notes"), list) or []
    wsl = _wsl(reader, top.get("wsl"))
    if reader.problems:
        raise FileFormatError(
            f"{origin}: not a hardware facts file:\n" + "\n".join(reader.problems),
            hint="write one with 'gpuenv detect --json' on the machine it describes",
        )
    found = tuple(g for g in gpus if g is not None)
    present = {
        "gpus": True,
        "driver_version": driver is not None,
        "cuda_driver_version": cuda is not None,
        "compute_capability": any(g.compute_capability for g in found),
    }
    return HardwareFacts(
        gpus=found,
        driver_version=driver,
        cuda_driver_version=cuda,
        sources={key: SOURCE_FILE for key, there in present.items() if there},
        measured=False,
        notes=(*(str(n) for n in notes), f"facts read from {origin}"),
        wsl=wsl,
        no_gpu_reason=reason if not found else None,
    )


def facts_from_json(path: str | Path) -> HardwareFacts:
    """Read a facts file (the output of ``gpuenv detect --json``).

    Raises ``FileFormatError`` (exit 2) for an unreadable file, invalid JSON, or
    values that are not facts, listing every problem with its JSON path.
    """
    from gpuenv import _fs

    try:  # bounded: a FIFO, a device or a huge file is refused, never read forever
        text = _fs.read_text(path, limit=_fs.STATE_LIMIT, what="hardware facts file")
    except OSError as exc:
        raise FileFormatError(f"cannot read hardware facts {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileFormatError(f"{path}: invalid JSON: {exc}") from exc
    except RecursionError:
        raise FileFormatError(f"{path}: JSON nested too deeply to be hardware facts") from None
    return facts_from_dict(data, origin=str(path))
