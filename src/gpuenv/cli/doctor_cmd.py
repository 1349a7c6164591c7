"""`gpuenv doctor`: diagnose any environment from its files; exit 1 on any error."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.cli import _common, _output
from gpuenv.errors import EXIT_CHECK_FAILED, EXIT_OK, GpuenvError

if TYPE_CHECKING:
    from gpuenv.doctor import Host, Report
    from gpuenv.hardware import HardwareFacts

_HEADINGS = {"error": "errors", "warning": "warnings", "info": "notes"}
_WIDTH = 300


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--python", metavar="PATH", type=Path, help="the environment of this interpreter"
    )
    where.add_argument(
        "--prefix",
        metavar="DIR",
        type=Path,
        help="the environment at this prefix (default: the active one)",
    )
    parser.add_argument(
        "--deep", action="store_true", help="also run the verification probe (writes no record)"
    )
    _common.add_json_flag(parser)


def hardware_facts() -> HardwareFacts:
    """This machine's facts (overrides applied); when detection itself fails, no GPU is
    known and the doctor says so instead of stopping."""
    from gpuenv import hardware

    try:
        return hardware.detect(overrides=_common.hardware_overrides())
    except GpuenvError as exc:
        notes: tuple[str, ...] = (f"hardware detection failed: {exc.message}",)
    return hardware.HardwareFacts(
        gpus=(), driver_version=None, cuda_driver_version=None, notes=notes
    )


def host() -> Host:
    from gpuenv.doctor import Host

    return Host()


def run(args: argparse.Namespace) -> int:
    from gpuenv.doctor import DoctorRequest, diagnose

    request = DoctorRequest(
        environ=dict(os.environ),
        hardware=hardware_facts(),
        prefix=args.prefix,
        python=args.python,
        default_prefix=Path(sys.prefix),
        deep=args.deep,
        host=host(),
    )
    report = diagnose(request)
    if args.json:
        _output.emit_json(report.to_json())
    else:
        _output.out(render(report))
    return EXIT_CHECK_FAILED if report.has_errors else EXIT_OK


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def _evidence_lines(evidence: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in evidence.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"      {key}:")
            lines.extend(f"        - {json.dumps(item)}" for item in value)
        else:
            lines.append(f"      {key}: {_value(value)}")
    return lines


def _environment_line(environment: dict[str, Any]) -> str:
    torch = environment.get("torch")
    stack = (
        f"torch {torch['version']} ({torch['build']})" if isinstance(torch, dict) else "no torch"
    )
    return f"environment: {environment.get('prefix')} ({environment.get('kind')}, {stack})"


def render(report: Report) -> str:
    data = report.to_json()
    lines = [_environment_line(data["environment"])]
    counts = {severity: 0 for severity in _HEADINGS}
    for severity, heading in _HEADINGS.items():
        group = [f for f in data["findings"] if f["severity"] == severity]
        counts[severity] = len(group)
        if not group:
            continue
        lines.append(f"\n{heading} ({len(group)}):")
        for finding in group:
            lines.append(f"  [{finding['code']}] {finding['message']}")
            lines.append("    evidence:")
            lines.extend(_evidence_lines(finding["evidence"]))
            lines.append(f"    fix: {finding['fix']}")
    if not data["findings"]:
        lines.append("no problems found")
    summary = ", ".join(f"{_HEADINGS[s]}: {counts[s]}" for s in _HEADINGS)
    lines.append(f"\n{summary}")
    return "\n".join(lines)
