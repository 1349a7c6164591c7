"""``dockerfile``: an image holding exactly the lock, on a CUDA base image whose CUDA and
cuDNN are the lock's: ``devel`` when a toolkit (nvcc) is locked, ``runtime`` otherwise.

The conda records go in as an explicit file (micromamba), the pip artifacts by their
exact URLs with ``--require-hashes`` (uv), both written into the Dockerfile as heredocs
(BuildKit), so the one file is the whole recipe. The verification probe needs the GPU,
which a build does not have, so it is not a build step or a HEALTHCHECK: the comment at
the end gives the command that runs it in a container on a GPU machine.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from gpuenv.errors import UsageError
from gpuenv.export._common import (
    ExportContext,
    Exported,
    clean_url,
    conda_python,
    describe,
    has_toolkit,
    origin,
    python_minor,
    requirement_lines,
)
from gpuenv.knowledge._data import data_toml
from gpuenv.lock.model import LockedTarget

PREFIX = "/opt/env"


def images() -> dict[str, Any]:
    """The base images (``knowledge/data/images.toml``: ``cuda-images``, ``cpu-image``,
    ``micromamba``, ``uv``, beside what ``gpuenv import`` reads of images)."""
    return data_toml("images.toml")


def base_image(target: LockedTarget, data: dict[str, Any]) -> tuple[str, str]:
    """(image, why) for the target: CUDA and cuDNN from the lock, devel or runtime."""
    stack = target.stack
    if stack.cuda is None:
        return data["cpu-image"]["image"], "a CPU build: no CUDA in the image"
    table = data["cuda-images"]
    release = table["releases"].get(stack.cuda)
    if release is None:
        known = ", ".join(sorted(table["releases"]))
        raise UsageError(
            f"no {table['repository']} image is known for CUDA {stack.cuda} (known: {known})",
            hint=f"see {table['source']}; add the release to gpuenv's knowledge/data/images.toml",
        )
    flavour = "devel" if has_toolkit(target) else "runtime"
    major = stack.cudnn.split(".")[0] if stack.cudnn else None
    cudnn = release["cudnn"].get(major) if major else None
    parts = [release["version"], *([cudnn] if cudnn else []), flavour, table["os"]]
    why = f"CUDA {release['version']} (the lock: {stack.cuda}), "
    if cudnn:
        why += f"cuDNN {major} (the lock: {stack.cudnn}), "
    elif stack.cudnn:
        why += f"no cuDNN {major} image for this CUDA (the wheels bring cuDNN {stack.cudnn}), "
    why += "devel: a toolkit is locked" if flavour == "devel" else "runtime: no toolkit is locked"
    return f"{table['repository']}:{'-'.join(parts)}", why


def _uv_version() -> str:
    from importlib.metadata import version

    return version("uv")


def _conda_steps(target: LockedTarget, data: dict[str, Any]) -> list[str]:
    if not target.conda:
        return []
    mamba = data["micromamba"]
    explicit = [f"{clean_url(c.url)}#{c.md5}" for c in sorted(target.conda, key=lambda c: c.name)]
    return [
        f"COPY --from={mamba['image']} {mamba['binary']} /usr/local/bin/micromamba",
        "# The conda records, exact (an explicit file: URL#md5):",
        "COPY <<'GPUENV_CONDA' /opt/gpuenv/conda-explicit.txt",
        "@EXPLICIT",
        *explicit,
        "GPUENV_CONDA",
        f"RUN micromamba create --yes --prefix {PREFIX} --file /opt/gpuenv/conda-explicit.txt"
        " && micromamba clean --all --yes",
    ]


def _pip_steps(target: LockedTarget) -> list[str]:
    steps = []
    if not conda_python(target):
        existing = " --allow-existing" if target.conda else ""
        steps.append(f"RUN uv venv{existing} --python {python_minor(target)} {PREFIX}")
    if target.pip:
        steps += [
            "# The pip artifacts, exact (URL and sha256 from the lock):",
            "COPY <<'GPUENV_PIP' /opt/gpuenv/requirements.txt",
            *requirement_lines(target, direct=True),
            "GPUENV_PIP",
            f"RUN uv pip install --python {PREFIX}/bin/python --no-deps --require-hashes"
            " -r /opt/gpuenv/requirements.txt",
        ]
    return steps


def _verification(target: LockedTarget) -> list[str]:
    from gpuenv.verify.target import expectations_for

    expect = expectations_for(target, Path(PREFIX), None, ()).to_json()
    payload = shlex.quote(json.dumps(expect, separators=(",", ":"), sort_keys=True))
    gpus = "" if target.stack.cuda is None else " --gpus all"
    return [
        "# Verification (not a HEALTHCHECK: the probe needs the GPU, which a build does not",
        "# have). On the machine that will run it, with gpuenv installed there:",
        "#   probe=$(python3 -c 'import gpuenv.verify, os; print(os.path.join(os.path.dirname("
        'gpuenv.verify.__file__), "probe.py"))\')',
        f"#   docker run --rm -i{gpus} IMAGE {PREFIX}/bin/python -I - --expect {payload}"
        ' < "$probe"',
        "# It prints one JSON object; every check must pass (gpuenv verify shows the same checks).",
    ]


def render(context: ExportContext) -> Exported:
    target = context.target
    data = images()
    image, why = base_image(target, data)
    lines = [
        "# syntax=docker/dockerfile:1.7",
        f"# {origin(context, 'dockerfile')}",
        f"# {describe(target)}.",
        f"# Base image: {why}.",
        f"FROM {image}",
        f"COPY --from={data['uv']['repository']}:{_uv_version()} /uv /usr/local/bin/uv",
        "ENV UV_PYTHON_INSTALL_DIR=/opt/python UV_LINK_MODE=copy UV_NO_CACHE=1",
        *_conda_steps(target, data),
        *_pip_steps(target),
        f'ENV VIRTUAL_ENV={PREFIX} PATH="{PREFIX}/bin:$PATH"',
        *(["ENV CUDA_HOME=" + PREFIX] if any(c.name == "cuda-nvcc" for c in target.conda) else []),
        *_verification(target),
    ]
    return Exported("\n".join(lines) + "\n")
