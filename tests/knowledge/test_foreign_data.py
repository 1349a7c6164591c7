"""The foreign-format data files (images, conda's CUDA packages and names, companions):
their schema, their invariants, and the cache of what validated."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from gpuenv.errors import FileFormatError
from gpuenv.knowledge import _data, knowledge_base
from gpuenv.knowledge.foreign import FOREIGN_FILES, ForeignKnowledge, load_foreign_knowledge
from gpuenv.plan import KNOWN_PYTHONS


@pytest.fixture(scope="module")
def fk() -> ForeignKnowledge:
    return load_foreign_knowledge(None)


def test_every_file_validates_against_its_schema(fk: ForeignKnowledge) -> None:
    assert set(FOREIGN_FILES) == {
        "images.toml",
        "conda_cuda.toml",
        "conda_names.toml",
        "companions.toml",
        "old_sdists.toml",
        "torch_dates.toml",
    }
    assert fk.companions and fk.ngc and fk.conda_cuda and fk.old_sdists and fk.torch_dates


@pytest.mark.parametrize("name", FOREIGN_FILES)
def test_every_entry_names_a_source_and_a_checked_date(name: str) -> None:
    raw = _data.read_data(name)
    count = 0

    def walk(node: Any) -> None:
        nonlocal count
        if isinstance(node, dict):
            if "source" in node:
                count += 1
                assert str(node["source"]).startswith("https://")
                assert "checked" in node, node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(raw)
    assert count > 3


def test_a_damaged_file_names_the_file_and_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _data.read_data

    def damaged(name: str) -> dict[str, Any]:
        data = real(name)
        if name == "companions.toml":
            data["companion"][0]["moves"] = "teleports"
        return data

    monkeypatch.setattr(_data, "read_data", damaged)
    with pytest.raises(
        FileFormatError, match=r"knowledge/data/companions.toml: companion\.0\.moves"
    ):
        load_foreign_knowledge(None)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda rows: rows[1].update(published=date(2018, 1, 1)),
            r"release: .*1\.0\.1 \(2018-01-01\) predates",
        ),
        (lambda rows: rows.append(dict(rows[0])), "release: .*torch 1.0.0 is listed twice"),
        (lambda rows: rows[0].update(published="2018-13-07"), r"release\.0\.published"),
        (lambda rows: rows[0].update(torch="one"), r"release\.0\.torch"),
        (lambda rows: rows[0].pop("source"), r"release\.0\.source"),
    ],
)
def test_damaged_release_dates_name_the_entry(
    monkeypatch: pytest.MonkeyPatch, damage: Callable[[list[dict[str, Any]]], Any], message: str
) -> None:
    real = _data.read_data

    def damaged(name: str) -> dict[str, Any]:
        data = real(name)
        if name == "torch_dates.toml":
            damage(data["release"])
        return data

    monkeypatch.setattr(_data, "read_data", damaged)
    with pytest.raises(FileFormatError, match=rf"knowledge/data/torch_dates.toml: .*{message}"):
        load_foreign_knowledge(None)


def test_the_validated_files_are_cached_and_reused(tmp_path: Path, fk: ForeignKnowledge) -> None:
    first = load_foreign_knowledge(tmp_path)
    (cached,) = (tmp_path / "foreign").iterdir()
    assert cached.suffix == ".json"
    second = load_foreign_knowledge(tmp_path)
    assert first == second == fk
    cached.write_text("{not json")
    assert load_foreign_knowledge(tmp_path) == fk, "a damaged cache is a miss"


# --- companions ---------------------------------------------------------------------------

BUILD_FOR_MOVES = {
    "paired": {"when-no-wheel", "never"},  # never: pure Python pinned to a torch (torchdata)
    "wheel-page": {"when-no-wheel"},
    "source": {"always"},
    "jit": {"jit"},
    "cuda-binaries": {"never"},
    "torch-pinned": {"never"},
    "cuda-suffix": {"never"},
    "unmanaged": {"never"},
}


def test_companion_fields_agree(fk: ForeignKnowledge) -> None:
    for companion in fk.companions.values():
        assert companion.build in BUILD_FOR_MOVES[companion.moves], companion.name
        if companion.build in ("always", "when-no-wheel", "jit"):
            assert companion.compiled_against_torch, companion.name
        if companion.successor:
            assert companion.successor in fk.companions
        if companion.wheel_page:
            assert "{build}" in companion.wheel_page and "{series}" in companion.wheel_page
        if companion.moves == "paired":
            assert companion.releases, f"{companion.name}: a paired package needs its pairs"


def test_release_entries_ascend_and_their_latest_stays_in_range(fk: ForeignKnowledge) -> None:
    for companion in (c for c in fk.companions.values() if c.releases):
        versions = [r.version for r in companion.releases]
        assert versions == sorted(set(versions)), companion.name
        for entry, after in zip(companion.releases, [*companion.releases[1:], None], strict=True):
            if entry.latest is not None:
                assert entry.latest >= entry.version
                assert after is None or entry.latest < after.version, (companion.name, entry)


def test_paired_releases_name_torch_releases_gpuenv_knows(fk: ForeignKnowledge) -> None:
    kb = knowledge_base()
    known = {str(r.version) for r in kb.torch_releases}
    for name in ("xformers", "vllm"):
        for entry in fk.companions[name].releases:
            exact = [s.version for s in entry.torch if s.operator == "=="]
            assert all(v in known for v in exact), (name, entry.version, exact)


def test_xformers_pairs_move_forward_with_torch(fk: ForeignKnowledge) -> None:
    xformers = fk.companions["xformers"]
    torches = [Version(next(iter(r.torch)).version) for r in xformers.releases if len(r.torch) == 1]
    assert torches == sorted(torches), "a newer xformers never pairs with an older torch"
    found = xformers.releases_for(Version("2.1.0"))
    assert [str(r.landing) for r in found] == ["0.0.22.post7"]
    assert xformers.wheels_lack(Version("0.0.18"), next(iter(_cc("9.0")))) is not None
    assert xformers.wheels_lack(Version("0.0.22"), next(iter(_cc("9.0")))) is None


def _cc(text: str) -> set[Any]:
    from gpuenv.versions import ComputeCapability

    return {ComputeCapability.parse(text)}


def test_flash_attn_floors_only_rise(fk: ForeignKnowledge) -> None:
    floors = [r for r in fk.companions["flash-attn"].releases if r.nvcc is not None]
    minimums = [Version(next(iter(r.nvcc)).version) for r in floors if r.nvcc is not None]
    assert minimums == sorted(minimums)


def test_python_floors_rise_with_python(fk: ForeignKnowledge) -> None:
    numpy = [f for f in fk.python_floors if f.package == "numpy"]
    assert [f.python for f in numpy] == sorted((f.python for f in numpy), key=lambda p: int(p[2:]))
    assert [f.version for f in numpy] == sorted(f.version for f in numpy)
    assert all(f.python in KNOWN_PYTHONS for f in numpy)


# --- images ------------------------------------------------------------------------------------


def test_ngc_releases_ascend_and_point_at_their_upstream(fk: ForeignKnowledge) -> None:
    releases = sorted(fk.ngc)
    cudas = [tuple(int(p) for p in fk.ngc[r].cuda.split(".")[:2]) for r in releases]
    assert cudas == sorted(cudas), "a later container never has an older CUDA"
    for release in fk.ngc.values():
        own = Version(Version(release.torch).base_version)
        assert release.upstream >= own, release.release
        assert release.python in ("3.8", "3.10", "3.12"), release.release
    oldest = knowledge_base().torch_releases[-1].version
    for release in fk.ngc.values():
        if release.upstream >= oldest:
            assert knowledge_base().torch_release(release.upstream), release.release


def test_image_pythons_are_versions(fk: ForeignKnowledge) -> None:
    for python, _ in [*fk.pytorch_image_python.values(), *fk.os_python.values()]:
        assert re.fullmatch(r"3\.\d{1,2}", python)


# --- conda --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "tag"),
    [
        ("py3.8_cuda11.3_cudnn8.3.2_0", "cu113"),
        ("py3.10_cuda11.8_cudnn8.7.0_0", "cu118"),
        ("cuda112py38h3c8f6a3_200", "cu112"),
        ("cuda120_py311h1234_300", "cu120"),
        ("cpu_py38h1234_0", "cpu"),
        ("py3.9_cpu_0", "cpu"),
        ("cpu_mkl_py310h1234_101", "cpu"),
        ("h7b6447c_0", None),
        ("main", None),
    ],
)
def test_build_strings_name_the_torch_build(
    fk: ForeignKnowledge, build: str, tag: str | None
) -> None:
    assert fk.build_cuda(build) == tag


def test_conda_names_do_not_overlap(fk: ForeignKnowledge) -> None:
    assert not any(fk.is_conda_runtime(name) for name in fk.conda_only)
    assert not any(fk.is_conda_runtime(name) for name in fk.renames)
    assert {fk.pypi_name(n) for n in ("pytorch", "pytorch-gpu", "pytorch-cpu")} == {"torch"}
    assert not fk.is_conda_runtime("numpy") and fk.is_conda_runtime("libgcc-ng")
    for name, package in fk.conda_cuda.items():
        assert not fk.is_conda_runtime(name), name
        assert package.means in ("build", "cpu", "toolkit", "runtime")
