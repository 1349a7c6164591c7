"""Companions move as one system: PyG's labelled wheels follow torch (or say why they are
built), OpenMMLab's lite mmcv is an ordinary pin, and packages that need an NVIDIA GPU are
named on a CPU target (knowledge/data/companions.toml)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import tomlkit

from tests.importers.conftest import Imported

PYG = "pyg2023"
EXTENSIONS = ("torch-scatter", "torch-sparse", "torch-cluster", "torch-spline-conv", "pyg-lib")


def _dependencies(imported: Imported) -> list[str]:
    spec = tomlkit.parse(imported.spec.read_text()).unwrap()
    return list(spec["pip"]["dependencies"])


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_pyg_wheel_labels_are_never_written(
    run_import: Callable[..., Imported], target: str
) -> None:
    imported = run_import(PYG, target=target)
    assert imported.result.code == 0, imported.result.out
    builds = imported.entries("needs_build")
    assert set(EXTENSIONS) <= set(builds)
    assert builds["torch-scatter"]["from"] == "2.1.0+pt113cu117"
    assert not [d for d in _dependencies(imported) if "+pt" in d], "no wheel label is written"
    assert imported.entries("kept")["torch-geometric"]["to"] == "==2.2.0"


def test_on_a_cpu_the_cuda_labelled_wheels_are_rebuilt_at_the_same_release(
    run_import: Callable[..., Imported],
) -> None:
    imported = run_import(PYG, target="cpu")
    scatter = imported.entries("needs_build")["torch-scatter"]
    assert scatter["to"] == "2.1.0"
    assert scatter["risk_detail"] == "the same release, compiled here instead of the prebuilt wheel"
    assert (
        "its +pt113cu117 wheel was built for torch 1.13 with cu117, not torch 1.13.1+cpu: "
        "written without the label, built for this torch"
    ) in scatter["why"]
    assert "torch-scatter==2.1.0" in _dependencies(imported)


def test_where_torch_stays_the_label_matches_but_only_its_page_has_it(
    run_import: Callable[..., Imported],
) -> None:
    imported = run_import(PYG, target="rtx4090")
    assert imported.torch() == "1.13.1+cu117"
    sparse = imported.entries("needs_build")["torch-sparse"]
    assert sparse["to"] == "0.6.16"
    assert (
        "its +pt113cu117 wheel (torch 1.13, cu117) matches this torch, but only that page has "
        "it: written without the label, built from source"
    ) in sparse["why"]


def test_on_an_h100_each_extension_moves_to_its_release_for_the_new_torch(
    run_import: Callable[..., Imported],
) -> None:
    imported = run_import(PYG, target="h100")
    assert imported.torch() == "2.0.1+cu118"
    builds = imported.entries("needs_build")
    moved = {name: builds[name]["to"] for name in EXTENSIONS}
    assert moved == {
        "torch-scatter": "torch-scatter 2.1.1",
        "torch-sparse": "torch-sparse 0.6.17",
        "torch-cluster": "torch-cluster 1.6.1",
        "torch-spline-conv": "torch-spline-conv 1.2.2",
        "pyg-lib": "pyg-lib 0.2.0",
    }
    assert "data.pyg.org/whl/torch-2.0.0+cu118.html" in builds["pyg-lib"]["why"]
    assert "not torch 2.0.1+cu118" in builds["pyg-lib"]["why"]
    deps = _dependencies(imported)
    assert "torch-spline-conv==1.2.2" in deps and "pyg-lib==0.2.0" in deps


def test_a_gpu_only_package_is_named_on_a_cpu_target(
    run_import: Callable[..., Imported],
) -> None:
    cuml = run_import(PYG, target="cpu").entries("kept")["cuml-cu11"]
    assert cuml["risk"] == "high"
    assert cuml["risk_detail"] == "RAPIDS cuML runs on an NVIDIA GPU only: the target has no GPU"
    on_gpu = run_import(PYG, target="h100").entries("kept")["cuml-cu11"]
    assert on_gpu["risk"] == "none" and "risk_detail" not in on_gpu


@pytest.mark.parametrize("target", ["h100", "cpu"])
def test_the_lite_mmcv_is_an_ordinary_pin(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("torch==1.13.1\nmmcv==1.4.0\n")
    imported = run_import(path, target=target)
    mmcv = imported.entries("kept")["mmcv"]
    assert (mmcv["to"], mmcv["risk"]) == ("==1.4.0", "none")
    assert "mmcv" not in imported.entries("needs_build")
    assert "mmcv==1.4.0" in _dependencies(imported)


def test_a_companion_with_no_release_for_torch_keeps_its_own_name(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # Neither mmcv-full nor its successor mmcv has a release for torch 2.7: the paper's
    # mmcv-full is built as it is, never written under its successor's name.
    path = tmp_path / "requirements.txt"
    path.write_text("torch==2.7.1\nmmcv-full==1.7.0\n")
    imported = run_import(path, target="rtx4090")
    deps = _dependencies(imported)
    assert "mmcv-full==1.7.0" in deps and "mmcv==1.7.0" not in deps


@pytest.mark.parametrize("target", ["h100", "cpu"])
def test_an_unpinned_torch_takes_the_newest_release_its_companions_accept(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("torch\nmmcv-full==1.7.0\nmmdet==2.28.2\n")
    imported = run_import(path, target=target)
    assert imported.torch().startswith("2.0.1+"), "mmcv-full 1.7.0 supports torch <2.1"
    assert (
        "mmcv-full==1.7.0 (torch<2.1,>=1.8) accepts" in imported.entries("changed")["torch"]["why"]
    )


def test_an_mmsegmentation_that_no_later_release_lets_follow_is_reported(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # mmsegmentation 0.20.2 accepts mmcv-full up to 1.6.0 (its get_started table); the
    # data knows no later release accepting the written 1.7.0, so it keeps its pin and
    # the report says the family cannot move together.
    path = tmp_path / "requirements.txt"
    path.write_text("torch==1.11.0\nmmcv-full==1.7.0\nmmsegmentation==0.20.2\n")
    mmseg = run_import(path, target="rtx4090").entries("kept")["mmsegmentation"]
    assert mmseg["risk"] == "high"
    assert mmseg["risk_detail"] == (
        "mmsegmentation 0.20.2 accepts mmcv-full<=1.6.0,>=1.3.13, and mmcv-full is written "
        "1.7.0: this family cannot move together; mmsegmentation checks the version at "
        "import and fails"
    )
