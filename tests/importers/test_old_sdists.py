"""Old sdists whose setup.py imports pkg_resources (knowledge/data/old_sdists.toml) get a
[pip.build.<name>] table that builds them in the prefix with a setuptools that still has
it (the repository's own pin when it does, else the cap), and that the lock honours: the
build requirements join the resolution and the dependencies come from the spec."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import tomlkit

from gpuenv.knowledge.foreign import load_foreign_knowledge
from gpuenv.lock import builds as lock_builds
from gpuenv.spec import load_spec
from tests.importers.conftest import Imported

REPO = "openmmlab2022"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "paper" / "requirements.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def _builds(imported: Imported) -> dict[str, dict[str, object]]:
    spec = tomlkit.parse(imported.spec.read_text()).unwrap()
    tables: dict[str, dict[str, object]] = spec["pip"].get("build", {})
    return tables


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_an_openmmlab_repository_builds_its_old_sdists_with_its_own_setuptools(
    run_import: Callable[..., Imported], target: str
) -> None:
    imported = run_import(REPO, target=target)
    assert imported.result.code == 0, imported.result.out
    builds = _builds(imported)
    assert set(builds) == {"mmcv-full", "albumentations"}
    mmcv, albu = builds["mmcv-full"], builds["albumentations"]
    # conda's setuptools=59.5.0 is the repository's own pin: it has pkg_resources
    assert mmcv["build-requires"] == ["ninja", "wheel", "setuptools==59.5.0"]
    assert albu["build-requires"] == ["wheel", "setuptools==59.5.0"]
    assert mmcv["no-build-isolation"] is True and albu["no-build-isolation"] is True
    assert (mmcv["against-torch"], albu["against-torch"]) == (True, False)
    assert "opencv-python>=3" in mmcv["requires-dist"]  # type: ignore[operator]
    assert "imgaug>=0.2.5,<0.2.7" in albu["requires-dist"]  # type: ignore[operator]
    if target == "cpu":
        assert "toolkit" not in mmcv and mmcv["env"] == {"MMCV_WITH_OPS": "1"}
    else:
        assert mmcv["toolkit"] is True
        assert mmcv["env"] == {"MMCV_WITH_OPS": "1", "FORCE_CUDA": "1"}
    assert "toolkit" not in albu and "env" not in albu
    entry = imported.entries("needs_build")["albumentations"]
    assert entry["from"] == entry["to"] == "==0.4.3"
    assert "pkg_resources, which setuptools 82.0.0 removed" in entry["why"]
    assert "setuptools==59.5.0" in entry["why"] and entry["risk"] == "medium"
    assert entry["unverified_fact"] is True, "the albumentations range is marked unverified"
    assert "pkg_resources" in imported.entries("needs_build")["mmcv-full"]["why"]
    assert '"setuptools==59.5.0"' in imported.spec.read_text().split("[pip]")[1]


def test_without_a_setuptools_pin_the_build_is_capped_below_the_removal(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    imported = run_import(_write(tmp_path, "torch==2.0.1\nalbumentations==0.4.3\n"))
    assert imported.result.code == 0, imported.result.out
    albu = _builds(imported)["albumentations"]
    assert albu["build-requires"] == ["wheel", "setuptools<82"]
    assert (
        "built in the prefix with wheel, setuptools<82"
        in (imported.entries("needs_build")["albumentations"]["why"])
    )


def test_a_setuptools_pin_without_pkg_resources_is_reported_not_used(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    text = "torch==2.0.1\nalbumentations==0.4.3\nsetuptools==82.0.0\nwheel==0.38.4\n"
    imported = run_import(_write(tmp_path, text))
    assert imported.result.code == 0, imported.result.out
    albu = _builds(imported)["albumentations"]
    assert albu["build-requires"] == ["wheel==0.38.4", "setuptools<82"], "its wheel pin is kept"
    entry = imported.entries("needs_build")["albumentations"]
    assert entry["risk"] == "high"
    assert entry["risk_detail"].startswith(
        "the repository pins setuptools==82.0.0, which has no pkg_resources"
    )


@pytest.mark.parametrize(
    "line",
    ["albumentations", "albumentations>=0.4", "albumentations==0.5.2", "albumentations<0.4.6"],
)
def test_unpinned_or_newer_releases_get_no_build_table(
    run_import: Callable[..., Imported], tmp_path: Path, line: str
) -> None:
    imported = run_import(_write(tmp_path, f"torch==2.0.1\n{line}\n"))
    assert imported.result.code == 0, imported.result.out
    assert _builds(imported) == {}
    assert "[pip.build" not in imported.spec.read_text()


def test_the_lock_honours_the_written_table(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """What the lock makes of the written spec: both are declared builds from their
    sdists, built in the prefix, their build requirements resolved with the rest and
    their dependencies given to uv (so it never runs the old setup.py to read them)."""
    imported = run_import(REPO, target="rtx4090")
    spec = load_spec(imported.spec).spec
    declared = lock_builds.declared(spec)
    albu, mmcv = declared["albumentations"], declared["mmcv-full"]
    assert albu.forced and albu.no_build_isolation and not albu.against_torch
    assert albu.build_requires == ("wheel", "setuptools==59.5.0")
    assert mmcv.against_torch and mmcv.toolkit and ("FORCE_CUDA", "1") in mmcv.env
    needs = lock_builds.needs(declared, cuda="11.6")
    assert "setuptools==59.5.0" in needs.requirements and needs.toolkit
    assert set(needs.no_binary) >= {"albumentations", "mmcv-full"}
    metadata = dict(needs.dependency_metadata)
    assert "scipy" in metadata["albumentations"] and "yapf" in metadata["mmcv-full"]


def test_every_old_sdist_names_a_known_tool_and_a_source() -> None:
    fk = load_foreign_knowledge(None)
    assert fk.build_tools["pkg_resources"].requirement == "setuptools<82"
    for sdist in fk.old_sdists:
        assert sdist.needs and set(sdist.needs) <= set(fk.build_tools), sdist.name
        assert sdist.requires_dist, sdist.name
        assert sdist.fact.source.startswith("https://github.com/"), sdist.name
