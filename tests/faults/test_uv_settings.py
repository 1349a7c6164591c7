"""A user's uv network setting that uv itself refuses (the suite's processes never carry
one: the fixtures drop every UV_* variable) is named as such, before uv runs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.conftest import Cli, Locked


@pytest.mark.parametrize("command", [["install", "--target", "cpu"], ["lock", "--upgrade"]])
def test_a_bad_uv_timeout_is_named_not_read_as_a_missing_python(
    project: Locked,
    run_cli: Callable[..., Cli],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    # install said "no Python 3.11 for target prefix ...: install Python 3.11 here" (uv
    # venv was the first uv call to refuse UV_HTTP_TIMEOUT=-1); lock "uv pip compile failed".
    monkeypatch.setenv("UV_HTTP_TIMEOUT", "-1")
    lock_before = project.lock.read_bytes()
    result = run_cli(*command, "--json")
    assert result.code == 2, result.out
    error = json.loads(result.out)["error"]
    assert error["kind"] == "usage", error
    assert "UV_HTTP_TIMEOUT='-1'" in error["message"], error
    assert "Python" not in error["message"] and "uv pip compile" not in error["message"]
    assert not list((Path(os.environ["GPUENV_HOME"]) / "prefixes").glob("*"))
    assert project.lock.read_bytes() == lock_before
