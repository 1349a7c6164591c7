"""sys.path as the user's Python computes it: PYTHONPATH, the user site and .pth files
put other copies of torch (or nvidia-* wheels) first; the doctor judges the torch that
is imported and names the variable or file responsible."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuenv.doctor import Severity
from gpuenv.doctor.environment import inventory, locate
from tests.doctor.conftest import NO_GPU, ElfFactory, FakeEnv, Run, codes, only


def other_env(tmp_path: Path, elf: ElfFactory, version: str = "2.5.0+cpu") -> FakeEnv:
    other = FakeEnv(tmp_path / "other", elf)
    other.site.mkdir(parents=True)
    other.torch(version=version, cuda=None)
    return other


def test_pythonpath_torch_shadows_the_environments(
    clean_env: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory
) -> None:
    other = other_env(tmp_path, elf)
    report = run(clean_env, environ={"PYTHONPATH": str(other.site)}, facts=NO_GPU)
    finding = only(report, "python-path-shadowing")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["entry"]["origin"] == "PYTHONPATH"
    row = finding.evidence["distributions"][0]
    assert row["imported"] == {
        "distribution": "torch",
        "version": "2.5.0+cpu",
        "location": str(other.site),
        "on_sys_path_because": f"PYTHONPATH entry 1 ({str(other.site)!r})",
    }
    assert row["shadowed"][0]["location"] == str(clean_env.site)
    assert row["shadowed"][0]["version"] == "2.4.1+cu124"
    assert str(other.site) in finding.message and str(clean_env.site) in finding.message
    assert finding.fix.startswith(f"1. remove {other.site} from PYTHONPATH")
    # the imported torch is the one judged: torchvision 0.19.1 does not pair with 2.5.0
    assert report.environment["torch"]["version"] == "2.5.0+cpu"
    winners = report.environment["winners"]
    assert winners["torch"]["location"] == str(other.site)
    assert winners["torchvision"]["location"] == str(clean_env.site)
    assert winners["nvidia-cudnn-cu12"]["on_sys_path_because"] == "the environment's site-packages"
    assert "trio-mismatch" in codes(report)


def test_relative_and_empty_pythonpath_entries_are_the_current_directory(
    clean_env: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory
) -> None:
    other_env(tmp_path, elf)  # the run's current directory is tmp_path
    relative = os.path.relpath(
        tmp_path / "other" / "lib" / "python3.11" / "site-packages", tmp_path
    )
    report = run(clean_env, environ={"PYTHONPATH": relative}, facts=NO_GPU)
    entry = only(report, "python-path-shadowing").evidence["entry"]
    assert entry["path"] == str(tmp_path / relative)


def test_the_environments_own_copy_first_is_fine(
    clean_env: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory
) -> None:
    other = other_env(tmp_path, elf)
    (clean_env.site / "zz-other.pth").write_text(f"# another env\n{other.site}\n")
    report = run(clean_env)  # site-packages comes before what its .pth files add
    assert report.findings == (), [(f.code, f.message) for f in report.findings]


def test_pth_file_brings_torch_into_an_environment_without_one(
    tmp_path: Path, elf: ElfFactory, run: Run
) -> None:
    env = FakeEnv(tmp_path / "bare", elf)
    env.prefix.mkdir()
    (env.prefix / "pyvenv.cfg").write_text("include-system-site-packages = false\n")
    env.site.mkdir(parents=True)
    other = other_env(tmp_path, elf)
    pth = env.site / "shared.pth"
    pth.write_text(f"import os\n{other.site}\n")
    finding = only(run(env, facts=NO_GPU), "package-outside-environment")
    assert finding.evidence["imported"]["on_sys_path_because"] == f"{pth} line 2"
    assert finding.fix.startswith(f"1. delete {pth} line 2")


def user_site_torch(tmp_path: Path, elf: ElfFactory) -> tuple[Path, Path]:
    home = tmp_path / "home"
    user = FakeEnv(home / ".local", elf)
    user.site.mkdir(parents=True)
    user.torch(version="2.3.1+cpu", cuda=None)
    return home, user.site


def test_user_site_shadows_a_conda_environment(tmp_path: Path, elf: ElfFactory, run: Run) -> None:
    env = FakeEnv(tmp_path / "conda", elf)
    env.site.mkdir(parents=True)
    env.conda("python", "3.11.9", files=["bin/python3.11"])
    env.torch(version="2.4.1+cpu", cuda=None)
    home, user = user_site_torch(tmp_path, elf)
    report = run(env, environ={"HOME": str(home)}, facts=NO_GPU)
    finding = only(report, "python-path-shadowing")
    assert finding.evidence["entry"]["origin"] == "user site-packages"
    assert finding.evidence["distributions"][0]["imported"]["location"] == str(user)
    assert "PYTHONNOUSERSITE=1" in finding.fix and "pip uninstall torch" in finding.fix
    quiet = run(env, environ={"HOME": str(home), "PYTHONNOUSERSITE": "1"}, facts=NO_GPU)
    assert "python-path-shadowing" not in codes(quiet)


def test_a_venv_without_system_site_packages_has_no_user_site(
    clean_env: FakeEnv, tmp_path: Path, elf: ElfFactory, run: Run
) -> None:
    home, _user = user_site_torch(tmp_path, elf)
    assert run(clean_env, environ={"HOME": str(home)}).findings == ()


def test_nvidia_wheel_on_pythonpath_shadows_the_environments(
    clean_env: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory
) -> None:
    other = FakeEnv(tmp_path / "other", elf)
    other.site.mkdir(parents=True)
    other.dist("nvidia-nccl-cu12", "2.18.1")
    finding = only(run(clean_env, environ={"PYTHONPATH": str(other.site)}), "python-path-shadowing")
    assert finding.severity is Severity.WARNING  # a wheel's metadata; the libraries decide
    assert finding.evidence["distributions"][0]["imported"]["version"] == "2.18.1"


# --- the real interpreter ---------------------------------------------------------------


@pytest.fixture(scope="module")
def real_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("real") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120
    )
    return prefix


def test_the_interpreter_is_asked_with_the_users_variables(
    real_venv: Path, tmp_path: Path, elf: ElfFactory
) -> None:
    other = other_env(tmp_path, elf)
    environ = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(other.site)}
    env = inventory(
        locate(prefix=real_venv, python=None, environ=environ, default_prefix=None, cwd=tmp_path)
    )
    assert env.asked and env.ask_problem is None
    origins = [(e.path, e.origin) for e in env.search_path if e.origin != "standard library"]
    assert origins[0] == (other.site, "PYTHONPATH")
    assert any(e.own and e.origin == "site-packages" for e in env.search_path)
    assert env.torch is not None and env.torch.version == "2.5.0+cpu"
    assert str(env.python).startswith(str(real_venv))


def test_real_interpreter_shadowing_end_to_end(
    real_venv: Path, tmp_path: Path, elf: ElfFactory, run: Run
) -> None:
    site = next((real_venv / "lib").glob("python*/site-packages"))
    own = FakeEnv(real_venv, elf, python_dir=site.parent.name)
    own.torch(version="2.4.1+cpu", cuda=None)
    other = other_env(tmp_path, elf)
    pth = site / "other.pth"
    pth.write_text(f"{other.site}\n")
    try:
        # the .pth entry comes after site-packages: the environment's torch wins
        assert "python-path-shadowing" not in codes(run(real_venv, facts=NO_GPU))
        report = run(real_venv, environ={"PYTHONPATH": str(other.site)}, facts=NO_GPU)
        finding = only(report, "python-path-shadowing")
        assert finding.evidence["sys_path_from"] == "the interpreter"
    finally:
        pth.unlink()
