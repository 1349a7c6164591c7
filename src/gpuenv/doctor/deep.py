"""``--deep``: run the verification probe with the environment's interpreter as its user
runs it (not isolated, under the user's variables: ``PYTHONPATH``, the user site and
``LD_LIBRARY_PATH`` count), writing no record (``gpuenv.verify.verify_python``), and
merge what it saw with the static findings.

Merging: each failed probe check is a finding (``probe-<check>``) naming the static
findings that explain it; the static library findings gain what the probe process
really mapped (``probe_mapped``, and whether their predicted winner was among it); the
probe's ``torch.cuda.get_arch_list()`` is checked against the GPUs where the knowledge
base does not know the build.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.doctor._context import Context
from gpuenv.doctor._fsafe import executable
from gpuenv.doctor.arch import parse_arch_list, uncovered
from gpuenv.doctor.model import Finding, Severity

if TYPE_CHECKING:
    from gpuenv.verify.model import CheckResult, ProbeResult

PROBE = "gpuenv.verify.verify_python"
PROBE_TIMEOUT = 300.0
_MAX_DATA = 2000

# Which static findings explain a failed probe check.
EXPLAINED_BY: Mapping[str, tuple[str, ...]] = {
    "torch-import": (
        "cuda-library-missing",
        "python-path-shadowing",
        "package-outside-environment",
        "ld-library-path-relative",
        "ld-preload-set",
    ),
    "driver": ("no-nvidia-driver", "driver-too-old", "libcuda-not-the-driver", "wsl-linux-driver"),
    "devices": (
        "no-nvidia-driver",
        "driver-too-old",
        "libcuda-not-the-driver",
        "cpu-torch-with-gpu",
    ),
    "versions": (
        "python-path-shadowing",
        "duplicate-cuda-library",
        "cuda-library-mismatch",
        "file-ownership-clash",
        "cpu-torch-with-gpu",
    ),
    "arch": ("arch-not-covered",),
    "matmul": ("arch-not-covered", "duplicate-cuda-library", "cuda-library-mismatch"),
    "cudnn": ("duplicate-cuda-library", "cuda-library-mismatch", "file-ownership-clash"),
    "linkage": (
        "duplicate-cuda-library",
        "cuda-library-mismatch",
        "ld-library-path-foreign-env",
        "ld-library-path-cuda-version",
        "ld-preload-set",
        "python-path-shadowing",
    ),
    "nccl": ("duplicate-cuda-library", "cuda-library-mismatch", "file-ownership-clash"),
    "torchvision": ("trio-mismatch", "trio-cu-tag-mismatch", "python-path-shadowing"),
    "torchaudio": ("trio-mismatch", "trio-cu-tag-mismatch", "python-path-shadowing"),
}
_LIBRARY_FINDINGS = ("duplicate-cuda-library", "cuda-library-mismatch")


def _unavailable(reason: str, **evidence: Any) -> Finding:
    return Finding(
        code="deep-checks-unavailable",
        severity=Severity.INFO,
        message=f"deep checks did not run: {reason} ({PROBE})",
        evidence={"module": PROBE, "reason": reason, **evidence},
        fix="run the static checks' fixes first; deep checks need gpuenv's verification "
        "probe and the environment's interpreter",
    )


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.split(":", 1)[0].lower()).strip("-")


def _small(data: Mapping[str, Any]) -> dict[str, Any]:
    """The check's data, without what is too long to show (tracebacks, big lists)."""
    out = {}
    for key, value in data.items():
        text = json.dumps(value, default=str)
        out[key] = value if len(text) <= _MAX_DATA else text[: _MAX_DATA - 3] + "..."
    return out


def _check_finding(
    ctx: Context, check: CheckResult, static: list[Finding], result: ProbeResult
) -> Finding:
    slug = _slug(check.name)
    explained = sorted({f.code for f in static if f.code in EXPLAINED_BY.get(slug, ())})
    return Finding(
        code=f"probe-{slug}",
        severity=Severity.ERROR,
        message=f"the probe's {check.name} check failed in {ctx.env.python}: {check.detail}",
        evidence={
            "python": str(ctx.env.python),
            "check": check.name,
            "detail": check.detail,
            "data": _small(check.data),
            "explained_by": explained,
            "probe_mode": result.mode,
        },
        fix=(check.fix or "see the check's detail")
        + (f" (the static findings {', '.join(explained)} say why)" if explained else ""),
    )


def _mapped(result: ProbeResult) -> list[str]:
    linkage = next((c for c in result.checks if c.name == "linkage"), None)
    libraries = linkage.data.get("libraries") if linkage is not None else None
    return [
        str(lib["path"])
        for lib in libraries or []
        if isinstance(lib, Mapping) and isinstance(lib.get("path"), str)
    ]


def _annotate(finding: Finding, mapped: list[str]) -> Finding:
    """A library finding, with what the probe process really mapped of that library."""
    if finding.code not in _LIBRARY_FINDINGS:
        return finding
    stem = str(finding.evidence.get("library") or "")
    picked = finding.evidence.get("picked")
    real = {os.path.realpath(p): p for p in mapped if Path(p).name.startswith(stem + ".")}
    evidence = dict(finding.evidence)
    evidence["probe_mapped"] = sorted(real.values())
    if isinstance(picked, Mapping) and isinstance(picked.get("path"), str):
        evidence["probe_confirms_pick"] = os.path.realpath(picked["path"]) in real
    return dataclasses.replace(finding, evidence=evidence)


def _probe_arch(ctx: Context, result: ProbeResult) -> list[Finding]:
    arch = next((c for c in result.checks if c.name == "arch"), None)
    entries = arch.data.get("arch_list") if arch is not None else None
    if not isinstance(entries, list) or ctx.torch_build is not None:
        return []
    parsed = parse_arch_list([str(a) for a in entries])
    return uncovered(ctx, parsed, "probe: torch.cuda.get_arch_list()")


def run(ctx: Context) -> ProbeResult | Finding:
    """The probe's result, or the note saying why it could not run."""
    try:
        from gpuenv.verify import verify_python
    except ImportError:
        return _unavailable("this gpuenv has no verification probe")
    python = ctx.env.python
    if python is None or not executable(python):
        return _unavailable("no runnable Python interpreter found", prefix=str(ctx.env.prefix))
    return verify_python(python, timeout=PROBE_TIMEOUT, env=dict(ctx.request.environ))


def merge(ctx: Context, static: list[Finding]) -> tuple[list[Finding], dict[str, Any]]:
    """The static findings with the probe's merged in, and a summary of the run."""
    outcome = run(ctx)
    if isinstance(outcome, Finding):
        return [*static, outcome], {"ran": False, "reason": outcome.evidence["reason"]}
    result = outcome
    mapped = _mapped(result)
    findings = [_annotate(f, mapped) for f in static]
    if result.reason is not None:
        findings.append(
            Finding(
                code="probe-failed",
                severity=Severity.ERROR,
                message=f"the verification probe did not complete in {ctx.env.python}: "
                f"{result.reason}",
                evidence={"python": str(ctx.env.python), "reason": result.reason},
                fix="fix the static findings above, then run 'gpuenv doctor --deep' again",
            )
        )
    known = {f.code for f in findings}
    findings += [f for f in _probe_arch(ctx, result) if f.code not in known]
    findings += [_check_finding(ctx, c, findings, result) for c in result.failed_checks]
    summary = {
        "ran": True,
        "python": str(ctx.env.python),
        "passed": result.passed,
        "mode": result.mode,
        "checks": [c.name for c in result.checks],
        "failed": [c.name for c in result.failed_checks],
        "seconds": round(result.seconds, 3),
    }
    return findings, summary
