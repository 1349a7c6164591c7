"""Builds the torch index serves that the knowledge base lacks, as ``gpuenv lock`` last
saw them (``gpuenv.lock.index_builds``): added to the releases the data knows, marked
"(seen on the index, not in the knowledge base)".

A seen build's arch list is not on the index page: it is taken from the same build tag of
the nearest release the data has for the platform (and the lock reads the real one from
the wheel, as for every build). A tag no release of the platform has is left out (its
arch coverage cannot be judged). Releases the data does not know at all are not added:
``plan`` names those as a torch newer than this gpuenv's knowledge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpuenv.knowledge import KnowledgeBase, Provenance, TorchBuild, TorchRelease
from gpuenv.versions import CudaVersion, VersionFormatError

Seen = Mapping[str, Mapping[str, Mapping[str, list[str]]]]


def _python_range(pythons: list[str]) -> SpecifierSet | None:
    return _range(tuple(pythons))


@lru_cache(maxsize=256)
def _range(pythons: tuple[str, ...]) -> SpecifierSet | None:
    minors = sorted(int(p.split(".")[1]) for p in pythons if p.startswith("3."))
    return SpecifierSet(f">=3.{minors[0]},<3.{minors[-1] + 1}") if minors else None


# (tag, platform) -> (minor index, patch, build) of every data build
Templates = Mapping[tuple[str, str], list[tuple[int, int, TorchBuild]]]


def _templates(kb: KnowledgeBase) -> dict[tuple[str, str], list[tuple[int, int, TorchBuild]]]:
    """Every build of the data by (tag, platform), with its release's place."""
    out: dict[tuple[str, str], list[tuple[int, int, TorchBuild]]] = {}
    for release in kb.torch_releases:
        major, minor, micro = (*release.version.release, 0, 0)[:3]
        for build in release.all_builds:
            out.setdefault((build.tag, build.platform), []).append(
                (major * 1000 + minor, micro, build)
            )
    return out


def _template(templates: Templates, version: Version, tag: str, platform: str) -> TorchBuild | None:
    """The same tag's build of the nearest release the data has on ``platform``."""
    candidates = templates.get((tag, platform))
    if not candidates:
        return None
    major, minor = (*version.release, 0)[:2]
    here = major * 1000 + minor
    return min(candidates, key=lambda c: (abs(c[0] - here), -c[1]))[2]


def _seen_build(
    kb: KnowledgeBase,
    templates: Templates,
    release: TorchRelease,
    tag: str,
    platform: str,
    pythons: list[str],
    index: str,
) -> TorchBuild | None:
    template = _template(templates, release.version, tag, platform)
    if template is None:
        return None
    try:
        cuda = None if tag == "cpu" else CudaVersion.from_tag(tag)
    except VersionFormatError:
        return None
    if cuda is not None and kb.cuda(cuda) is None:
        return None  # no driver minimum known for it
    base = template.provenance.where or f"build {tag}"
    return TorchBuild(
        tag=tag,
        cuda=cuda,
        arch=template.arch,
        cudnn=None,
        nccl=None,
        source=f"{index.rstrip('/')}/{tag}/torch/",
        platform=platform,
        python=_python_range(pythons),
        off_matrix=True,
        provenance=Provenance(
            where=f"{index.rstrip('/')}/torch/ ({platform}); arch list assumed from {base}",
            unverified="seen on the index by the last 'gpuenv lock', not in the knowledge base",
            seen=True,
        ),
    )


@lru_cache(maxsize=256)
def _pythons_of(spec: SpecifierSet) -> frozenset[str]:
    from gpuenv.plan._model import KNOWN_PYTHONS

    return frozenset(p for p in KNOWN_PYTHONS if spec.contains(p))


def _widened(release: TorchRelease, seen: Mapping[str, Mapping[str, list[str]]]) -> TorchRelease:
    """``release`` taking the Pythons the index lists for its builds that the data does
    not (each build keeps its own Pythons; PyPI keeps the data's)."""
    from gpuenv.plan._model import KNOWN_PYTHONS

    old = _pythons_of(release.python)
    listed_anywhere = {p for platforms in seen.values() for ps in platforms.values() for p in ps}
    if not (listed_anywhere - old) & set(KNOWN_PYTHONS):
        return release  # the common case: nothing beyond the release's Pythons
    extra: set[str] = set()
    builds = []
    for build in release.all_builds:
        listed = set(seen.get(build.tag, {}).get(build.platform, [])) & set(KNOWN_PYTHONS)
        mine = _pythons_of(release.python_of(build))
        more = listed - mine - old
        extra |= more
        python = _python_range(sorted(mine | more)) if more else release.python_of(build)
        builds.append(replace(build, python=python))
    if not extra:
        return release
    everything = tuple(builds)
    return replace(
        release,
        python=_python_range(sorted(old | extra)) or release.python,
        pypi_python=release.pypi_python or release.python,
        all_builds=everything,
        builds=tuple(b for b in everything if b.platform == release.platform),
        seen_pythons=tuple(sorted(extra)),
    )


def with_seen(kb: KnowledgeBase, seen: Seen, index: str) -> KnowledgeBase:
    """``kb`` with the builds (and Pythons) ``seen`` on ``index`` that its releases lack."""
    if not seen:
        return kb
    releases = []
    changed = False
    templates: dict[tuple[str, str], list[tuple[int, int, TorchBuild]]] = {}
    for release in kb.torch_releases:
        mine = seen.get(str(release.version), {})
        added = []
        have = {(b.tag, b.platform) for b in release.all_builds}
        for tag, platforms in mine.items():
            for platform, pythons in platforms.items():
                if (tag, platform) in have:
                    continue
                if not templates:  # built once, and only when a build is missing
                    templates.update(_templates(kb))
                build = _seen_build(kb, templates, release, tag, platform, pythons, index)
                if build is not None:
                    added.append(build)
        new = _widened(release, mine) if mine else release
        if added:
            everything = tuple(
                sorted((*new.all_builds, *added), key=lambda b: b.cuda or CudaVersion(0, 0))
            )
            new = replace(
                new,
                all_builds=everything,
                builds=tuple(b for b in everything if b.platform == new.platform),
            )
        changed = changed or new is not release
        releases.append(new)
    if not changed:
        return kb
    seen_kb = replace(kb, torch_releases=tuple(releases))
    if "_alias_tokens" in kb.__dict__:  # the GPU names did not change: keep their tokens
        seen_kb.__dict__["_alias_tokens"] = kb.__dict__["_alias_tokens"]
    return seen_kb


def unknown_builds(kb: KnowledgeBase, listed: Seen) -> dict[str, dict[str, dict[str, list[str]]]]:
    """What of ``listed`` (an index's builds) the data lacks, for releases it knows: whole
    builds, and the Pythons of known builds beyond the data's. What ``lock`` keeps for
    ``plan``: small, whatever the index lists."""
    out: dict[str, dict[str, dict[str, list[str]]]] = {}
    for release in kb.torch_releases:
        mine = listed.get(str(release.version))
        if not mine:
            continue
        have = {(b.tag, b.platform): b for b in release.all_builds}
        for tag, platforms in mine.items():
            for platform, pythons in platforms.items():
                build = have.get((tag, platform))
                known = _pythons_of(release.python_of(build)) if build is not None else set()
                extra = [p for p in pythons if p not in known]
                if build is None or extra:
                    slot = out.setdefault(str(release.version), {}).setdefault(tag, {})
                    slot[platform] = list(pythons) if build is None else extra
    return out
