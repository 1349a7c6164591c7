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

from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.plugin import PkgIndex

GETTING_STARTED = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"


def walkthrough() -> list[list[str]]:
    """The commands of the getting-started page's first-day block, comments dropped."""
    text = GETTING_STARTED.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- first-day:begin -->\n```sh\n(.*?)```\n<!-- first-day:end -->", text, re.S
    )
    assert found, "docs/getting-started.md has no first-day block"
    return [
        shlex.split(line, comments=True) for line in found.group(1).splitlines() if line.strip()
    ]


def _give_the_probe_a_torch(project: Path, env: dict[str, str]) -> None:
    """The local index's torch wheels are empty stand-ins: give the installed prefix the
    test torch (a CPU build) that the probe can exercise, as other e2e tests do."""
    prefix = Path(os.readlink(project / ".gpuenv" / "cpu"))
    site = next(prefix.glob("lib/python3*/site-packages"))
    fake = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torch"
    for name in ("torch", "torchvision", "torchaudio"):
        if (site / name).exists():
            shutil.rmtree(site / name)
        shutil.copytree(fake / name, site / name)
    env["GPUENV_FAKE_TORCH"] = json.dumps(
        {
            "version": "2.4.1+cpu",
            "cuda": None,
            "devices": [],
            "torchvision": "0.19.1+cpu",
            "torchaudio": "2.4.1+cpu",
        }
    )


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
    outputs = []
    for command in commands:
        assert command[0] == "gpuenv", command
        result = subprocess.run(
            [sys.executable, "-m", "gpuenv", *command[1:]],
            cwd=project.dir,
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
            _give_the_probe_a_torch(project.dir, env)
    assert (project.dir / "gpuenv.lock").is_file()
    assert "h100" in outputs[2] and "cu124" in outputs[2], outputs[2]  # plan's choice, with reasons
    assert outputs[-1].strip() == "2.4.1+cpu"  # `run` used the verified prefix's torch
