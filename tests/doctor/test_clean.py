"""A coherent environment has no findings; the report names the environment."""

from __future__ import annotations

from pathlib import Path

from tests.doctor.conftest import FakeEnv, Run, make_toolkit


def test_clean_venv_has_no_findings(clean_env: FakeEnv, run: Run) -> None:
    report = run(clean_env)
    assert report.findings == ()
    assert not report.has_errors
    env = report.environment
    assert env["kind"] == "venv"
    assert env["torch"]["version"] == "2.4.1+cu124"
    assert env["torch"]["build"] == "cu124"


def test_clean_with_matching_toolkit_and_library_path(
    clean_env: FakeEnv, run: Run, tmp_path: Path
) -> None:
    toolkit = make_toolkit(tmp_path / "cuda-12.4", "12.4")
    environ = {
        "CUDA_HOME": str(toolkit),
        "PATH": str(toolkit / "bin"),
        "LD_LIBRARY_PATH": str(clean_env.site / "nvidia" / "cuda_runtime" / "lib"),
    }
    assert run(clean_env, environ=environ).findings == ()
