"""`gpuenv verify --python PATH`: exit codes, the table and the JSON contract."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.verify.conftest import make_site

PY = sys.executable


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Make this interpreter see a fake-torch installation with real metadata."""

    def install(config: Mapping[str, Any] | None = None, **env: str) -> None:
        import json

        config = dict(config or {})
        for var in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "PYTHONHOME"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("PYTHONPATH", str(make_site(tmp_path, config)))
        fake = {k: v for k, v in config.items() if k != "dists"}
        monkeypatch.setenv("GPUENV_FAKE_TORCH", json.dumps(fake))
        for key, value in env.items():
            monkeypatch.setenv(key, value)

    return install


CU124_DISTS = {"nvidia-cudnn-cu12": "9.1.0.70", "nvidia-nccl-cu12": "2.20.5"}


def test_a_working_gpu_interpreter_exits_0(
    cli: Callable[..., CliResult], installed: Callable[..., None]
) -> None:
    installed({"dists": CU124_DISTS})
    result = cli("verify", "--python", PY, "--json")
    assert result.code == 0, result.out
    data = result.json()
    assert data["passed"] is True and data["mode"] == "cuda" and data["python"] == PY
    for entry in data["checks"]:
        assert {"name", "passed", "detail", "fix"} <= set(entry)
    versions = next(c for c in data["checks"] if c["name"] == "versions")
    assert "cudnn 9.1.0" in versions["detail"]


def test_expectations_come_from_what_is_installed(
    cli: Callable[..., CliResult], installed: Callable[..., None]
) -> None:
    """The nvidia-cudnn wheel says 9.1.0.70 but another cuDNN loaded: caught."""
    installed({"cudnn": 8907, "dists": CU124_DISTS})
    data = cli("verify", "--python", PY, "--json").json()
    versions = next(c for c in data["checks"] if c["name"] == "versions")
    assert data["passed"] is False
    assert "cudnn is 8.9.7, the lock says 9.1.0.70" in versions["detail"]


def test_a_cpu_build_is_verified_as_a_cpu_build(
    cli: Callable[..., CliResult], installed: Callable[..., None]
) -> None:
    installed(
        {"version": "2.4.1+cpu", "cuda": None, "torchvision": "0.19.1+cpu", "torchaudio": None}
    )
    result = cli("verify", "--python", PY, "--json")
    assert result.code == 0, result.out
    data = result.json()
    assert data["mode"] == "cpu"
    assert [c["name"] for c in data["checks"]] == [
        "torch-import",
        "versions",
        "matmul:cpu",
        "torchvision",
        "linkage",
    ]


def test_a_cuda_build_without_a_usable_gpu_exits_1_and_says_why(
    cli: Callable[..., CliResult], installed: Callable[..., None]
) -> None:
    installed({"driver_cuda": 0, "available": False})
    result = cli("verify", "--python", PY)
    assert result.code == 1
    assert "no NVIDIA driver" in result.out
    assert "NOT verified" in result.out
    installed({}, CUDA_VISIBLE_DEVICES="")
    data = cli("verify", "--python", PY, "--json").json()
    devices = next(c for c in data["checks"] if c["name"] == "devices")
    assert not devices["passed"] and "hides every GPU" in devices["detail"]


def test_the_table_lists_check_result_detail_fix(
    cli: Callable[..., CliResult], installed: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    installed({"arch": ["sm_80", "sm_86"], "fail": {"kernel": "no kernel image is available"}})
    result = cli("verify", "--python", PY)
    assert result.code == 1
    for word in ("check", "result", "detail", "fix", "arch", "FAIL", "matmul:cuda:0"):
        assert word in result.out
    assert "install a torch build that has sm_90: cu118, cu121, cu124" in result.out


@pytest.mark.parametrize("columns", ["20", "40"])
def test_a_narrow_terminal_gets_one_line_per_check_not_a_crushed_table(
    cli: Callable[..., CliResult],
    installed: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    columns: str,
) -> None:
    # At 20 columns the table's headers were 'ch', 're', 'de', 'f' and every detail was
    # cut into pieces of four letters; the suite's runs have no COLUMNS (80 in a pipe).
    monkeypatch.setenv("COLUMNS", columns)
    installed({"arch": ["sm_80", "sm_86"], "fail": {"kernel": "no kernel image is available"}})
    result = cli("verify", "--python", PY)
    assert result.code == 1
    assert "┏" not in result.out and "│" not in result.out
    assert "\n  matmul:cuda:0: FAIL: " in result.out
    assert "    fix: install a torch build that has sm_90: cu118, cu121, cu124" in result.out
    assert result.out.rstrip().splitlines()[-1].startswith("NOT verified: ")


def test_a_crashing_probe_exits_1(
    cli: Callable[..., CliResult], installed: Callable[..., None]
) -> None:
    installed({"crash": "matmul"})
    data = cli("verify", "--python", PY, "--json").json()
    assert data["passed"] is False and "SIGSEGV" in data["reason"]
    assert data["checks"][-1]["name"] == "probe" and data["checks"][-1]["passed"] is False


def test_a_hanging_probe_times_out_and_exits_1(
    cli: Callable[..., CliResult], installed: Callable[..., None]
) -> None:
    installed({"hang": "matmul"})
    result = cli("verify", "--python", PY, "--json", "--timeout", "8")
    assert result.code == 1
    data = result.json()
    assert data["passed"] is False
    hung = next(c for c in data["checks"] if c["name"] == "matmul:cuda:0")
    assert "did not finish" in hung["detail"]


def test_bad_input_exits_2(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    missing = cli("verify", "--python", str(tmp_path / "nope"), "--json")
    assert missing.code == 2 and "does not exist" in missing.json()["error"]["message"]
    assert cli("verify").code == 2
    assert cli("verify", "--python", PY, "--timeout", "0").code == 2


def test_an_interpreter_without_torch_fails(
    cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    if any((Path(p) / "torch").is_dir() for p in sys.path if p and os.path.isdir(p)):
        pytest.skip("this interpreter has a real torch")
    result = cli("verify", "--python", PY, "--json")
    assert result.code == 1
    first = result.json()["checks"][0]
    assert first["name"] == "torch-import" and "No module named 'torch'" in first["detail"]


def test_a_failed_cuda_target_on_a_machine_without_a_driver_is_told_where_it_can_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse
    from types import SimpleNamespace
    from typing import cast

    from gpuenv.cli import verify_cmd
    from gpuenv.verify import ProbeResult, gate

    args = argparse.Namespace(target=None, python=None)
    failed = cast(ProbeResult, SimpleNamespace(passed=False, mode="cuda"))
    monkeypatch.setattr(gate, "machine_fingerprint", lambda **_: {"driver": None, "gpus": []})
    note = verify_cmd._no_driver_note(args, "h100 (/store/prefixes/h100-1)", failed)
    assert note is not None and note.startswith("this machine has no NVIDIA driver: ")
    assert "there, 'gpuenv verify --target h100'" in note
    cpu = cast(ProbeResult, SimpleNamespace(passed=False, mode="cpu"))
    assert verify_cmd._no_driver_note(args, "cpu (/p)", cpu) is None
    monkeypatch.setattr(gate, "machine_fingerprint", lambda **_: {"driver": "550.54.15"})
    assert verify_cmd._no_driver_note(args, "h100 (/p)", failed) is None
