"""What the probe is asked to check, and what it answered: frozen values.

``Expectations`` are serialised to the probe's ``--expect`` JSON; ``ProbeResult`` is
built only by ``gpuenv.verify._run`` from the probe's output (never taken on trust) and
round-trips through JSON inside a verification record. Standard library only: records
are read on every ``gpuenv run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuenv.errors import FileFormatError

PROBE_VERSION = 1  # must equal probe.PROBE_VERSION (a test holds them together)

CPU_REQUIRED = ("torch-import", "versions", "matmul:cpu", "linkage")
CUDA_REQUIRED = (
    "torch-import",
    "driver",
    "devices",
    "versions",
    "arch",
    "matmul:cuda:0",
    "cudnn",
    "linkage",
    "nccl",
)


@dataclass(frozen=True, kw_only=True)
class Expectations:
    """What an environment must show. ``None`` means "not locked: report, don't compare".

    ``builds`` maps a build tag (cu121, cu128) to its arch list ("8.0", "9.0+PTX" or
    torch's "sm_90"), so a failed arch check can name the builds that have the GPU's arch.
    ``prefix`` and ``library_roots`` are where CUDA libraries may be loaded from; with no
    prefix the probe allows the interpreter's own prefix and site-packages.
    """

    torch: str | None = None
    torchvision: str | None = None
    torchaudio: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    arch_list: tuple[str, ...] = ()
    cpu: bool = False
    # macOS arm64 (osx-arm64): the CPU build also runs on the Apple GPU; checked as "mps"
    mps: bool = False
    prefix: Path | None = None
    library_roots: tuple[Path, ...] = ()
    extra: tuple[str, ...] = ()
    builds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Compiled extensions gpuenv built into the prefix: {"name", "version", "modules"
    # (to import), "files" (absolute paths of their shared objects, whose GPU code is read)}.
    extensions: tuple[Mapping[str, Any], ...] = ()
    time_budget: float | None = None
    check_budget: float | None = None
    matmul_size: int | None = None

    def with_budget(self, seconds: float) -> Expectations:
        return replace(self, time_budget=seconds)

    def to_json(self) -> dict[str, Any]:
        return {
            "torch": self.torch,
            "torchvision": self.torchvision,
            "torchaudio": self.torchaudio,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "arch_list": list(self.arch_list),
            "cpu": self.cpu,
            "mps": self.mps,
            "prefix": str(self.prefix) if self.prefix else None,
            "library_roots": [str(p) for p in self.library_roots],
            "extra": list(self.extra),
            "builds": {tag: list(arch) for tag, arch in self.builds.items()},
            "extensions": [dict(e) for e in self.extensions],
            "time_budget": self.time_budget,
            "check_budget": self.check_budget,
            "matmul_size": self.matmul_size,
        }

    def required_checks(self) -> tuple[str, ...]:
        """Checks that must be present (and pass) for the result to pass."""
        names = list(CPU_REQUIRED if self.cpu else CUDA_REQUIRED)
        if self.mps:
            names.append("mps")
        if self.torchvision:
            names.append("torchvision")
        if self.torchaudio:
            names.append("torchaudio")
        if self.extensions:
            names.append("extensions")
        names.extend(f"extra:{i}" for i in range(len(self.extra)))
        return tuple(names)


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """One check of a probe run: its name, whether it passed (or was skipped), what it
    found, how to fix a failure, how long it took, and the data it measured."""

    name: str
    status: str  # "pass", "fail" or "skip" (a skip counts as passed)
    passed: bool
    detail: str
    fix: str | None = None
    seconds: float = 0.0
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "passed": self.passed,
            "detail": self.detail,
            "fix": self.fix,
            "seconds": self.seconds,
            "data": dict(self.data),
        }

    @classmethod
    def from_json(cls, raw: Any) -> CheckResult:
        """Strict: a check without a str name, a bool passed and a str detail is garbled."""
        if not isinstance(raw, Mapping):
            raise FileFormatError("a check is not a JSON object")
        name, passed, detail = raw.get("name"), raw.get("passed"), raw.get("detail")
        if not isinstance(name, str) or not isinstance(passed, bool) or not isinstance(detail, str):
            raise FileFormatError(f"malformed check: {dict(raw)!r:.200}")
        status = raw.get("status")
        if status not in ("pass", "fail", "skip") or (status == "fail") == passed:
            status = "pass" if passed else "fail"
        fix = raw.get("fix")
        seconds = raw.get("seconds")
        data = raw.get("data")
        return cls(
            name=name,
            status=status,
            passed=passed,
            detail=detail,
            fix=fix if isinstance(fix, str) else None,
            seconds=float(seconds) if isinstance(seconds, int | float) else 0.0,
            data=dict(data) if isinstance(data, Mapping) else {},
        )


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """The verdict on one probe run. ``passed`` is True only when the probe exited 0,
    printed one well-formed JSON object, ran every required check and every check
    passed; ``reason`` says why not when the failure is the probe's own (crash, time
    out, garbled output) rather than a check's."""

    passed: bool
    checks: tuple[CheckResult, ...] = ()
    reason: str | None = None
    mode: str | None = None
    python: Mapping[str, Any] = field(default_factory=dict)
    probe_version: int | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    returncode: int | None = None
    seconds: float = 0.0
    stderr_tail: str = ""

    @property
    def failed_checks(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def report_checks(self) -> tuple[CheckResult, ...]:
        """The checks, plus a failed "probe" check carrying ``reason`` when there is one,
        so a reader of the list alone never mistakes a crashed run for a clean one."""
        if self.reason is None:
            return self.checks
        probe = CheckResult(
            name="probe", status="fail", passed=False, detail=self.reason, fix=_reason_fix(self)
        )
        return (*self.checks, probe)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "reason": self.reason,
            "mode": self.mode,
            "python": dict(self.python),
            "probe_version": self.probe_version,
            "checks": [c.to_json() for c in self.checks],
            "timings": dict(self.timings),
            "returncode": self.returncode,
            "seconds": self.seconds,
            "stderr_tail": self.stderr_tail,
        }

    @classmethod
    def from_json(cls, raw: Any) -> ProbeResult:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("passed"), bool):
            raise FileFormatError("not a probe result")
        checks = tuple(CheckResult.from_json(c) for c in raw.get("checks") or [])
        passed = bool(raw["passed"]) and bool(checks) and all(c.passed for c in checks)
        timings = raw.get("timings")
        python = raw.get("python")
        returncode = raw.get("returncode")
        probe_version = raw.get("probe_version")
        reason = raw.get("reason")
        return cls(
            passed=passed and reason is None,
            checks=checks,
            reason=reason if isinstance(reason, str) else None,
            mode=raw.get("mode") if isinstance(raw.get("mode"), str) else None,
            python=dict(python) if isinstance(python, Mapping) else {},
            probe_version=probe_version if isinstance(probe_version, int) else None,
            timings=dict(timings) if isinstance(timings, Mapping) else {},
            returncode=returncode if isinstance(returncode, int) else None,
            seconds=float(raw.get("seconds") or 0.0),
            stderr_tail=str(raw.get("stderr_tail") or ""),
        )


def _reason_fix(result: ProbeResult) -> str:
    if result.reason and "did not finish" in result.reason:
        return "raise --timeout; if it still hangs, check nvidia-smi and dmesg"
    if result.reason and ("signal" in result.reason or "without output" in result.reason):
        return "the probe crashed: see its stderr (gpuenv -v) for the library that faulted"
    return "see the probe's stderr (gpuenv -v)"
