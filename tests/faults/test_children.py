"""Children die with gpuenv: timeouts, exceptions, Ctrl-C, SIGTERM and SIGKILL of
gpuenv leave no uv and no probe (or probe grandchild) running, checked by pid; an
interrupted install removes its unfinished prefix and says one line.

Processes are real: ``gpuenv._proc`` runs shell scripts that write their pids, and
install/verify run as the real console entry point in a subprocess, with the stand-in
uv (``conftest.FAKE_UV``) told to hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv import _proc
from gpuenv.errors import ExternalToolError, StorageError
from tests.faults.conftest import REPO, Cli, Locked


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def gone(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def wait_for_pids(path: Path, count: int, within: float = 30.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"no {count} pids in {path}")


HANGS = 'echo $$ >> "$1"; sleep 600 & echo $! >> "$1"; wait'


def test_a_timeout_kills_the_child_and_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with pytest.raises(ExternalToolError, match="did not finish within 1 s"):
        _proc.run(["sh", "-c", HANGS, "sh", str(pids)], timeout=1, what="hang")
    assert gone(wait_for_pids(pids, 2))


def test_an_exception_while_waiting_kills_the_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            _proc.run(["sh", "-c", HANGS, "sh", str(pids)], timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert gone(wait_for_pids(pids, 2))


def test_stragglers_of_a_finished_child_are_killed(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = 'sleep 600 </dev/null >/dev/null 2>&1 & echo $! >> "$1"'
    result = _proc.run(["sh", "-c", script, "sh", str(pids)], timeout=30)
    assert result.returncode == 0
    assert gone(wait_for_pids(pids, 1))


def test_a_sigkilled_parent_takes_its_child_along(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: SIGKILL of the process that ran ``_proc.run``."""
    pids = tmp_path / "pids"
    code = (
        "import sys; from gpuenv import _proc; "
        "_proc.run(['sh', '-c', 'echo $$ >> \"$1\"; exec sleep 600', 'sh', sys.argv[1]],"
        " timeout=600)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    parent = subprocess.Popen([sys.executable, "-c", code, str(pids)], env=env)
    child = wait_for_pids(pids, 1)
    parent.kill()
    parent.wait()
    assert gone(child)


def test_a_started_child_is_waited_for_once_and_its_result_kept(tmp_path: Path) -> None:
    child = _proc.start(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30, check=False)
    first = child.wait()
    assert (first.returncode, first.stdout, first.stderr) == (3, "out\n", "err\n")
    assert child.wait() is first
    child.abandon()  # waited for: nothing to kill, nothing raised
    assert child.pid not in _proc.running()


def test_a_started_child_that_fails_raises_as_run_does() -> None:
    child = _proc.start(["sh", "-c", "echo broken >&2; exit 2"], timeout=30, what="step")
    with pytest.raises(ExternalToolError, match=r"step failed \(exit 2\):\nbroken"):
        child.wait()
    child.abandon()


def test_an_abandoned_child_and_its_children_are_killed(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    child = _proc.start(["sh", "-c", HANGS, "sh", str(pids)], timeout=600)
    assert child.pid in _proc.running()
    started = wait_for_pids(pids, 2)
    child.abandon()
    assert gone(started)
    assert child.pid not in _proc.running()


class Stopped(Exception):
    """What the test's SIGTERM handler raises (as the console script raises its own)."""


def _signalled_while_starting(
    pids: Path, monkeypatch: pytest.MonkeyPatch, *, linger: float = 0.0
) -> None:
    """``_proc.run`` of a child that starts a child of its own, with SIGTERM sent once
    both run and before Popen returns (as if it came during the start); ``linger``:
    seconds Popen goes on after it (where a handler run at once would raise). The
    handler's exception must come out of ``run``."""
    real = subprocess.Popen

    class SignalledWhileStarting(real):  # type: ignore[type-arg,misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            wait_for_pids(pids, 2)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(linger)

    def stop(_signum: int, _frame: object) -> None:
        raise Stopped

    previous = signal.signal(signal.SIGTERM, stop)
    monkeypatch.setattr(_proc.subprocess, "Popen", SignalledWhileStarting)
    try:
        with pytest.raises(Stopped):
            _proc.run(["sh", "-c", HANGS, "sh", str(pids)], timeout=600)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_signal_while_a_child_starts_is_raised_once_the_child_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal that arrives while Popen waits for the child's exec was raised inside
    Popen: the child was never handed back, so nothing killed its group, and its own
    children outlived gpuenv. Here it arrives once the child and its child run, before
    Popen returns: it is raised only once the child is held, and the group is killed."""
    pids = tmp_path / "pids"
    _signalled_while_starting(pids, monkeypatch)
    assert gone(wait_for_pids(pids, 2))


def test_a_signal_another_thread_takes_while_a_child_starts_still_kills_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same signal, while another thread runs that holds nothing back (a library's,
    or one an earlier test left): the kernel gives it to that thread, and Python runs
    the handler in the main thread at once, inside Popen, mask or not. The child, forked
    already, is still killed with its group and reaped."""
    pids = tmp_path / "pids"
    done = threading.Event()
    bystander = threading.Thread(target=done.wait, daemon=True)
    bystander.start()
    try:
        _signalled_while_starting(pids, monkeypatch, linger=1.0)  # the handler runs inside
    finally:
        done.set()
    shell, sleeper = wait_for_pids(pids, 2)
    assert gone([shell, sleeper])
    with pytest.raises(ChildProcessError):
        os.waitpid(shell, os.WNOHANG)  # reaped, not left a zombie


def test_a_program_that_cannot_start_kills_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Popen reaps a child whose exec failed before it raises: its pid may be another
    process's by then, so nothing is sent to it."""
    killed: list[int | None] = []
    monkeypatch.setattr(_proc, "_kill_forked", killed.append)
    with pytest.raises(ExternalToolError):
        _proc.run([str(tmp_path / "no-such-program")], timeout=30, what="missing")
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    with pytest.raises(ExternalToolError, match="not-executable: permission denied") as raised:
        _proc.run([str(tmp_path / "not-executable")], timeout=30, what="not executable")
    assert "noexec" in (raised.value.hint or "")
    with pytest.raises(ExternalToolError, match="permission denied"):
        _proc.start([str(tmp_path / "not-executable")], timeout=30).wait()
    assert killed == []


def test_a_child_runs_with_the_signal_mask_gpuenv_had(tmp_path: Path) -> None:
    """The signals held back while a child starts are not held in the child."""
    own = Path("/proc/self/status").read_text()
    child = _proc.run(["cat", "/proc/self/status"], timeout=30).stdout

    def blocked(status: str) -> str:
        return next(line for line in status.splitlines() if line.startswith("SigBlk:"))

    assert blocked(child) == blocked(own)


def test_work_beside_a_run_happens_while_the_child_runs(tmp_path: Path) -> None:
    """``Watch.on_start`` (install's imports beside ``uv pip install``) runs before the
    child is waited for: this child ends only once that work has happened."""
    flag = tmp_path / "flag"
    waits = 'while [ ! -e "$1" ]; do sleep 0.01; done'
    watch = _proc.Watch(on_start=lambda _pid: flag.touch())
    result = _proc.run(["sh", "-c", waits, "sh", str(flag)], timeout=30, watch=watch)
    assert result.returncode == 0


def test_work_beside_a_run_that_fails_kills_the_child(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def fails(_pid: int) -> None:
        wait_for_pids(pids, 2)
        raise OSError("the work beside it failed")

    with pytest.raises(OSError, match="beside it failed"):
        _proc.run(
            ["sh", "-c", HANGS, "sh", str(pids)], timeout=600, watch=_proc.Watch(on_start=fails)
        )
    assert gone(wait_for_pids(pids, 2))


# --- the real console entry point, with the stand-in uv -----------------------------------

ENTRY = (
    "import sys, uv; fake = sys.argv.pop(1); uv.find_uv_bin = lambda: fake; "
    "from gpuenv.cli import entry; sys.argv[0] = 'gpuenv'; entry()"
)


def start_gpuenv(fake_uv: Path, project: Locked, *args: str, **env: str) -> subprocess.Popen[str]:
    environ = {**os.environ, "PYTHONPATH": str(REPO / "src"), **env}
    return subprocess.Popen(
        [sys.executable, "-c", ENTRY, str(fake_uv), *args],
        cwd=project.dir,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _unfinished(store: Path) -> list[Path]:
    root = store / "prefixes"
    return (
        [p for p in root.iterdir() if not (p / "etc/gpuenv/installed.json").exists()]
        if root.exists()
        else []
    )


@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [
        (signal.SIGINT, 130, "gpuenv: interrupted"),
        (signal.SIGTERM, 143, "gpuenv: terminated by SIGTERM"),
        (signal.SIGHUP, 129, "gpuenv: terminated by SIGHUP"),
    ],
)
@pytest.mark.parametrize("step", ["venv", "pip"])
def test_a_signal_during_install_kills_uv_and_removes_the_prefix(
    fake_uv: Path, project: Locked, tmp_path: Path, signum: int, code: int, line: str, step: str
) -> None:
    """In either uv step: ``uv venv`` runs beside the fetch's check of the store."""
    pids = tmp_path / "pids"
    process = start_gpuenv(
        fake_uv, project, "install", "--frozen", "--target", "cpu",
        FAKE_UV_HANG=step, FAKE_UV_PIDS=str(pids),
    )  # fmt: skip
    # uv venv and its child; or uv venv, uv pip install and its child
    uv_pids = wait_for_pids(pids, 2 if step == "venv" else 3)
    assert (tmp_path / "store" / "prefixes").exists()
    process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    *phases, last = err.strip().splitlines()
    assert last == line, err  # one line says why it stopped, after the phases it began
    assert all(p.startswith("gpuenv: cpu: ") for p in phases), err
    assert gone(uv_pids)
    assert _unfinished(tmp_path / "store") == []
    assert not (project.dir / ".gpuenv" / "cpu").exists()


def test_sigkill_of_install_leaves_no_uv_and_the_next_install_completes(
    fake_uv: Path, project: Locked, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    fake_uv.write_text(
        fake_uv.read_text().replace(
            '    sleep 600 &\n    [ -n "$FAKE_UV_PIDS" ] && echo $! >> "$FAKE_UV_PIDS"\n    wait\n',
            "    exec sleep 600\n",
        )
    )
    process = start_gpuenv(
        fake_uv, project, "install", "--frozen", "--target", "cpu",
        FAKE_UV_HANG="pip", FAKE_UV_PIDS=str(pids),
    )  # fmt: skip
    uv_pids = wait_for_pids(pids, 2)
    process.kill()
    process.communicate(timeout=30)
    assert gone(uv_pids), "PR_SET_PDEATHSIG took uv along"
    assert len(_unfinished(tmp_path / "store")) == 1
    again = start_gpuenv(fake_uv, project, "install", "--frozen", "--target", "cpu")
    _, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert _unfinished(tmp_path / "store") == []


def test_a_fetch_that_fails_beside_uv_venv_kills_it_and_removes_the_prefix(
    fake_uv: Path,
    project: Locked,
    run_cli: Callable[..., Cli],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uv makes the environment while the fetch checks the store: a fetch that fails
    then stops uv before the prefix is removed (nobody is left writing into it)."""
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_UV_HANG", "venv")
    monkeypatch.setenv("FAKE_UV_PIDS", str(pids))

    def fails(*_args: object, **_kwargs: object) -> None:
        wait_for_pids(pids, 2)  # uv venv and its child are running
        raise StorageError("no space left", path=str(tmp_path / "store"), errno_name="ENOSPC")

    monkeypatch.setattr("gpuenv.install.pipeline.fetch_artifacts", fails)
    result = run_cli("install", "--frozen", "--target", "cpu", "--json")
    assert result.code == 5, result.err
    assert json.loads(result.out)["error"]["kind"] == "storage"
    assert gone(wait_for_pids(pids, 2))
    assert _unfinished(tmp_path / "store") == []


HANGING_PYTHON = """#!/bin/sh
echo $$ >> {pids}
sleep 600 &
echo $! >> {pids}
wait
"""


def test_a_timed_out_verify_leaves_no_probe_or_grandchild(
    fake_uv: Path, project: Locked, tmp_path: Path
) -> None:
    install = start_gpuenv(fake_uv, project, "install", "--frozen", "--target", "cpu")
    _, err = install.communicate(timeout=60)
    assert install.returncode == 0, err
    prefix = Path(os.readlink(project.dir / ".gpuenv" / "cpu"))
    pids = tmp_path / "pids"
    python = prefix / "bin" / "python"
    python.unlink()
    python.write_text(HANGING_PYTHON.format(pids=pids))
    python.chmod(0o755)
    started = time.monotonic()
    verify = start_gpuenv(fake_uv, project, "verify", "--target", "cpu", "--timeout", "2", "--json")
    out, err = verify.communicate(timeout=60)
    assert verify.returncode == 1, err
    assert "did not finish within 2 s" in json.loads(out)["reason"]
    assert time.monotonic() - started < 30
    assert gone(wait_for_pids(pids, 2))


@pytest.mark.parametrize("how", ["run", "run watching stderr", "stream"])
def test_a_signal_another_thread_receives_ends_the_wait_for_a_child(how: str) -> None:
    """A process-directed signal may land on any thread that does not block it (a
    lock's background reads, rattler's runtime), and Python runs its handler in the main
    thread only when that thread next runs Python code: one waiting in poll() (or a
    read) for a child slept until the child ended (a full-suite run hung 10 minutes on
    a child of `sleep 600`). Each wait wakes every ``_proc.WAKE_SECONDS`` to let the
    handler raise; the child is killed as on any way out."""
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    other = threading.Timer(0.3, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGTERM))
    started = time.monotonic()
    argv = ["sh", "-c", "echo started >&2; sleep 30"]
    try:
        other.start()
        with pytest.raises(Stopped):
            if how == "run":
                _proc.run(argv, timeout=600)
            elif how == "stream":
                _proc.stream(argv, timeout=600, on_line=lambda _line: None)
            else:
                _proc.run(argv, timeout=600, watch=_proc.Watch(on_stderr_line=lambda _l: None))
    finally:
        other.cancel()
        signal.signal(signal.SIGTERM, previous)
    assert time.monotonic() - started < 5


def _raise_stopped(_signum: int, _frame: object) -> None:
    raise Stopped
