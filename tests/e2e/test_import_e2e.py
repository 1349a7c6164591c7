"""Imported specs go on through `plan`, `lock` and `install` with real uv, against the
local index fixtures (the spec names no index: GPUENV_INDEX_URL and GPUENV_TORCH_INDEX
point the commands at the fixtures, as a mirror would)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from gpuenv.lock.format import read_lock
from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.importers.conftest import IMPORTS


def _imported(
    make_project: Callable[..., Project], pkgindex: PkgIndex, source: Path, *target: str
) -> Project:
    project = make_project("placeholder")
    project.spec.unlink()
    project.env.update(
        GPUENV_INDEX_URL=pkgindex.default_index, GPUENV_TORCH_INDEX=pkgindex.torch_base
    )
    result = project.gpuenv("import", str(source), *target, "-o", "gpuenv.toml", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pytorch.org" not in project.spec.read_text().split("[pip]", 1)[1], "no index written"
    return project


def _python_of(prefix: Path, code: str) -> str:
    out = subprocess.run(
        [str(prefix / "bin" / "python"), "-I", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_an_imported_conda_env_plans_locks_and_installs_for_a_cpu(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = _imported(
        make_project, pkgindex, IMPORTS / "e2e" / "cpu" / "environment.yml", "--gpu", "none"
    )
    plan = json.loads(project.gpuenv("plan", "--json", check=True).stdout)["targets"]["cpu"]
    assert (plan["torch"], plan["cu_tag"], plan["python"]) == ("2.4.1", "cpu", "3.11")
    project.gpuenv("lock", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    cpu = lock.targets["cpu"]
    assert cpu.pip_package("torch").version == "2.4.1+cpu"  # type: ignore[union-attr]
    assert cpu.pip_package("transformers").version == "4.44.2"  # type: ignore[union-attr]
    result = project.gpuenv("install", "--target", "cpu", "--json", check=True)
    prefix = Path(json.loads(result.stdout)["targets"]["cpu"]["prefix"])
    versions = _python_of(
        prefix,
        "import torch, torchvision, transformers; "
        "print(torch.__version__, torchvision.__version__, transformers.__version__)",
    )
    assert versions.split() == ["2.4.1+cpu", "0.19.1+cpu", "4.44.2"]


def test_an_imported_pyproject_plans_locks_and_installs_for_an_h100(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = _imported(
        make_project, pkgindex, IMPORTS / "e2e" / "h100" / "pyproject.toml",
        "--gpu", "H100", "--driver", "550.54.15",
    )  # fmt: skip
    plan = json.loads(project.gpuenv("plan", "--json", check=True).stdout)["targets"]["h100"]
    # torch==2.4.1 with no build named: PyPI's default build (cu121), which has sm_90 kernels
    assert (plan["torch"], plan["cu_tag"], plan["python"]) == ("2.4.1", "cu121", "3.11")
    assert plan["torchaudio"] == "2.4.1" and plan["torchvision"] is None
    project.gpuenv("lock", check=True)
    assert project.gpuenv("lock", "--check").returncode == 0
    lock = read_lock(project.lock)
    assert lock is not None
    h100 = lock.targets["h100"]
    torch = h100.pip_package("torch")
    assert torch is not None and torch.version == "2.4.1+cu121"
    assert torch.url.startswith(pkgindex.torch_index("cu121") + "/")
    assert h100.pip_package("anyio").version == "4.4.0"  # type: ignore[union-attr]
    result = project.gpuenv("install", "--target", "h100", "--json", check=True)
    prefix = Path(json.loads(result.stdout)["targets"]["h100"]["prefix"])
    assert _python_of(prefix, "import torch, torchaudio; print(torch.__version__)") == "2.4.1+cu121"
    assert os.path.islink(project.dir / ".gpuenv" / "h100")
