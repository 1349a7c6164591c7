"""Why a build failed: the known causes (``knowledge/data/diagnoses.toml``) matched against its log
and exit status, each with the line that gave it away and what to do."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from gpuenv.builds import knowledge

TAIL_LINES = 25


@dataclass(frozen=True)
class Diagnosis:
    """One known cause a failed build shows: its code and title, what to do, and the log
    line (or the exit status) that gave it away."""

    code: str
    title: str
    fix: str
    evidence: str  # the matching log line, or the exit status

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "title": self.title, "fix": self.fix, "evidence": self.evidence}

    def render(self) -> str:
        return f"{self.title} [{self.code}]\n    seen: {self.evidence}\n    fix: {self.fix}"


def _line_at(text: str, position: int) -> str:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return text[start : end if end >= 0 else len(text)].strip()[:300]


def _signal_of(returncode: int) -> int | None:
    if returncode < 0:
        return -returncode
    if returncode > 128 and returncode - 128 < 64:  # a shell's (or a supervisor's) 128+N
        return returncode - 128
    return None


def diagnose(log: str, returncode: int) -> list[Diagnosis]:
    """Every known cause the log (or the exit status) shows, in the data file's order."""
    found = []
    killed_by = _signal_of(returncode)
    for cause in knowledge.causes():
        evidence = None
        for pattern in cause.patterns:
            match = pattern.search(log)
            if match:
                evidence = _line_at(log, match.start())
                break
        if evidence is None and cause.exit_signal is not None and killed_by == cause.exit_signal:
            evidence = f"the build was killed by {signal.Signals(killed_by).name}"
        if evidence is not None:
            found.append(Diagnosis(cause.code, cause.title, cause.fix, evidence))
    return found


def tail(log: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(log.rstrip().splitlines()[-lines:])
