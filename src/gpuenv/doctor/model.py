"""What the doctor is asked (``DoctorRequest``) and what it answers (``Report``).

Every ``Finding`` carries a stable kebab-case ``code``, a ``severity``, a message, the
``evidence`` it rests on (paths, versions: never empty) and a ``fix``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from gpuenv.hardware import HardwareFacts


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return ("error", "warning", "info").index(self.value)


@dataclass(frozen=True)
class Finding:
    """One thing the doctor reports: its stable code, severity and message, the evidence it
    rests on (never empty) and the fix."""

    code: str
    severity: Severity
    message: str
    evidence: Mapping[str, Any]
    fix: str

    def __post_init__(self) -> None:
        if not self.evidence:
            raise ValueError(f"finding {self.code!r} has no evidence")

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "evidence": dict(self.evidence),
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Host:
    """Where the machine's own files live. ``root`` is ``/`` except in tests, which
    point it at a fixture tree holding ``proc/``, ``etc/ld.so.conf``, ``usr/local/cuda``,
    ``usr/lib/wsl/lib`` and the system library directories."""

    root: Path = Path("/")
    system_lib_dirs: tuple[str, ...] = (
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
    )

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")


@dataclass(frozen=True)
class DoctorRequest:
    """One diagnosis. Exactly one of ``prefix`` and ``python`` may be given; with
    neither, the active environment (``VIRTUAL_ENV``, ``CONDA_PREFIX``, else
    ``default_prefix``) is examined. ``environ`` is the invoking process's environment:
    ``LD_LIBRARY_PATH``, ``LD_PRELOAD``, ``CUDA_HOME`` and ``PATH`` are judged from it."""

    environ: Mapping[str, str]
    hardware: HardwareFacts
    prefix: Path | None = None
    python: Path | None = None
    default_prefix: Path | None = None
    deep: bool = False
    cwd: Path = field(default_factory=Path.cwd)
    host: Host = field(default_factory=Host)
    chosen_because: str | None = None  # why this environment, when the CLI chose it


@dataclass(frozen=True)
class Report:
    """The doctor's answer: every finding, errors first, and a summary of the
    environment it examined."""

    findings: tuple[Finding, ...]
    environment: Mapping[str, Any]

    @property
    def has_errors(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [f.to_json() for f in self.findings],
            "environment": dict(self.environment),
        }
