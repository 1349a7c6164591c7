"""Choosing the nearest torch reproduction for one target, by asking gpuenv's planner.

There is no second planner here: every candidate is a ``Spec`` handed to
``gpuenv.plan.plan_target``, in the order a careful person would try them:

1. the paper's torch release with the paper's CUDA build, exactly;
2. the same release with another CUDA build (the planner picks the newest that fits);
3. else the oldest torch series after it whose builds fit (within a series, its newest
   patch release first: patch releases only fix bugs), torchvision/torchaudio paired by
   the planner in lock step;
4. else, nearest first, the series before it.

The Python stays the paper's where the candidate release supports it, else the nearest
one it does. What the planner said about each rejected candidate becomes the reason.

On a network that reaches PyPI but not the PyTorch index (``Planning.pypi_only``: the
import found that index unreachable), a GPU target's candidate counts only as PyPI's
own build of a release: the planner is asked for that build's CUDA, and a release whose
PyPI build does not run on the target is refused, saying so. The lock then needs no
torch index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv.errors import NoCompatiblePlan
from gpuenv.knowledge import KnowledgeBase, TorchRelease
from gpuenv.plan import KNOWN_PYTHONS, TargetPlan, plan_target
from gpuenv.spec import Project, Spec, Stack, Target


@dataclass(frozen=True)
class PaperTorch:
    """What the files asked of torch."""

    specifier: str  # "==1.12.1", ">=1.10", "" (any)
    version: Version | None  # the exact release, when one is pinned
    build: str | None  # "cu113", "cpu", None (not stated)
    python: str | None  # the paper's Python as major.minor, or a range, or None
    torchvision: bool  # the paper installs torchvision
    torchaudio: bool
    era: str | None = None  # why ``version`` stands for a range: "torchvision==0.14.1 ..."
    cuda_major: int | None = None  # no build named, but a CUDA major (cuda-version 12.*)


@dataclass(frozen=True)
class TorchBound:
    """A torch range a requirement needs that no file states, learned from the resolve
    check's conflict (rl-baselines3-zoo: the pins dated the files to torch 2.0.1, and
    ``stable-baselines3==2.9.0a2 depends on torch>=2.3,<3.0``)."""

    specifier: str  # ">=2.3,<3.0"
    who: str  # "stable-baselines3==2.9.0a2"
    first: str  # the torch chosen before it, which did not resolve: "2.0.1"


@dataclass(frozen=True)
class Choice:
    """The torch reproduction ``choose`` settled on: the planner's plan, the step of the
    search that found it, and what the planner said against the paper's own release."""

    plan: TargetPlan
    step: str  # "exact", "other-build", "newer", "older", "range", "any"
    rejected: tuple[str, ...]  # what the planner said about the paper's own release
    below: Version | None = None  # a range stopped below this release (an API change)
    allowed_by: str | None = None  # the companion pins whose torch range bounded the choice
    pypi_only: bool = False  # chosen among PyPI's own builds (``Planning.pypi_only``)


# How many releases within a candidate's specifier are planned, at most, looking for one
# whose PyPI build runs (``Planning.pypi_only``): each try is a plan, a few ms.
PYPI_RELEASES_TRIED = 20


@dataclass(frozen=True)
class Planning:
    """How each candidate is put to the planner: the project and the target (name and spec)
    of the ``Spec`` it is planned as, the knowledge base, and the torch index."""

    project: str
    target: str
    target_spec: Target
    kb: KnowledgeBase
    torch_index: str | None = None
    # The PyTorch index cannot be reached from here: only PyPI's own builds are planned.
    pypi_only: bool = False

    def spec(self, torch: str, python: str, cuda: str | None, paper: PaperTorch) -> Spec:
        stack = Stack(
            python=python,
            torch=torch,
            torchvision="*" if paper.torchvision else False,
            torchaudio="*" if paper.torchaudio else False,
            cuda=cuda or "auto",
        )
        return Spec(Project(self.project), stack, {self.target: self.target_spec})

    def attempt(
        self, torch: str, python: str, cuda: str | None, paper: PaperTorch
    ) -> TargetPlan | NoCompatiblePlan:
        """The planner's answer; where no build is asked but a CUDA major is, that
        major's builds first (newest CUDA first), as a named build is tried first."""
        if cuda is None and paper.cuda_major is not None:
            for release in self._of_major(paper.cuda_major):
                found = self._plan(torch, python, release, paper)
                if not isinstance(found, NoCompatiblePlan):
                    return found
        return self._plan(torch, python, cuda, paper)

    def _of_major(self, major: int) -> list[str]:
        """The CUDA releases of ``major`` torch has builds for, newest first."""
        found = {
            build.cuda
            for release in self.kb.torch_releases
            for build in release.builds
            if build.cuda is not None and build.cuda.major == major
        }
        return [str(v) for v in sorted(found, reverse=True)]

    def _plan(
        self, torch: str, python: str, cuda: str | None, paper: PaperTorch
    ) -> TargetPlan | NoCompatiblePlan:
        try:
            plan = plan_target(
                self.target,
                self.spec(torch, python, cuda, paper),
                self.kb,
                torch_index=self.torch_index,
            )
        except NoCompatiblePlan as exc:
            if not self.pypi_only:
                return exc
            return self._pypi_build(torch, python, cuda, paper, elsewhere=exc)
        if not self.pypi_only or plan.pypi_default or plan.hardware.cpu:
            return plan
        return self._pypi_build(torch, python, cuda, paper)

    def _pypi_build(
        self,
        torch: str,
        python: str,
        cuda: str | None,
        paper: PaperTorch,
        elsewhere: NoCompatiblePlan | None = None,
    ) -> TargetPlan | NoCompatiblePlan:
        """``pypi_only``: the newest release within ``torch`` (``PYPI_RELEASES_TRIED`` at
        most) whose PyPI build the planner gives this target, asked for that build's
        CUDA (and only where ``cuda``, when named, is it); else a refusal naming the
        first release's PyPI build and why it does not run here."""
        try:
            wanted = SpecifierSet(torch)
        except InvalidSpecifier:
            wanted = SpecifierSet()
        platform = self.target_spec.platform or "linux-64"
        first: str | None = None
        for release in self.kb.torch_matching(wanted)[:PYPI_RELEASES_TRIED]:
            build = release.on(platform).pypi_cuda_build()
            if build is None or build.cuda is None:  # (cuda: for the type checker)
                continue  # PyPI's build there is the CPU one, or none
            pypi_cuda = str(build.cuda)
            why = f"PyPI's own build of torch {release.version} is {build.tag}"
            candidate = self.spec(f"=={release.version}", python, pypi_cuda, paper)
            try:
                found = plan_target(self.target, candidate, self.kb, torch_index=self.torch_index)
            except NoCompatiblePlan as exc:  # why it does not run here comes first
                reason = reasons(exc)
                first = first or (f"{why}: {reason[0]}" if reason else why)
                continue
            if cuda is not None and pypi_cuda != cuda:
                first = first or f"{why}, not CUDA {cuda}"
                continue
            if found.pypi_default:
                return found
        lines = [f"- {first}"] if first else []
        if elsewhere is None:  # another build would fit, where the index can be reached
            lines.append(
                "- the PyTorch index, which serves torch's other builds, cannot be reached "
                "from here"
            )
        else:  # no build of any kind fits: the index is not what is missing (DETR's 1.5)
            lines += [f"- {reason}" for reason in reasons(elsewhere) if reason not in (first or "")]
        return NoCompatiblePlan(
            f"no torch build PyPI serves fits target '{self.target}' within torch {torch}:\n"
            + "\n".join(lines)
        )


def obstacles(error: NoCompatiblePlan) -> tuple[str, ...]:
    """The planner's "- ..." lines: why nothing fits."""
    lines = [line.removeprefix("- ").strip() for line in error.message.splitlines()[1:]]
    return tuple(re.sub(r"torch ==(\S+)", r"torch \1", line) for line in lines if line)


def reasons(error: NoCompatiblePlan) -> tuple[str, ...]:
    """Why nothing fits: the "- ..." lines, or the one line a refusal of the hardware
    itself is ("driver 450.80.02 cannot drive H100: ..."), without its target."""
    found = obstacles(error)
    if found:
        return found
    headline = error.message.splitlines()[0] if error.message else ""
    return (re.sub(r"^target '[^']*' \(.*?\): ", "", headline),) if headline else ()


def python_for(release: TorchRelease, wanted: str | None) -> str:
    """The paper's Python where ``release`` supports it, else the nearest it does."""
    supported = [p for p in KNOWN_PYTHONS if release.python.contains(p)]
    if not supported:
        return KNOWN_PYTHONS[-1]
    if wanted is None:
        return supported[-1]
    if wanted[:1].isdigit():
        minor = int(wanted.split(".")[1]) if "." in wanted else 0
        return min(supported, key=lambda p: (abs(int(p.split(".")[1]) - minor), -int(p[2:])))
    try:
        spec = SpecifierSet(wanted)
    except InvalidSpecifier:
        return supported[-1]
    inside = [p for p in supported if spec.contains(p)]
    return inside[-1] if inside else supported[-1]


def planner_python(wanted: str | None) -> str:
    """The paper's Python as the planner takes it: an exact version it knows (the
    nearest one, for 3.7), or a range (any: ">=3.8")."""
    if wanted is None:
        return f">={KNOWN_PYTHONS[0]}"
    if not wanted[:1].isdigit():
        return wanted
    if wanted in KNOWN_PYTHONS:
        return wanted
    minor = int(wanted.split(".")[1]) if "." in wanted else 0
    return min(KNOWN_PYTHONS, key=lambda p: abs(int(p.split(".")[1]) - minor))


def pythons_for(release: TorchRelease, wanted: str | None) -> tuple[str, ...]:
    """The Pythons to try with ``release``: the one ``python_for`` picks, then, where the
    paper pins no exact Python, its range for the planner to choose in: the series'
    newest Python may be one the target's build lacks (torch 1.13's CPU wheels stop at
    3.10, its cu117 ones at 3.11), and a free Python must not move a pinned torch."""
    first = python_for(release, wanted)
    if wanted is not None and wanted[:1].isdigit():
        return (first,)
    return (first, planner_python(wanted))


def _series(version: Version) -> tuple[int, int]:
    return (version.major, version.minor)


def _by_series(kb: KnowledgeBase) -> dict[tuple[int, int], list[TorchRelease]]:
    """Releases grouped by series, each newest patch first."""
    grouped: dict[tuple[int, int], list[TorchRelease]] = {}
    for release in kb.torch_releases:  # newest first
        grouped.setdefault(_series(release.version), []).append(release)
    return grouped


def _walk(kb: KnowledgeBase, start: Version) -> Iterator[tuple[str, TorchRelease]]:
    """Candidates after the paper's series (ascending), then before it (descending). A
    release the data lacks inside a series it knows (1.8.2, the LTS release) is nearest to
    that series' own patch releases (1.8.1), older ones included, before another series."""
    grouped = _by_series(kb)
    after = sorted(s for s in grouped if s > _series(start))
    before = sorted((s for s in grouped if s < _series(start)), reverse=True)
    same = [r for r in grouped.get(_series(start), []) if r.version > start]
    for release in sorted(same, key=lambda r: r.version):
        yield "newer", release
    if kb.torch_release(start) is None:
        older = [r for r in grouped.get(_series(start), []) if r.version < start]
        for release in sorted(older, key=lambda r: r.version, reverse=True):
            yield "older", release
    for series in after:
        for release in grouped[series]:
            yield "newer", release
    for series in before:
        for release in grouped[series]:
            yield "older", release


def _cuda_of(build: str | None) -> str | None:
    if build is None or not build.startswith("cu") or not build[2:].isdigit():
        return None
    digits = build[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def _pinned(
    planning: Planning, paper: PaperTorch
) -> tuple[TargetPlan | None, str, tuple[str, ...]]:
    """Steps 1 and 2 for an exact release gpuenv knows."""
    assert paper.version is not None
    release = planning.kb.torch_release(paper.version)
    if release is None:
        return None, "", ()
    pythons = pythons_for(release, paper.python)
    torch = f"=={release.version}"
    rejected: tuple[str, ...] = ()
    cuda = _cuda_of(paper.build)
    if cuda is not None and release.build(paper.build or "") is not None:
        found = _attempt(planning, torch, pythons, cuda, paper)
        if not isinstance(found, NoCompatiblePlan):
            return found, "exact", ()
        rejected = obstacles(found)
    elif paper.build is None and planning.target_spec.platform in (None, "linux-64"):
        # No build named: a bare `pip install torch==X` took PyPI's default build (the
        # report assumes it too), so that build is the paper's where it runs here.
        default = _cuda_of(release.pypi_default)
        kept = _attempt(planning, torch, pythons, default, paper) if default else None
        if kept is not None and not isinstance(kept, NoCompatiblePlan):
            return kept, "exact", ()
    found = _attempt(planning, torch, pythons, None, paper)
    if not isinstance(found, NoCompatiblePlan):
        return found, "exact" if cuda is None else "other-build", rejected
    return None, "", rejected or obstacles(found)


def _attempt(
    planning: Planning, torch: str, pythons: tuple[str, ...], cuda: str | None, paper: PaperTorch
) -> TargetPlan | NoCompatiblePlan:
    """The first plan one of ``pythons`` gives (the first one's refusal when none does)."""
    first: NoCompatiblePlan | None = None
    for python in pythons:
        found = planning.attempt(torch, python, cuda, paper)
        if not isinstance(found, NoCompatiblePlan):
            return found
        first = first or found
    assert first is not None
    return first


def _start_of(paper: PaperTorch, kb: KnowledgeBase) -> Version:
    if paper.version is not None:
        return Version(paper.version.base_version)
    try:
        spec = SpecifierSet(paper.specifier)
    except InvalidSpecifier:
        spec = SpecifierSet()
    matching = [r.version for r in kb.torch_releases if spec.contains(r.version)]
    return max(matching) if matching else kb.torch_releases[-1].version


def _unpinned(planning: Planning, paper: PaperTorch) -> TargetPlan | NoCompatiblePlan:
    """A range or no torch at all: the planner's newest in range, the paper's build first."""
    python = planner_python(paper.python)
    torch = paper.specifier or "*"
    cuda = _cuda_of(paper.build)
    attempt = planning.attempt(torch, python, cuda, paper) if cuda else None
    if attempt is None or isinstance(attempt, NoCompatiblePlan):
        attempt = planning.attempt(torch, python, None, paper)
    return attempt


def choose(
    planning: Planning,
    paper: PaperTorch,
    caps: Sequence[Version] = (),
    allowed: tuple[str, str] | None = None,
) -> Choice:
    """The nearest reproduction the planner accepts; ``NoCompatiblePlan`` when none.
    For a range (or no version), ``allowed`` (a torch specifier the other pins allow, and
    who says so) bounds it first, then each of ``caps`` (ascending: releases whose API
    changes break code written before them) as an upper bound: the newest release that
    fits within the most of them wins."""
    if paper.version is None:
        within = _within(planning, paper, caps, allowed)
        if within is not None:
            return within
    rejected: tuple[str, ...] = ()
    last_error: NoCompatiblePlan | None = None
    if paper.version is not None:
        release = Version(paper.version.base_version)
        found, step, rejected = _pinned(planning, _replace_version(paper, release))
        if found is not None:
            return Choice(found, "release" if paper.version.is_prerelease else step, rejected)
    else:
        attempt = _unpinned(planning, paper)
        if not isinstance(attempt, NoCompatiblePlan):
            return Choice(attempt, "range" if paper.specifier else "any", ())
        rejected, last_error = obstacles(attempt), attempt
    start = _start_of(paper, planning.kb)
    for step, release_found in _walk(planning.kb, start):
        pythons = pythons_for(release_found, paper.python)
        plan = _attempt(planning, f"=={release_found.version}", pythons, None, paper)
        if not isinstance(plan, NoCompatiblePlan):
            return Choice(plan, step, rejected)
        last_error = plan
    if last_error is not None:
        refusal = _refusal(planning, paper, rejected or reasons(last_error))
        # what the planner offers is of the hardware ("install a driver of branch R520
        # or newer"), true of every release: kept
        refusal.alternatives = last_error.alternatives
        raise refusal
    raise NoCompatiblePlan(f"no torch release gpuenv knows fits target '{planning.target}'")


def _refusal(planning: Planning, paper: PaperTorch, reasons: tuple[str, ...]) -> NoCompatiblePlan:
    """Nothing fits: said of what the files ask (the walk's last try, the newest or the
    oldest release, is no answer: RTX 3090s on driver 470 were told of torch 2.15.0 for
    papers that pin 1.7.1)."""
    asked = f"torch {paper.specifier.removeprefix('==')}" if paper.specifier else "any torch"
    lines = "".join(f"\n- {reason}" for reason in reasons)
    return NoCompatiblePlan(
        f"no torch release fits target '{planning.target}': not the files' ({asked}) nor "
        f"any release before or after it that gpuenv knows{':' if lines else ''}{lines}",
        target=planning.target,
    )


def _within(
    planning: Planning,
    paper: PaperTorch,
    caps: Sequence[Version],
    allowed: tuple[str, str] | None,
) -> Choice | None:
    """A range (or no version) bounded first by what the other pins allow, then by each
    cap: the first of those that fits, else None."""
    step = "range" if paper.specifier else "any"
    if allowed is not None:
        bounded = _combined(paper.specifier, allowed[0])
        found = (
            _within(planning, replace(paper, specifier=bounded), caps, None) if bounded else None
        )
        if found is None and bounded:
            plan = _unpinned(planning, replace(paper, specifier=bounded))
            found = None if isinstance(plan, NoCompatiblePlan) else Choice(plan, step, ())
        if found is not None:
            return replace(found, step=step, allowed_by=allowed[1])
    for cap in caps:
        bound = f"{paper.specifier},<{cap}" if paper.specifier else f"<{cap}"
        capped = _unpinned(planning, replace(paper, specifier=bound))
        if not isinstance(capped, NoCompatiblePlan):
            return Choice(capped, step, (), cap)
    return None


def _combined(first: str, second: str) -> str | None:
    """Two specifiers as one (None when they are not specifiers)."""
    try:
        return str(SpecifierSet(",".join(s for s in (first, second) if s)))
    except InvalidSpecifier:
        return None


def _replace_version(paper: PaperTorch, version: Version) -> PaperTorch:
    return replace(paper, version=version, specifier=f"=={version}")


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None
