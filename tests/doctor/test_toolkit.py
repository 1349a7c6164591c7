"""CUDA_HOME, the nvcc on PATH, /usr/local/cuda and torch.version.cuda."""

from __future__ import annotations

from pathlib import Path

from gpuenv.doctor import Severity
from tests.doctor.conftest import FakeEnv, Run, codes, make_toolkit, only, write_nvcc


def test_cuda_home_of_another_major(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    home = make_toolkit(tmp_path / "cuda-11.8", "11.8")
    other_bin = tmp_path / "bin"
    nvcc = write_nvcc(other_bin, "12.1")
    report = run(clean_env, environ={"CUDA_HOME": str(home), "PATH": str(other_bin)})
    finding = only(report, "toolkit-mismatch")
    assert finding.severity is Severity.ERROR
    ev = finding.evidence
    assert ev["CUDA_HOME"] == {
        "path": str(home),
        "version": "11.8",
        "version_from": str(home / "version.json"),
    }
    assert ev["nvcc on PATH"]["path"] == str(nvcc)
    assert ev["nvcc on PATH"]["version"] == "12.1"  # from running `nvcc --version`
    assert ev["torch_cuda"] == "12.4"
    assert ev["extension_builds_use"] == "CUDA_HOME"


def test_usr_local_cuda_link_minor_mismatch(
    clean_env: FakeEnv, run: Run, tmp_path: Path, host_root: Path
) -> None:
    target = make_toolkit(host_root / "usr" / "local" / "cuda-12.1", "12.1")
    (host_root / "usr" / "local" / "cuda").symlink_to(target)
    finding = only(run(clean_env), "toolkit-mismatch")
    assert finding.severity is Severity.INFO, "nothing here builds extensions"
    clean_env.dist("ninja", "1.11.1.1")
    finding = only(run(clean_env), "toolkit-mismatch")
    assert finding.severity is Severity.WARNING  # same major: builds, with a warning
    assert finding.evidence["builds_extensions"].startswith("ninja is installed")
    link = finding.evidence["/usr/local/cuda"]
    assert link["target"] == str(target)
    assert link["version"] == "12.1"


def test_toolkit_without_version_file_asks_nvcc(
    clean_env: FakeEnv, run: Run, tmp_path: Path
) -> None:
    home = tmp_path / "cuda"
    write_nvcc(home / "bin", "11.7")
    finding = only(run(clean_env, environ={"CUDA_HOME": str(home)}), "toolkit-mismatch")
    assert finding.evidence["CUDA_HOME"]["version"] == "11.7"
    assert finding.evidence["CUDA_HOME"]["version_from"].endswith("nvcc --version")


def test_cuda_home_invalid(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    gone = str(tmp_path / "cuda-12.4")
    report = run(clean_env, environ={"CUDA_HOME": gone})
    finding = only(report, "cuda-home-invalid")
    assert finding.evidence["CUDA_HOME"] == gone
    assert finding.evidence["exists"] is False
    assert codes(report) == {"cuda-home-invalid"}


def test_a_system_nvcc_of_another_major_is_a_note_where_nothing_is_compiled(
    clean_env: FakeEnv, run: Run, tmp_path: Path
) -> None:
    """nvcc 13 on PATH beside a CUDA 12 torch: nothing here builds, so nothing breaks."""
    bin_dir = tmp_path / "bin"
    write_nvcc(bin_dir, "13.0")
    finding = only(run(clean_env, environ={"PATH": str(bin_dir)}), "toolkit-mismatch")
    assert finding.severity is Severity.INFO
    assert "nothing here builds or JIT-compiles CUDA extensions" in finding.message
    assert finding.fix.startswith("nothing needed now; before building extensions:")
    building = {"PATH": str(bin_dir), "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    finding = only(run(clean_env, environ=building), "toolkit-mismatch")
    assert finding.severity is Severity.ERROR
    assert "it matters because TORCH_EXTENSIONS_DIR is set" in finding.message
