"""``--deep``: run the verification probe (``gpuenv.verify.run_probe``) with the
environment's own interpreter, writing no record, and judge its answer.

The probe is another piece of gpuenv; when this build lacks it, the doctor says so as
an ``info`` finding rather than failing. The probe's answer is read loosely (a mapping,
or an object with ``to_json()``): ``passed``/``ok`` false is an error, and an
``arch_list`` (``torch.cuda.get_arch_list()``) is checked against the GPUs.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from gpuenv.doctor._context import Context
from gpuenv.doctor.arch import parse_arch_list, uncovered
from gpuenv.doctor.model import Finding, Severity
from gpuenv.errors import GpuenvError

PROBE_MODULE = "gpuenv.verify"


def _probe() -> Callable[..., Any] | None:
    try:
        module = importlib.import_module(PROBE_MODULE)
    except ImportError:
        return None
    probe = getattr(module, "run_probe", None)
    return probe if callable(probe) else None


def _unavailable(reason: str, **evidence: Any) -> Finding:
    return Finding(
        code="deep-checks-unavailable",
        severity=Severity.INFO,
        message=f"deep checks did not run: {reason} ({PROBE_MODULE}.run_probe)",
        evidence={"module": f"{PROBE_MODULE}.run_probe", "reason": reason, **evidence},
        fix="run the static checks' fixes first; deep checks need gpuenv's verification "
        "probe and the environment's interpreter",
    )


def _arguments(probe: Callable[..., Any], ctx: Context) -> dict[str, Any]:
    offered = {
        "python": ctx.env.python,
        "prefix": ctx.env.prefix,
        "environ": dict(ctx.request.environ),
        "env": dict(ctx.request.environ),
        "record": False,
        "write_record": False,
    }
    accepted = inspect.signature(probe).parameters
    return {k: v for k, v in offered.items() if k in accepted}


def _as_mapping(result: Any) -> Mapping[str, Any]:
    if hasattr(result, "to_json"):
        result = result.to_json()
    elif dataclasses.is_dataclass(result) and not isinstance(result, type):
        result = dataclasses.asdict(result)
    return result if isinstance(result, Mapping) else {"result": repr(result)}


def _judge(ctx: Context, result: Mapping[str, Any]) -> list[Finding]:
    findings = []
    passed = result.get("passed", result.get("ok"))
    if passed is False:
        findings.append(
            Finding(
                code="probe-failed",
                severity=Severity.ERROR,
                message=f"the verification probe failed in {ctx.env.python}: "
                f"{result.get('error') or result.get('message') or 'see evidence'}",
                evidence={"python": str(ctx.env.python), "probe": dict(result)},
                fix="fix the static findings above, then run 'gpuenv doctor --deep' again",
            )
        )
    arch = result.get("arch_list")
    if isinstance(arch, list) and not ctx.torch_build:
        entries = [str(a) for a in arch]
        findings += uncovered(ctx, parse_arch_list(entries), "probe: torch.cuda.get_arch_list()")
    return findings


def check(ctx: Context) -> list[Finding]:
    if not ctx.request.deep:
        return []
    probe = _probe()
    if probe is None:
        return [_unavailable("this gpuenv has no verification probe")]
    if ctx.env.python is None:
        return [_unavailable("no Python interpreter found", prefix=str(ctx.env.prefix))]
    try:
        result = probe(**_arguments(probe, ctx))
    except GpuenvError as exc:
        return [
            Finding(
                code="probe-failed",
                severity=Severity.ERROR,
                message=f"the verification probe could not run: {exc.message}",
                evidence={"python": str(ctx.env.python), "error": exc.to_json()["error"]},
                fix=exc.hint or "fix the static findings above, then retry --deep",
            )
        ]
    return _judge(ctx, _as_mapping(result))
