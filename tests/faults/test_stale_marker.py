"""The activation marker is checked, not trusted (issue 24, finding 5): a shell that
inherits ``_GPUENV_ACTIVE`` (and the prefix's records) but reset ``PATH`` (a login
shell, tmux, a Slurm profile) gets the prefix activated again by ``gpuenv run`` and
``eval "$(gpuenv activate)"``, which had run the system's python while claiming the
verified prefix, or silently done nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuenv._envdelta import ACTIVE_VAR, apply, prefix_tag, unset_var
from tests.faults.test_shell_safety import Installed, make_installed

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _installed(tmp_path: Path) -> Installed:
    installed = make_installed(tmp_path)
    python = installed.prefix / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("#!/bin/sh\necho the-prefix-python\n")
    python.chmod(0o755)
    return installed


def _env(installed: Installed, tmp_path: Path, path: str) -> dict[str, str]:
    tag = prefix_tag(str(installed.prefix))
    return {
        "PATH": path,
        "HOME": str(tmp_path),
        "GPUENV_HOME": str(installed.store),
        "XDG_CACHE_HOME": str(tmp_path / ".cache"),
        "PYTHONPATH": SRC,
        "LC_ALL": "C.UTF-8",
        # inherited from the shell that activated the prefix; PATH was then reset
        ACTIVE_VAR: str(installed.prefix),
        unset_var(tag): "",
        f"_GPUENV_{tag}_OLD_PATH": "/usr/bin:/bin",
    }


def _gpuenv(
    installed: Installed, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuenv", *args],
        cwd=installed.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_run_activates_again_when_the_inherited_marker_has_no_path(tmp_path: Path) -> None:
    installed = _installed(tmp_path)
    env = _env(installed, tmp_path, "/usr/bin:/bin")
    result = _gpuenv(installed, env, "run", "--unverified", "--", "python")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "the-prefix-python"


def test_run_leaves_a_marker_whose_path_is_in_place_alone(tmp_path: Path) -> None:
    installed = _installed(tmp_path)
    path = f"{installed.prefix}/bin:/usr/bin:/bin"
    env = _env(installed, tmp_path, path)
    result = _gpuenv(installed, env, "run", "--unverified", "--", "sh", "-c", 'printf "%s" "$PATH"')
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == path, "not prepended twice"


@pytest.mark.parametrize("shell", ["bash", "sh", "zsh", "fish"])
def test_activate_activates_again_when_the_inherited_marker_has_no_path(
    shell: str, tmp_path: Path
) -> None:
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"{shell} is not installed")
    installed = _installed(tmp_path)
    env = _env(installed, tmp_path, "/usr/bin:/bin")
    line = f"{sys.executable} -m gpuenv activate --unverified --shell {shell}"
    code = (
        f"eval ({line} | string collect); python; gpuenv_deactivate; string join : $PATH"
        if shell == "fish"
        else f'eval "$({line})"; python; gpuenv_deactivate; echo "$PATH"'
    )
    result = subprocess.run(
        [program, "-c", code],
        cwd=installed.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines[0] == "the-prefix-python", result.stdout + result.stderr
    assert lines[-1] == "/usr/bin:/bin", "deactivation restores the reset PATH"


def test_the_replay_checks_every_kind_of_effect() -> None:
    delta = {
        "format": 1,
        "active": "/s/p",
        "ops": [
            {"op": "prepend", "name": "PATH", "entries": ["/s/p/bin"]},
            {"op": "set", "name": "CUDA_HOME", "value": "/s/p"},
            {"op": "unset", "name": "CUDA_PATH"},
        ],
    }
    tag = prefix_tag("/s/p")
    done = {"PATH": "/s/p/bin:/bin", "CUDA_HOME": "/s/p", ACTIVE_VAR: "/s/p", unset_var(tag): ""}
    assert apply(delta, done) == (done, [])
    for broken in ({"PATH": "/bin"}, {"CUDA_HOME": "/other"}, {"CUDA_PATH": "/x"}):
        env, _ = apply(delta, {**done, **broken})
        assert env["PATH"].split(":")[0] == "/s/p/bin"
        assert env["CUDA_HOME"] == "/s/p" and "CUDA_PATH" not in env
        assert env[ACTIVE_VAR] == "/s/p"


def test_fish_deactivation_leaves_an_unexported_variable_unexported(tmp_path: Path) -> None:
    """Issue 24, finding 9: fish's deactivation exported a CUDA_HOME that was a plain
    (unexported) shell variable before activation."""
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    from gpuenv.activation import ActivationInputs, write_activation_files

    prefix = tmp_path / "store" / "p"
    inputs = ActivationInputs(
        prefix=prefix,
        name="demo:gpu",
        store_root=tmp_path / "store",
        bin_dirs=(prefix / "bin",),
        lib_dirs=(),
        cuda_home=prefix,
        cuda_version="12.4",
    )
    write_activation_files(prefix, inputs)
    script = prefix / "etc" / "gpuenv" / "activate.fish"
    code = (
        "set -g CUDA_HOME /mine; set -gx KEEP 1\n"
        f"source '{script}'\n"
        "set -qx CUDA_HOME; and echo active-exported\n"
        "gpuenv_deactivate\n"
        "echo value=$CUDA_HOME\n"
        "set -qx CUDA_HOME; and echo exported; or echo unexported\n"
    )
    result = subprocess.run(
        ["fish", "--no-config", "-c", code],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["active-exported", "value=/mine", "unexported"]
