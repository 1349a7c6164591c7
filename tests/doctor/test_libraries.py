"""Duplicate, mismatched and missing CUDA libraries, and the loader's pick."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuenv.doctor import Severity
from tests.doctor.conftest import FakeEnv, Run, codes, hardware, make_toolkit, only

DRIVER_580 = hardware(driver="580.65.06", cuda="13.0")


def test_ld_library_path_copy_shadows_torchs_runpath(
    clean_env: FakeEnv, run: Run, tmp_path: Path
) -> None:
    stray = tmp_path / "old-cuda" / "lib64"
    planted = clean_env.lib(stray, "libcudart.so.12.1.105", "libcudart.so.12", ["libcudart.so.12"])
    report = run(clean_env, environ={"LD_LIBRARY_PATH": str(stray)})
    finding = only(report, "duplicate-cuda-library")
    assert finding.severity is Severity.ERROR
    ev = finding.evidence
    assert ev["library"] == "libcudart"
    assert ev["picked"]["path"] == str(planted.resolve())
    assert ev["picked"]["via"] == "LD_LIBRARY_PATH"
    assert ev["picked"]["version"] == "12.1.105"
    assert ev["torch_built_with"] == "12.4"
    assert ev["picked_matches_torch"] is False
    assert ev["loaded_by"].endswith("torch/lib/libtorch_cuda.so")
    versions = {c["version"] for c in ev["copies"]}
    assert versions == {"12.1.105", "12.4.127"}
    assert "12.1.105" in finding.message and str(planted.resolve()) in finding.message
    assert report.has_errors


def test_newer_copy_first_is_a_warning(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    stray = tmp_path / "newer"
    clean_env.lib(stray, "libcudart.so.12.6.77", "libcudart.so.12", ["libcudart.so.12"])
    finding = only(
        run(clean_env, environ={"LD_LIBRARY_PATH": str(stray)}), "duplicate-cuda-library"
    )
    assert finding.severity is Severity.WARNING
    assert finding.evidence["picked_matches_torch"] is True


def test_copy_off_the_search_path_is_a_note(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path / "cuda-12.4", "12.4")
    clean_env.lib(toolkit / "lib64", "libcudart.so.12.4.99", "libcudart.so.12", ["libcudart.so.12"])
    report = run(clean_env, environ={"CUDA_HOME": str(toolkit)})
    finding = only(report, "duplicate-cuda-library")
    assert finding.severity is Severity.INFO
    assert finding.evidence["picked"]["via"].startswith("RUNPATH of libtorch_cuda.so")
    assert any("toolkit" in c["via"] for c in finding.evidence["copies"])


def test_rpath_beats_ld_library_path(tmp_path: Path, elf, run: Run) -> None:
    """A conda-style torch: DT_RPATH into the prefix's lib, searched before
    LD_LIBRARY_PATH."""
    env = FakeEnv(tmp_path / "conda", elf)
    (env.prefix / "conda-meta").mkdir(parents=True)
    own = env.lib(
        env.prefix / "lib", "libcudart.so.12.4.127", "libcudart.so.12", ["libcudart.so.12"]
    )
    env.conda("cuda-cudart", "12.4.127", files=["lib/libcudart.so.12.4.127"])
    env.torch(rpath=["$ORIGIN/../../../.."], needed=["libcudart.so.12"])
    stray = tmp_path / "stray"
    env.lib(stray, "libcudart.so.12.1.105", "libcudart.so.12", ["libcudart.so.12"])
    finding = only(run(env, environ={"LD_LIBRARY_PATH": str(stray)}), "duplicate-cuda-library")
    assert finding.evidence["picked"]["path"] == str(own.resolve())
    assert finding.evidence["picked"]["via"] == "RPATH of libtorch_cuda.so"
    assert finding.evidence["picked_matches_torch"] is True
    assert finding.severity is Severity.WARNING


def test_single_wrong_copy_is_a_mismatch(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    shutil.rmtree(clean_env.site / "nvidia" / "cudnn")
    stray = tmp_path / "cudnn8"
    planted = clean_env.lib(stray, "libcudnn.so.9.0.0", "libcudnn.so.9", ["libcudnn.so.9"])
    report = run(clean_env, environ={"LD_LIBRARY_PATH": str(stray)})
    finding = only(report, "cuda-library-mismatch")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["picked"]["path"] == str(planted.resolve())
    assert finding.evidence["torch_built_with"] == "9.1.0.70"
    assert "duplicate-cuda-library" not in codes(report)


def test_missing_library(clean_env: FakeEnv, run: Run) -> None:
    shutil.rmtree(clean_env.site / "nvidia" / "nccl")
    finding = only(run(clean_env), "cuda-library-missing")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["needed_name"] == "libnccl.so.2"
    assert finding.evidence["loaded_by"].endswith("libtorch_cuda.so")
    assert any("nvidia/nccl/lib" in d for d in finding.evidence["search_order"])


def test_versions_from_conda_meta(tmp_path: Path, elf, run: Run) -> None:
    """Two conda-style copies named only by SONAME: versions come from conda-meta."""
    env = FakeEnv(tmp_path / "conda", elf)
    env.site.mkdir(parents=True)
    env.lib(env.prefix / "lib", "libnccl.so.2", "libnccl.so.2")
    env.conda("nccl", "2.18.1.1", files=["lib/libnccl.so.2"])
    env.torch(rpath=["$ORIGIN/../../../.."], needed=["libnccl.so.2"])
    env.lib(env.site / "nvidia" / "nccl" / "lib", "libnccl.so.2", "libnccl.so.2")
    env.dist("nvidia-nccl-cu12", "2.20.5", files=["nvidia/nccl/lib/libnccl.so.2"])
    finding = only(run(env), "duplicate-cuda-library")
    by_version = {c["version"]: c for c in finding.evidence["copies"]}
    assert set(by_version) == {"2.18.1.1", "2.20.5"}
    assert by_version["2.18.1.1"]["version_from"].endswith("nccl-2.18.1.1-0.json")
    assert finding.evidence["picked"]["version"] == "2.18.1.1"
    assert finding.severity is Severity.ERROR  # older than the build's NCCL 2.20.5


def test_cuda13_wheel_layout_versions_from_record(tmp_path: Path, elf, run: Run) -> None:
    """CUDA 13 wheels share site-packages/nvidia/cu13/lib; RECORD names the owner."""
    env = FakeEnv(tmp_path / "venv", elf)
    (tmp_path / "venv").mkdir()
    (env.prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    env.site.mkdir(parents=True)
    lib = env.site / "nvidia" / "cu13" / "lib"
    env.lib(lib, "libcudart.so.13", "libcudart.so.13")
    env.lib(lib, "libcublas.so.13", "libcublas.so.13")
    env.dist("nvidia-cuda-runtime", "13.0.96", files=["nvidia/cu13/lib/libcudart.so.13"])
    env.dist("nvidia-cublas", "13.1.1.3", files=["nvidia/cu13/lib/libcublas.so.13"])
    env.torch(
        version="2.14.1+cu130",
        cuda="13.0",
        rpath=["$ORIGIN/../../nvidia/cu13/lib"],
        needed=["libcudart.so.13", "libcublas.so.13"],
    )
    env.dist("torchvision", "0.29.1+cu130")
    stray = tmp_path / "cuda-13.0" / "lib64"  # a toolkit known only by its directory name
    env.lib(stray, "libcudart.so.13", "libcudart.so.13")
    report = run(env, environ={"LD_LIBRARY_PATH": str(stray)}, facts=DRIVER_580)
    # the toolkit's "13.0" is the wheel's "13.0.96" as far as both are known
    assert report.findings == (), [(f.code, f.message) for f in report.findings]

    # A CUDA 12.8 runtime is libcudart.so.12: the loader never takes it for libcudart.so.13
    old = tmp_path / "cuda-12.8" / "lib64"
    env.lib(old, "libcudart.so.12", "libcudart.so.12")
    report = run(env, environ={"LD_LIBRARY_PATH": f"{stray}:{old}"}, facts=DRIVER_580)
    assert "duplicate-cuda-library" not in codes(report)
    note = only(report, "ld-library-path-cuda-version")
    assert note.severity is Severity.INFO
    assert note.evidence["entries"][0]["version"] == "12.8"

    # A second libcudart.so.13 of another release is a rival; versions come from RECORD
    # and from the toolkit's directory name
    other = tmp_path / "cuda-13.1" / "lib64"
    env.lib(other, "libcudart.so.13", "libcudart.so.13")
    report = run(env, environ={"LD_LIBRARY_PATH": str(other)}, facts=DRIVER_580)
    finding = only(report, "duplicate-cuda-library")
    by_version = {c["version"]: c for c in finding.evidence["copies"]}
    assert by_version["13.0.96"]["version_from"].endswith("nvidia_cuda_runtime-13.0.96.dist-info")
    assert by_version["13.1"]["version_from"] == f"directory name {tmp_path / 'cuda-13.1'}"
    assert finding.evidence["picked"]["via"] == "RPATH of libtorch_cuda.so"
    assert finding.severity is Severity.WARNING


def test_dependencies_load_breadth_first_like_ld_so(
    tmp_path: Path, elf, run: Run, host_root: Path
) -> None:
    """libcusparse needs libnvJitLink and has no RUNPATH for it; libtorch_cuda needs both,
    cusparse first. ld.so maps libtorch_cuda's own dependencies (through its RUNPATH)
    before theirs, so a system libnvJitLink on ld.so.conf never wins."""
    env = FakeEnv(tmp_path / "venv", elf)
    env.prefix.mkdir()
    (env.prefix / "pyvenv.cfg").write_text("include-system-site-packages = false\n")
    env.site.mkdir(parents=True)
    cusparse = env.site / "nvidia" / "cusparse" / "lib"
    jit = env.site / "nvidia" / "nvjitlink" / "lib"
    env.lib(cusparse, "libcusparse.so.12", "libcusparse.so.12", needed=["libnvJitLink.so.12"])
    env.dist("nvidia-cusparse-cu12", "12.3.1.170", files=["nvidia/cusparse/lib/libcusparse.so.12"])
    wheel = env.lib(jit, "libnvJitLink.so.12", "libnvJitLink.so.12")
    env.dist("nvidia-nvjitlink-cu12", "12.4.127", files=["nvidia/nvjitlink/lib/libnvJitLink.so.12"])
    env.torch(
        runpath=["$ORIGIN/../../nvidia/cusparse/lib", "$ORIGIN/../../nvidia/nvjitlink/lib"],
        needed=["libcusparse.so.12", "libnvJitLink.so.12"],
    )
    system = host_root / "usr" / "local" / "cuda-12.1" / "lib64"
    elf.install(system / "libnvJitLink.so.12.1.105", "libnvJitLink.so.12", variant="12.1")
    (system / "libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.1.105")
    (host_root / "etc").mkdir()
    (host_root / "etc" / "ld.so.conf").write_text("/usr/local/cuda-12.1/lib64\n")
    report = run(env)
    finding = only(report, "duplicate-cuda-library")
    assert finding.evidence["needed_name"] == "libnvJitLink.so.12"
    assert finding.evidence["picked"]["path"] == str(wheel.resolve())
    assert finding.evidence["picked"]["by"] == "libtorch_cuda.so"
    assert finding.severity is Severity.WARNING  # the stray is reachable, not used
    assert "cuda-library-missing" not in codes(report)


def test_a_system_copy_beside_torchs_own_is_not_fixed_by_installing_it_again(
    tmp_path: Path, elf, run: Run, host_root: Path
) -> None:
    """Seen on a real H200 image: torch preloads its wheel's libcudnn, and the base image
    has another in /usr/lib on ld.so.cache. The warning stays; its fix must not ask to
    install the wheel that is installed and loaded."""
    env = FakeEnv(tmp_path / "venv", elf)
    env.prefix.mkdir()
    (env.prefix / "pyvenv.cfg").write_text("include-system-site-packages = false\n")
    env.site.mkdir(parents=True)
    cusparse = env.site / "nvidia" / "cusparse" / "lib"
    jit = env.site / "nvidia" / "nvjitlink" / "lib"
    env.lib(cusparse, "libcusparse.so.12", "libcusparse.so.12", needed=["libnvJitLink.so.12"])
    env.dist("nvidia-cusparse-cu12", "12.3.1.170", files=["nvidia/cusparse/lib/libcusparse.so.12"])
    env.lib(jit, "libnvJitLink.so.12", "libnvJitLink.so.12")
    env.dist("nvidia-nvjitlink-cu12", "12.4.127", files=["nvidia/nvjitlink/lib/libnvJitLink.so.12"])
    env.torch(
        runpath=["$ORIGIN/../../nvidia/cusparse/lib", "$ORIGIN/../../nvidia/nvjitlink/lib"],
        needed=["libcusparse.so.12", "libnvJitLink.so.12"],
    )
    system = host_root / "usr" / "lib" / "x86_64-linux-gnu"
    elf.install(system / "libnvJitLink.so.12.1.105", "libnvJitLink.so.12", variant="12.1")
    (system / "libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.1.105")
    (host_root / "etc").mkdir()
    (host_root / "etc" / "ld.so.conf").write_text("/usr/lib/x86_64-linux-gnu\n")
    finding = only(run(env), "duplicate-cuda-library")
    assert finding.severity is Severity.WARNING
    assert finding.fix is not None
    assert "install" not in finding.fix
    assert "nothing to change for torch" in finding.fix
