"""`gpuenv verify`: run the verification probe and show each check.

``--python PATH`` verifies any interpreter read-only (nothing is recorded); the
``--target`` form (a store prefix from the lock, recorded) plugs into ``_verify``.
Exit 0 only when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.cli import _common, _output, _progress
from gpuenv.errors import CheckFailed, UsageError

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.verify import ProbeResult


MAX_TIMEOUT = 7 * 86400.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(
        parser, what="verify this installed target and record the result (default: the only one)"
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        type=Path,
        help="verify this interpreter as it is (read-only: records nothing)",
    )
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=float,
        default=None,
        help="give up after S seconds (default: 300); a timed-out probe fails",
    )
    parser.add_argument(
        "--slurm",
        action="store_true",
        help="verify on every node through srun (one task per node; records per node); "
        "srun's own arguments follow '--'",
    )
    parser.add_argument("--node-report", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("srun_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    srun_args = list(args.srun_args)
    if srun_args and srun_args[0] == "--":
        srun_args = srun_args[1:]
    if args.slurm or args.node_report:
        from gpuenv.cli import _slurm as slurm_verify

        if args.python is not None:
            raise UsageError("--slurm verifies an installed target: drop --python")
        if args.node_report:
            return slurm_verify.node(args, settings)
        return slurm_verify.cluster(args, tuple(srun_args))
    if srun_args:
        raise UsageError(
            f"unexpected arguments: {' '.join(srun_args)}",
            hint="arguments after '--' are srun's, with --slurm",
        )
    subject, result = _verify(args, settings)
    if args.json:
        _output.emit_json(to_json(subject, result))
    else:
        _output.out(render(subject, result), raw=True)  # escaped cell by cell: keeps colours
        note = _no_driver_note(args, subject, result)
        if note:
            _output.err(f"gpuenv: note: {note}")
    return 0 if result.passed else CheckFailed.exit_code


def _no_driver_note(args: argparse.Namespace, subject: str, result: ProbeResult) -> str | None:
    """For a CUDA target that failed on a machine without an NVIDIA driver: where it can
    be verified instead (said once, after the checks)."""
    if result.passed or result.mode != "cuda" or args.python is not None:
        return None
    from gpuenv.verify.gate import machine_fingerprint, only_on_its_hardware

    if machine_fingerprint()["driver"]:
        return None
    target = args.target or subject.split(" (", 1)[0]
    return f"this machine has no NVIDIA driver: {only_on_its_hardware(target)}"


def _verify(args: argparse.Namespace, settings: Settings) -> tuple[str, ProbeResult]:
    """Dispatch on the form: (what was verified, the result)."""
    from gpuenv import verify

    timeout = args.timeout if args.timeout is not None else None
    # Also nan (it killed the probe at once) and what the timer cannot wait for (inf,
    # 1e309, 1e11 s: an OverflowError in the timer's thread left no timeout at all).
    if timeout is not None and not 0 < timeout <= MAX_TIMEOUT:
        raise UsageError(
            f"--timeout {args.timeout:g}: a number of seconds, more than 0 and at most "
            f"{MAX_TIMEOUT:g} (a week)"
        )
    if args.python is not None:
        if args.target:
            raise UsageError("give --python or --target, not both")
        problem = verify.interpreter_problem(args.python)
        if problem:
            raise UsageError(problem)
        with _progress.display(args) as progress:
            result = verify.verify_python(
                args.python, timeout=timeout or verify.DEFAULT_TIMEOUT, progress=progress
            )
        return str(args.python), result
    return verify_installed_target(args, timeout, settings)


def verify_installed_target(
    args: argparse.Namespace, timeout: float | None, settings: Settings
) -> tuple[str, ProbeResult]:
    """``--target`` (or the only installed target): probe the prefix, record the result."""
    from gpuenv.verify.target import verify_installed

    with _progress.display(args) as progress:
        selected, verification = verify_installed(
            _common.spec_path(args),
            args.target,
            cache_dir=settings.cache_dir,
            timeout=timeout,
            progress=progress,
        )
    return f"{selected.target} ({selected.prefix})", verification.result


def to_json(subject: str, result: ProbeResult) -> dict[str, Any]:
    return {
        "passed": result.passed,
        "python": subject,
        "mode": result.mode,
        "reason": result.reason,
        "checks": [
            {
                "name": c.name,
                "passed": c.passed,
                "status": c.status,
                "detail": c.detail,
                "fix": c.fix,
                "seconds": c.seconds,
                "data": dict(c.data),
            }
            for c in result.report_checks()
        ],
        "timings": dict(result.timings),
        "seconds": round(result.seconds, 3),
    }


_MARK = {"pass": "[green]pass[/]", "skip": "[yellow]skip[/]", "fail": "[red]FAIL[/]"}


_NARROW = 60  # columns below which a four-column table cuts every word: one line a check


def _lines(subject: str, result: ProbeResult) -> str:
    """The table's content as lines, for a terminal too narrow for its columns."""
    lines = [f"gpuenv verify {subject}"]
    for check in result.report_checks():
        mark = "FAIL" if check.status == "fail" else check.status
        lines.append(f"  {check.name}: {mark}: {check.detail}")
        if check.fix:
            lines.append(f"    fix: {check.fix}")
    return "\n".join(_output.printable(line) for line in lines)


def render(subject: str, result: ProbeResult) -> str:
    from rich.markup import escape
    from rich.table import Table

    console = _output.console()
    if console.width < _NARROW:
        return _lines(subject, result) + "\n" + _verdict(result)
    title = escape(_output.printable(f"gpuenv verify {subject}"))
    table = Table(title=title, title_justify="left", expand=False)
    for header in ("check", "result", "detail", "fix"):
        table.add_column(header, overflow="fold")
    for check in result.report_checks():
        table.add_row(
            escape(_output.printable(check.name)),
            _MARK.get(check.status, check.status),
            escape(_output.printable(check.detail)),
            escape(_output.printable(check.fix or "")),
        )
    with console.capture() as captured:
        console.print(table)
    return captured.get().rstrip() + "\n" + _verdict(result)


def _verdict(result: ProbeResult) -> str:
    failed = len([c for c in result.report_checks() if not c.passed])
    if result.passed:
        return f"verified in {result.seconds:.1f} s"
    return f"NOT verified: {failed} check{'s' if failed != 1 else ''} failed"
