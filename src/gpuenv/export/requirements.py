"""``requirements``: a pip requirements file, every line pinned to one version with its
sha256, and the index options that find them: ``pip install --require-hashes -r``."""

from __future__ import annotations

from gpuenv.export._common import (
    ExportContext,
    Exported,
    conda_left_out,
    describe,
    index_lines,
    origin,
    requirement_lines,
)


def render(context: ExportContext) -> Exported:
    target = context.target
    lines = [
        f"# {origin(context, 'requirements')}",
        f"# for {describe(target)}; every line carries its sha256:",
        "#   pip install --require-hashes -r requirements.txt",
        *index_lines(target),
        *requirement_lines(target),
    ]
    return Exported("\n".join(lines) + "\n", conda_left_out(target, "requirements file"))
