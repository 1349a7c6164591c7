"""The reproduction report: what was kept, changed (from, to, why, risk), must be built
for this GPU (with the nvcc it needs), cannot be reproduced, is not managed by gpuenv,
and what was assumed. Rendered as Markdown a reader can paste into a README, and as
JSON; entries are ordered by risk, highest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuenv.importers.model import Origin

KEPT = "kept"
CHANGED = "changed"
NEEDS_BUILD = "needs_build"
UNREPRODUCIBLE = "unreproducible"
UNMANAGED = "unmanaged"
ASSUMPTION = "assumption"
KINDS = (UNREPRODUCIBLE, NEEDS_BUILD, CHANGED, UNMANAGED, KEPT, ASSUMPTION)

NONE, LOW, MEDIUM, HIGH = 0, 1, 2, 3
RISK_NAMES = {NONE: "none", LOW: "low", MEDIUM: "medium", HIGH: "high"}


@dataclass(frozen=True)
class Entry:
    """One line of the report (``kind``: kept, changed, to be built, unreproducible,
    unmanaged, or an assumption): the package, if any, why, where the files asked for it,
    from what to what, and the risk."""

    kind: str
    package: str | None
    why: str
    origin: Origin | None = None
    was: str | None = None  # what the files asked for
    now: str | None = None  # what the reproduction installs
    risk: int = NONE
    risk_text: str | None = None  # "numerics may differ", "API removed in 2.0: torch._six"
    nvcc: str | None = None  # needs_build: the CUDA compiler the build needs
    unverified: bool = False  # a fact behind this entry is marked unverified in the data

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "package": self.package,
            "from": self.was,
            "to": self.now,
            "why": self.why,
            "risk": RISK_NAMES[self.risk],
            "file": self.origin.where() if self.origin else None,
            "entry": self.origin.text if self.origin else None,
        }
        if self.risk_text:
            body["risk_detail"] = self.risk_text
        if self.kind == NEEDS_BUILD:
            body["nvcc"] = self.nvcc
        if self.unverified:
            body["unverified_fact"] = True
        return body

    def comment(self) -> str:
        """The comment the written spec carries for this entry."""
        where = self.origin.cite() if self.origin else "import"
        if self.was == self.now or (self.kind == KEPT and not (self.was and self.now)):
            return where
        moved = f" → {self.now}" if self.now else ""
        return f"{where}{moved}: {self.why}"


@dataclass(frozen=True)
class Report:
    """The reproduction report of one target: the target and its hardware, a one-line
    summary, the files read (with their formats), every entry, the files' disagreements and
    the planner's reasons."""

    target: str
    hardware: str
    summary: str  # "torch 1.12.1+cu113 → 2.0.1+cu118, Python 3.8"
    inputs: tuple[tuple[str, str], ...]  # (file, format)
    entries: tuple[Entry, ...]
    disagreements: tuple[dict[str, Any], ...]
    plan_reasons: tuple[str, ...]
    exclude_newer: str | None = None  # [pip] exclude-newer as written: the files' day
    exclude_newer_package: tuple[tuple[str, str], ...] = ()  # and exclude-newer-package

    def of(self, kind: str) -> list[Entry]:
        found = [e for e in self.entries if e.kind == kind]
        return sorted(found, key=lambda e: -e.risk)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "target": self.target,
            "hardware": self.hardware,
            "summary": self.summary,
            "inputs": [{"file": f, "format": fmt} for f, fmt in self.inputs],
        }
        for kind in KINDS:
            key = "assumptions" if kind == ASSUMPTION else kind
            body[key] = [e.to_json() for e in self.of(kind)]
        body["disagreements"] = list(self.disagreements)
        body["plan_reasons"] = list(self.plan_reasons)
        body["exclude_newer"] = self.exclude_newer
        body["exclude_newer_package"] = dict(self.exclude_newer_package)
        return body


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _risk(entry: Entry) -> str:
    name = RISK_NAMES[entry.risk]
    detail = f": {entry.risk_text}" if entry.risk_text else ""
    return f"{name}{detail}" + (
        " (it rests on a fact gpuenv's data marks unverified)" if entry.unverified else ""
    )


def _list(title: str, entries: list[Entry], line: Any) -> list[str]:
    if not entries:
        return []
    return ["", f"### {title}", "", *[f"- {line(e)}" for e in entries]]


def _changed_table(entries: list[Entry]) -> list[str]:
    if not entries:
        return []
    rows = [
        "",
        "### Changed",
        "",
        "| package | from | to | why | risk | asked in |",
        "|---|---|---|---|---|---|",
    ]
    for e in entries:
        where = e.origin.where() if e.origin else ""
        rows.append(
            f"| {_cell(e.package)} | {_cell(e.was)} | {_cell(e.now)} | {_cell(e.why)} "
            f"| {_cell(_risk(e))} | {_cell(where)} |"
        )
    return rows


def _where(entry: Entry) -> str:
    return f" ({entry.origin.cite()})" if entry.origin else ""


def render_markdown(report: Report) -> str:
    lines = [
        f"## Reproduction on {report.target}: {report.hardware}",
        "",
        report.summary,
        "",
        "Imported from: " + ", ".join(f"`{f}` ({fmt})" for f, fmt in report.inputs) + ".",
    ]
    lines += _list(
        "Cannot be reproduced",
        report.of(UNREPRODUCIBLE),
        lambda e: f"**{e.package or 'environment'}** {e.was or ''}: {e.why}{_where(e)}",
    )
    lines += _list(
        "Must be built for this target",
        report.of(NEEDS_BUILD),
        lambda e: (
            f"**{e.package}** {e.now or ''}: {e.why}"
            + (f"; nvcc {e.nvcc}" if e.nvcc else "")
            + (f" ({RISK_NAMES[e.risk]} risk: {e.risk_text})" if e.risk >= HIGH else "")
            + _where(e)
        ),
    )
    lines += _changed_table(report.of(CHANGED))
    lines += _list(
        "Not managed by gpuenv",
        report.of(UNMANAGED),
        lambda e: f"**{e.package}**" + (f" {e.was}" if e.was else "") + f": {e.why}{_where(e)}",
    )
    lines += _list(
        "Kept as the paper had it",
        report.of(KEPT),
        lambda e: (
            f"{e.package} {e.now or ''}"
            + (
                f": **{e.why}** ({RISK_NAMES[e.risk]} risk"
                + (f": {e.risk_text}" if e.risk_text else "")
                + ")"
                if e.risk >= MEDIUM
                else (f": {e.why}" if e.was and e.now and e.was != e.now else "")
            )
            + _where(e)
        ),
    )
    lines += _list("Assumptions", report.of(ASSUMPTION), lambda e: f"{e.why}{_where(e)}")
    if report.disagreements:
        lines += ["", "### Where the files disagree", ""]
        lines += [
            f"- {d['subject']}: `{d['winner']}` over "
            + ", ".join(f"`{o}`" for o in d["over"])
            + f": {d['why']}"
            for d in report.disagreements
        ]
    return "\n".join(lines) + "\n"
