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
    assert "fix: unset LD_PRELOAD" in result.out
    assert "evidence" not in result.out.replace("(the evidence: gpuenv doctor -v, or --json)", "")
    assert (
        "LD_PRELOAD: /opt/libhook.so" in cli("doctor", "--prefix", str(clean_env.prefix), "-v").out
    )


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


# -- the environment the user means ---------------------------------------------------------


def _installed_project(tmp_path: Path, elf: ElfFactory, target: str = "cpu") -> Path:
    """A project whose target's pointer leads to an installed (marked) prefix."""
    from gpuenv.store import Store, point_project

    store = Store(tmp_path / "store")
    prefix = store.prefix_for(target, "a" * 64)
    make_clean_venv(prefix, elf)
    store.mark_installed(prefix, lock_hash="a" * 64, target=target, python="3.11")
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "gpuenv.toml").write_text(
        f'[project]\nname = "p"\n[stack]\npython = "3.11"\n[targets.{target}]\ngpu = "none"\n'
    )
    point_project(store, project, target, prefix)
    return prefix


def _chosen(cli: Cli) -> tuple[str, str]:
    result = cli("doctor", "--json")
    assert result.code in (0, 1), result.err
    environment = result.json()["environment"]
    return environment["prefix"], environment["chosen_because"]


def test_inside_gpuenv_run_the_activated_prefix_wins(
    cli: Cli, clean_env: FakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("_GPUENV_ACTIVE", str(clean_env.prefix))
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path))  # gpuenv run's prefix comes first
    assert _chosen(cli) == (
        str(clean_env.prefix),
        "the environment 'gpuenv run' or 'gpuenv shell' activated",
    )
    human = cli("doctor").out.splitlines()[0]
    assert human.startswith(f"environment: {clean_env.prefix} (venv")
    assert human.endswith(": the environment 'gpuenv run' or 'gpuenv shell' activated")


@pytest.mark.parametrize(
    ("variable", "why"),
    [
        ("VIRTUAL_ENV", "the activated venv ($VIRTUAL_ENV)"),
        ("CONDA_PREFIX", "the activated conda environment ($CONDA_PREFIX)"),
    ],
)
def test_an_activated_environment_is_next(
    variable: str, why: str, cli: Cli, clean_env: FakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, str(clean_env.prefix))
    assert _chosen(cli) == (str(clean_env.prefix), why)


@pytest.mark.parametrize(
    ("variable", "off"), [("VIRTUAL_ENV", "'deactivate'"), ("CONDA_PREFIX", "'conda deactivate'")]
)
def test_an_activated_environment_since_deleted_is_named_by_its_variable(
    variable: str, off: str, cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A venv deleted while still activated said "no environment at PATH" without
    naming $VIRTUAL_ENV, the one thing to change."""
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "_GPUENV_ACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, str(tmp_path / "gone"))
    result = cli("doctor")
    assert result.code == 2
    assert f"${variable} names '{tmp_path / 'gone'}', which is not a directory" in result.err
    assert off in result.err and "--prefix" in result.err


def test_in_a_project_its_installed_target(
    cli: Cli, elf: ElfFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    prefix = _installed_project(tmp_path, elf)
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)  # gpuenv's own venv, activated: skipped
    where, why = _chosen(cli)
    assert Path(where).resolve() == prefix.resolve()
    assert why == f"target cpu of the project {tmp_path / 'project' / 'gpuenv.toml'}"
    assert cli("doctor", "--target", "h100").code == 2, "not a target of this project"


def test_a_project_named_with_f_wins_over_an_activated_environment(
    cli: Cli, elf: ElfFactory, clean_env: FakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prefix = _installed_project(tmp_path, elf)
    monkeypatch.setenv("VIRTUAL_ENV", str(clean_env.prefix))
    spec = tmp_path / "project" / "gpuenv.toml"
    result = cli("-f", str(spec), "doctor", "--json")
    assert result.code in (0, 1), result.err
    environment = result.json()["environment"]
    assert Path(environment["prefix"]).resolve() == prefix.resolve()
    assert environment["chosen_because"] == f"target cpu of the project {spec}"


@pytest.mark.parametrize("named", ["missing.toml", "folder", "binary.toml"])
def test_a_bad_file_named_with_f_is_exit_2_not_another_environment(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, named: str
) -> None:
    """doctor -f with a missing, a folder's or a binary file's path diagnosed gpuenv's own
    environment, exit 0, without a word about the file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "binary.toml").write_bytes(b"\x00\x01\xff")
    result = cli("-f", named, "doctor")
    assert result.code == 2, (result.code, result.out[:300])
    assert named in result.err


def test_outside_any_environment_the_first_python3_on_path(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import shutil

    system = shutil.which("python3", path="/usr/bin:/bin")
    if system is None:
        pytest.skip("no python3 in /usr/bin or /bin")
    bin_dir = tmp_path / "no-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(system)
    monkeypatch.chdir(tmp_path)
    result = cli("doctor", "--json")
    assert result.code in (0, 1), result.err
    environment = result.json()["environment"]
    assert environment["chosen_because"] == (
        "the first python3 on PATH, as no environment is active"
    )
    assert environment["python"] is not None


def test_with_nothing_else_gpuenvs_own_environment_says_so(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    (tmp_path / "gpuenv.toml").write_text('[project]\nname = "p"\n')
    monkeypatch.chdir(tmp_path)
    where, why = _chosen(cli)
    assert Path(where) == Path(sys.prefix)
    assert why == (
        "gpuenv's own, as no other is active or on PATH (the project here has nothing installed)"
    )


def test_python_is_looked_up_on_path(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    bin_dir = tmp_path / "no-bin"
    bin_dir.mkdir()
    (bin_dir / "mypython").symlink_to(sys.executable)
    result = cli("doctor", "--python", "mypython", "--json")
    assert result.code in (0, 1), result.err
    assert "chosen_because" not in result.json()["environment"]
    missing = cli("doctor", "--python", "nopython")
    assert missing.code == 2
    assert "--python nopython: no such file (and no such command on PATH)" in missing.err
