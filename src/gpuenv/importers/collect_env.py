"""The output of ``python -m torch.utils.collect_env`` (pasted into an issue, say): the
torch version and its CUDA build, the Python, the GPU and driver the paper ran on, and
the "Versions of relevant libraries" section (``[pip3] numpy==1.21.5``,
``[conda] pytorch 1.12.1 py3.8_cuda11.3_cudnn8.3.2_0 pytorch``)."""

from __future__ import annotations

import re
from pathlib import Path

from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._text import fail
from gpuenv.importers.conda_env import CondaSink
from gpuenv.importers.model import (
    DRIVER,
    GPU,
    PYTHON,
    TORCH_BUILD,
    Ask,
    Authority,
    Origin,
    ReadingBuilder,
)
from gpuenv.names import TRIO

MARKERS = ("PyTorch version:", "Is debug build:", "CUDA used to build PyTorch:")
_LIBRARY = re.compile(r"^\[(pip3?|conda)\]\s+(.*)$")


def looks_like_collect_env(text: str) -> bool:
    head = text[:4000]
    return sum(marker in head for marker in MARKERS) >= 2


def _torch(builder: ReadingBuilder, value: str, origin: Origin) -> None:
    if value in ("N/A", "None", ""):
        return
    build = requirements.build_of(value)
    version = value.split("+", 1)[0]
    builder.asks.append(Ask("torch", f"=={version}", origin, build=build))


def _library(
    sink: CondaSink, builder: ReadingBuilder, kind: str, rest: str, origin: Origin
) -> None:
    if kind.startswith("pip"):
        found = requirements.ask_from(rest.strip(), origin)
        if not isinstance(found, str):
            builder.asks.append(found)
        return
    parts = rest.split()
    if len(parts) >= 2 and not rest.startswith("Could not collect"):
        sink.package(parts[0], parts[1], parts[2] if len(parts) > 2 else None, origin)


def _cuda_build(builder: ReadingBuilder, value: str, origin: Origin) -> None:
    if not value or value == "N/A":
        return
    match = re.fullmatch(r"(\d+)\.(\d+)", value)
    if match:
        builder.fact(TORCH_BUILD, f"cu{match.group(1)}{match.group(2)}", origin, "collect_env")
    elif value in ("None", "Could not collect"):
        builder.fact(TORCH_BUILD, "cpu", origin, "collect_env")


def _python(builder: ReadingBuilder, value: str, origin: Origin) -> None:
    match = re.match(r"(\d+\.\d+(\.\d+)?)", value)
    if match:
        builder.fact(PYTHON, match.group(1), origin)


def _line(builder: ReadingBuilder, sink: CondaSink, line: str, origin: Origin) -> bool:
    """One line; True when it was the torch version line."""
    key, _, value = line.partition(":")
    value = value.strip()
    if key == "PyTorch version":
        _torch(builder, value, origin)
        return True
    if key == "CUDA used to build PyTorch":
        _cuda_build(builder, value, origin)
    elif key == "Python version":
        _python(builder, value, origin)
    elif key == "GPU models and configuration" and value:
        builder.fact(GPU, value, origin)
    elif line.startswith("GPU 0: "):
        builder.fact(GPU, line.removeprefix("GPU 0: "), origin)
    elif key == "Nvidia driver version" and value:
        builder.fact(DRIVER, value, origin)
    else:
        library = _LIBRARY.match(line)
        if library:
            _library(sink, builder, library.group(1), library.group(2), origin)
    return False


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    builder = ReadingBuilder(display, "collect-env", Authority.RECORD)
    sink = CondaSink(ctx, builder)
    seen_torch = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        seen_torch |= _line(builder, sink, line, Origin(display, number, line))
    if not seen_torch:
        fail(display, 1, "no 'PyTorch version:' line: not collect_env output")
    builder.asks = _without_duplicate_torch(builder.asks)
    sink.finish()
    ctx.readings.append(builder.build())


def _without_duplicate_torch(asks: list[Ask]) -> list[Ask]:
    """The header's torch line and the library list both name torch: keep the header's."""
    out: list[Ask] = []
    names: set[str] = set()
    for ask in asks:
        if ask.name in names and ask.name in TRIO:
            continue
        names.add(ask.name)
        out.append(ask)
    return out
