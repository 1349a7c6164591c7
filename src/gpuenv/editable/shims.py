"""pip inside a prefix never reaches another environment.

A prefix is made by uv without pip, so ``pip`` in an activated shell (or under ``gpuenv
run``) used to be the next one on ``PATH``: gpuenv's own, or the system's, which then
installed somewhere else, silently. Each prefix gets a ``pip`` and a ``pip3`` of its own
that refuse, saying the environment is managed by gpuenv.lock and naming ``gpuenv add``;
``python -m pip`` finds a stub ``pip`` package whose import fails with the same words
(an ``ImportError``: code that probes for pip carries on as without it). Refusing (rather than
installing into the prefix and marking it as drifted) keeps a prefix exactly what its
lock and completion marker say, so verification still vouches for what runs.

Where the lock installs pip itself (a project that asks for it), its own pip is kept.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gpuenv._fs import writing

MESSAGE = (
    "gpuenv: this environment is managed by gpuenv.lock: pip would install outside the lock.\n"
    "  add the package to the project instead:  gpuenv add {example}\n"
    "  (or edit gpuenv.toml and run 'gpuenv install'); the lock then holds it for every "
    "machine of this target.\n"
)
SCRIPT = """#!/bin/sh
# gpuenv: pip in this prefix refuses (see gpuenv.editable.shims).
printf '%s' {message} >&2
exit 1
"""
STUB = '''"""gpuenv's stand-in for pip: this environment is managed by gpuenv.lock."""
raise ImportError({message!r})
'''


def _site_packages(prefix: Path) -> Path | None:
    return next(iter(sorted(prefix.glob("lib/python3*/site-packages"))), None)


def write_pip_shims(prefix: Path) -> list[Path]:
    """``bin/pip``, ``bin/pip3`` and a ``pip`` stub module, unless the prefix has pip."""
    site = _site_packages(prefix)
    if site is None or (site / "pip").exists():
        return []
    text = MESSAGE.format(example="NAME")
    written = []
    with writing(prefix / "bin", "the prefix's pip stand-ins"):
        for name in ("pip", "pip3"):
            path = prefix / "bin" / name
            if path.exists() or path.is_symlink():
                continue
            path.write_text(SCRIPT.format(message=shlex.quote(text)))
            path.chmod(0o755)
            written.append(path)
        (site / "pip").mkdir()
        (site / "pip" / "__init__.py").write_text(STUB.format(message=text.strip()))
        written.append(site / "pip")
    return written
