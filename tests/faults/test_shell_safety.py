"""`gpuenv shell` with hostile store and project paths, in sh, dash, bash, zsh and fish:
nothing a shell expands is built from a path, and leaving restores the user's ``ENV``.

The prefix is a real one as far as the shell is concerned: activation files, shell
entry files, completion marker and project pointer written by gpuenv's own code (no
Python environment is needed to start a shell in it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuenv.activation import ActivationInputs, write_activation_files
from gpuenv.lock.format import write_lock
from gpuenv.lock.model import Lock
from gpuenv.shells import write_shell_entrypoints
from gpuenv.store import Store, point_project
from tests.locked import cpu_target

TARGET = cpu_target()
LOCK_HASH = TARGET.content_hash  # the prefix is the build of the project's lock
HOSTILE = "a b $(touch {pwned}-1) `touch {pwned}-2` $HOME ;x& 'q\" \\e *"


@dataclass(frozen=True)
class Installed:
    project: Path
    store: Path
    prefix: Path
    pwned: Path


def make_installed(tmp_path: Path) -> Installed:
    pwned = tmp_path / "pwned"
    store_root = tmp_path / ("store " + HOSTILE.format(pwned=f"{pwned}-store"))
    project = tmp_path / ("project " + HOSTILE.format(pwned=f"{pwned}-project"))
    store = Store(store_root)
    prefix = store.prefix_for("cpu", LOCK_HASH)
    inputs = ActivationInputs(
        prefix=prefix,
        name="demo:cpu",
        store_root=store.prefixes,
        bin_dirs=(prefix / "bin",),
        lib_dirs=(),
        cuda_home=None,
        cuda_version=None,
    )
    write_activation_files(prefix, inputs)
    write_shell_entrypoints(prefix)
    store.mark_installed(prefix, lock_hash=LOCK_HASH, target="cpu", python="3.11")
    project.mkdir(parents=True)
    (project / "gpuenv.toml").write_text("")
    write_lock(project / "gpuenv.lock", Lock("sha256:" + "0" * 64, {"cpu": TARGET}))
    point_project(store, project, "cpu", prefix)
    return Installed(project, store_root, prefix, pwned)


POSIX_SCRIPT = (
    'printf "active=%s\\n" "$_GPUENV_ACTIVE"\n'
    'printf "env=%s\\n" "${ENV-unset}"\n'
    "gpuenv_deactivate\n"
    'printf "after=%s env=%s\\n" "${_GPUENV_ACTIVE-none}" "${ENV-unset}"\n'
    "exit 3\n"
)
FISH_SCRIPT = (
    'printf "active=%s\\n" "$_GPUENV_ACTIVE"\n'
    "gpuenv_deactivate\n"
    "set -q _GPUENV_ACTIVE; or printf 'after=none\\n'\n"
    "exit 3\n"
)
# `gpuenv shell --shell NAME`, and which program answers to the name it runs
SHELLS = {
    "sh": ("sh", "sh"),
    "dash": ("sh", "dash"),  # sh resolved to dash
    "bash-as-sh": ("sh", "bash"),  # sh resolved to bash (POSIX mode)
    "bash": ("bash", "bash"),
    "zsh": ("zsh", "zsh"),
    "fish": ("fish", "fish"),
}


@pytest.mark.parametrize("case", list(SHELLS))
def test_hostile_paths_create_nothing_and_env_is_restored(case: str, tmp_path: Path) -> None:
    flag, program = SHELLS[case]
    real = shutil.which(program)
    if real is None:
        pytest.skip(f"{program} is not installed")
    installed = make_installed(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / flag).symlink_to(real)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(home),
        "GPUENV_HOME": str(installed.store),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
    }
    result = subprocess.run(
        [sys.executable, "-m", "gpuenv", "shell", "--unverified", "--shell", flag],
        cwd=installed.project,
        env=env,
        input=FISH_SCRIPT if flag == "fish" else POSIX_SCRIPT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 3, result.stderr
    assert f"active={installed.prefix}" in result.stdout.splitlines(), result.stdout
    if flag != "fish":
        assert "env=unset" in result.stdout.splitlines(), "ENV never lingers in the shell"
        assert "after=none env=unset" in result.stdout.splitlines()
    else:
        assert "after=none" in result.stdout.splitlines()
    created = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned"))
    assert created == [], f"{case} ran a command from a path"
    assert not any(p.name.startswith("pwned") for p in installed.project.iterdir())


def test_sh_reads_the_users_own_env_file_and_restores_env(tmp_path: Path) -> None:
    if shutil.which("dash") is None:
        pytest.skip("dash is not installed")
    installed = make_installed(tmp_path)
    rc = tmp_path / "my shrc"
    rc.write_text("FROM_USER_ENV=yes\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to(shutil.which("dash") or "")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ENV": str(rc),
        "GPUENV_HOME": str(installed.store),
        "XDG_CACHE_HOME": str(tmp_path / ".cache"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "gpuenv", "shell", "--unverified", "--shell", "sh"],
        cwd=installed.project,
        env=env,
        input='printf "%s|%s|%s\\n" "$FROM_USER_ENV" "$ENV" "${GPUENV_SHELL_RC-unset}"\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"yes|{rc}|unset" in result.stdout.splitlines()


def test_the_shell_command_never_puts_a_path_in_env() -> None:
    from gpuenv.shells import shell_command

    prefix = Path("/s/$(touch x)/p")
    argv, env = shell_command("sh", prefix, {"ENV": "/home/u/.shrc", "PATH": "/bin"})
    assert argv == ["sh", "-i"]
    assert env["ENV"] == "${GPUENV_SHELL_RC}"
    assert env["GPUENV_SHELL_RC"].startswith(str(prefix))
    assert env["GPUENV_USER_ENV"] == "/home/u/.shrc"
    assert os.sep.join(["", "s"]) not in env["ENV"]
