"""Old sdists that need an old build tool (``knowledge/data/old_sdists.toml``).

mmcv-full 1.7.0 and albumentations 0.4.3 are built from their sdists, whose setup.py
imports ``pkg_resources``; an isolated build fetches the newest setuptools, which no
longer ships it, and fails. For each written pip requirement pinned (``==``) to such a
version, the reproduction writes a ``[pip.build.<name>]`` table that the lock and the
builds honour as they are:

- ``no-build-isolation = true``: the build runs in the prefix, with what is installed
  there, so the capped tool is the one it imports;
- ``build-requires``: the data's build requirements and the cap of each tool it needs
  (``setuptools<82``), or the repository's own ``setuptools``/``wheel`` pin where that
  satisfies the cap (a pin that does not is reported: both cannot hold);
- ``requires-dist``: the package's dependencies, so that the lock reads them from the
  spec instead of running the setup.py in an isolated environment;
- ``against-torch``, and for packages that compile CUDA ops on a GPU target ``toolkit``
  and the data's variables.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv.importers.report import HIGH, KEPT, MEDIUM, NEEDS_BUILD, Entry
from gpuenv.knowledge.foreign import ForeignKnowledge, OldSdist
from gpuenv.names import normalize_name

# The build tools a repository pins for its own builds, kept in build-requires.
TOOLS = ("setuptools", "wheel")


@dataclass(frozen=True)
class BuildTable:
    """One ``[pip.build.<name>]`` table of the written spec, with its comment."""

    name: str
    values: dict[str, object]
    comment: str


def _pinned(text: str) -> tuple[str, Version | None, Requirement] | None:
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    exact = [s for s in requirement.specifier if s.operator in ("==", "===")]
    version = None
    if len(exact) == 1 and "*" not in exact[0].version:
        try:
            version = Version(exact[0].version)
        except InvalidVersion:
            version = None
    return normalize_name(requirement.name), version, requirement


def _own_pins(lines: list[str]) -> dict[str, Requirement]:
    """The repository's own exact pins of setuptools and wheel, as written."""
    out = {}
    for text in lines:
        found = _pinned(text)
        if found is not None and found[0] in TOOLS and found[1] is not None:
            out[found[0]] = found[2]
    return out


def _tool_requirement(cap: str, own: dict[str, Requirement]) -> tuple[str, str | None]:
    """The build requirement for ``cap`` ("setuptools<82"): the repository's own pin of
    that tool when the cap allows it; else the cap, and why the own pin could not be used."""
    capped = Requirement(cap)
    name = normalize_name(capped.name)
    pin = own.get(name)
    if pin is None:
        return cap, None
    version = next(iter(pin.specifier)).version
    if SpecifierSet(str(capped.specifier)).contains(version, prereleases=True):
        return f"{name}=={version}", None
    return cap, f"the repository pins {name}=={version}"


def _table(
    sdist: OldSdist, fk: ForeignKnowledge, own: dict[str, Requirement], gpu: bool
) -> tuple[dict[str, object], list[str], list[str], bool]:
    """The table's values, the tools' facts (for the entry), conflicts, unverified."""
    requires = list(sdist.build_requires)
    facts, conflicts, unverified = [], [], sdist.fact.unverified
    capped = set()
    for module in sdist.needs:
        tool = fk.build_tools.get(module)
        if tool is None:  # the data test keeps every need known
            continue
        requirement, conflict = _tool_requirement(tool.requirement, own)
        capped.add(normalize_name(Requirement(tool.requirement).name))
        facts.append(f"its setup.py imports {module}, which {tool.removed_in} removed")
        if conflict is not None:
            conflicts.append(f"{conflict}, which has no {module}")
        requires.append(requirement)
        unverified = unverified or tool.fact.unverified
    for name, pin in own.items():  # the repository's wheel pin, kept for the build too
        if name in capped:
            continue
        at = next((i for i, r in enumerate(requires) if normalize_name(r) == name), None)
        if at is not None:
            requires[at] = str(pin)
    values: dict[str, object] = {
        "no-build-isolation": True,
        "against-torch": sdist.against_torch,
    }
    if sdist.toolkit and gpu:
        values["toolkit"] = True
    env = dict(sdist.env) | (dict(sdist.gpu_env) if gpu else {})
    if env:
        values["env"] = env
    values["build-requires"] = requires
    values["requires-dist"] = list(sdist.requires_dist)
    return values, facts, conflicts, unverified


_LOWER, _UPPER = (">=", ">", "~="), ("<", "<=")


def _bounds(specifier: SpecifierSet) -> tuple[Version | None, tuple[Version, bool] | None] | None:
    """The lowest version a specifier allows (inclusive or not, which does not matter
    here) and its upper bound (version, inclusive); None when it has another operator
    (==X.*, ===) whose set this does not follow."""
    lower: Version | None = None
    upper: tuple[Version, bool] | None = None
    for spec in specifier:
        if spec.operator == "!=":
            continue  # it only removes versions
        if spec.operator not in (*_LOWER, *_UPPER) or "*" in spec.version:
            return None
        version = Version(spec.version)
        if spec.operator in _LOWER:
            lower = version if lower is None else max(lower, version)
        if spec.operator == "~=":
            parts = version.release[:-1] or version.release
            ceiling = Version(".".join(map(str, (*parts[:-1], parts[-1] + 1))))
            spec_upper: tuple[Version, bool] = (ceiling, False)
            upper = spec_upper if upper is None else min(upper, spec_upper)
        elif spec.operator in _UPPER:
            this = (version, spec.operator == "<=")
            upper = this if upper is None else min(upper, this)
    return lower, upper


def _covering(fk: ForeignKnowledge, name: str, specifier: SpecifierSet) -> OldSdist | None:
    """The entry whose versions hold every version a range allows (albumentations<0.4.6
    in >=0.4.0,<0.4.6 once its floor is there too): whichever release the lock takes
    needs the old tool. None for an unbounded range or one reaching past the entry."""
    asked = _bounds(specifier)
    if asked is None or asked[1] is None:
        return None
    low, (high, inclusive) = asked[0], asked[1]
    for sdist in fk.old_sdists:
        known = _bounds(sdist.versions)
        if sdist.name != name or known is None:
            continue
        known_low, known_high = known
        if known_low is not None and (low is None or low < known_low):
            continue
        if known_high is not None:
            limit, limit_inclusive = known_high
            if high > limit or (high == limit and inclusive and not limit_inclusive):
                continue
        return sdist
    return None


def _entry_for(entries: list[Entry], name: str) -> int | None:
    """The report entry of the package a written line installs (a companion moved to
    its successor is reported under its old name, ``now`` = "mmcv 2.1.0")."""
    for i, entry in enumerate(entries):
        if entry.package == name or (entry.now or "").startswith(f"{name} "):
            return i
    return None


def apply(
    pip: list[str], entries: list[Entry], fk: ForeignKnowledge, *, gpu: bool
) -> list[BuildTable]:
    """The build tables for the written pip requirements ``pip``; the entries of the
    packages concerned (in ``entries``, replaced in place) say why and what is built."""
    own = _own_pins(pip)
    tables: list[BuildTable] = []
    for text in pip:
        found = _pinned(text)
        if found is None:
            continue
        name, version, requirement = found
        sdist = (
            fk.old_sdist(name, version)
            if version is not None
            else _covering(fk, name, requirement.specifier)
        )
        if sdist is None or any(t.name == name for t in tables):
            continue
        values, facts, conflicts, unverified = _table(sdist, fk, own, gpu)
        requires = ", ".join(str(r) for r in values["build-requires"])  # type: ignore[attr-defined]
        which = (
            f"{name} {version}" if version is not None else f"every {name}{requirement.specifier}"
        )
        why = (
            f"{which} is built from its sdist, and {'; '.join(facts)}: "
            f"built in the prefix with {requires}"
        )
        tables.append(BuildTable(name, values, why))
        at = _entry_for(entries, name)
        if at is None:
            continue
        entry = entries[at]
        risk, risk_text = max(entry.risk, MEDIUM), entry.risk_text
        if conflicts:
            risk = HIGH
            risk_text = "; ".join(conflicts) + ": the build needs the older one"
        entries[at] = replace(
            entry,
            kind=NEEDS_BUILD if entry.kind == KEPT else entry.kind,
            why=f"{entry.why}; {why}" if entry.kind != KEPT else why,
            now=entry.now or str(version or requirement.specifier),
            risk=risk,
            risk_text=risk_text or "a source build with an old setuptools",
            unverified=entry.unverified or unverified,
        )
    return tables
