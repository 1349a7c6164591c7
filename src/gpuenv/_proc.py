"""The one way gpuenv runs subprocesses.

Always an argument list (never a shell string), always a timeout, output captured,
and failures raised as ``ExternalToolError`` with the command and the tail of stderr.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuenv.errors import ExternalToolError

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 20


@dataclass(frozen=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input_text: str | None = None,
    check: bool = True,
    what: str | None = None,
) -> ProcResult:
    """Run ``argv`` and return its captured output.

    ``check`` raises ``ExternalToolError`` on a non-zero exit; a missing program or a
    timeout always raises. ``what`` names the step for the error message ("uv pip
    compile"); it defaults to the program name.
    """
    args = tuple(os.fspath(a) for a in argv)
    label = what or Path(args[0]).name
    started = time.perf_counter()
    try:
        completed = subprocess.run(  # an argument list, never a shell (S603 is off project-wide)
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            input=input_text,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ExternalToolError(f"{label}: program not found: {args[0]}", argv=args) from exc
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        raise ExternalToolError(
            f"{label} did not finish within {timeout:g} s",
            argv=args,
            stderr_tail=_tail(stderr or ""),
        ) from exc
    seconds = time.perf_counter() - started
    log.debug("ran %s in %.3f s (exit %d)", args, seconds, completed.returncode)
    result = ProcResult(args, completed.returncode, completed.stdout, completed.stderr, seconds)
    if check and completed.returncode != 0:
        tail = _tail(completed.stderr or completed.stdout)
        raise ExternalToolError(
            f"{label} failed (exit {completed.returncode})" + (f":\n{tail}" if tail else ""),
            argv=args,
            returncode=completed.returncode,
            stderr_tail=tail,
        )
    return result


@dataclass(frozen=True)
class StreamResult:
    argv: tuple[str, ...]
    returncode: int  # negative: killed by that signal
    seconds: float


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    import contextlib
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def stream(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    what: str | None = None,
) -> StreamResult:
    """Run ``argv`` in a process group of its own (a new session), its stdout and stderr
    merged, and hand each line to ``on_line`` as it arrives: for long builds, whose
    progress is shown while they run. The exit status is returned, not checked.

    On a timeout, an interrupt, or an exception raised by ``on_line``, the whole group is
    killed (every compiler the build started, not only its first process) before this
    returns or raises."""
    import threading

    args = tuple(os.fspath(a) for a in argv)
    label = what or Path(args[0]).name
    started = time.perf_counter()
    try:
        process = subprocess.Popen(  # an argument list, never a shell
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise ExternalToolError(f"{label}: program not found: {args[0]}", argv=args) from exc
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _kill_group(process)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            on_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        returncode = process.wait()
    except BaseException:
        _kill_group(process)
        process.wait()
        raise
    finally:
        timer.cancel()
        if process.stdout is not None:
            process.stdout.close()
    _kill_group(process)  # whatever the build left running in its group
    seconds = time.perf_counter() - started
    log.debug("streamed %s in %.3f s (exit %d)", args, seconds, returncode)
    if expired.is_set():
        raise ExternalToolError(f"{label} did not finish within {timeout:g} s", argv=args)
    return StreamResult(args, returncode, seconds)
