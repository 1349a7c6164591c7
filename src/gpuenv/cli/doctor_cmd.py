"""`gpuenv doctor`: diagnose any environment from its files; exit 1 on any error.

Without ``--python``/``--prefix`` it diagnoses the environment the user means, the
first of: the prefix ``gpuenv run``/``shell`` activated (``_GPUENV_ACTIVE``), an
activated venv (``VIRTUAL_ENV``), an activated conda environment (``CONDA_PREFIX``),
the installed target of the project here (``--target`` among several), the first
``python3`` on ``PATH``; gpuenv's own environment only when there is nothing else.
The first line of the report says which, and why."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.cli import _common, _output
from gpuenv.errors import EXIT_CHECK_FAILED, EXIT_OK, GpuenvError, UsageError

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
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
    _common.add_target_flag(
        parser, what="in a project: the installed target to diagnose (default: the only one)"
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


def default_environment(
    environ: dict[str, str], cwd: Path, target: str | None, file: str | None
) -> tuple[Path | None, Path | None, str]:
    """(prefix, python, why): the environment the user means when none is named."""
    from gpuenv import runtime
    from gpuenv._envdelta import ACTIVE_VAR

    if file:  # named with -f: that project's environment, or why not (never another)
        spec = runtime.find_spec(file, str(cwd))
        selected = runtime.select(runtime.project_of(spec), target, spec=spec, explicit=True)
        return Path(selected.prefix), None, f"target {selected.target} of the project {spec}"
    own = Path(sys.prefix).resolve()
    active = environ.get(ACTIVE_VAR)
    if active and Path(active).is_dir():
        return Path(active), None, "the environment 'gpuenv run' or 'gpuenv shell' activated"
    for variable, what in (("VIRTUAL_ENV", "venv"), ("CONDA_PREFIX", "conda environment")):
        value = environ.get(variable)
        if value and not Path(value).is_dir():  # deleted or moved since its activation
            off = "deactivate" if variable == "VIRTUAL_ENV" else "conda deactivate"
            raise UsageError(
                f"${variable} names {value!r}, which is not a directory: the activated "
                f"{what} was deleted or moved",
                hint=f"run '{off}' (or unset {variable}), or name one: gpuenv doctor "
                "--prefix DIR or --python PATH",
            )
        if value and Path(value).resolve() != own:
            return Path(value), None, f"the activated {what} (${variable})"
    spec = runtime.find_spec(file, str(cwd))
    project = runtime.project_of(spec)
    in_project = Path(spec).is_file()
    if in_project and (target is not None or runtime.installed_targets(project)):
        selected = runtime.select(project, target, spec=spec)
        why = f"target {selected.target} of the project {spec}"
        return Path(selected.prefix), None, why
    if target is not None:
        raise UsageError(f"--target {target}: no gpuenv.toml here", hint="gpuenv doctor --help")
    nothing = " (the project here has nothing installed)" if in_project else ""
    python3 = shutil.which("python3", path=environ.get("PATH", os.defpath))
    if python3 and Path(python3).parent.parent.resolve() != own:
        return (
            None,
            Path(python3),
            f"the first python3 on PATH, as no environment is active{nothing}",
        )
    return Path(sys.prefix), None, f"gpuenv's own, as no other is active or on PATH{nothing}"


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.doctor import DoctorRequest, diagnose

    environ = dict(os.environ)
    prefix, python, why = args.prefix, args.python, None
    if prefix is None and python is None:
        prefix, python, why = default_environment(
            environ, Path.cwd(), args.target, getattr(args, "file", None)
        )
    elif args.target is not None:
        raise UsageError("--target picks a project's target: not with --python or --prefix")
    request = DoctorRequest(
        environ=environ,
        hardware=hardware_facts(),
        prefix=prefix,
        python=python,
        default_prefix=Path(sys.prefix),
        deep=args.deep,
        host=host(),
        chosen_because=why,
    )
    report = diagnose(request)
    if args.json:
        _output.emit_json(report.to_json())
    else:
        _output.out(render(report, verbose=args.verbose or 0))
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
    line = f"environment: {environment.get('prefix')} ({environment.get('kind')}, {stack})"
    why = environment.get("chosen_because")
    return f"{line}: {why}" if why else line


def render(report: Report, *, verbose: int = 0) -> str:
    """One line per finding and its fix; the evidence under ``-v`` (and in ``--json``)."""
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
            if verbose:
                lines.append("    evidence:")
                lines.extend(_evidence_lines(finding["evidence"]))
            lines.append(f"    fix: {finding['fix']}")
    if not data["findings"]:
        lines.append("no problems found")
    summary = ", ".join(f"{_HEADINGS[s]}: {counts[s]}" for s in _HEADINGS)
    if data["findings"] and not verbose:
        summary += " (the evidence: gpuenv doctor -v, or --json)"
    lines.append(f"\n{summary}")
    return "\n".join(lines)
