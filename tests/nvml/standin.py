"""Build the stand-in ``libnvidia-ml.so.1`` and describe what it should answer.

``build(out_dir)`` compiles ``standin.c`` with the system C compiler; ``FakeNvml``
turns a machine description into the ``GPUENV_FAKE_NVML`` value the library reads.
A test process cannot redirect pynvml's ``CDLL("libnvidia-ml.so.1")`` after it has
started, so tests run gpuenv in a subprocess with ``LD_LIBRARY_PATH`` set.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("standin.c")
LIBRARY = "libnvidia-ml.so.1"
SPEC_VAR = "GPUENV_FAKE_NVML"
LOG_VAR = "GPUENV_FAKE_NVML_LOG"

# nvml.h return codes the tests use.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15

MIB = 1 << 20


def compiler() -> str | None:
    return shutil.which("gcc") or shutil.which("cc")


def build(out_dir: Path) -> Path:
    """Compile the stand-in into ``out_dir/libnvidia-ml.so.1``; returns ``out_dir``."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (gcc or cc) on PATH")
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Wextra",
            f"-Wl,-soname,{LIBRARY}",
            "-o",
            str(out_dir / LIBRARY),
            str(SOURCE),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out_dir


@dataclass(frozen=True)
class FakeGpu:
    name: str
    uuid: str
    cc: str
    memory_bytes: int

    def item(self) -> str:
        return f"gpu={self.name}|{self.uuid}|{self.cc}|{self.memory_bytes}"


def fake_uuid(n: int, prefix: str = "5b3bb5e9") -> str:
    return f"GPU-{prefix}-{n:04x}-4c6e-9a51-{n:012x}"


def h100(n: int = 0) -> FakeGpu:
    return FakeGpu("NVIDIA H100 80GB HBM3", fake_uuid(n), "9.0", 81559 * MIB)


def a100(n: int = 0) -> FakeGpu:
    return FakeGpu("NVIDIA A100-SXM4-80GB", fake_uuid(n, "a1000000"), "8.0", 81920 * MIB)


def t4(n: int = 0) -> FakeGpu:
    return FakeGpu("Tesla T4", fake_uuid(n, "7e570000"), "7.5", 15360 * MIB)


@dataclass(frozen=True)
class FakeNvml:
    """What the stand-in answers: GPUs, driver, CUDA version, failure modes."""

    gpus: tuple[FakeGpu, ...] = ()
    driver: str = "550.54.15"
    cuda: int = 12040
    init_error: int | None = None
    failures: Mapping[str, int] = field(default_factory=dict)

    def spec(self) -> str:
        items = [f"driver={self.driver}", f"cuda={self.cuda}"]
        items += [gpu.item() for gpu in self.gpus]
        if self.init_error is not None:
            items.append(f"init={self.init_error}")
        items += [f"fail={name}:{code}" for name, code in self.failures.items()]
        return ";".join(items)


@dataclass(frozen=True)
class DetectRun:
    """What a ``gpuenv detect`` subprocess did."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


RunDetect = Callable[..., DetectRun]
