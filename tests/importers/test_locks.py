"""Realistic 2024 repositories of five formats, each imported for an H100 on driver 550,
an RTX 4090 on driver 535 and a CPU, with --check-resolves against the fixture index;
the written spec is then planned and locked unchanged, with real uv, against the fixture
indexes (they serve torch 2.4.1 and these pins for Python 3.10 and 3.11 only: a Python
chosen for torch alone, 3.12, would not lock)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.lock.format import read_lock
from tests.conftest import CliResult
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.importers.conftest import IMPORTS

TARGETS = {
    "h100": ("--gpu", "H100", "--driver", "550.54.15"),
    "rtx4090": ("--gpu", "RTX 4090", "--driver", "535.104.05"),
    "cpu": ("--gpu", "none"),
}
# repository -> (the torch build each target locks, the packages the lock must pin)
REPOS = {
    "req2024": ({"h100": "cu124", "rtx4090": "cu121", "cpu": "cpu"}, ("transformers", "numpy")),
    "conda2024": ({"h100": "cu121", "rtx4090": "cu121", "cpu": "cpu"}, ("safetensors",)),
    "uvproj": ({"h100": "cu124", "rtx4090": "cu121", "cpu": "cpu"}, ("anyio", "numpy")),
    # torch==2.4.1 with no build named: PyPI's default, cu121, which runs on both GPUs
    "pipenv": ({"h100": "cu121", "rtx4090": "cu121", "cpu": "cpu"}, ("tokenizers",)),
    "docker2024": ({"h100": "cu124", "rtx4090": "cu121", "cpu": "cpu"}, ("huggingface-hub",)),
}


@pytest.fixture
def indexes(pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch) -> PkgIndex:
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", pkgindex.default_index)
    monkeypatch.setenv("GPUENV_INDEX_URL", pkgindex.default_index)
    monkeypatch.setenv("GPUENV_TORCH_INDEX", pkgindex.torch_base)
    return pkgindex


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("repo", list(REPOS))
def test_an_imported_repository_plans_and_locks_unchanged(
    cli: Callable[..., CliResult], indexes: PkgIndex, tmp_path: Path, repo: str, target: str
) -> None:
    spec = tmp_path / "gpuenv.toml"
    imported = cli(
        "import", str(IMPORTS / "lockable" / repo), *TARGETS[target], "-o", str(spec), "--json"
    )
    assert imported.code == 0, imported.out + imported.err
    written = spec.read_text()
    plan = cli("-f", str(spec), "plan", "--json")
    assert plan.code == 0, plan.out + plan.err
    planned = next(iter(json.loads(plan.out)["targets"].values()))
    builds, pinned = REPOS[repo]
    assert (planned["torch"], planned["cu_tag"]) == ("2.4.1", builds[target])
    assert planned["python"] in ("3.10", "3.11")
    locked = cli("-f", str(spec), "lock")
    assert locked.code == 0, locked.out + locked.err
    assert spec.read_text() == written, "the spec locks as written"
    lock = read_lock(spec.with_name("gpuenv.lock"))
    assert lock is not None
    (entry,) = lock.targets.values()
    torch = entry.pip_package("torch")
    assert torch is not None and torch.version.startswith("2.4.1")
    for name in pinned:
        assert entry.pip_package(name) is not None, name


def test_without_the_wheel_check_the_same_repository_does_not_lock(
    cli: Callable[..., CliResult], indexes: PkgIndex, tmp_path: Path
) -> None:
    spec = tmp_path / "gpuenv.toml"
    source = str(IMPORTS / "lockable" / "req2024")
    imported = cli("import", source, *TARGETS["cpu"], "-o", str(spec), "--no-check-resolves")
    assert imported.code == 0, imported.err
    assert 'python = "3.12"' in spec.read_text()  # torch 2.4.1's newest: chosen for torch alone
    assert cli("-f", str(spec), "lock").code != 0
