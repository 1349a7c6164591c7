"""Merging several files' readings into one environment, with provenance.

Per package, every file's ask is weighed, in this order (``PRECEDENCE``; the first rule
that tells two contradicting asks apart decides, and the report says which):

1. a file named by ``--prefer``;
2. a record of an installed environment (pip freeze, conda env export, conda-lock,
   collect_env) over the project's own exact pins (``==`` in pyproject.toml, setup.py,
   setup.cfg: ``pip install -e .`` of the project needs them) over an environment
   definition (environment.yml, requirements files, Dockerfile, cog.yaml) over the
   project's other metadata (ranges);
3. a stated requirement over what a base image implies;
4. in one file, pip's copy over conda's (pip installed over it);
5. an exact pin over a range;
6. in a git checkout, the file changed more recently;
7. the file read first (the order named, or found: the top level first).

Disagreement is never an error. Versions equal under PEP 440 (``0.6`` and ``0.6.0``)
agree. The winner's specifier is narrowed by every compatible ask. Files for another
platform (a conda-lock file with only ppc64le packages, ``environment-macos.yml``) are
set aside and named when a file for Linux is there.

Markers are evaluated for the machines gpuenv targets (Linux, x86_64) and the paper's
Python; asks whose marker is false are dropped with a note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cmp_to_key

from packaging.markers import InvalidMarker, Marker, UndefinedComparison
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv.importers.images import IMPLIED
from gpuenv.importers.model import (
    DROPPED,
    NAME,
    PYTHON,
    UNREADABLE,
    Ask,
    Authority,
    Fact,
    Note,
    Origin,
    Reading,
)
from gpuenv.names import normalize_name
from gpuenv.plan import KNOWN_PYTHONS


@dataclass(frozen=True)
class Disagreement:
    """Files that asked differently for one package or fact: whose ask won, over whose, and
    the rule that decided it."""

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
    """The one environment merged from every reading: each package's winning ask, the
    constraints, the facts (best first), the notes, and the disagreements between files."""

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


_OVER_UNPINNED = "a versioned requirement beats a git branch or URL that names no version"


def _other_folder(a: Ask, b: Ask) -> bool:
    """Two folders of one repository under one name (a folder's project gpuenv could not
    name): two builds, of which only one can be kept, and the report says which."""
    from gpuenv.importers.requirements import vcs_subdirectory

    return bool(a.url and b.url) and vcs_subdirectory(a.url or "") != vcs_subdirectory(b.url or "")


def _compatible(a: Ask, b: Ask) -> bool:
    if (bool(a.url) != bool(b.url) and not (_pinned_url(a) or _pinned_url(b))) or _other_folder(
        a, b
    ):
        return False  # a release from an index, or whatever a URL serves today
    pa, pb = exact_version(a.specifier), exact_version(b.specifier)
    try:
        if pa is not None and pb is not None:
            return Version(pa.public) == Version(pb.public)
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


_METADATA_PIN = 2.5  # the project's own exact pins: between a definition and a record


_RULE_PIP_OVER_CONDA = 3  # the index of rule 4 in _Merger._criteria


class _Merger:
    def __init__(
        self,
        readings: Iterable[Reading],
        prefer: frozenset[str] = frozenset(),
        recency: Callable[[str], float | None] | None = None,
    ) -> None:
        self.readings = tuple(readings)
        self.by_file = {r.file: r for r in self.readings}
        self.order = {r.file: i for i, r in enumerate(self.readings)}
        self.prefer = prefer
        self.recency = recency
        self._recent: dict[str, float | None] = {}
        self.disagreements: list[Disagreement] = []
        self.notes: list[Note] = [n for r in self.readings for n in r.notes]

    def _weight(self, ask: Ask) -> float:
        authority = _authority_of(ask, self.by_file)
        if authority == Authority.METADATA and exact_version(ask.specifier) is not None:
            return _METADATA_PIN
        return float(authority)

    def _criteria(self, ask: Ask) -> tuple[tuple[float, str], ...]:
        """(key, why when it decides) for rules 1-5 of ``PRECEDENCE``: lower keys win."""
        file = ask.origin.file
        weight = self._weight(ask)
        exact = exact_version(ask.specifier) is not None or _pinned_url(ask)
        return (
            (float(file not in self.prefer), f"--prefer names {file}"),
            (-weight, f"{file} is {_weight_text(weight)}"),
            (float(ask.manager == "image"), "what is installed replaces the base image's copy"),
            (float(ask.manager == "conda"), "pip installed its copy over conda's"),
            (float(not exact), "an exact pin beats a range"),
        )

    def _ties(self, ask: Ask) -> tuple[tuple[float, str], ...]:
        """Rules 6 and 7, asked only between contradicting asks that rules 1-5 tie."""
        file = ask.origin.file
        if file not in self._recent:
            self._recent[file] = self.recency(file) if self.recency else None
        when = self._recent[file]
        return (
            (-(when or 0.0), f"{file} was changed more recently (git)"),
            (float(self.order.get(file, len(self.order))), f"{file} was read first"),
        )

    def compare(self, a: Ask, b: Ask) -> int:
        ka, kb = self.rank(a, b), self.rank(b, a)
        if ka != kb:
            return -1 if ka < kb else 1
        if _compatible(a, b):
            return 0
        ta, tb = [k for k, _ in self._ties(a)], [k for k, _ in self._ties(b)]
        return -1 if ta < tb else (1 if ta > tb else 0)

    def rank(self, ask: Ask, other: Ask | None = None) -> tuple[float, ...]:
        """``ask``'s keys against ``other``: rule 4 (pip's copy over conda's) only
        between two asks of one file, as ``PRECEDENCE`` says (nerfstudio's Dockerfile
        torch won over pixi.toml's "because pip installed its copy over conda's")."""
        keys = [key for key, _ in self._criteria(ask)]
        if other is not None and other.origin.file != ask.origin.file:
            keys[_RULE_PIP_OVER_CONDA] = 0.0
        return tuple(keys)

    def why_won(self, winner: Ask, loser: Ask) -> str:
        """Why ``winner`` beats a contradicting ``loser``: the first rule that tells them
        apart (the order ``compare`` sorts by)."""
        mine = list(self._criteria(winner) + self._ties(winner))
        theirs = list(self._criteria(loser) + self._ties(loser))
        if winner.origin.file != loser.origin.file:  # rule 4 is for one file's asks
            rule = _RULE_PIP_OVER_CONDA
            mine[rule], theirs[rule] = (0.0, mine[rule][1]), (0.0, theirs[rule][1])
        for (key, why), (other, _) in zip(mine, theirs, strict=True):
            if key < other:
                if why.startswith(f"{winner.origin.file} is "):
                    return f"{why}; {loser.origin.file} is {_weight_text(self._weight(loser))}"
                return why
            if key > other:
                break
        return "both carry the same weight: the first one read wins"

    def resolve(self, name: str, asks: list[Ask]) -> Resolved:
        ordered = sorted(asks, key=cmp_to_key(self.compare))
        winner = ordered[0]
        if winner.url and not _pinned_url(winner):
            # A git branch (or a URL naming no version) has moved since the paper: a
            # release another file pins exactly says more, and is kept.
            pinned = next((a for a in ordered if not a.url and a.specifier), None)
            if pinned is not None:
                self.disagreements.append(
                    Disagreement(
                        name,
                        pinned.origin,
                        (winner.origin,),
                        _OVER_UNPINNED,
                    )
                )
                ordered = [pinned, *(a for a in ordered if a is not pinned and a is not winner)]
                winner = ordered[0]
        specifier, losers, reasons = winner.specifier, [], []
        extras = list(winner.extras)
        for other in ordered[1:]:
            if _compatible(winner, other):
                specifier = _narrow(specifier, other.specifier)
                # `black` and `black[jupyter]` in one file: black with its extra (the
                # extra was lost with the second line)
                extras += [e for e in other.extras if e not in extras]
                continue
            losers.append(other.origin)
            if _other_folder(winner, other):
                from gpuenv._redact import redact_url

                url = redact_url(other.url or "")
                reasons.append(
                    "another folder of the same repository builds under this name, and gpuenv "
                    "does not know the project it builds: after `gpuenv install`, `gpuenv run "
                    f"-- pip install --no-build-isolation '{url}'` builds it"
                )
                continue
            reasons.append(
                _OVER_UNPINNED
                if other.url and not winner.url and not _pinned_url(other)
                else self.why_won(winner, other)
            )
        if losers:
            self.disagreements.append(
                Disagreement(name, winner.origin, tuple(losers), "; ".join(dict.fromkeys(reasons)))
            )
        build = next((a.build for a in ordered if a.build), None)
        pinned_by = _pinned_by(winner, specifier, ordered[1:])
        if tuple(extras) != winner.extras or pinned_by is not None:
            # stylegan3's bare `imageio` (Dockerfile) narrowed to ==2.9.0 by its
            # environment.yml was cited as the Dockerfile's line: the pin's line is cited
            origin = pinned_by.origin if pinned_by is not None else winner.origin
            winner = replace(winner, extras=tuple(extras), origin=origin)
            ordered = [winner, *ordered[1:]]
        return Resolved(name, winner, specifier, build, tuple(ordered))

    def fact_rank(self, fact: Fact) -> tuple[int, int, int, int]:
        """A file ``--prefer`` names first, then exact statements (a range says what is
        accepted, not what ran), then what the files state outright over what an image
        implies, then authority."""
        reading = self.by_file.get(fact.origin.file)
        authority = int(reading.authority) if reading else 0
        ranged = int(any(c in fact.value for c in "<>=!~^,"))
        preferred = int(fact.origin.file not in self.prefer)
        return (preferred, ranged, int(_implied(fact)), -authority)

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
        losers = [f for f in facts[1:] if _fact_differs(key, best.value, f.value)]
        if losers:
            why = self.fact_why(best, losers)
            self.disagreements.append(
                Disagreement(key, best.origin, tuple(f.origin for f in losers), why)
            )

    def fact_why(self, best: Fact, losers: list[Fact]) -> str:
        """The rule that put ``best`` first, as it was applied: where nothing of
        ``fact_rank`` tells them apart, the order they were read in did (HunyuanVideo's
        README installs ``pytorch-cuda=11.8`` on one line and ``=12.4`` two lines below:
        "the most authoritative, most specific statement" explained nothing)."""
        if best.origin.file in self.prefer:
            return f"--prefer names {best.origin.file}"
        if all(self.fact_rank(f) == self.fact_rank(best) for f in losers):
            if all(f.origin.file == best.origin.file for f in losers):
                above = all((f.origin.line or 0) > (best.origin.line or 0) for f in losers)
                return (
                    f"equally specific lines of {best.origin.file}: the "
                    + ("first in the file" if above else "one read first")
                    + " is taken"
                )
            return "equally specific statements of equal authority: the file read first is taken"
        if all(_implied(f) for f in losers) and not _implied(best):
            return "what the files state outright beats what a base image implies"
        return "the most authoritative, most specific statement wins"


def _pinned_url(ask: Ask) -> bool:
    """A URL that names one version: a git commit, or a file with a version."""
    if not ask.url:
        return False
    if ask.url.startswith(("git+", "hg+", "svn+", "bzr+")):
        import re

        ref = re.search(r"@([^#@/]+)(#|$)", ask.url.split("://", 1)[-1])
        return bool(ref and re.fullmatch(r"[0-9a-f]{7,40}", ref.group(1)))
    return exact_version(ask.specifier) is not None


def _weight_text(weight: float) -> str:
    if weight == _METADATA_PIN:
        return "the project's own exact pin (`pip install -e .` needs it)"
    return Authority(int(weight)).describe()


_ROCM = "AMD GPUs (ROCm)"
_INTEL = "Intel GPUs (XPU)"
_ACCELERATORS = frozenset({_ROCM, _INTEL})
# Words in a file's name that say it is for another platform than Linux.
_OTHER_PLATFORMS = {
    "osx": "macOS",
    "macos": "macOS",
    "mac": "macOS",
    "darwin": "macOS",
    "m1": "macOS",
    "apple": "macOS",
    "win": "Windows",
    "win64": "Windows",
    "windows": "Windows",
    "ppc64le": "ppc64le",
    "ppc": "ppc64le",
    "s390x": "s390x",
    # another vendor's GPUs: requirements_linux_rocm.txt, requirements_ipex_xpu.txt
    "rocm": _ROCM,
    "ipex": _INTEL,
    "xpu": _INTEL,
    "directml": "DirectML (Windows)",
}


# Words naming the other Linux machine: an Arm file beside x86_64 ones (yolov5's
# Dockerfile-arm64) on an x86_64 target, and the other way round.
_OTHER_MACHINE = {
    "x86_64": ({"arm64", "aarch64"}, "Linux on Arm (aarch64)"),
    "aarch64": ({"amd64", "x86", "x86_64"}, "Linux on x86_64"),
}


def other_platform(reading: Reading, machine: str = "x86_64") -> str | None:
    """The platform a file is for, when it is not Linux on ``machine`` (the target's)."""
    if reading.platform is not None:
        return (
            None
            if reading.platform.startswith("linux-")
            and not reading.platform.endswith(("ppc64le", "s390x"))
            else reading.platform
        )
    import re

    stem = reading.file.rsplit("/", 1)[-1].lower()
    others, other_machine = _OTHER_MACHINE.get(machine, (set(), ""))
    for word in re.split(r"[^a-z0-9]+", stem.replace("x86_64", "x86")):
        # a word with its release (FastVideo's docker/rocm7_1.Dockerfile, win10) too
        known = word if word in _OTHER_PLATFORMS else word.rstrip("0123456789")
        if known in _OTHER_PLATFORMS:
            return _OTHER_PLATFORMS[known]
        if word in others:
            return other_machine
    return None


def _implied(fact: Fact) -> bool:
    return bool(fact.note and fact.note.startswith(IMPLIED))


def _fact_differs(key: str, a: str, b: str) -> bool:
    if key != PYTHON:
        return a != b
    short = [".".join(v.split(".")[:2]) for v in (a, b)]
    if any(c in b for c in "<>=!~^,"):
        try:
            if not a[:1].isdigit():
                # two ranges: the same one twice agrees (fairseq2's setup.py and
                # native/python/setup.py both say python_requires='>=3.10')
                return SpecifierSet(a) != SpecifierSet(b)
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


# Readings that name the repository's own project: its name in them is the project itself.
_PROJECT_KINDS = frozenset({"pyproject", "setup.py", "setup.cfg"})


def own_names(readings: Iterable[Reading]) -> dict[str, str]:
    """The repository's own project names (as pyproject.toml, setup.py or setup.cfg
    name them), each with why a requirement of it is not a dependency. ``pip install
    fschat`` in FastChat's Dockerfile and ``flux[gradio]`` in flux's ``all`` extra name
    the project itself: as a pip dependency it would install the published copy (or an
    unrelated project that has the name on the index) beside the checkout."""
    found: dict[str, str] = {}
    for reading in readings:
        if reading.format not in _PROJECT_KINDS:
            continue
        for fact in reading.facts:
            if fact.key == NAME and fact.value:
                found.setdefault(
                    normalize_name(fact.value),
                    f"the project itself ({fact.origin.cite()} names it): not a dependency; "
                    "its extras' requirements are read from the file that defines them, "
                    "and `gpuenv run -- pip install --no-deps -e .` installs the project",
                )
    return found


def _pinned_by(winner: Ask, specifier: str, others: list[Ask]) -> Ask | None:
    """The ask whose exact pin the merged ``specifier`` is, when the winner itself pins
    nothing exact (a bare name narrowed by another file's ``==``)."""
    exact = exact_version(specifier)
    if exact is None or exact_version(winner.specifier) is not None:
        return None
    return next((a for a in others if exact_version(a.specifier) == exact), None)


def _names_its_repository(ask: Ask) -> bool:
    """A git URL of a repository named as the project (detectron2's DensePose project
    requires ``detectron2@git+https://github.com/facebookresearch/detectron2.git``, the
    checkout being imported): the project itself, not a second copy built from GitHub.
    A URL of another name (a fork's, an archive's) stays a dependency."""
    from gpuenv.importers.requirements import git_repository

    url = ask.url or ""
    if not url.startswith(("git+", "hg+")):
        return False
    try:
        repository = git_repository(url)
    except ValueError:
        return False
    return normalize_name(repository.rsplit("/", 1)[-1]) == ask.name


def set_aside(
    readings: Iterable[Reading], machine: str = "x86_64"
) -> tuple[list[Reading], list[Note]]:
    """The readings to merge, and a note for each file set aside as another platform's
    (kept when every file is another platform's: then there is nothing else to read)."""
    readings = list(readings)
    linux = [r for r in readings if other_platform(r, machine) is None]
    if not linux:
        return readings, []
    notes = []
    for reading in readings:
        platform = other_platform(reading, machine)
        if platform is not None:
            notes.append(
                Note(
                    DROPPED,
                    f"{reading.file} set aside: it is for {platform}, "
                    + ("not NVIDIA GPUs or a CPU" if platform in _ACCELERATORS else "not Linux"),
                    Origin(reading.file, None, ""),
                )
            )
    return linux, notes


def merge(
    readings: Iterable[Reading],
    *,
    prefer: Iterable[str] = (),
    recency: Callable[[str], float | None] | None = None,
    machine: str = "x86_64",
) -> Merged:
    """One environment from every reading. Disagreements are decided by ``PRECEDENCE``
    (``prefer``: display paths that win; ``recency``: a display path's last commit time,
    None when unknown) and listed; nothing here is an error. Files for another platform
    than Linux on ``machine`` (the target's) are set aside."""
    kept, aside = set_aside(readings, machine)
    merger = _Merger(kept, frozenset(prefer), recency)
    merger.notes.extend(aside)
    python = paper_python(merger.readings)
    environment = marker_environment(python)
    own = own_names(merger.readings)
    grouped: dict[str, list[Ask]] = {}
    constraints: dict[str, list[Ask]] = {}
    for reading in merger.readings:
        for ask in reading.asks:
            if ask.name in own and (not ask.url or _names_its_repository(ask)):
                merger.notes.append(
                    Note(DROPPED, f"{ask.requirement_text()}: {own[ask.name]}", ask.origin)
                )
                continue
            if not _valid_specifier(ask):
                merger.notes.append(
                    Note(
                        UNREADABLE,
                        f"not read: {ask.origin.text}: {ask.specifier!r} is not a version "
                        "or PEP 440 specifier",
                        ask.origin,
                    )
                )
                continue
            if not _applies(ask, environment):
                # a platform marker is false whatever the Python (litgpt's
                # sys_platform=='darwin' was said false "with Python 3.10", the Python
                # assumed for markers, though 3.13 was chosen)
                anywhere = not any(_applies(ask, marker_environment(p)) for p in KNOWN_PYTHONS)
                merger.notes.append(
                    Note(
                        DROPPED,
                        f"{ask.origin.text}: its marker is false on Linux x86_64"
                        + ("" if anywhere else f" with Python {python}"),
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
    return Merged(
        readings=merger.readings,
        packages=packages,
        constraints={k: tuple(v) for k, v in constraints.items()},
        facts=facts,
        notes=tuple(merger.notes),
        disagreements=tuple(merger.disagreements),
    )
