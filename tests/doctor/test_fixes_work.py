"""Each fix, carried out on its fixture the way pip and the shell would, leaves an
environment the doctor finds clean; and where order matters, the other order does not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.doctor.conftest import (
    ElfFactory,
    FakeEnv,
    Run,
    codes,
    make_cu13_venv,
    only,
    plant_cu12_wheel,
)
from tests.doctor.test_cuda13 import H100_580


def pip_uninstall(env: FakeEnv, name: str) -> None:
    """What 'pip uninstall NAME' does: delete every file its RECORD lists, then the
    dist-info (shared files go too: pip does not know another wheel owns them)."""
    info = next(env.site.glob(f"{name.replace('-', '_')}-*.dist-info"))
    for line in (info / "RECORD").read_text().splitlines():
        path = env.site / line.split(",", 1)[0]
        if path.is_file() or path.is_symlink():
            path.unlink()
    shutil.rmtree(info, ignore_errors=True)


def reinstall_cu13_cudnn(env: FakeEnv) -> None:
    """'pip install --force-reinstall --no-deps nvidia-cudnn-cu13==9.20.0.48'."""
    lib = env.site / "nvidia" / "cudnn" / "lib"
    env.lib(lib, "libcudnn.so.9", "libcudnn.so.9", variant="nvidia-cudnn-cu13 9.20.0.48")
    env.dist("nvidia-cudnn-cu13", "9.20.0.48", files=["nvidia/cudnn/lib/libcudnn.so.9"])


@pytest.fixture
def cu13(tmp_path: Path, elf: ElfFactory) -> FakeEnv:
    return make_cu13_venv(tmp_path / "cu13", elf)


def test_shared_files_fix_in_its_order_leaves_a_clean_environment(cu13: FakeEnv, run: Run) -> None:
    plant_cu12_wheel(cu13, "cudnn", "nvidia-cudnn-cu12", "9.10.2.21", ["libcudnn.so.9"])
    fix = only(run(cu13, facts=H100_580), "file-ownership-clash").fix
    assert fix.index("uninstall -y nvidia-cudnn-cu12") < fix.index("nvidia-cudnn-cu13==9.20.0.48")
    pip_uninstall(cu13, "nvidia-cudnn-cu12")  # step 1
    halfway = run(cu13, facts=H100_580)
    assert "cuda-library-missing" in codes(halfway)  # the shared file went with it
    reinstall_cu13_cudnn(cu13)  # step 2
    report = run(cu13, facts=H100_580)
    assert report.findings == (), [(f.code, f.message) for f in report.findings]


def test_the_other_order_leaves_the_environment_broken(cu13: FakeEnv, run: Run) -> None:
    plant_cu12_wheel(cu13, "cudnn", "nvidia-cudnn-cu12", "9.10.2.21", ["libcudnn.so.9"])
    reinstall_cu13_cudnn(cu13)
    pip_uninstall(cu13, "nvidia-cudnn-cu12")
    assert "cuda-library-missing" in codes(run(cu13, facts=H100_580))


def test_preload_stray_fix(cu13: FakeEnv, run: Run) -> None:
    plant_cu12_wheel(cu13, "curand", "nvidia-curand-cu12", "10.3.7.77", ["libcurand.so.10"])
    fix = only(run(cu13, facts=H100_580), "duplicate-cuda-library").fix
    assert fix == (
        "1. 'python -m pip uninstall -y nvidia-curand-cu12' (torch's preload loads its copy "
        "first; torch does not need it)."
    )
    pip_uninstall(cu13, "nvidia-curand-cu12")
    assert run(cu13, facts=H100_580).findings == ()


def test_pythonpath_fix(clean_env: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory) -> None:
    other = FakeEnv(tmp_path / "other", elf)
    other.site.mkdir(parents=True)
    other.torch(version="2.5.0+cpu", cuda=None)
    environ = {"PYTHONPATH": f"{other.site}:{tmp_path / 'keep'}"}
    only(run(clean_env, environ=environ), "python-path-shadowing")
    environ["PYTHONPATH"] = str(tmp_path / "keep")  # step 1: the entry removed
    assert run(clean_env, environ=environ).findings == ()


def test_stub_fix(clean_env: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory) -> None:
    stubs = tmp_path / "stubs"
    elf.install(stubs / "libcuda.so.1", "libcuda.so.1", variant="stub")
    environ = {"LD_LIBRARY_PATH": f"{stubs}:{tmp_path}"}
    fix = only(run(clean_env, environ=environ), "libcuda-not-the-driver").fix
    assert fix.startswith(f"1. remove {str(stubs)!r} from LD_LIBRARY_PATH")
    environ["LD_LIBRARY_PATH"] = str(tmp_path)
    assert "libcuda-not-the-driver" not in codes(run(clean_env, environ=environ))


def test_pip_over_conda_fix_back_to_conda(tmp_path: Path, elf: ElfFactory, run: Run) -> None:
    env = FakeEnv(tmp_path / "conda", elf)
    env.site.mkdir(parents=True)
    site = "lib/python3.11/site-packages"
    env.conda("fastjson-core", "1.0", files=[f"{site}/fastjson/__init__.py"])
    env.dist("turbojson", "2.0", files=["fastjson/__init__.py", "turbojson/__init__.py"])
    fix = only(run(env), "pip-overwrote-conda-files").fix
    assert fix.startswith(
        "Go back to conda's fastjson-core: 1. 'python -m pip uninstall -y turbojson'"
    )
    pip_uninstall(env, "turbojson")  # step 1 (deletes conda's file too)
    assert "pip-overwrote-conda-files" not in codes(run(env))
    env.conda("fastjson-core", "1.0", files=[f"{site}/fastjson/__init__.py"])  # step 2
    assert run(env).findings == ()
