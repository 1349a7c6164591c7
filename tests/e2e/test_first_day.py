"""The "Your first day" walkthrough of docs/getting-started.md, run as written: each command of its block,
in a fresh directory, against the local index (the only change: GPUENV_INDEX_URL and
GPUENV_TORCH_INDEX point at it, as a mirror would)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gpuenv.plan import DEFAULT_TORCH_INDEX
from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.index import Seen
from tests.fixtures.pkgindex.plugin import PkgIndex, closed_port

GETTING_STARTED = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"


def walkthrough(block: str = "first-day") -> list[list[str]]:
    """The commands of one of the getting-started page's blocks, comments dropped."""
    text = GETTING_STARTED.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {block}:begin -->\n```sh\n(.*?)```\n<!-- {block}:end -->", text, re.S)
    assert found, f"docs/getting-started.md has no {block} block"
    return [
        shlex.split(line, comments=True) for line in found.group(1).splitlines() if line.strip()
    ]


def _give_the_probe_a_torch(project: Path, env: dict[str, str], *, pypi: bool = False) -> None:
    """The local index's torch wheels are empty stand-ins: give the installed prefix the
    test torch (a CPU build, or PyPI's cu121 one) that the probe can exercise, as other
    e2e tests do."""
    prefix = Path(os.readlink(project / ".gpuenv" / "cpu"))
    site = next(prefix.glob("lib/python3*/site-packages"))
    fake = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torch"
    for name in ("torch", "torchvision", "torchaudio"):
        if (site / name).exists():
            shutil.rmtree(site / name)
        shutil.copytree(fake / name, site / name)
    local = "" if pypi else "+cpu"
    env["GPUENV_FAKE_TORCH"] = json.dumps(
        {
            "version": f"2.4.1{local}",
            "cuda": "12.1" if pypi else None,
            "devices": [],
            "torchvision": f"0.19.1{local}",
            "torchaudio": f"2.4.1{local}",
        }
    )


def _run_walkthrough(
    commands: list[list[str]], project: Path, env: dict[str, str], *, pypi: bool
) -> list[str]:
    """Each command as written (``gpuenv`` as this interpreter's module), each exit 0
    with no traceback; after ``install`` the probe gets its test torch. The stdouts."""
    outputs = []
    for command in commands:
        assert command[0] == "gpuenv", command
        result = subprocess.run(
            [sys.executable, "-m", "gpuenv", *command[1:]],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, f"{shlex.join(command)}:\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr
        outputs.append(result.stdout)
        if command[1] == "install":
            _give_the_probe_a_torch(project, env, pypi=pypi)
    return outputs


def test_the_getting_started_walkthrough_runs_as_written(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    project.spec.unlink()  # the walkthrough starts from an empty directory
    env = {
        **project.env,
        "GPUENV_INDEX_URL": pkgindex.default_index,
        "GPUENV_TORCH_INDEX": pkgindex.torch_base,
    }
    commands = walkthrough()
    assert [c[:2] for c in commands][:4] == [
        ["gpuenv", "detect"],
        ["gpuenv", "init"],
        ["gpuenv", "plan"],
        ["gpuenv", "lock"],
    ]
    outputs = _run_walkthrough(commands, project.dir, env, pypi=False)
    assert (project.dir / "gpuenv.lock").is_file()
    assert "h100" in outputs[2] and "cu124" in outputs[2], outputs[2]  # plan's choice, with reasons
    assert outputs[-1].strip() == "2.4.1+cpu"  # `run` used the verified prefix's torch


def test_the_pypi_only_walkthrough_runs_with_the_torch_index_down(
    make_project: Callable[..., Project], serve_index: Callable[..., PkgIndex]
) -> None:
    """The page's PyPI-only first day, as written: the PyTorch index is a closed port
    (through a mirror entry, as a proxy that blocks it would look), and the counting
    server is never asked for a torch index page."""
    seen = Seen()
    index = serve_index(seen=seen)
    project = make_project()
    project.spec.unlink()
    env = {
        **project.env,
        "GPUENV_INDEX_URL": index.default_index,
        "GPUENV_MIRRORS": f"{DEFAULT_TORCH_INDEX}=http://127.0.0.1:{closed_port()}/whl",
        "UV_HTTP_RETRIES": "0",
    }
    outputs = _run_walkthrough(walkthrough("first-day-pypi"), project.dir, env, pypi=True)
    assert outputs[1].count("PyPI's plain torch 2.4.1 (linux-64) is this same build") == 2
    assert outputs[-1].strip() == "2.4.1"  # PyPI's own build, unlabelled
    assert [p for p, _auth in seen.requests if p.startswith("/whl/")] == []
