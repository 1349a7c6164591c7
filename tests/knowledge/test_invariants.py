"""Data-only guards on the shipped knowledge base.

Adding a CUDA release, a GPU or a torch release is a data-only change (docs/dev/style.md R5);
these invariants are what keeps such a change honest. They read the loaded
``KnowledgeBase`` and, where provenance matters, the raw TOML.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Any
from urllib.parse import urlparse

import pytest
from packaging.version import Version

from gpuenv.knowledge import KnowledgeBase, gpu_tokens, knowledge_base
from gpuenv.knowledge._data import DATA_FILES, read_data
from gpuenv.versions import ComputeCapability, CudaVersion


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return knowledge_base()


# --- CUDA ------------------------------------------------------------------------


def test_cuda_versions_are_unique(kb: KnowledgeBase) -> None:
    counts = Counter(c.version for c in kb.cuda_releases)
    assert [v for v, n in counts.items() if n > 1] == []


def test_a_newer_cuda_never_needs_an_older_linux_driver(kb: KnowledgeBase) -> None:
    ordered = sorted(kb.cuda_releases, key=lambda c: c.version)
    for older, newer in itertools.pairwise(ordered):
        assert newer.linux_driver_min >= older.linux_driver_min, (older.version, newer.version)


def test_a_newer_cuda_never_needs_an_older_windows_driver(kb: KnowledgeBase) -> None:
    ordered = [c for c in sorted(kb.cuda_releases, key=lambda c: c.version) if c.windows_driver_min]
    for older, newer in itertools.pairwise(ordered):
        assert newer.windows_driver_min is not None
        assert older.windows_driver_min is not None
        assert newer.windows_driver_min >= older.windows_driver_min, (older.version, newer.version)


def test_cuda_arch_ranges_are_ordered_and_never_move_backwards(kb: KnowledgeBase) -> None:
    ordered = sorted(kb.cuda_releases, key=lambda c: c.version)
    for release in ordered:
        assert release.arch_min is not None and release.arch_max is not None, release.version
        assert release.arch_min <= release.arch_max, release.version
    for older, newer in itertools.pairwise(ordered):
        assert older.arch_min is not None and newer.arch_min is not None
        assert older.arch_max is not None and newer.arch_max is not None
        assert newer.arch_min >= older.arch_min, (older.version, newer.version)
        assert newer.arch_max >= older.arch_max, (older.version, newer.version)


def test_cuda_release_set_is_complete_from_10_2() -> None:
    versions = {c.version for c in knowledge_base().cuda_releases}
    expected = {CudaVersion(9, 2), CudaVersion(10, 1), CudaVersion(10, 2)}  # torch 1.7's builds
    expected |= {CudaVersion(11, m) for m in range(9)}
    expected |= {CudaVersion(12, m) for m in range(10) if m != 7}  # there is no 12.7
    expected |= {CudaVersion(13, m) for m in range(4)}
    assert expected <= versions


def test_toolkit_support_drops_land_on_the_right_majors(kb: KnowledgeBase) -> None:
    def cuda(text: str) -> Any:
        release = kb.cuda(CudaVersion.parse(text))
        assert release is not None
        return release

    kepler, maxwell, turing = (ComputeCapability.parse(t) for t in ("3.5", "5.0", "7.5"))
    assert cuda("11.8").arch_min <= kepler < cuda("12.0").arch_min
    assert cuda("12.9").arch_min <= maxwell < cuda("13.0").arch_min == turing
    assert cuda("11.7").arch_max < ComputeCapability(9, 0) <= cuda("11.8").arch_max
    assert cuda("12.6").arch_max < ComputeCapability(12, 0) <= cuda("12.8").arch_max


def test_every_cuda_major_with_minor_compat_has_a_family_floor(kb: KnowledgeBase) -> None:
    majors = {c.version.major for c in kb.cuda_releases if c.version.major >= 11}
    assert {f.major for f in kb.cuda_families} == majors


def test_family_floor_is_no_higher_than_its_releases(kb: KnowledgeBase) -> None:
    for family in kb.cuda_families:
        members = [c for c in kb.cuda_releases if c.version.major == family.major]
        assert members, family.major
        # CUDA 11.0 GA shipped with an older driver than the 11.x compatibility floor.
        later = [c for c in members if c.version.minor >= 1]
        assert all(family.linux_driver_min <= c.linux_driver_min for c in later), family.major


# --- GPUs --------------------------------------------------------------------------


def test_gpu_names_and_aliases_are_unique_after_normalisation(kb: KnowledgeBase) -> None:
    owners: dict[tuple[str, ...], list[str]] = {}
    for gpu in kb.gpus:
        for spelling in (gpu.name, *gpu.aliases):
            owners.setdefault(gpu_tokens(spelling), []).append(gpu.name)
    clashes = {" ".join(t): names for t, names in owners.items() if len(names) > 1}
    assert clashes == {}


def test_every_gpu_cc_belongs_to_a_listed_architecture(kb: KnowledgeBase) -> None:
    orphans = [g.name for g in kb.gpus if kb.architecture_of(g.cc) is None]
    assert orphans == []


def test_architectures_do_not_share_compute_capabilities(kb: KnowledgeBase) -> None:
    counts = Counter(cc for a in kb.architectures for cc in a.compute_capabilities)
    assert [str(cc) for cc, n in counts.items() if n > 1] == []


def test_every_architecture_has_a_gpu(kb: KnowledgeBase) -> None:
    used = {kb.architecture_of(g.cc) for g in kb.gpus}
    assert {a.name for a in kb.architectures} <= used


def test_reused_model_numbers_have_no_bare_alias(kb: KnowledgeBase) -> None:
    # Four generations sell an "RTX 6000" (and three an "RTX 5000"/"RTX 4000").
    for bare in ("RTX 6000", "RTX 5000", "RTX 4000", "6000"):
        assert kb.find_gpu(bare) is None, bare


# --- torch -------------------------------------------------------------------------


def test_torch_versions_are_unique(kb: KnowledgeBase) -> None:
    counts = Counter(r.version for r in kb.torch_releases)
    assert [str(v) for v, n in counts.items() if n > 1] == []


def test_torch_releases_cover_1_7_through_2_15(kb: KnowledgeBase) -> None:
    minors = {(r.version.major, r.version.minor) for r in kb.torch_releases}
    assert {(1, m) for m in range(7, 14)} | {(2, m) for m in range(16)} <= minors
    assert str(kb.torch_releases[-1].version) == "1.7.0"


def test_series_members_share_the_series_minor() -> None:
    for series in read_data("torch.toml")["series"]:
        for release in series["releases"]:
            version = Version(release["torch"])
            assert f"{version.major}.{version.minor}" == series["minor"], release["torch"]
        names = {r["torch"] for r in series["releases"]}
        for build in series["builds"]:
            assert set(build.get("only") or ()) <= names, (series["minor"], build["tag"])


def test_every_release_has_a_cpu_build(kb: KnowledgeBase) -> None:
    assert [str(r.version) for r in kb.torch_releases if r.build("cpu") is None] == []


def test_build_tags_are_unique_per_release(kb: KnowledgeBase) -> None:
    for release in kb.torch_releases:
        assert len(set(release.tags)) == len(release.tags), release.version


def test_cuda_builds_have_an_arch_list_and_cpu_builds_none(kb: KnowledgeBase) -> None:
    for release in kb.torch_releases:
        for build in release.builds:
            assert bool(build.arch) == (not build.is_cpu), (release.version, build.tag)


def test_arch_lists_are_sorted_without_duplicates(kb: KnowledgeBase) -> None:
    for release in kb.torch_releases:
        for build in release.cuda_builds:
            ccs = [a.cc for a in build.arch]
            assert ccs == sorted(set(ccs)), (release.version, build.tag, build.arch_text)


def test_ptx_is_only_embedded_for_the_newest_arch(kb: KnowledgeBase) -> None:
    for release in kb.torch_releases:
        for build in release.cuda_builds:
            assert not any(a.ptx for a in build.arch[:-1]), (release.version, build.tag)


def test_every_cu_tag_has_a_cuda_release(kb: KnowledgeBase) -> None:
    missing = {
        b.tag for r in kb.torch_releases for b in r.cuda_builds if b.cuda and not kb.cuda(b.cuda)
    }
    assert missing == set()


def test_arch_lists_fit_their_toolkit(kb: KnowledgeBase) -> None:
    for release in kb.torch_releases:
        for build in release.cuda_builds:
            assert build.cuda is not None
            toolkit = kb.cuda(build.cuda)
            assert toolkit is not None and toolkit.arch_min and toolkit.arch_max
            for target in build.arch:
                where = (release.version, build.tag, str(target))
                assert toolkit.arch_min <= target.cc <= toolkit.arch_max, where


def test_pypi_default_names_an_existing_build(kb: KnowledgeBase) -> None:
    for release in kb.torch_releases:
        if release.pypi_default is not None:
            assert release.build(release.pypi_default), (release.version, release.pypi_default)


def test_pypi_default_is_known_up_to_2_14(kb: KnowledgeBase) -> None:
    unknown = [str(r.version) for r in kb.torch_releases if r.pypi_default is None]
    assert all(Version(v) >= Version("2.15") for v in unknown), unknown


def test_pypi_default_never_moves_to_an_older_cuda(kb: KnowledgeBase) -> None:
    known = [r for r in reversed(kb.torch_releases) if r.pypi_default]
    tags = [CudaVersion.from_tag(r.pypi_default or "") for r in known]
    assert tags == sorted(tags)


def test_torchvision_minor_is_torch_minor_plus_15(kb: KnowledgeBase) -> None:
    for release in kb.torch_releases:
        vision = release.torchvision
        assert vision is not None, release.version
        if release.version.major == 2 and release.version < Version("2.15"):
            assert (vision.major, vision.minor) == (0, release.version.minor + 15), release.version
            # 2.0.0 shipped with torchvision 0.15.1 (0.15.0 was never published)
            shift = 1 if release.version.minor == 0 else 0
            assert vision.micro == release.version.micro + shift, release.version
        elif release.version.major == 2:
            # No torchvision 0.30: the stable-ABI 0.29.x (torch>=2.14) installs beside 2.15.
            assert (vision.major, vision.minor) < (0, release.version.minor + 15)


def test_torchaudio_follows_torch_until_2_11_then_pairs_its_stable_abi_release(
    kb: KnowledgeBase,
) -> None:
    for release in kb.torch_releases:
        audio, version = release.torchaudio, release.version
        if version >= Version("2.12"):
            assert audio == Version("2.11.1"), version
        elif version >= Version("2.1"):
            assert audio == version, version
        else:
            assert audio is not None, version


def test_companion_versions_never_move_backwards(kb: KnowledgeBase) -> None:
    oldest_first = list(reversed(kb.torch_releases))
    for field in ("torchvision", "torchaudio"):
        values = [getattr(r, field) for r in oldest_first if getattr(r, field)]
        assert values == sorted(values), field


def test_python_ranges_never_drop_a_newer_python(kb: KnowledgeBase) -> None:
    probes = [f"3.{m}" for m in range(7, 16)]
    oldest_first = list(reversed(kb.torch_releases))
    for older, newer in itertools.pairwise(oldest_first):
        newest_old = max((p for p in probes if older.python.contains(p)), key=Version)
        newest_new = max((p for p in probes if newer.python.contains(p)), key=Version)
        assert Version(newest_new) >= Version(newest_old), (older.version, newer.version)


# --- provenance ------------------------------------------------------------------


def _entries_with_source(data: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(data, dict):
        if "source" in data:
            found.append((path, data))
        for key, value in data.items():
            found += _entries_with_source(value, f"{path}.{key}")
    elif isinstance(data, list):
        for number, item in enumerate(data):
            found += _entries_with_source(item, f"{path}[{number}]")
    return found


@pytest.mark.parametrize("name", DATA_FILES)
def test_sources_are_specific_https_urls(name: str) -> None:
    entries = _entries_with_source(read_data(name))
    assert entries
    for where, entry in entries:
        url = urlparse(entry["source"])
        assert url.scheme == "https", (name, where)
        assert url.netloc and url.path.strip("/"), (name, where, entry["source"])


def test_cuda_sources_name_their_release() -> None:
    for entry in read_data("cuda.toml")["release"]:
        assert f"/archive/{entry['cuda']}" in entry["source"], entry["cuda"]


def test_torch_build_sources_name_their_release_branch() -> None:
    for series in read_data("torch.toml")["series"]:
        assert series["source"].endswith(f"/v{series['minor']}.0"), series["minor"]
        for build in series["builds"]:
            source = build["source"]
            if build["tag"] == "cpu":
                assert source.endswith("/whl/cpu/torch/"), series["minor"]
            elif "pytorch/builder" in source:
                # build_cuda.sh from release/1.11 on, build.sh before it
                assert re.search(r"/blob/[0-9a-f]{40}/manywheel/build(_cuda)?\.sh$", source), source
            elif "pytorch/test-infra" in source:  # aarch64 builds of 2.4-2.6: the build matrix
                assert re.search(r"/blob/[0-9a-f]{9,40}/tools/scripts/", source), source
            elif build.get("off_matrix") and "/issues/" in source:
                # outside the release's matrix: only third parties show it, and it says so
                assert build.get("unverified"), (series["minor"], source)
            else:
                assert f"/blob/release/{series['minor']}/" in source, (series["minor"], source)
