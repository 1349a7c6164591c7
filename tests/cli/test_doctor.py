"""`gpuenv doctor`: the JSON contract, exit codes and the human report, in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.cli import doctor_cmd
from gpuenv.doctor import Host
from gpuenv.errors import HardwareDetectionError
from tests.conftest import CliResult
from tests.doctor.conftest import GCC, H100, ElfFactory, FakeEnv, make_clean_venv

DETECT = doctor_cmd.hardware_facts

Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def elf(tmp_path_factory: pytest.TempPathFactory) -> ElfFactory:
    if GCC is None:
        pytest.skip("gcc builds the ELF fixtures")
    return ElfFactory(tmp_path_factory.mktemp("elf"))


@pytest.fixture
def clean_env(tmp_path: Path, elf: ElfFactory) -> FakeEnv:
    return make_clean_venv(tmp_path / "env", elf)


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The doctor judges the invoking process's variables: make them the test's."""
    for name in (
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "CUDA_HOME",
        "CUDA_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PYTHONPATH",
        "PYTHONUSERBASE",
        "PYTHONNOUSERSITE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user site of this machine
    (tmp_path / "host").mkdir()
    monkeypatch.setattr(doctor_cmd, "hardware_facts", lambda: H100)
    monkeypatch.setattr(doctor_cmd, "host", lambda: Host(root=tmp_path / "host"))


def test_json_clean(cli: Cli, clean_env: FakeEnv) -> None:
    result = cli("doctor", "--prefix", str(clean_env.prefix), "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["findings"] == []
    assert data["environment"]["prefix"] == str(clean_env.prefix)


def test_json_error_exits_1(cli: Cli, clean_env: FakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", ":/nowhere")
    result = cli("doctor", "--prefix", str(clean_env.prefix), "--json")
    assert result.code == 1
    findings = result.json()["findings"]
    assert [f["code"] for f in findings] == [
        "ld-library-path-relative",
        "ld-library-path-missing-dir",
    ]
    for finding in findings:
        assert set(finding) == {"code", "severity", "message", "evidence", "fix"}
        assert finding["evidence"]
    assert findings[0]["severity"] == "error"


def test_warnings_only_exit_0(
    cli: Cli, clean_env: FakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/opt/libhook.so")
    result = cli("doctor", "--prefix", str(clean_env.prefix))
    assert result.code == 0
    assert "warnings (1):" in result.out
    assert "[ld-preload-set]" in result.out
    assert "LD_PRELOAD: /opt/libhook.so" in result.out
    assert "fix: unset LD_PRELOAD" in result.out


def test_human_report_groups_by_severity(
    cli: Cli, clean_env: FakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stray = tmp_path / "stray"
    clean_env.lib(stray, "libcudart.so.12.1.105", "libcudart.so.12", ["libcudart.so.12"])
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{stray}:{stray}")
    result = cli("doctor", "--prefix", str(clean_env.prefix))
    assert result.code == 1
    out = result.out
    assert out.index("errors (1):") < out.index("notes (1):")
    assert "[duplicate-cuda-library]" in out and "[ld-library-path-duplicate]" in out
    assert "errors: 1, warnings: 1, notes: 1" in out


def test_active_environment_is_the_default(
    cli: Cli, clean_env: FakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", str(clean_env.prefix))
    result = cli("doctor", "--json")
    assert result.json()["environment"]["prefix"] == str(clean_env.prefix)


def test_bad_prefix_exits_2(cli: Cli, tmp_path: Path) -> None:
    result = cli("doctor", "--prefix", str(tmp_path / "missing"), "--json")
    assert result.code == 2
    assert result.json()["error"]["kind"] == "usage"


def test_python_and_prefix_exclusive(cli: Cli, tmp_path: Path) -> None:
    result = cli("doctor", "--prefix", str(tmp_path), "--python", "/usr/bin/python3")
    assert result.code == 2


def test_hardware_facts_when_detection_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuenv.hardware

    def detect(**_kwargs: object) -> None:
        raise HardwareDetectionError("NVML lost the GPU")

    monkeypatch.setattr(gpuenv.hardware, "detect", detect, raising=False)
    assert "NVML lost the GPU" in DETECT().notes[0]
