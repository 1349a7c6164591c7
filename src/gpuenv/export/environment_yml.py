"""``environment-yml``: a conda ``environment.yml`` for people who only have conda: every
conda record pinned to its exact build from its channel, and in the ``pip:`` section each
pip artifact by its exact URL with a ``#sha256=`` fragment (pip checks it; plain PEP 508,
so conda-lock's parser reads the file too, and no index option is needed)."""

from __future__ import annotations

import json

from gpuenv.export._common import (
    ExportContext,
    Exported,
    channels,
    clean_url,
    conda_python,
    describe,
    origin,
    python_minor,
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
        pins = [f"{p.name} @ {clean_url(p.url)}#sha256={p.sha256}" for p in target.pip]
        lines += [f"      - {_quoted(pin)}" for pin in sorted(pins)]
    return Exported("\n".join(lines) + "\n", tuple(notes))
