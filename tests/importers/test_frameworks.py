"""TensorFlow and JAX projects are recognised and never given a torch no file asks for;
conda-only packages stay conda packages (or are dropped as conda's own libraries)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.importers.conftest import Imported


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_a_tensorflow_1_project_gets_no_invented_torch(
    run_import: Callable[..., Imported], target: str
) -> None:
    imported = run_import("tf1-gan", target=target)
    assert imported.result.code == 3, imported.result.out
    assert not imported.spec.exists(), "nothing is written"
    error = json.loads(imported.result.out)["error"]
    assert error["message"].startswith(
        "a tensorflow, tensorflow-gpu project: no file asks for torch"
    )
    assert "Dockerfile:2 FROM tensorflow/tensorflow:1.14.0-gpu-py3" in error["message"]
    assert "nvcr.io/nvidia/tensorflow" in error["hint"]
    if target == "h100":
        assert (
            "built for GPUs up to compute capability 7.5: no kernels for sm_90" in error["message"]
        )
    if target == "cpu":
        assert "no kernels" not in error["message"]


def test_a_jax_project_gets_no_invented_torch(run_import: Callable[..., Imported]) -> None:
    imported = run_import("jax-flax", target="h100")
    assert imported.result.code == 3, imported.result.out
    error = json.loads(imported.result.out)["error"]
    assert error["message"].startswith("a jax project")
    assert "jax[cuda12]" in error["hint"]


def test_torch_beside_tensorflow_plans_torch_and_names_tensorflow(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.1.2\ntensorflow==2.15.0  # only for the TFRecord loader\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    assert imported.torch().startswith("2.1.2")
    assert "tensorflow" in imported.entries("unmanaged")
    pip = imported.spec.read_text().split("[pip]", 1)[1]
    assert "# left out: tensorflow==2.15.0" in pip
    assert '"tensorflow' not in pip


def test_conda_only_packages_never_become_pip_requirements(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    env = tmp_path / "environment.yml"
    env.write_text(
        "name: seg\nchannels: [pytorch, nvidia, conda-forge]\ndependencies:\n"
        "  - python=3.10\n  - pytorch=2.1.2\n  - pytorch-cuda=12.1\n  - imagemagick=7.1.1\n"
        "  - aws-c-common=0.9.0\n  - mkl-devel=2023.1.0\n  - cuda-nvrtc=12.1.105\n"
        "  - mkl=2023.1.0\n  - numpy=1.26.4\n"
    )
    imported = run_import(env, target="h100")
    assert imported.result.code == 0, imported.result.out
    spec = imported.spec.read_text()
    pip = spec.split("[pip]", 1)[1].split("[conda]", 1)[0]
    for name in ("imagemagick", "aws-c-common", "mkl", "cuda-nvrtc"):
        assert name not in pip, name
    assert '"imagemagick=7.1.1"' in spec.split("[conda]", 1)[1]
    assert '"numpy==1.26.4"' in pip
