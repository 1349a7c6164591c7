"""``_proc`` once an interrupted command has killed its children: no child starts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


def test_a_child_started_after_an_interrupted_command_killed_its_children_is_killed_at_once(
    tmp_path: Path,
) -> None:
    """An interrupted lock kills the children its threads run, then removes their
    folders; a resolution thread that started uv just after wrote its output there again
    (tests/lock/test_headstart.py left gpuenv-uv-*/attempt-0/pylock.toml behind)."""
    from gpuenv import _proc
    from gpuenv.errors import ExternalToolError

    out = tmp_path / "late" / "out.txt"
    try:
        _proc.kill_running()
        with pytest.raises(ExternalToolError, match="ending"):
            _proc.run(["sh", "-c", f"sleep 0.3; mkdir -p {out.parent}; echo x > {out}"], timeout=10)
        time.sleep(0.6)
        assert not out.parent.exists(), "the late child was killed before it wrote"
    finally:
        _proc.resume()
    assert _proc.run(["true"], timeout=10).returncode == 0
