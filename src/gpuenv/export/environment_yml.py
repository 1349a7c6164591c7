"""``environment-yml``: a conda ``environment.yml`` for people who only have conda: every
conda record pinned to its exact build from its channel, the pip artifacts pinned with
their sha256 in the ``pip:`` section (conda hands those lines to pip as a requirements
file, so the hashes are checked)."""

from __future__ import annotations

import json

from gpuenv.export._common import (
    ExportContext,
    Exported,
    channels,
    clean_url,
    conda_python,
    describe,
    index_lines,
    origin,
    python_minor,
    requirement_lines,
)


def _quoted(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML scalar


def render(context: ExportContext) -> Exported:
    target = context.target
    notes: list[str] = []
    lines = [
        f"# {origin(context, 'environment-yml')}",
        f"# for {describe(target)}: conda create -n NAME -f environment.yml (conda or micromamba)",
        f"name: {_quoted(f'{context.project}-{target.name}')}",
        "channels:",
        *(f"  - {_quoted(c)}" for c in channels(target)),
        "  - nodefaults",
        "dependencies:",
    ]
    for c in sorted(target.conda, key=lambda c: c.name):
        channel = clean_url(c.channel).rstrip("/")
        lines.append(f"  - {_quoted(f'{channel}::{c.name}=={c.version}={c.build}')}")
    if not conda_python(target):
        lines.append(f"  - {_quoted(f'python={python_minor(target)}')}")
        notes.append(
            f"python {python_minor(target)} is not a locked conda record: conda chooses its build"
        )
    if target.pip:
        names = {c.name for c in target.conda}
        if "pip" not in names:
            lines.append('  - "pip"')
            notes.append("pip itself is not locked: conda chooses its version")
        lines.append("  - pip:")
        pip_lines = index_lines(target) + requirement_lines(target)
        lines += [f"      - {_quoted(line)}" for line in pip_lines]
    return Exported("\n".join(lines) + "\n", tuple(notes))
