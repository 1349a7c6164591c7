"""--deep: the REAL verification probe (gpuenv.verify.verify_python, the real
run_probe) run with the environment's interpreter as its user runs it, against the fake
torch (tests/fixtures/fake_torch) reached only through PYTHONPATH; its findings merge
with the static ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuenv.doctor import DoctorRequest, Host, Severity, diagnose
from tests.doctor.conftest import H100, FakeEnv, Run, hardware, only
from tests.verify.conftest import fake_env, make_site

NO_SM90 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]


def test_deep_without_probe_is_a_note(
    clean_env: FakeEnv, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gpuenv.verify", None)  # import fails
    report = run(clean_env, deep=True)
    finding = only(report, "deep-checks-unavailable")
    assert finding.severity is Severity.INFO
    assert finding.evidence["module"] == "gpuenv.verify.verify_python"
    assert not report.has_errors


def test_deep_without_an_interpreter_is_a_note(clean_env: FakeEnv, run: Run) -> None:
    report = run(clean_env, deep=True)  # the fixture prefix has no bin/python
    assert only(report, "deep-checks-unavailable").evidence["reason"].startswith("no runnable")
    assert report.environment["deep"]["ran"] is False


def user_environ(tmp_path: Path, config: dict[str, Any]) -> dict[str, str]:
    """The user's variables: the fake torch only on PYTHONPATH, configured."""
    environ = fake_env({k: v for k, v in config.items() if k != "dists"})
    environ["PYTHONPATH"] = str(make_site(tmp_path, config))
    environ["HOME"] = str(tmp_path / "home")
    return environ


def deep_report(tmp_path: Path, config: dict[str, Any], facts: Any = H100) -> Any:
    root = tmp_path / "host"
    root.mkdir(exist_ok=True)
    request = DoctorRequest(
        environ=user_environ(tmp_path, config),
        hardware=facts,
        python=Path(sys.executable),
        deep=True,
        cwd=tmp_path,
        host=Host(root=root),
    )
    return diagnose(request)


def test_deep_passing_probe_through_pythonpath(tmp_path: Path) -> None:
    report = deep_report(tmp_path, {})
    deep = report.environment["deep"]
    assert deep["ran"] is True and deep["passed"] is True, report.to_json()
    assert deep["mode"] == "cuda"
    assert "linkage" in deep["checks"] and "matmul:cuda:0" in deep["checks"]
    assert not [f for f in report.findings if f.code.startswith("probe")]
    # the static side judged the same torch the probe imported: the one on PYTHONPATH
    assert report.environment["torch"]["version"] == "2.4.1+cu124"
    assert report.environment["torch"]["version_file"].startswith(str(tmp_path / "site"))


def test_deep_probe_failure_becomes_a_finding(tmp_path: Path) -> None:
    report = deep_report(tmp_path, {"arch": NO_SM90, "fail": {"kernel": "no kernel image"}})
    arch = only(report, "probe-arch")
    assert arch.severity is Severity.ERROR
    assert "sm_90" in arch.message and arch.evidence["check"] == "arch"
    matmul = only(report, "probe-matmul")
    assert "no kernel image" in matmul.message
    assert report.environment["deep"]["failed"] == ["arch", "matmul:cuda:0"]


def test_deep_arch_list_for_a_build_the_knowledge_base_lacks(tmp_path: Path) -> None:
    config = {"version": "2.4.99+cu124", "arch": ["sm_80", "sm_86"], "torchvision": None}
    report = deep_report(tmp_path, config, facts=hardware())
    finding = only(report, "arch-not-covered")
    assert finding.evidence["arch_list_from"] == "probe: torch.cuda.get_arch_list()"
    assert "arch-not-covered" in only(report, "probe-arch").evidence["explained_by"]


def test_doctor_deep_cli_end_to_end(tmp_path: Path) -> None:
    """`gpuenv doctor --deep --python` in a real subprocess: exit 1 and the probe's
    finding when the fake cuDNN fails torch's version check."""
    config = {"cudnn_mismatch": {"compiled": [9, 1, 0], "runtime": [8, 9, 7]}}
    environ = user_environ(tmp_path, config)
    environ["GPUENV_OVERRIDE_COMPUTE_CAP"] = "9.0"
    environ["PATH"] = os.environ.get("PATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "gpuenv", "doctor", "--deep", "--python", sys.executable, "--json"],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    by_code = {f["code"]: f for f in data["findings"]}
    assert "failed torch's version check" in by_code["probe-cudnn"]["message"]
    assert data["environment"]["deep"]["ran"] is True


def test_deep_confirms_the_static_pick_with_what_the_probe_mapped(tmp_path: Path, elf: Any) -> None:
    environ = user_environ(tmp_path, {"libs": ["libcudnn.so.9"]})
    site = Path(environ["PYTHONPATH"])
    elf.install(
        site / "torch" / "lib" / "libtorch_cuda.so",
        "libtorch_cuda.so",
        needed=("libcudnn.so.9",),
        runpath=("$ORIGIN/../../nvidia/cudnn/lib",),
    )
    elf.install(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "libcudnn.so.9")
    stray = tmp_path / "old-cudnn"
    elf.install(stray / "libcudnn.so.9.0.0", "libcudnn.so.9", variant="9.0.0")
    (stray / "libcudnn.so.9").symlink_to("libcudnn.so.9.0.0")
    environ["LD_LIBRARY_PATH"] = str(stray)
    root = tmp_path / "host"
    root.mkdir()
    request = DoctorRequest(
        environ=environ,
        hardware=H100,
        python=Path(sys.executable),
        deep=True,
        cwd=tmp_path,
        host=Host(root=root),
    )
    report = diagnose(request)
    finding = only(report, "duplicate-cuda-library")
    assert finding.evidence["picked"]["via"] == "LD_LIBRARY_PATH"
    assert finding.evidence["probe_mapped"] == [
        str(stray / "libcudnn.so.9.0.0")
    ]  # maps show real files
    assert finding.evidence["probe_confirms_pick"] is True
    linkage = only(report, "probe-linkage")
    assert "duplicate-cuda-library" in linkage.evidence["explained_by"]
