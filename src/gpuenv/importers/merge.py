"""Merging several files' readings into one environment, with provenance.

Per package, every file's ask is weighed: a record of an installed environment beats an
environment definition, which beats package metadata (``Authority``); within one
authority, a stated requirement beats what a base image implies, and in one file pip's
copy beats conda's (pip installed over it). The winner's specifier is narrowed by every
compatible ask. Asks that cannot both hold are either decided by those rules (and
reported as a ``Disagreement``: which file won and why) or, when nothing ranks one above
the other, an error (exit 2) naming both files and lines.

Markers are evaluated for the machines gpuenv targets (Linux, x86_64) and the paper's
Python; asks whose marker is false are dropped with a note.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from packaging.markers import InvalidMarker, Marker, UndefinedComparison
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv.errors import ForeignFileError, SpecProblem
from gpuenv.importers.images import IMPLIED
from gpuenv.importers.model import DROPPED, PYTHON, Ask, Authority, Fact, Note, Origin, Reading


@dataclass(frozen=True)
class Disagreement:
    subject: str  # a package name, or a fact key ("python", "torch-build")
    winner: Origin
    losers: tuple[Origin, ...]
    why: str

    def to_json(self) -> dict[str, object]:
        return {
            "subject": self.subject,
            "winner": self.winner.cite(),
            "over": [o.cite() for o in self.losers],
            "why": self.why,
        }


@dataclass(frozen=True)
class Resolved:
    """One package after merging: the winning ask and what the others added."""

    name: str
    ask: Ask
    specifier: str  # the winner's, narrowed by every compatible ask
    build: str | None
    asks: tuple[Ask, ...]  # every ask, winner first

    @property
    def exact(self) -> Version | None:
        return exact_version(self.specifier)


@dataclass(frozen=True)
class Merged:
    readings: tuple[Reading, ...]
    packages: dict[str, Resolved]
    constraints: dict[str, tuple[Ask, ...]]
    facts: dict[str, tuple[Fact, ...]]  # best first
    notes: tuple[Note, ...]
    disagreements: tuple[Disagreement, ...]

    def fact(self, key: str) -> Fact | None:
        found = self.facts.get(key)
        return found[0] if found else None


def exact_version(specifier: str) -> Version | None:
    """The one version an ``==X`` (or ``===X``) specifier allows, else None."""
    text = specifier.strip()
    if not text.startswith("==") or "," in text or text.endswith(".*"):
        return None
    try:
        return Version(text.lstrip("="))
    except InvalidVersion:
        return None


def _authority_of(ask: Ask, readings: dict[str, Reading]) -> Authority:
    return (
        readings[ask.origin.file].authority if ask.origin.file in readings else Authority.METADATA
    )


def _compatible(a: Ask, b: Ask) -> bool:
    pa, pb = exact_version(a.specifier), exact_version(b.specifier)
    try:
        if pa is not None and pb is not None:
            return pa.public == pb.public
        if pa is not None:
            return SpecifierSet(b.specifier).contains(pa, prereleases=True)
        if pb is not None:
            return SpecifierSet(a.specifier).contains(pb, prereleases=True)
    except InvalidSpecifier:
        return True
    return True


def _narrow(specifier: str, other: str) -> str:
    if not other or other == specifier:
        return specifier
    if exact_version(specifier) is not None:
        return specifier
    try:
        return str(SpecifierSet(specifier) & SpecifierSet(other))
    except InvalidSpecifier:
        return specifier


class _Merger:
    def __init__(self, readings: Iterable[Reading]) -> None:
        self.readings = tuple(readings)
        self.by_file = {r.file: r for r in self.readings}
        self.disagreements: list[Disagreement] = []
        self.problems: list[SpecProblem] = []
        self.notes: list[Note] = [n for r in self.readings for n in r.notes]

    def rank(self, ask: Ask) -> tuple[int, int, int, int]:
        return (
            -int(_authority_of(ask, self.by_file)),
            int(ask.manager == "image"),
            int(ask.manager == "conda"),  # pip installs after conda, over it
            int(exact_version(ask.specifier) is None and ask.url is None),
        )

    def why_won(self, winner: Ask, loser: Ask) -> str | None:
        """Why ``winner`` beats a contradicting ``loser``; None when nothing ranks it."""
        a, b = _authority_of(winner, self.by_file), _authority_of(loser, self.by_file)
        if a > b:
            return f"{winner.origin.file} is {a.describe()}; {loser.origin.file} is {b.describe()}"
        if loser.manager == "image" and winner.manager != "image":
            return "the base image's copy is replaced by what is installed on top of it"
        if winner.origin.file == loser.origin.file and {winner.manager, loser.manager} == {
            "pip",
            "conda",
        }:
            return "pip installed its copy over conda's"
        return None

    def resolve(self, name: str, asks: list[Ask]) -> Resolved:
        ordered = sorted(asks, key=self.rank)
        winner = ordered[0]
        specifier, losers, reasons = winner.specifier, [], []
        for other in ordered[1:]:
            if _compatible(winner, other):
                specifier = _narrow(specifier, other.specifier)
                continue
            why = self.why_won(winner, other)
            if why is None:
                self.problems.append(
                    SpecProblem(
                        other.origin.file,
                        other.origin.line,
                        name,
                        f"{other.origin.text!r} contradicts {winner.origin.cite()!r}",
                        "both files carry the same weight: edit one, or import only one of them",
                    )
                )
                continue
            losers.append(other.origin)
            reasons.append(why)
        if losers:
            self.disagreements.append(
                Disagreement(name, winner.origin, tuple(losers), "; ".join(dict.fromkeys(reasons)))
            )
        build = next((a.build for a in ordered if a.build), None)
        return Resolved(name, winner, specifier, build, tuple(ordered))

    def fact_rank(self, fact: Fact) -> tuple[int, int, int]:
        """Exact statements first (a range says what is accepted, not what ran), then
        what the files state outright over what an image implies, then authority."""
        reading = self.by_file.get(fact.origin.file)
        authority = int(reading.authority) if reading else 0
        ranged = int(any(c in fact.value for c in "<>=!~^,"))
        return (ranged, int(_implied(fact)), -authority)

    def facts(self) -> dict[str, tuple[Fact, ...]]:
        grouped: dict[str, list[Fact]] = {}
        for reading in self.readings:
            for fact in reading.facts:
                grouped.setdefault(fact.key, []).append(fact)
        ordered = {key: tuple(sorted(found, key=self.fact_rank)) for key, found in grouped.items()}
        for key in (PYTHON, "torch-build"):
            self.fact_disagreement(key, ordered.get(key, ()))
        return ordered

    def fact_disagreement(self, key: str, facts: tuple[Fact, ...]) -> None:
        if len(facts) < 2:
            return
        best = facts[0]
        losers = tuple(f.origin for f in facts[1:] if _fact_differs(key, best.value, f.value))
        if losers:
            implied = [_implied(f) for f in facts[1:] if f.origin in losers]
            why = (
                "what the files state outright beats what a base image implies"
                if all(implied) and not _implied(best)
                else "the most authoritative, most specific statement wins"
            )
            self.disagreements.append(Disagreement(key, best.origin, losers, why))


def _implied(fact: Fact) -> bool:
    return bool(fact.note and fact.note.startswith(IMPLIED))


def _fact_differs(key: str, a: str, b: str) -> bool:
    if key != PYTHON:
        return a != b
    short = [".".join(v.split(".")[:2]) for v in (a, b)]
    if any(c in b for c in "<>=!~^,"):
        try:
            return not SpecifierSet(b).contains(a if a[0].isdigit() else "0")
        except InvalidSpecifier:
            return False
    return short[0] != short[1]


def marker_environment(python: str) -> dict[str, str]:
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "os_name": "posix",
        "platform_machine": "x86_64",
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": f"{python}.0",
        "python_version": python,
        "sys_platform": "linux",
        "extra": "",
    }


def _applies(ask: Ask, environment: dict[str, str]) -> bool:
    if not ask.marker:
        return True
    try:
        return Marker(ask.marker).evaluate(environment)
    except (InvalidMarker, UndefinedComparison, ValueError):
        return True


def _valid_specifier(ask: Ask) -> bool:
    try:
        SpecifierSet(ask.specifier)
    except InvalidSpecifier:
        return False
    return True


def paper_python(readings: Iterable[Reading]) -> str:
    """The Python the files name (major.minor), for markers; 3.10 when none does."""
    for reading in sorted(readings, key=lambda r: -int(r.authority)):
        for fact in reading.facts:
            if fact.key == PYTHON and fact.value[:1].isdigit():
                return ".".join(fact.value.split(".")[:2])
    return "3.10"


def merge(readings: Iterable[Reading]) -> Merged:
    """One environment from every reading; ``ForeignFileError`` on contradictions that
    no rule decides, listing each with both files and lines."""
    merger = _Merger(readings)
    python = paper_python(merger.readings)
    environment = marker_environment(python)
    grouped: dict[str, list[Ask]] = {}
    constraints: dict[str, list[Ask]] = {}
    for reading in merger.readings:
        for ask in reading.asks:
            if not _valid_specifier(ask):
                merger.problems.append(
                    SpecProblem(
                        ask.origin.file,
                        ask.origin.line,
                        ask.name,
                        f"{ask.specifier!r} is not a version or PEP 440 specifier",
                    )
                )
                continue
            if not _applies(ask, environment):
                merger.notes.append(
                    Note(
                        DROPPED,
                        f"{ask.origin.text}: its marker is false on Linux x86_64 "
                        f"with Python {python}",
                        ask.origin,
                    )
                )
                continue
            target = constraints if ask.group == "constraints" else grouped
            target.setdefault(ask.name, []).append(ask)
    packages = {name: merger.resolve(name, asks) for name, asks in grouped.items()}
    for name, found in constraints.items():
        if name in packages:
            resolved = packages[name]
            narrowed = resolved.specifier
            for ask in found:
                narrowed = _narrow(narrowed, ask.specifier)
            packages[name] = replace(resolved, specifier=narrowed)
    facts = merger.facts()
    if merger.problems:
        raise ForeignFileError(merger.problems, hint="the files contradict each other")
    return Merged(
        readings=merger.readings,
        packages=packages,
        constraints={k: tuple(v) for k, v in constraints.items()},
        facts=facts,
        notes=tuple(merger.notes),
        disagreements=tuple(merger.disagreements),
    )
