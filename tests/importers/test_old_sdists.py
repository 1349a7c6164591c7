"""Old sdists whose setup.py imports pkg_resources (knowledge/data/old_sdists.toml) get a
[pip.build.<name>] table that builds them in the prefix with a setuptools that still has
it (the repository's own pin when it does, else the cap), and that the lock honours: the
build requirements join the resolution and the dependencies come from the spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import tomlkit
from packaging.specifiers import SpecifierSet

from gpuenv.knowledge import foreign
from gpuenv.knowledge.foreign import BuildTool, OldSdist, load_foreign_knowledge
from gpuenv.lock import builds as lock_builds
from gpuenv.lock.format import read_lock
from gpuenv.spec import load_spec
from tests.conftest import CliResult
from tests.fixtures.pkgindex.plugin import PkgIndex
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


@pytest.mark.parametrize(
    ("line", "tables"),
    [
        ("albumentations>=0.4,<0.4.6", 1),
        ("albumentations>=0.4.1,<=0.4.5,!=0.4.2", 1),
        ("albumentations<0.4.6", 0),  # 0.3.x too, which the data does not name
        ("albumentations~=0.4.3", 0),  # up to 0.5: 0.4.6 is not in the data
        ("albumentations>=0.4,<0.5", 0),
    ],
)
def test_a_range_gets_a_table_when_every_release_it_allows_needs_one(
    run_import: Callable[..., Imported], tmp_path: Path, line: str, tables: int
) -> None:
    imported = run_import(_write(tmp_path, f"torch==2.0.1\n{line}\n"), target="cpu")
    assert imported.result.code == 0, imported.result.out
    assert len(_builds(imported)) == tables
    if tables:
        why = imported.entries("needs_build")["albumentations"]["why"]
        assert why.startswith("every albumentations") and "setuptools<82" in why


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


def test_the_written_table_locks_against_the_fixture_index(
    cli: Callable[..., CliResult],
    pkgindex: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """End to end with real uv: the data's packages are not on the fixture index, so the
    same rule is pointed at the index's own sdist (fixture-pure 0.3.0) with a cap the
    index serves (idna<4 standing for setuptools<82). The import writes the table; `gpuenv
    lock` locks it unchanged, the build in the prefix with its build requirement resolved
    beside the rest and its dependencies read from the spec."""
    real = foreign.foreign_knowledge()
    cap = BuildTool(
        "pkg_resources", "idna<4", "a test's tool 4.0", real.build_tools["pkg_resources"].fact
    )
    sdist = OldSdist(
        name="fixture-pure",
        versions=SpecifierSet("==0.3.0"),
        needs=("pkg_resources",),
        against_torch=False,
        toolkit=False,
        build_requires=(),
        env=(),
        gpu_env=(),
        requires_dist=("idna",),
        fact=real.old_sdists[0].fact,
    )
    fake = replace(real, build_tools={"pkg_resources": cap}, old_sdists=(sdist,))
    monkeypatch.setattr(foreign, "foreign_knowledge", lambda: fake)
    for name, value in (
        ("GPUENV_IMPORT_INDEX", "off"),
        ("GPUENV_INDEX_URL", pkgindex.default_index),
        ("GPUENV_TORCH_INDEX", pkgindex.torch_base),
    ):
        monkeypatch.setenv(name, value)
    req = _write(tmp_path, "torch==2.4.1\nfixture-pure==0.3.0\n")
    (req.parent / ".python-version").write_text("3.11\n")
    spec = tmp_path / "gpuenv.toml"
    imported = cli("import", str(req.parent), "--gpu", "none", "-o", str(spec), "--json")
    assert imported.code == 0, imported.out + imported.err
    written = spec.read_text()
    assert 'build-requires = ["idna<4"]' in written
    locked = cli("-f", str(spec), "lock")
    assert locked.code == 0, locked.out + locked.err
    assert spec.read_text() == written, "the spec locks as written"
    lock = read_lock(spec.with_name("gpuenv.lock"))
    assert lock is not None
    (target,) = lock.targets.values()
    (build,) = [b for b in target.builds if b.name == "fixture-pure"]
    assert build.inputs.no_build_isolation and not build.inputs.against_torch
    assert build.inputs.build_requires == ("idna",)
    idna = target.pip_package("idna")
    assert idna is not None and int(idna.version.split(".")[0]) < 4
