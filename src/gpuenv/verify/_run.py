"""Run the probe under an interpreter and judge what comes back.

Nothing the probe says is taken on trust: a crash, a time-out, a non-zero exit, a
missing check or output that is not exactly one well-formed JSON object is a failed
``ProbeResult`` with the reason, never a pass.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from gpuenv import _proc
from gpuenv.errors import ExternalToolError, FileFormatError
from gpuenv.verify.model import PROBE_VERSION, CheckResult, Expectations, ProbeResult

DEFAULT_TIMEOUT = 300.0
INSPECT_TIMEOUT = 60.0
EXIT_TIMED_OUT = 3  # the probe's watchdog ended a hung check (probe.EXIT_TIMED_OUT)
_RUNNING = re.compile(r"^gpuenv-probe: running (\S+)", re.MULTILINE)
_FAILED = re.compile(r"^gpuenv-probe: failed (\S+)")


def _probe_argv(python: Path, probe: Path, *, isolated: bool, args: Sequence[str]) -> list[str]:
    return [str(python), *(["-I"] if isolated else []), str(probe), *args]


def probe_budget(timeout: float) -> float:
    """The probe's own time budget: below ``timeout`` so its watchdog reports a hung
    check (with the JSON) before gpuenv has to kill it."""
    return max(1.0, timeout - min(15.0, timeout * 0.2))


def run_probe(
    python: Path,
    expectations: Expectations,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    isolated: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ProbeResult:
    """Run the probe with ``python`` (``-I`` unless ``isolated`` is False) under ``env``
    (None: this process's environment) and judge its output. ``progress`` hears
    "checking <name>" as the probe starts each check."""
    blocked = _blocking_venv_config(python)
    if blocked is not None:
        return ProbeResult(passed=False, reason=blocked)
    if expectations.time_budget is None:
        expectations = expectations.with_budget(probe_budget(timeout))
    payload = json.dumps(expectations.to_json(), separators=(",", ":"))
    with resources.as_file(resources.files("gpuenv.verify") / "probe.py") as probe:
        argv = _probe_argv(python, probe, isolated=isolated, args=["--expect", payload])
        try:
            proc = _proc.run(
                argv,
                timeout=timeout,
                env=env,
                check=False,
                what="the probe",
                watch=_proc.Watch(on_stderr_line=_check_reporter(progress) if progress else None),
            )
        except ExternalToolError as exc:
            return _not_run(exc, timeout)
        except OSError as exc:
            return ProbeResult(passed=False, reason=f"cannot run {python}: {exc}")
    return parse_probe_output(
        proc.stdout,
        returncode=proc.returncode,
        stderr=proc.stderr,
        required=expectations.required_checks(),
        seconds=proc.seconds,
    )


def _blocking_venv_config(python: Path) -> str | None:
    """Why ``python`` cannot start, if its ``pyvenv.cfg`` is not a regular file: the
    interpreter reads it before anything else, so a FIFO there blocks it until the
    probe's timeout and a link to ``/dev/zero`` fills its memory."""
    import stat

    for directory in (python.parent, python.parent.parent):
        cfg = directory / "pyvenv.cfg"
        try:
            mode = cfg.stat().st_mode
        except OSError:
            continue  # absent (or unreadable: Python says so itself)
        if not stat.S_ISREG(mode):
            return (
                f"{cfg} is not a regular file, so {python} cannot start; "
                "reinstall the environment (gpuenv install)"
            )
    return None


def _check_reporter(progress: Callable[[str], None]) -> Callable[[str], None]:
    """The probe's "gpuenv-probe: running <check>" stderr lines, as progress phases
    (and its "gpuenv-probe: failed <check>" lines, as that phase failing)."""

    def on_line(line: str) -> None:
        found = _RUNNING.match(line)
        if found:
            progress(f"checking {found.group(1)}")
        elif _FAILED.match(line):
            from gpuenv._progress import failed

            failed(progress)

    return on_line


def _not_run(exc: ExternalToolError, timeout: float) -> ProbeResult:
    if isinstance(exc.__cause__, FileNotFoundError):
        return ProbeResult(passed=False, reason=f"interpreter not found: {exc.argv[0]}")
    running = _last_running(exc.stderr_tail)
    where = f" (it was running the {running} check)" if running else ""
    return ProbeResult(
        passed=False,
        reason=f"the probe did not finish within {timeout:g} s and was killed{where}",
        stderr_tail=exc.stderr_tail,
    )


def _last_running(stderr: str) -> str | None:
    found = _RUNNING.findall(stderr or "")
    return found[-1] if found else None


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join((text or "").rstrip().splitlines()[-lines:])


def _exit_reason(returncode: int, running: str | None) -> str | None:
    during = f" while running the {running} check" if running else ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the probe was killed by {name}{during}"
    if returncode == EXIT_TIMED_OUT:
        return f"a check ran past its time budget{during}"
    if returncode not in (0, 1):
        return f"the probe exited with code {returncode}{during}"
    return None


def _decode(stdout: str) -> dict[str, Any]:
    """Exactly one JSON object from this probe version, with a list of checks."""
    try:
        document = json.loads(stdout)
    except ValueError as exc:
        raise FileFormatError(f"not one JSON object ({exc})") from exc
    if not isinstance(document, dict):
        raise FileFormatError("not a JSON object")
    if document.get("probe_version") != PROBE_VERSION:
        raise FileFormatError(
            f"probe version {document.get('probe_version')!r}, expected {PROBE_VERSION}"
        )
    if not isinstance(document.get("checks"), list):
        raise FileFormatError("no list of checks")
    return document


def parse_probe_output(
    stdout: str,
    *,
    returncode: int,
    stderr: str = "",
    required: Sequence[str] = (),
    seconds: float = 0.0,
) -> ProbeResult:
    """Judge one probe run from its exit status and output (pure; see module doc)."""
    running = _last_running(stderr)
    base: dict[str, Any] = {
        "returncode": returncode,
        "seconds": seconds,
        "stderr_tail": _tail(stderr),
    }
    exit_reason = _exit_reason(returncode, running)
    if not stdout.strip():
        during = f" while running the {running} check" if running else ""
        silent = exit_reason or f"the probe exited {returncode} without output{during}"
        return ProbeResult(passed=False, reason=silent, **base)
    try:
        document = _decode(stdout)
        checks = tuple(CheckResult.from_json(c) for c in document["checks"])
    except FileFormatError as exc:
        garbled = f"the probe's output is garbled: {exc.message}: {stdout.strip()[:200]!r}"
        return ProbeResult(passed=False, reason=exit_reason or garbled, **base)
    reason = exit_reason or _consistency(checks, returncode, required)
    python = document.get("python")
    timings = document.get("timings")
    return ProbeResult(
        passed=reason is None and all(c.passed for c in checks),
        checks=checks,
        reason=reason,
        mode=str(document.get("mode")) if document.get("mode") else None,
        python=python if isinstance(python, dict) else {},
        probe_version=PROBE_VERSION,
        timings={k: float(v) for k, v in (timings or {}).items() if isinstance(v, int | float)},
        **base,
    )


def _consistency(
    checks: Sequence[CheckResult], returncode: int, required: Sequence[str]
) -> str | None:
    if not checks:
        return "the probe ran no check"
    names = {c.name for c in checks}
    if all(c.passed for c in checks):
        missing = [n for n in _all_required(checks, required) if n not in names]
        if missing:
            return f"required checks did not run: {', '.join(missing)}"
        if returncode != 0:
            return f"the probe exited {returncode} although every check passed"
    return None


def _all_required(checks: Sequence[CheckResult], required: Sequence[str]) -> list[str]:
    """The required names, plus one product per GPU the devices check listed."""
    names = list(required)
    devices = next((c.data.get("devices") for c in checks if c.name == "devices"), None)
    if isinstance(devices, list):
        names.extend(f"matmul:cuda:{i}" for i in range(len(devices)) if i > 0)
    return names


def inspect_python(
    python: Path, *, env: Mapping[str, str] | None = None, timeout: float = INSPECT_TIMEOUT
) -> dict[str, Any]:
    """What ``python`` has installed (the probe's ``--inspect``), without importing torch.
    Raises ``ExternalToolError`` when it cannot be run or answers garbage."""
    with resources.as_file(resources.files("gpuenv.verify") / "probe.py") as probe:
        argv = _probe_argv(python, probe, isolated=False, args=["--inspect"])
        proc = _proc.run(argv, timeout=timeout, env=env, what=f"{python} (inspect)")
    try:
        found = json.loads(proc.stdout)
    except ValueError as exc:
        raise ExternalToolError(
            f"{python} answered the inspection with garbage: {proc.stdout[:200]!r}",
            argv=proc.argv,
        ) from exc
    if not isinstance(found, dict):
        raise ExternalToolError(f"{python} answered the inspection with garbage", argv=proc.argv)
    return found


def expectations_for_installed(
    found: Mapping[str, Any], *, builds: Mapping[str, tuple[str, ...]] | None = None
) -> Expectations:
    """Expectations for an interpreter gpuenv did not install: what its metadata says
    is installed (a torch with no CUDA in version.py is a CPU build)."""

    def text(key: str) -> str | None:
        value = found.get(key)
        return str(value) if value else None

    cuda = text("torch_cuda")
    return Expectations(
        torch=text("torch"),
        torchvision=text("torchvision"),
        torchaudio=text("torchaudio"),
        cuda=cuda,
        cudnn=text("cudnn") if cuda else None,
        nccl=text("nccl") if cuda else None,
        cpu=cuda is None,
        builds=dict(builds or {}),
    )


def arch_hints(torch_version: str | None) -> dict[str, tuple[str, ...]]:
    """Each CUDA build of this torch release and its arch list, from the knowledge base
    (empty when the release is unknown), so an arch failure can name the build to use."""
    if not torch_version:
        return {}
    from gpuenv.knowledge import knowledge_base

    try:
        release = knowledge_base().torch_release(torch_version.split("+", 1)[0])
    except (ValueError, LookupError):
        return {}
    if release is None:
        return {}
    return {b.tag: tuple(str(a) for a in b.arch) for b in release.cuda_builds}


def verify_python(
    python: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ProbeResult:
    """Verify any interpreter read-only, as its user runs it (not isolated: its user
    site and PYTHONPATH count), against what is installed there. Records nothing."""
    inspect_timeout = min(INSPECT_TIMEOUT, max(5.0, timeout / 4))
    started = time.monotonic()
    try:
        found = inspect_python(python, env=env, timeout=inspect_timeout)
    except ExternalToolError as exc:
        return ProbeResult(passed=False, reason=exc.message, stderr_tail=exc.stderr_tail)
    torch = found.get("torch")
    expectations = expectations_for_installed(
        found, builds=arch_hints(str(torch) if torch else None)
    )
    remaining = max(5.0, timeout - (time.monotonic() - started))
    return run_probe(
        python, expectations, env=env, timeout=remaining, isolated=False, progress=progress
    )


def interpreter_problem(python: Path) -> str | None:
    """Why ``python`` cannot be an interpreter (missing, a directory, not executable)."""
    if not python.exists():
        return f"{python} does not exist"
    if python.is_dir():
        return f"{python} is a directory, not an interpreter"
    if not os.access(python, os.X_OK):
        return f"{python} is not executable"
    return None
