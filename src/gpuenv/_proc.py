"""The one way gpuenv runs subprocesses.

Always an argument list (never a shell string), always a timeout, output captured,
and failures raised as ``ExternalToolError`` with the command and the tail of stderr.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
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
