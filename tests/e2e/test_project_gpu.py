"""On a real GPU (marked `gpu`; skipped without one): the project's CUDA kernel, built by
gpuenv with real nvcc for each target's archs, runs on this GPU exactly when the code
read from its shared object says it can. The target whose arch is this GPU's adds one to
every value on the device; a target built for another generation without PTX gets CUDA's
'no kernel image' error, the failure gpuenv exists to prevent."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.builds.elfscan import gpu_code
from tests.builds.conftest import needs_gcc
from tests.builds.test_nvcc import needs_nvcc
from tests.e2e.conftest import Project
from tests.e2e.test_project import _prefix, _python, installed_cuda_project
from tests.fixtures.pkgindex.plugin import PkgIndex

pytestmark = pytest.mark.gpu


def _gpu_capability() -> tuple[int, int] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    result = subprocess.run(
        [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = result.stdout.split()
    if result.returncode != 0 or not lines:
        return None
    major, minor = lines[0].split(".")
    return int(major), int(minor)


@needs_gcc
@needs_nvcc
def test_each_targets_kernel_runs_on_this_gpu_exactly_when_its_code_fits(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    capability = _gpu_capability()
    if capability is None:
        pytest.skip("no NVIDIA GPU here (nvidia-smi answers no compute capability)")
    project = installed_cuda_project(make_project, pkgindex, tmp_path)
    ran = {}
    for target in ("h100", "ada"):
        prefix = _prefix(project, target)
        so = next(prefix.rglob("paper_kernels/_native*.so"))
        code = gpu_code(so)
        assert code is not None
        answer = _python(prefix, "import paper_kernels._native as n; print(n.run())")
        ran[target] = answer
        if code.runs_on(*capability):
            assert answer == "(2.0, 3.0, 4.0, 5.0)", f"{target} on sm_{capability}: {answer}"
        else:
            assert answer == "cudaErrorNoKernelImageForDevice", f"{target}: {answer}"
    print(f"sm_{capability[0]}{capability[1]}: {ran}")
