"""Progress of long commands (#15): drawn live on a terminal (a real pseudo-terminal
here), one plain line per phase when stderr is a pipe, nothing under --json or -q.
Real uv against the local index; the verify phases come from the real probe."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.conftest import Project


def _phase_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gpuenv: ")]


def test_piped_stderr_gets_one_plain_line_per_phase_and_no_terminal_codes(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    locked = project.gpuenv("lock", "--target", "cpu", check=True)
    assert "gpuenv: cpu: resolving pip packages" in _phase_lines(locked.stderr)
    installed = project.gpuenv("install", "--target", "cpu", check=True)
    phases = _phase_lines(installed.stderr)
    assert any(p.startswith("gpuenv: cpu: creating the Python") for p in phases), phases
    assert any(p.startswith("gpuenv: cpu: installing") for p in phases), phases
    assert len(phases) == len(set(phases)), "each phase once"
    assert "\x1b" not in installed.stderr, "no terminal codes in a log"
    assert "cpu: installed in" in installed.stdout  # the final summary says how long
    verified = project.gpuenv("verify", "--target", "cpu", "--timeout", "120")
    checks = [p for p in _phase_lines(verified.stderr) if p.startswith("gpuenv: checking ")]
    assert "gpuenv: checking torch-import" in checks, verified.stderr
    assert len(checks) >= 3, checks  # one line per check the probe ran


def test_json_and_quiet_print_no_progress(make_project: Callable[..., Project]) -> None:
    project = make_project()
    result = project.gpuenv("install", "--target", "cpu", "--json", check=True)
    assert _phase_lines(result.stderr) == []
    assert json.loads(result.stdout)["targets"]["cpu"]["built"] is True
    project.dir.joinpath("gpuenv.lock").unlink()
    quiet = project.gpuenv("-q", "lock", "--target", "cpu", check=True)
    assert _phase_lines(quiet.stderr) == []
    assert "wrote" in quiet.stdout, "results are still printed under -q"
    quiet_too = project.gpuenv("lock", "--target", "cpu", "--quiet", check=True)
    assert _phase_lines(quiet_too.stderr) == []


def _run_on_a_terminal(project: Project, *args: str, timeout: float = 180) -> tuple[int, str]:
    """``gpuenv ARGS`` with stderr on a pseudo-terminal (stdout piped): what it drew."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuenv", *args],
        cwd=project.dir,
        env={**project.env, "TERM": "xterm-256color", "COLUMNS": "120"},
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    drawn = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    os.close(master)
    assert process.stdout is not None
    process.stdout.read()
    return process.wait(timeout=30), drawn.decode("utf-8", errors="replace")


def test_a_terminal_gets_a_live_display_with_finished_phases_and_their_times(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    code, drawn = _run_on_a_terminal(project, "install", "--target", "cpu")
    if os.environ.get("GPUENV_SHOW_DRAWN"):
        print(repr(drawn))
    assert code == 0, drawn
    assert "\x1b[" in drawn, "drawn with terminal codes (rich)"
    assert "✓" in drawn and "cpu: resolving pip packages" in drawn, drawn
    assert "cpu: installing" in drawn
    assert " s" in drawn  # each finished phase shows its duration
    assert "gpuenv: cpu:" not in drawn, "not the plain lines of a log"


def test_a_failed_phase_is_marked_on_the_terminal(make_project: Callable[..., Project]) -> None:
    project = make_project()
    project.gpuenv("lock", "--target", "cpu", check=True)
    project.dir.joinpath("gpuenv.toml").write_text(
        project.spec.read_text().replace('"transformers>=4.44"', '"no-such-package-anywhere"')
    )
    code, drawn = _run_on_a_terminal(project, "lock", "--target", "cpu")
    assert code != 0
    assert "✗" in drawn and "resolving pip packages" in drawn, drawn
    assert "Traceback" not in drawn


def test_progress_texts_are_redacted(tmp_path: Path) -> None:
    """A phase text carrying a URL with a password (a future message, a mirror) is
    redacted like every other line gpuenv prints."""
    code = (
        "import sys\n"
        "from gpuenv.cli._progress import Display, LINES\n"
        "with Display(LINES) as p:\n"
        "    p('fetching https://user:s3cret@example.invalid/simple/torch/')\n"
        "    p.detail('ignored in a log')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert "s3cret" not in result.stderr
    assert result.stderr.count("gpuenv: fetching") == 1
    assert "ignored in a log" not in result.stderr


def _plain(drawn: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)


def test_a_check_that_fails_and_a_target_that_cannot_be_reached_are_marked_failed(
    make_project: Callable[..., Project],
) -> None:
    """The display marked every phase ✓ when the next one started: verify's failed
    checks (the local index's torch is an empty stand-in: 'versions' and others raise)
    and a target whose index is unreachable while the next target locks."""
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    code, drawn = _run_on_a_terminal(project, "verify", "--target", "cpu", "--timeout", "120")
    plain = _plain(drawn)
    assert code == 1, drawn
    assert "✓ checking torch-import" in plain, drawn
    assert "✗ checking versions" in plain and "✓ checking versions" not in plain, drawn
    text = project.spec.read_text()
    torch_index = text.split('torch-index = "')[1].split('"')[0]
    project.spec.write_text(text.replace(torch_index, "http://127.0.0.1:9/whl"))
    project.env.update(UV_HTTP_RETRIES="0", UV_HTTP_TIMEOUT="5")
    code, drawn = _run_on_a_terminal(project, "lock")
    plain = _plain(drawn)
    assert code == 5, drawn
    assert "✗ h100: resolving pip packages" in plain, drawn
    assert "✓ h100: resolving pip packages" not in plain, drawn
