"""Replicate's ``cog.yaml``: ``build.python_version``, ``build.cuda`` (the CUDA cog
matched torch's build to), ``build.python_packages``, ``build.python_requirements`` (a
requirements file, read), ``build.system_packages`` (reported) and ``build.run``."""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._text import fail, line_not_read
from gpuenv.importers._yaml import YNode, load
from gpuenv.importers.model import (
    PYTHON,
    TORCH_BUILD,
    UNMANAGED,
    Authority,
    Origin,
    ReadingBuilder,
    system_packages,
)


def _strings(node: YNode | None, display: str) -> list[tuple[int, str]]:
    if node is None:
        return []
    if node.kind != "seq":
        fail(display, node.line, "expected a list")
    out = []
    for item in node.children():
        text = item.text()
        if text is None:
            fail(display, item.line, "expected a string")
        out.append((item.line, text))
    return out


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    root = load(text, display)
    build = root.get("build")
    if build is None or build.kind != "map":
        fail(display, root.line, "no 'build:' section: not a cog.yaml")
    builder = ReadingBuilder(display, "cog", Authority.DEFINITION)
    python = build.get("python_version")
    if python is not None and python.text():
        builder.fact(PYTHON, str(python.text()), Origin(display, python.line, "python_version"))
    cuda = build.get("cuda")
    gpu = build.get("gpu")
    if cuda is not None and cuda.text():
        match = re.match(r"(\d+)\.(\d+)", str(cuda.text()))
        if match:
            origin = Origin(display, cuda.line, f"cuda: {cuda.text()}")
            builder.fact(TORCH_BUILD, f"cu{match.group(1)}{match.group(2)}", origin, "cog's cuda")
    elif gpu is not None and gpu.value is False:
        builder.fact(TORCH_BUILD, "cpu", Origin(display, gpu.line, "gpu: false"), "cog gpu: false")
    feeder = requirements.PipLines(ctx, builder, path.parent)
    for line, requirement in _strings(build.get("python_packages"), display):
        feeder.line(line, requirement.strip())
    extra = build.get("python_requirements")
    if extra is not None and extra.text():
        target = Path(os.path.normpath(path.parent / str(extra.text())))
        origin = Origin(display, extra.line, f"python_requirements: {extra.text()}")
        with line_not_read(builder, origin):
            ctx.include(target, "requirements", by=display, line=extra.line)
    system = _strings(build.get("system_packages"), display)
    if system:
        builder.note(
            UNMANAGED,
            system_packages([t for _, t in system]),
            Origin(display, system[0][0], "system_packages"),
        )
    ctx.readings.append(builder.build())
