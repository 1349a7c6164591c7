"""Judging a probe run: garbled, inconsistent or incomplete output never passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuenv.verify import (
    Expectations,
    expectations_for_installed,
    interpreter_problem,
    parse_probe_output,
    run_probe,
)
from gpuenv.verify._run import probe_budget
from gpuenv.verify.model import CPU_REQUIRED, PROBE_VERSION, ProbeResult

CPU = Expectations(cpu=True)


def _doc(checks: list[dict[str, Any]], **extra: Any) -> str:
    return json.dumps({"probe_version": PROBE_VERSION, "mode": "cpu", "checks": checks, **extra})


def _ok(name: str) -> dict[str, Any]:
    return {"name": name, "status": "pass", "passed": True, "detail": "fine", "fix": None}


ALL_CPU = [_ok(n) for n in CPU_REQUIRED]


def test_a_clean_run_passes() -> None:
    result = parse_probe_output(_doc(ALL_CPU), returncode=0, required=CPU_REQUIRED)
    assert result.passed and result.reason is None


@pytest.mark.parametrize(
    ("stdout", "fragment"),
    [
        ('{"probe_version": 1, "checks": [', "garbled"),
        (_doc(ALL_CPU) + "\n" + _doc(ALL_CPU), "garbled"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"probe_version": 99, "checks": []}), "probe version 99"),
        (json.dumps({"probe_version": PROBE_VERSION}), "no list of checks"),
        (_doc([{"name": "versions", "passed": "yes", "detail": "x"}]), "malformed check"),
        (_doc([{"name": 3, "passed": True, "detail": "x"}]), "malformed check"),
        ("Segmentation fault", "garbled"),
    ],
)
def test_garbled_output_fails(stdout: str, fragment: str) -> None:
    result = parse_probe_output(stdout, returncode=0, required=CPU_REQUIRED)
    assert not result.passed and result.reason and fragment in result.reason


def test_missing_required_checks_fail() -> None:
    result = parse_probe_output(_doc(ALL_CPU[:2]), returncode=0, required=CPU_REQUIRED)
    assert not result.passed
    assert result.reason == "required checks did not run: matmul:cpu, linkage"


def test_every_gpu_needs_its_product() -> None:
    devices = {**_ok("devices"), "data": {"devices": [{"index": 0}, {"index": 1}]}}
    checks = [devices, _ok("matmul:cuda:0")]
    result = parse_probe_output(_doc(checks), returncode=0, required=("devices", "matmul:cuda:0"))
    assert result.reason == "required checks did not run: matmul:cuda:1"


def test_no_checks_fail() -> None:
    result = parse_probe_output(_doc([]), returncode=0)
    assert not result.passed and result.reason == "the probe ran no check"


def test_exit_status_disagreeing_with_checks_fails() -> None:
    result = parse_probe_output(_doc(ALL_CPU), returncode=1, required=CPU_REQUIRED)
    assert not result.passed and "although every check passed" in (result.reason or "")


def test_a_failed_check_with_exit_zero_still_fails() -> None:
    checks = [*ALL_CPU[:-1], {"name": "linkage", "passed": False, "detail": "bad"}]
    result = parse_probe_output(_doc(checks), returncode=0, required=CPU_REQUIRED)
    assert not result.passed and result.reason is None


def test_a_signal_fails_even_after_good_json() -> None:
    stderr = "gpuenv-probe: running linkage\n"
    result = parse_probe_output(_doc(ALL_CPU), returncode=-11, stderr=stderr, required=CPU_REQUIRED)
    assert not result.passed
    assert result.reason == "the probe was killed by SIGSEGV while running the linkage check"


def test_odd_exit_codes_fail() -> None:
    result = parse_probe_output(_doc(ALL_CPU), returncode=7, required=CPU_REQUIRED)
    assert not result.passed and result.reason == "the probe exited with code 7"


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def test_an_interpreter_printing_garbage_fails(tmp_path: Path) -> None:
    python = _script(tmp_path, 'echo \'{"probe_version": 1, "checks": [\' \nexit 0\n')
    result = run_probe(python, CPU, timeout=10)
    assert not result.passed and "garbled" in (result.reason or "")


def test_an_interpreter_claiming_success_without_checks_fails(tmp_path: Path) -> None:
    python = _script(tmp_path, f"echo '{_doc([_ok('torch-import')], passed=True)}'\n")
    result = run_probe(python, CPU, timeout=10)
    assert not result.passed and "required checks did not run" in (result.reason or "")


def test_an_interpreter_that_does_not_exist_fails(tmp_path: Path) -> None:
    result = run_probe(tmp_path / "nope", CPU, timeout=10)
    assert not result.passed and "interpreter not found" in (result.reason or "")
    assert interpreter_problem(tmp_path / "nope") == f"{tmp_path / 'nope'} does not exist"
    assert "is a directory" in (interpreter_problem(tmp_path) or "")
    plain = tmp_path / "plain"
    plain.write_text("", encoding="utf-8")
    assert "not executable" in (interpreter_problem(plain) or "")


def test_the_probe_gets_the_expectations_and_a_budget_below_the_timeout(tmp_path: Path) -> None:
    seen = tmp_path / "argv"
    python = _script(tmp_path, f'for a in "$@"; do echo "$a"; done > {seen}\n')
    run_probe(python, Expectations(torch="2.4.1", cuda="12.4"), timeout=100)
    argv = seen.read_text(encoding="utf-8").splitlines()
    assert argv[0] == "-I" and argv[1].endswith("probe.py") and argv[2] == "--expect"
    sent = json.loads(argv[3])
    assert sent["torch"] == "2.4.1" and sent["cuda"] == "12.4"
    assert sent["time_budget"] == probe_budget(100) < 100


def test_probe_result_round_trips_and_cannot_be_forged_to_pass() -> None:
    result = parse_probe_output(_doc(ALL_CPU), returncode=0, required=CPU_REQUIRED)
    again = ProbeResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again == result
    forged = result.to_json()
    forged["checks"][0]["passed"] = False
    assert not ProbeResult.from_json(forged).passed
    forged = {**result.to_json(), "reason": "killed"}
    assert not ProbeResult.from_json(forged).passed


def test_expectations_from_an_installation() -> None:
    gpu = expectations_for_installed(
        {
            "torch": "2.4.1+cu124",
            "torch_cuda": "12.4",
            "cudnn": "9.1.0.70",
            "nccl": "2.20.5",
            "torchvision": "0.19.1+cu124",
            "torchaudio": None,
        }
    )
    assert (gpu.torch, gpu.cuda, gpu.cudnn, gpu.nccl, gpu.cpu) == (
        "2.4.1+cu124",
        "12.4",
        "9.1.0.70",
        "2.20.5",
        False,
    )
    assert gpu.required_checks()[-1] == "torchvision"
    cpu = expectations_for_installed({"torch": "2.4.1+cpu", "torch_cuda": None, "cudnn": "9.1"})
    assert cpu.cpu and cpu.cudnn is None
