"""`gpuenv kernel`: a kernelspec Jupyter itself finds (jupyter_client's search), whose
argv goes through `gpuenv run` so the gate holds: an unverified prefix is refused, the
reason on the kernel's stderr (Jupyter's log)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Project


def _kernels_env(project: Project, data: Path) -> dict[str, str]:
    return {**project.env, "JUPYTER_DATA_DIR": str(data)}


def test_a_kernelspec_jupyter_finds_starts_through_the_gate(
    make_project: Callable[..., Project], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    project = make_project()
    data = tmp_path / "jupyter"
    project.env = _kernels_env(project, data)
    installed = project.gpuenv("install", "--target", "cpu", timeout=300)
    assert installed.returncode == 0, installed.stderr
    made = project.gpuenv("kernel", "install", "--target", "cpu")
    assert made.returncode == 0, made.stderr
    assert "no ipykernel" in made.stderr and "gpuenv add --group jupyter ipykernel" in made.stderr

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))  # Jupyter's own search, as a user has it
    manager = kernelspec.KernelSpecManager()
    specs = manager.find_kernel_specs()
    assert specs["gpuenv-e2e-cpu"] == str(data / "kernels" / "gpuenv-e2e-cpu")
    spec = manager.get_kernel_spec("gpuenv-e2e-cpu")
    assert spec.display_name == "e2e (cpu)" and spec.language == "python"
    assert spec.argv[1:5] == ["-m", "gpuenv", "-f", str(project.spec)]
    assert spec.argv[5:9] == ["run", "--target", "cpu", "--"]
    assert spec.argv[-2:] == ["-f", "{connection_file}"]

    # The kernel's argv as Jupyter runs it: refused by the gate (not verified here).
    argv = [a.replace("{connection_file}", str(tmp_path / "c.json")) for a in spec.argv]
    started = subprocess.run(
        argv, env=project.env, capture_output=True, text=True, check=False, timeout=60
    )
    assert started.returncode == 4, started.stderr
    assert "verif" in started.stderr, "the refusal reason is in the kernel's log"

    listed = json.loads(project.gpuenv("kernel", "list", "--json").stdout)
    assert [k["name"] for k in listed["kernels"]] == ["gpuenv-e2e-cpu"]
    assert listed["kernels"][0]["target"] == "cpu"

    foreign = data / "kernels" / "python3"
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text('{"argv": ["python"], "display_name": "Python 3"}')
    clash = project.gpuenv("kernel", "install", "--target", "cpu", "--name", "python3")
    assert clash.returncode == 2 and "did not write" in clash.stderr
    refused = project.gpuenv("kernel", "remove", "python3")
    assert refused.returncode == 2 and foreign.exists(), "only gpuenv's kernels are removed"
    bad = project.gpuenv("kernel", "install", "--target", "cpu", "--name", "../escape")
    assert bad.returncode == 2 and "not a kernel name" in bad.stderr

    removed = project.gpuenv("kernel", "remove", "gpuenv-e2e-cpu")
    assert removed.returncode == 0, removed.stderr
    assert "gpuenv-e2e-cpu" not in manager.find_kernel_specs()


def test_prefix_puts_the_kernelspec_under_share_jupyter(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project()
    made = project.gpuenv(
        "kernel", "install", "--target", "h100", "--prefix", str(tmp_path / "env"), "--json"
    )
    assert made.returncode == 0, made.stderr
    kernel = json.loads(made.stdout)["kernel"]
    assert kernel["directory"] == str(tmp_path / "env/share/jupyter/kernels/gpuenv-e2e-h100")
    assert json.loads(made.stdout)["ipykernel"] is False
