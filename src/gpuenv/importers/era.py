"""The era of a torch range or an unpinned torch, from dates.

A range (``torch>=1.7``) or a bare ``torch`` says nothing of the release the paper ran;
the files' other facts do. Two of them carry dates:

- a nightly (``torch==2.1.0.dev20230415``, or a torchvision/torchaudio nightly beside a
  bare torch) is dated by its ``.devYYYYMMDD``. Its era is *the release it led to* (the
  version its label names: 2.1.0, or the torch paired with torchvision 0.16.0), not the
  release current that day (2.0.0): a paper runs a nightly for something the current
  release lacks, the release it led to has every change the nightly had, and PyTorch
  deprecates before it removes, so that nightly's API still works there;
- an NGC PyTorch container (``nvcr.io/nvidia/pytorch:23.04-py3``) that ``images.toml``
  does not list is dated by its tag: NVIDIA's build in it led to the release its listed
  neighbours' builds led to where they agree (23.02 and 23.05: 2.0.0), else the newest
  torch published by the end of the tag's month between theirs;
- the files' exact pins (``transformers==4.28.1``): when the package index says when
  each was first uploaded (PEP 700 ``upload-time``, ``--check-resolves``), the newest of
  those days is the earliest the files can have been written, and the torch they ran is
  taken as the newest torch published by that day (``torch_dates.toml``): one certainly
  out when the pins were chosen. No grace period: a torch published after the last pin
  may have been missed by the authors and may bring API changes they never met; never a
  newer one, unless the target needs it (its GPU's kernels), and then the report says so.

Pure: the index pages are read by ``importers.wheels`` (bounded, cached), dates compared
here. Without an index (``GPUENV_IMPORT_INDEX=off``) only the nightly dates count.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from gpuenv.importers import wheels as wheel_index
from gpuenv.importers.model import Origin
from gpuenv.knowledge.foreign import ForeignKnowledge
from gpuenv.names import TRIO, normalize_name
from gpuenv.spec._values import pinned_exactly

if TYPE_CHECKING:  # merge reads images, which reads this module
    from gpuenv.importers.merge import Merged

FIRST_NIGHTLY = date(2016, 1, 1)  # before torch's first release: no nightly is older


@dataclass(frozen=True)
class Dated:
    """The earliest day the files can have been written: their newest pin's upload day."""

    day: date
    package: str
    version: Version
    origin: Origin

    def says(self) -> str:
        return (
            f"{self.day.isoformat()}, when {self.package} {self.version} was published "
            f"({self.origin.where()})"
        )


def nightly_day(version: Version) -> date | None:
    """The day of a nightly's ``.devYYYYMMDD`` label; None when it has none, or when it
    is not a day (``dev20231399``), lies before torch existed or in the future."""
    dev = version.dev
    if dev is None or not 10_000_000 <= dev <= 99_999_999:
        return None
    try:
        day = date(dev // 10_000, dev // 100 % 100, dev % 100)
    except ValueError:
        return None
    if day < FIRST_NIGHTLY or day > datetime.now(timezone.utc).date():
        return None
    return day


def nightly_text(
    version: Version,
    led_to: str,
    fk: ForeignKnowledge,
    fits: str = "",
    torch: Version | None = None,
) -> str:
    """Why a nightly stands for ``led_to`` (``fits``: what to add after "the release it
    led to"; ``torch``: the torch release that is, when ``led_to`` is a torchvision or
    torchaudio one): dated when its label carries a real day, with the release current
    then."""
    day = nightly_day(version)
    torch = torch or Version(led_to)
    paired = f", paired with torch {torch}" if str(torch) != led_to else ""
    if day is None:
        bad = f" (its date {version.dev} is no real day)" if version.dev else ""
        return f"{version} is a pre-release{bad}; {led_to} is the release it led to{fits}{paired}"
    current = fk.torch_current_on(day)
    out = fk.torch_published(torch)
    when = f" (published {out.isoformat()})" if out else ""
    named = f"{led_to}{'' if paired else when}"
    text = (
        f"{version} is a nightly of {day.isoformat()}; {named} is the release it led "
        f"to{fits}{paired}{when if paired else ''}"
    )
    if current is not None and current.version < torch:
        text += (
            f": it has every change the nightly had, which torch {current.version}, the "
            f"release current that day ({current.published.isoformat()}), lacks"
        )
    return text


def pins_day(merged: Merged, wheels: wheel_index.WheelIndex | None) -> Dated | None:
    """The newest upload day among the files' exact pins (not torch, torchvision or
    torchaudio: they are what is being dated), as the index says; None without an index
    that answers, or when it gives no dates."""
    if wheels is None or wheels.failure is not None:
        return None
    pins = []
    for name, resolved in merged.packages.items():
        ask = resolved.ask
        exact = resolved.exact
        if name in TRIO or exact is None or ask.url or ask.editable or ask.conda_only:
            continue
        if ask.manager == "image":
            continue
        pins.append((name, exact, ask.origin))
    if not pins:
        return None
    wheels.prefetch(name for name, _, _ in pins)
    best: Dated | None = None
    for name, version, origin in pins:
        day = wheel_index.published(wheels, name, version)
        if day is not None and (best is None or day > best.day):
            best = Dated(day, name, Version(version.public), origin)
    return best


def nightly_led_to(fk: ForeignKnowledge, dated: Dated, specifier: str) -> Version | None:
    """For files that install torch's nightly: the release the nightly of ``dated.day`` led
    to (the first of the next series after the one current that day: patch releases come
    from the release branch, the nightly from main), within ``specifier``; None when it is
    not known yet or the range rules it out."""
    current = fk.torch_current_on(dated.day)
    if current is None:
        return None
    series = (current.version.major, current.version.minor)
    try:
        spec = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None
    after = [
        d.version
        for d in fk.torch_dates
        if (d.version.major, d.version.minor) > series and d.published > dated.day
    ]
    led_to = min(after) if after else None
    return led_to if led_to is not None and led_to in spec else None


def dated_release(
    fk: ForeignKnowledge, dated: Dated, specifier: str, allowed: str | None = None
) -> tuple[Version, bool] | None:
    """The newest torch published by ``dated.day`` that ``specifier`` (and ``allowed``,
    what the companion pins accept, where it leaves any) allows, and False; when the range
    only has later releases, its oldest and True (the files cannot predate the torch they
    ask for; without a floor, old pins say nothing of a newer torch: None); None when the
    range has none gpuenv has a date for."""
    try:
        spec = SpecifierSet(specifier)
        bound = SpecifierSet(allowed) if allowed else None
    except InvalidSpecifier:
        return None
    inside = [d for d in fk.torch_dates if d.version in spec]
    if bound is not None and any(d.version in bound for d in inside):
        inside = [d for d in inside if d.version in bound]
    by_then = [d.version for d in inside if d.published <= dated.day]
    if by_then:
        return max(by_then), False
    floor = any(s.operator in (">=", ">", "~=") for s in spec)
    return (min(d.version for d in inside), True) if inside and floor else None


def ngc_era(release: str, fk: ForeignKnowledge) -> tuple[Version, str] | None:
    """The torch an NGC PyTorch container gpuenv has no data for stands for (``release``:
    "23.04"), and why; None when its tag is no month, lies in the future or nothing fits."""
    year, month = 2000 + int(release[:2]), int(release[3:])
    if not 1 <= month <= 12 or date(year, month, 1) > datetime.now(timezone.utc).date():
        return None
    end = date(year, month, calendar.monthrange(year, month)[1])
    known = sorted(fk.ngc.values(), key=lambda n: n.release)
    low = next((n for n in reversed(known) if n.release < release), None)
    high = next((n for n in known if n.release > release), None)
    if low is not None and high is not None and low.upstream == high.upstream:
        return low.upstream, (
            f"NGC {low.release} and {high.release}, either side of it, both hold builds "
            f"that led to torch {low.upstream}"
        )
    inside = [
        d
        for d in fk.torch_dates
        if (low is None or d.version >= low.upstream)
        and (high is None or d.version <= high.upstream)
    ]
    if not inside:
        return None
    by_then = [d.version for d in inside if d.published <= end]
    pick = max(by_then) if by_then else min(d.version for d in inside)
    sides = [f"NGC {n.release}'s build led to {n.upstream}" for n in (low, high) if n is not None]
    edge = (
        f"the newest torch published by {end.isoformat()}, the end of its month"
        if by_then
        else f"the oldest torch its neighbours allow ({', '.join(sides)})"
    )
    return pick, f"its tag dates it to {year}-{month:02d}: torch {pick} is {edge}" + (
        f" ({', '.join(sides)})" if by_then and sides else ""
    )


@dataclass(frozen=True)
class Dating:
    """What the resolve check fed back about the day (gpuenv.import_check): ``undated``,
    why the written dependencies are not resolved as of the files' day (they do not
    resolve then); ``split``, what the target's torch requires, which then takes torch's
    own day while the rest keeps the files'."""

    undated: str | None = None
    split: tuple[str, ...] | None = None
    split_built: tuple[str, ...] = ()  # of ``split``, those with only a source archive then
    # A Python the files do not name, on which the resolution builds less from source than
    # on the planner's (AnimateDiff's tokenizers 0.13 has no wheel for 3.12), and why.
    python: tuple[str, str] | None = None


@dataclass(frozen=True)
class AsOf:
    """The day the written pip dependencies resolve as of (``[pip] exclude-newer``): the
    newest of the days each written version range first had a release on the index (an
    exact pin: the day it was published), and the day the target's torch was published
    when that is later."""

    day: date
    package: str  # what dates it: the requirement, or torch
    version: Version  # the release that was published that day
    # the target's torch moved the day later than the files' own: their day, as dated
    files: AsOf | None = None

    @property
    def months_later(self) -> int:
        """How many whole months the target's torch moved the day past the files'."""
        return (self.day - self.files.day).days * 12 // 365 if self.files is not None else 0

    def says(self) -> str:
        if self.files is not None:
            gap = f"{self.months_later} months after" if self.months_later > 1 else "later than"
            return (
                f"{self.day.isoformat()}, when torch {self.version}, the target's, was "
                f"published, {gap} the files' {self.files.day.isoformat()} ({self.files.package} "
                f"{self.files.version})"
            )
        return f"{self.day.isoformat()}, when {self.package} {self.version} was published"


def as_of(
    merged: Merged,
    requirements: list[str],
    torch: Version,
    fk: ForeignKnowledge,
    wheels: wheel_index.WheelIndex,
) -> AsOf | None:
    """The day the written ``requirements`` resolve as of, so that what they leave
    unpinned (their dependencies too) comes as it did when the files were written, not
    as today: the newest of the files' exact pins' publication days (``pins_day``), of
    the first release in each version range the files wrote and of the releases those
    ranges name (``_range_days``), and of the files' own torch pin, raised to the first
    release of each package they name with no version (a floor, never a day of its
    own); never before
    ``torch`` was published (its own dependencies must resolve). A written exact pin
    needs no day (the lock exempts it: it may be a release the import moved to). None
    when the index dates none of them (nothing says how old the files are, and an index
    without upload days would serve nothing under a day), or torch's day is unknown."""
    torch_day = fk.torch_published(torch)
    if torch_day is None or wheels.failure is not None:
        return None
    ranged = _ranged(merged, requirements)
    pinned = pins_day(merged, wheels)
    best = AsOf(pinned.day, pinned.package, pinned.version) if pinned is not None else None
    named: AsOf | None = None  # the newest first release of a package named bare
    wheels.prefetch(r.name for r in ranged)
    for requirement in ranged:
        for day, version in _range_days(requirement, wheels):
            if requirement.specifier and (best is None or day > best.day):
                best = AsOf(day, requirement.name, version)
            elif not requirement.specifier and (named is None or day > named.day):
                named = AsOf(day, requirement.name, version)
    if (best is None and named is None) or wheels.failure is not None:
        return None  # the index gives no upload days: a day would hide all it serves
    files_torch = merged.packages.get("torch")
    if files_torch is not None and files_torch.exact is not None:  # the files' own torch
        pinned_day = fk.torch_published(files_torch.exact)
        if pinned_day is not None and (best is None or pinned_day > best.day):
            best = AsOf(pinned_day, "torch", Version(files_torch.exact.public))
    if best is None:
        # packages named bare are a floor, not a date: a repository of unpinned names
        # (karpathy/nanoGPT) says nothing of when it was written
        return None
    if named is not None and named.day > best.day:
        best = named
    if torch_day > best.day:
        return AsOf(torch_day, "torch", Version(torch.public), files=best)
    return best


def _ranged(merged: Merged, requirements: list[str]) -> list[Requirement]:
    """The written requirements with a version range the files asked for (not an exact
    pin, a URL, the torch family, or a bound of gpuenv's own such as numpy<2), and those
    the files name with no version, as any release: the files cannot predate a package's
    first release (Grounded-Segment-Anything's litellm, first published weeks after its
    newest pin: dated by the pins alone, litellm had no release that day, nothing
    resolved, and every package came as of today)."""
    ranged = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        asked = merged.packages.get(normalize_name(requirement.name))
        if asked is None or requirement.url is not None or requirement.name in TRIO:
            continue
        if all(a.inferred is not None for a in asked.asks):
            continue  # gpuenv asked it from the code (setuptools<82): not the files'
        if not asked.specifier:
            ranged.append(Requirement(requirement.name))  # named: as any release
            continue
        if not requirement.specifier or pinned_exactly(requirement):
            continue  # an exact pin: the lock exempts it, it dates nothing
        if all(a.inferred is not None or not a.specifier for a in asked.asks):
            continue  # gpuenv's own bound from the code (setuptools<82): not the files'
        ranged.append(requirement)
    return ranged


def _range_days(
    requirement: Requirement, wheels: wheel_index.WheelIndex
) -> list[tuple[date, Version]]:
    """When ``requirement``'s range first had a release on the index, and when each
    release it names was published: one existed when the range was written
    (apache-tvm-ffi<=0.1.12 in state-spaces/mamba: 0.1.12 came out in June 2026); "<"
    may name one still to come, so it dates nothing."""
    first: dict[Version, date] = {}  # each release's first upload day
    for f in wheels.files(requirement.name) or []:
        version = Version(f.version.public)
        if f.uploaded is not None and (version not in first or f.uploaded < first[version]):
            first[version] = f.uploaded
    inside = [(day, v) for v, day in first.items() if requirement.specifier.contains(v, True)]
    named = [
        (first[v], v)
        for spec in requirement.specifier
        if spec.operator in (">=", "<=", "~=", ">")
        and "*" not in spec.version
        and (v := Version(spec.version)) in first
    ]
    return [*sorted(inside)[:1], *named]
