"""`gpuenv rollback` where the current generation's prefix is gone (deleted by hand):
with no --target it said "target cpu is not installed" (exit 4) and hinted at an
install, which builds the lock's environment, not the previous one; with --target it
rolled back. Both roll back now, saying the generation left is gone."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.store import Store, current_prefix, point_project
from tests.conftest import CliResult

SPEC = '[project]\nname = "r"\n[stack]\npython = "3.12"\n[targets.cpu]\ngpu = "none"\n'


def _generations(store: Store, project: Path) -> tuple[Path, Path]:
    """Two installed generations of cpu, the second current, the first previous."""
    made = []
    for digit in "ab":
        lock_hash = "sha256:" + digit * 64
        prefix = store.prefix_for("cpu", lock_hash)
        (prefix / "bin").mkdir(parents=True)
        store.mark_installed(prefix, lock_hash=lock_hash, target="cpu", python="3.12")
        point_project(store, project, "cpu", prefix)
        made.append(prefix)
    return made[0], made[1]


@pytest.mark.parametrize("named", [(), ("--target", "cpu")])
def test_rollback_from_a_deleted_prefix_goes_back_to_the_previous_one(
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    named: tuple[str, ...],
) -> None:
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    first, second = _generations(Store(tmp_path / "store"), tmp_path)
    shutil.rmtree(second)

    result = cli("rollback", *named)
    assert result.code == 0, result.err
    assert f"cpu: now {first}" in result.out and "no longer installed" in result.out
    assert "again to undo" not in result.out
    assert current_prefix(tmp_path, "cpu") == first

    again = cli("rollback", *named, "--json")  # nothing to return to: said, not done
    assert again.code == 4, again.out + again.err
    error = again.json()["error"]
    assert error["kind"] == "not-installed" and str(second) in error["message"], error
    assert "no longer there" in error["message"] and "gpuenv install" in error["hint"]
    assert current_prefix(tmp_path, "cpu") == first and "Traceback" not in again.err


def test_rollback_json_says_whether_the_generation_left_is_installed(
    cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    first, second = _generations(Store(tmp_path / "store"), tmp_path)
    back = cli("rollback", "--json")
    assert back.code == 0, back.err
    assert back.json() == {
        "target": "cpu",
        "from": str(second),
        "to": str(first),
        "from_installed": True,
    }
    assert json.loads(cli("rollback", "--json").out)["to"] == str(second)
