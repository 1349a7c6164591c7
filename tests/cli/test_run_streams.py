"""``gpuenv run`` hands the command what a shell would: a closed stderr or stdout never
stops it (``2>&-`` crashed before the exec: the command never ran, exit 1), and the
signals Python ignores are the default again in it (``gpuenv run -- yes | head -1``
said "Broken pipe" and ended with 1, not 141)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuenv import runtime
from gpuenv.cli import _fastrun


def _stub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    selected = runtime.Selected("cpu", str(tmp_path), None, str(tmp_path))  # type: ignore[arg-type]
    monkeypatch.setattr(runtime, "select", lambda *a, **k: selected)
    monkeypatch.setattr(runtime, "child_environment", lambda s, e: (dict(e), ["a note"]))
    import gpuenv.editable.state
    import gpuenv.verify.gate

    monkeypatch.setattr(gpuenv.verify.gate, "admit", lambda s, unverified: ["a warning"])
    monkeypatch.setattr(gpuenv.editable.state, "stale_note", lambda p, project=None: None)
    ran: list[list[str]] = []

    def execvpe(name: str, argv: list[str], env: dict[str, str]) -> None:
        ran.append(argv)
        raise SystemExit(0)

    import os

    monkeypatch.setattr(os, "execvpe", execvpe)
    return ran


def test_a_closed_stderr_does_not_stop_the_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran = _stub(monkeypatch, tmp_path)
    monkeypatch.setattr(sys, "stderr", None)  # Python's stream for a descriptor closed at start
    with pytest.raises(SystemExit):
        _fastrun.execute(_fastrun.FastRun(None, None, True, ["true", "x"]))
    assert ran == [["true", "x"]]


def test_the_command_gets_the_signals_python_ignores_back() -> None:
    code = (
        "import signal; signal.signal(signal.SIGPIPE, signal.SIG_IGN); "
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "from gpuenv.cli._fastrun import default_signals; default_signals(); "
        "import os; os.execvp('sh', ['sh', '-c', 'grep ^SigIgn: /proc/self/status'])"
    )
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc here")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    ignored = int(done.stdout.split()[1], 16)
    import signal

    assert not ignored & (1 << (signal.SIGPIPE - 1)), done.stdout
    assert not ignored & (1 << (signal.SIGXFSZ - 1)), done.stdout


def test_a_failed_exec_leaves_this_process_as_it_was(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The signals went back to their default before the exec and stayed so when it
    failed: the test process then died of SIGPIPE at its next broken pipe."""
    import signal

    before = signal.getsignal(signal.SIGPIPE)
    _stub(monkeypatch, tmp_path)
    import os

    def missing(name: str, argv: list[str], env: dict[str, str]) -> None:
        raise FileNotFoundError(name)

    monkeypatch.setattr(os, "execvpe", missing)
    assert _fastrun.execute(_fastrun.FastRun(None, None, True, ["nope"])) == 127
    assert signal.getsignal(signal.SIGPIPE) == before
    with pytest.raises(SystemExit):  # a stand-in that raises anything else: the same
        monkeypatch.setattr(os, "execvpe", lambda *a: (_ for _ in ()).throw(SystemExit(3)))
        _fastrun.execute(_fastrun.FastRun(None, None, True, ["x"]))
    assert signal.getsignal(signal.SIGPIPE) == before


def test_a_run_refused_with_stdout_closed_says_so_and_ends_with_its_code(tmp_path: Path) -> None:
    """`gpuenv run -- true >&-` where nothing is installed: the refusal, then a traceback
    from the final flush of a stdout Python had as None (exit 1, not 4)."""
    done = subprocess.run(
        ["sh", "-c", f'exec "{sys.executable}" -m gpuenv run -- true >&-'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr and "no gpuenv.toml here" in done.stderr
