"""Real nvcc: a fixture package with a tiny .cu kernel, built for a target's archs, and
the built shared object read back (its fat binary) to hold exactly that GPU code.
Skipped cleanly where no CUDA toolkit is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.builds.cache import BuildCache
from gpuenv.builds.elfscan import gpu_code
from gpuenv.builds.runner import BuildContext, nvcc_release, wheel_for
from gpuenv.store import Store
from tests.builds.conftest import entry_for, gcc_major, make_prefix, uv_bin, write_sdist
from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.fixtures.sdists import SdistSpec


def _toolkit() -> Path | None:
    for candidate in (os.environ.get("CUDA_HOME"), "/usr/local/cuda-13.0", "/usr/local/cuda"):
        if candidate and (Path(candidate) / "bin" / "nvcc").exists():
            return Path(candidate)
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else None


TOOLKIT = _toolkit()
needs_nvcc = pytest.mark.skipif(
    TOOLKIT is None or nvcc_release(TOOLKIT) is None or shutil.which("gcc") is None,
    reason="needs a CUDA toolkit (nvcc) and gcc",
)
CUDA_EXT = SdistSpec(
    "fixture-cuda-ext", "1.0.0", "fixture_cuda_ext", extension="cuda", needs_torch=False
)


def extension_of(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".so"))
        archive.extract(name, into)
    return into / name


def cuobjdump_list(path: Path) -> str | None:
    """cuobjdump's own listing, when one is installed (an independent reading)."""
    tool = shutil.which("cuobjdump") or (str(TOOLKIT / "bin" / "cuobjdump") if TOOLKIT else None)
    if tool is None or not Path(tool).exists():
        return None
    out = subprocess.run(
        [tool, "--list-elf", "--list-ptx", path], capture_output=True, text=True, check=False
    )
    return out.stdout if out.returncode == 0 else None


@needs_nvcc
def test_a_cuda_kernel_is_compiled_for_exactly_the_locked_archs(
    tmp_path: Path, pkgindex: PkgIndex
) -> None:
    assert TOOLKIT is not None
    prefix = make_prefix(tmp_path, pkgindex)
    sdist, sha = write_sdist(tmp_path, CUDA_EXT)
    cuda = nvcc_release(TOOLKIT)
    cache = BuildCache(Store(tmp_path / "store"))
    ctx = BuildContext(prefix=prefix, uv=uv_bin(), cuda_home=TOOLKIT, environ=dict(os.environ))
    found = {}
    for arch in ("9.0+PTX", "8.9+PTX"):
        entry = entry_for(
            sdist,
            sha,
            CUDA_EXT,
            arch_list=arch,
            toolkit=f"{cuda}.88",
            cuda=cuda,
            host_compiler=f"gcc-{gcc_major()}",
            no_build_isolation=False,
        )
        with wheel_for(cache, entry, ctx) as (wheel, _outcome):
            so = extension_of(wheel.wheel, tmp_path / arch)
        code = gpu_code(so)
        assert code is not None
        found[arch] = code
        listing = cuobjdump_list(so)
        if listing is not None:
            for entry_name in code.entries():
                assert entry_name.split("_")[1] in listing
    h100, ada = found["9.0+PTX"], found["8.9+PTX"]
    assert h100.sass == {90} and h100.ptx == {90}
    assert ada.sass == {89} and ada.ptx == {89}
    assert h100.runs_on(9, 0) == "sm_90 machine code"
    assert h100.runs_on(8, 9) is None, "sm_90 code does not run on an RTX 4090"
    assert ada.runs_on(9, 0) == "PTX for compute_89 is JIT-compiled for sm_90"


NVCC_SPEC = """[project]
name = "nvcc"

[stack]
python = "3.11"
torch = "2.9.0"
torchvision = false
torchaudio = false
cuda = "{cuda}"
toolkit = "system:{toolkit}"

[targets.h100]
gpu = "H100"
driver = "580.65.06"

[targets.rtx4090]
gpu = "RTX 4090"
driver = "580.65.06"

[pip]
index-url = "{default}"
torch-index = "{torch}"
dependencies = ["fixture-cuda-ext"]

[pip.build.fixture-cuda-ext]
toolkit = true
"""


@needs_nvcc
def test_gpuenv_install_compiles_the_kernel_for_each_targets_gpu(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    assert TOOLKIT is not None
    cuda = nvcc_release(TOOLKIT)
    if cuda != "13.0":
        pytest.skip(f"the fixture index has a torch for CUDA 13.0, this toolkit is {cuda}")
    text = NVCC_SPEC.format(
        cuda=cuda, toolkit=TOOLKIT, default=pkgindex.default_index, torch=pkgindex.torch_base
    )
    project = make_project(text)
    result = project.gpuenv("install", "--all", "--json", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    codes = {}
    for target, gpu in (("h100", (9, 0)), ("rtx4090", (8, 9))):
        prefix = Path(os.readlink(project.dir / ".gpuenv" / target))
        record = json.loads((prefix / "etc/gpuenv/builds.json").read_text())
        (build,) = record["builds"]
        (so,) = build["extensions"]
        code = gpu_code(prefix / so)
        assert code is not None
        codes[target] = code
        assert code.runs_on(*gpu), f"{target}: {code.entries()}"
        listing = cuobjdump_list(prefix / so)
        if listing is not None:
            assert f"sm_{gpu[0]}{gpu[1]}" in listing
        answer = subprocess.run(
            [
                prefix / "bin/python",
                "-I",
                "-c",
                "import fixture_cuda_ext._native as n; print(n.answer())",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert answer.stdout.strip() == "42"
    assert codes["h100"].sass == {90} and codes["h100"].ptx == {90}
    assert codes["rtx4090"].sass == {89} and codes["rtx4090"].ptx == {89}
