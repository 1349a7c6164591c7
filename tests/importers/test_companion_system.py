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


# --- OpenMMLab's version checks, mmcv-full below 1.7 (companions.toml) -------------------


def _requirements(tmp_path: Path, text: str, name: str = "requirements.txt") -> Path:
    path = tmp_path / "paper" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_an_mmcv_full_below_1_7_stays_on_its_series_where_torch_allows(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # A mid-2022 detection repository: mmdet 2.24 accepts mmcv-full up to 1.6.0, and
    # mmcv-full 1.6.0 has wheels for torch 1.12. Nothing moves, nothing is at risk.
    path = _requirements(
        tmp_path, "torch==1.12.1\ntorchvision==0.13.1\nmmcv-full==1.6.0\nmmdet==2.24.0\n"
    )
    imported = run_import(path, target="rtx4090")
    mmcv = imported.entries("needs_build")["mmcv-full"]
    assert mmcv["to"] == "1.6.0"
    assert mmcv["why"].startswith("built for torch 1.12.1; gpuenv's lock cannot read")
    mmdet = imported.entries("kept")["mmdet"]
    assert (mmdet["to"], mmdet["risk"]) == ("==2.24.0", "none")
    deps = _dependencies(imported)
    assert "mmcv-full==1.6.0" in deps and "mmdet==2.24.0" in deps


@pytest.mark.parametrize("spelling", ["mmcv_full", "MMCV-Full", "mmcv.full"])
def test_an_early_2022_mmdet_moves_with_its_mmcv_full(
    run_import: Callable[..., Imported], tmp_path: Path, spelling: str
) -> None:
    # An H100 needs torch 2.0 (sm_90): torch 1.10 moves to 2.0.1, mmcv-full 1.4.0 (wheels
    # up to torch 1.10) to 1.7.0 (wheels for 2.0), and mmdet 2.20 (mmcv-full <= 1.5.0 at
    # import) to 2.25.0, the first that accepts 1.7.0.
    path = _requirements(tmp_path, f"torch==1.10.0\n{spelling}==1.4.0\nmmdet==2.20.0\n")
    imported = run_import(path, target="h100")
    assert imported.result.code == 0, imported.result.out
    mmcv = imported.entries("needs_build")["mmcv-full"]
    assert (mmcv["from"], mmcv["to"]) == ("1.4.0", "mmcv-full 1.7.0")
    assert mmcv["why"].startswith(
        "1.7.0 is the mmcv-full release with wheels for torch 2.0.1; gpuenv's lock cannot "
        "read its wheel page yet (https://download.openmmlab.com/mmcv/dist/cu118/torch2.0/"
        "index.html)"
    )
    mmdet = imported.entries("changed")["mmdet"]
    assert (mmdet["from"], mmdet["to"]) == ("2.20.0", "2.25.0")
    assert mmdet["why"] == (
        "mmdet 2.20.0 accepts mmcv-full<=1.5.0,>=1.3.17, and mmcv-full is written 1.7.0; "
        "2.25.0 is the oldest mmdet release that accepts it (mmcv-full<=1.7.0,>=1.3.17)"
    )
    deps = _dependencies(imported)
    assert "mmcv-full==1.7.0" in deps and "mmdet==2.25.0" in deps


def test_an_early_2022_mmdet_stays_where_its_torch_runs(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # On an RTX 4090 torch 1.10.0 runs (its cu113 build): mmcv-full 1.4.0 has wheels for
    # torch 1.10 and mmdet 2.20 accepts it, so neither moves.
    path = _requirements(tmp_path, "torch==1.10.0\nmmcv-full==1.4.0\nmmdet==2.20.0\n")
    imported = run_import(path, target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    assert imported.torch() == "1.10.0+cu113"
    mmcv = imported.entries("needs_build")["mmcv-full"]
    assert mmcv["to"] == "1.4.0"
    assert mmcv["why"].startswith("built for torch 1.10.0; gpuenv's lock cannot read")
    assert imported.entries("kept")["mmdet"]["to"] == "==2.20.0"
    assert "mmdet" not in imported.entries("changed")


def test_a_range_of_mmcv_full_lands_inside_it(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = _requirements(tmp_path, "torch==1.12.1\nmmcv-full>=1.3.17,<1.7\nmmdet==2.28.2\n")
    imported = run_import(path, target="cpu")
    mmcv = imported.entries("needs_build")["mmcv-full"]
    assert (mmcv["from"], mmcv["to"]) == ("<1.7,>=1.3.17", "mmcv-full 1.6.2")
    assert imported.entries("kept")["mmdet"]["risk"] == "none"  # 2.28 accepts <= 1.8.0


def test_an_mmsegmentation_0_27_cannot_follow_mmcv_full_to_hopper(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # mmseg 0.27-0.29 accept mmcv-full < 1.7.0 (their FAQ table); torch 2.0 needs
    # mmcv-full 1.7, and no later mmseg in the data accepts it.
    path = _requirements(tmp_path, "torch==1.12.1\nmmcv-full==1.6.2\nmmsegmentation==0.27.0\n")
    imported = run_import(path, target="h100")
    assert imported.torch() == "2.0.1+cu118"
    assert imported.entries("needs_build")["mmcv-full"]["to"] == "mmcv-full 1.7.0"
    mmseg = imported.entries("kept")["mmsegmentation"]
    assert mmseg["risk"] == "high"
    assert mmseg["risk_detail"] == (
        "mmsegmentation 0.27.0 accepts mmcv-full<1.7.0,>=1.5.0, and mmcv-full is written "
        "1.7.0: this family cannot move together; mmsegmentation checks the version at import "
        "and fails"
    )
    kept = run_import(path, target="rtx4090").entries("kept")["mmsegmentation"]
    assert kept["risk"] == "none", "on torch 1.12 mmcv-full 1.6.2 stays, and mmseg with it"


def test_mmdet_3_refuses_the_mmcv_2_2_of_torch_2_4(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # The "MMCV==2.2.0 is used but incompatible" of 2024: mmdet 3.3 and mmsegmentation
    # 1.x assert mmcv < 2.2.0.
    path = _requirements(
        tmp_path, "torch==2.4.1\nmmcv==2.2.0\nmmdet==3.3.0\nmmsegmentation==1.2.2\nmmengine\n"
    )
    imported = run_import(path, target="rtx4090")
    kept = imported.entries("kept")
    assert kept["mmdet"]["risk"] == "high"
    assert kept["mmdet"]["risk_detail"] == (
        "mmdet 3.3.0 accepts mmcv<2.2.0,>=2.0.0rc4, and mmcv is written 2.2.0: this family "
        "cannot move together; mmdet checks the version at import and fails"
    )
    assert kept["mmsegmentation"]["risk_detail"] == (
        "mmsegmentation 1.2.2 accepts mmcv<2.2.0,>=2.0.0rc4, and mmcv is written 2.2.0: this "
        "family cannot move together; mmsegmentation checks the version at import and fails"
    )
    older = _requirements(
        tmp_path, "torch==2.1.2\nmmcv==2.1.0\nmmdet==3.3.0\nmmsegmentation==1.2.2\n", "older.txt"
    )
    fine = run_import(older, target="rtx4090").entries("kept")
    assert fine["mmdet"]["risk"] == "none" and fine["mmsegmentation"]["risk"] == "none"


def test_companion_pins_that_disagree_across_files_are_listed_not_fatal(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = _requirements(tmp_path, "torch==1.12.1\nmmcv-full==1.6.0\nmmdet==2.24.0\n")
    docker = _requirements(
        tmp_path,
        "FROM pytorch/pytorch:1.12.1-cuda11.3-cudnn8-devel\n"
        "RUN pip install mmcv-full==1.5.0 -f "
        "https://download.openmmlab.com/mmcv/dist/cu113/torch1.12/index.html\n",
        "Dockerfile",
    )
    imported = run_import(req, docker, target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    assert any("mmcv-full" in str(d) for d in imported.report.get("disagreements", [])), (
        imported.report.keys()
    )
    written = [d for d in _dependencies(imported) if d.startswith("mmcv-full")]
    assert len(written) == 1


# --- detectron2, apex: source builds from git -------------------------------------------


def test_detectron2_pinned_beside_a_moved_torch_builds_from_its_git_tag(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # The README way of 2021: its find-links page for torch 1.9 + cu111 and the release.
    path = _requirements(
        tmp_path,
        "-f https://dl.fbaipublicfiles.com/detectron2/wheels/cu111/torch1.9/index.html\n"
        "torch==1.9.0+cu111\ntorchvision==0.10.0+cu111\ndetectron2==0.6\nopencv-python\n",
    )
    imported = run_import(path, target="h100")
    built = imported.entries("needs_build")["detectron2"]
    assert built["why"] == (
        "detectron2 0.6's prebuilt wheels (find-links pages per CUDA build and torch "
        "series) cover torch 1.8, 1.9, 1.10 only, none for torch 2.0.1+cu118: compiled "
        "against torch 2.0.1+cu118 for sm_90, with no build isolation"
    )
    deps = _dependencies(imported)
    assert "detectron2 @ git+https://github.com/facebookresearch/detectron2.git@v0.6" in deps
    assert "detectron2==0.6" not in deps, "not on PyPI"
    # On a CPU torch 1.9.0 stays (its CPU build), and detectron2 0.6 had a wheel for it
    imported = run_import(path, target="cpu")
    assert imported.torch() == "1.9.0+cpu"
    built = imported.entries("needs_build")["detectron2"]
    assert built["why"].startswith(
        "detectron2 0.6 has a prebuilt wheel for torch 1.9 with cpu on its find-links page "
        "(https://dl.fbaipublicfiles.com/detectron2/wheels/cpu/torch1.9/index.html)"
    )
    assert "detectron2==0.6" not in _dependencies(imported), "not on PyPI"


def test_a_git_url_of_a_source_companion_is_written_as_it_is(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = _requirements(
        tmp_path,
        "torch==2.1.2\n"
        "detectron2 @ git+https://github.com/facebookresearch/detectron2.git@v0.6\n"
        "git+https://github.com/NVIDIA/apex.git#egg=apex\n",
    )
    imported = run_import(path, target="rtx4090")
    builds = imported.entries("needs_build")
    d2 = builds["detectron2"]
    assert d2["why"].startswith(
        "installed from git+https://github.com/facebookresearch/detectron2.git@v0.6: compiled"
    )
    assert d2["risk"] == "medium"
    apex = builds["apex"]
    assert apex["risk"] == "high"
    assert apex["risk_detail"].endswith(
        "no release named: the lock freezes the commit its default branch has when written"
    )
    deps = _dependencies(imported)
    assert "detectron2 @ git+https://github.com/facebookresearch/detectron2.git@v0.6" in deps
    assert "apex @ git+https://github.com/NVIDIA/apex.git" in deps
    assert "apex" not in deps and "detectron2" not in deps


def test_a_bare_apex_is_nvidias_from_git_and_the_report_names_what_replaces_it(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = _requirements(tmp_path, "torch==2.1.2\napex\n")
    imported = run_import(path, target="h100")
    apex = imported.entries("needs_build")["apex"]
    assert apex["why"] == (
        "apex installs from its git repository only (PyPI has no build of it): compiled "
        "against torch 2.1.2+cu121 for sm_90, with no build isolation"
    )
    assert "torch.amp" in apex["risk_detail"] and "apex.amp is deprecated" in apex["risk_detail"]
    assert "apex @ git+https://github.com/NVIDIA/apex.git" in _dependencies(imported)


# --- bitsandbytes on a CPU target ---------------------------------------------------------


def test_an_old_bitsandbytes_on_a_cpu_is_named_with_the_first_release_that_runs_there(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = _requirements(tmp_path, "torch==2.4.1\ntransformers\nbitsandbytes==0.41.1\n")
    bnb = run_import(path, target="cpu").entries("kept")["bitsandbytes"]
    assert bnb["risk"] == "high"
    assert bnb["why"] == (
        "the target has no GPU: it imports, but its CUDA kernels cannot run (bitsandbytes "
        "0.48.1 and later run on CPU, with torch >=2.3)"
    )
    new = _requirements(tmp_path, "torch==2.4.1\nbitsandbytes==0.48.1\n", "new.txt")
    fine = run_import(new, target="cpu").entries("kept")["bitsandbytes"]
    assert (fine["risk"], fine["why"]) == ("none", "its binaries cover this target")
    unpinned = _requirements(tmp_path, "torch==2.4.1\nbitsandbytes\n", "unpinned.txt")
    assert run_import(unpinned, target="cpu").entries("kept")["bitsandbytes"]["risk"] == "none"
    old_torch = _requirements(tmp_path, "torch==2.1.2\nbitsandbytes\n", "old.txt")
    held = run_import(old_torch, target="cpu").entries("kept")["bitsandbytes"]
    assert held["risk"] == "high", "torch 2.1 cannot take a bitsandbytes that runs on CPU"


def test_a_torch_and_build_with_a_detectron2_wheel_page_says_so() -> None:
    # gpuenv plans torch 1.12 and later, past detectron2's last wheels: the pairs its
    # INSTALL.md lists are still told apart from those it does not.
    from packaging.version import Version

    from gpuenv.importers import companions as moves
    from gpuenv.importers.merge import Resolved
    from gpuenv.importers.model import Ask, Origin
    from gpuenv.knowledge.foreign import foreign_knowledge
    from gpuenv.versions import ComputeCapability

    detectron2 = foreign_knowledge().companion("detectron2")
    assert detectron2 is not None
    ask = Ask("detectron2", "==0.6", Origin("requirements.txt", 3, "detectron2==0.6"))
    resolved = Resolved("detectron2", ask, "==0.6", None, (ask,))
    sm86 = ComputeCapability.parse("8.6")
    listed = moves.Target(Version("1.10.0"), "cu113", "11.3", sm86)
    move = moves.move(detectron2, resolved, listed, None)
    assert move.entry.why.startswith(
        "detectron2 0.6 has a prebuilt wheel for torch 1.10 with cu113 on its find-links page "
        "(https://dl.fbaipublicfiles.com/detectron2/wheels/cu113/torch1.10/index.html), which "
        "gpuenv's lock cannot read yet"
    )
    unlisted = moves.Target(Version("1.9.0"), "cu113", "11.3", sm86)  # 1.9 had cu102/cu111
    assert "cover torch 1.8, 1.9, 1.10 only, none for torch 1.9.0+cu113" in (
        moves.move(detectron2, resolved, unlisted, None).entry.why
    )


def test_a_bitsandbytes_without_binaries_for_torchs_cuda_moves_to_one_with_them(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # 0.43.0's wheels carry CUDA 11.0 to 12.3 (its installation guide); torch 2.4.1's
    # cu124 build needs 12.4, which 0.43.2's (to 12.5) carry. cu121 is covered as it is.
    path = _requirements(tmp_path, "torch==2.4.1+cu124\nbitsandbytes==0.43.0\n")
    moved = run_import(path, target="rtx4090").entries("changed")["bitsandbytes"]
    assert (moved["from"], moved["to"]) == ("0.43.0", "0.43.2")
    assert moved["why"] == (
        "0.43.0's wheels carry binaries for CUDA >=11.0,<12.4, not torch's 12.4; 0.43.2 does"
    )
    covered = _requirements(tmp_path, "torch==2.4.1+cu121\nbitsandbytes==0.43.0\n", "cu121.txt")
    kept = run_import(covered, target="rtx4090").entries("kept")["bitsandbytes"]
    assert (kept["to"], kept["why"]) == ("0.43.0", "its binaries cover this target")


def test_a_git_subdirectory_is_kept_and_pips_egg_dropped(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # tiny-cuda-nn's torch bindings build from bindings/torch (its README's pip line);
    # detectron2's projects install from their own folder.
    path = _requirements(
        tmp_path,
        "torch==2.1.2\n"
        "git+https://github.com/NVlabs/tiny-cuda-nn/#subdirectory=bindings/torch\n"
        "git+https://github.com/facebookresearch/detectron2.git@v0.6"
        "#subdirectory=projects/PointRend&egg=detectron2\n",
    )
    deps = _dependencies(run_import(path, target="h100"))
    assert (
        "tinycudann @ git+https://github.com/NVlabs/tiny-cuda-nn/#subdirectory=bindings/torch"
        in deps
    )
    assert (
        "detectron2 @ git+https://github.com/facebookresearch/detectron2.git@v0.6"
        "#subdirectory=projects/PointRend"
    ) in deps


def test_a_git_requirement_is_named_after_the_package_its_repository_builds(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # detectron2's Dockerfile (2ca36e3c): the package built in cocoapi/PythonAPI is
    # pycocotools; written as "cocoapi @ ..." uv refuses it once it reads the metadata.
    path = _requirements(
        tmp_path,
        "torch==2.1.2\n"
        "git+https://github.com/cocodataset/cocoapi.git#subdirectory=PythonAPI\n"
        "git+https://github.com/HazyResearch/flash-attention.git@v1.0.4\n",
    )
    deps = _dependencies(run_import(path, target="h100"))
    assert (
        "pycocotools @ git+https://github.com/cocodataset/cocoapi.git#subdirectory=PythonAPI"
        in deps
    )
    assert "flash-attn @ git+https://github.com/HazyResearch/flash-attention.git@v1.0.4" in deps


@pytest.mark.parametrize(
    ("text", "landing"),
    [
        # mmdet 2.24 accepts mmcv-full <= 1.6.0: the 1.6 series' first release, not 1.6.2
        ("torch==1.12.1\nmmcv-full<1.7\nmmdet==2.24.0\n", "1.6.0"),
        # mmdet 2.20 accepts <= 1.5.0: 1.4.7, the first with torch 1.11 wheels, has 1.10's
        ("torch==1.10.0\nmmcv-full>=1.3.17\nmmdet==2.20.0\n", "1.4.7"),
    ],
)
def test_an_unpinned_mmcv_full_lands_where_its_pinned_mmdet_accepts_it(
    run_import: Callable[..., Imported], tmp_path: Path, text: str, landing: str
) -> None:
    imported = run_import(_requirements(tmp_path, text), target="rtx4090")
    assert imported.entries("needs_build")["mmcv-full"]["to"] == f"mmcv-full {landing}"
    mmdet = imported.entries("kept")["mmdet"]
    assert mmdet["risk"] == "none" and "mmdet" not in imported.entries("changed")
    assert f"mmcv-full=={landing}" in _dependencies(imported)


def test_an_unpinned_mmcv_full_with_no_release_the_mmdet_accepts_moves_the_mmdet(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # torch 2.0 has mmcv-full 1.7 only, which mmdet 2.20 refuses: mmdet follows it.
    path = _requirements(tmp_path, "torch==2.0.1\nmmcv-full\nmmdet==2.20.0\n")
    imported = run_import(path, target="rtx4090")
    assert imported.entries("needs_build")["mmcv-full"]["to"] == "mmcv-full 1.7.0"
    assert imported.entries("changed")["mmdet"]["to"] == "2.25.0"


def test_a_gpu_only_package_to_be_built_is_named_on_a_cpu_target_too() -> None:
    """dinov2's cuml-cu11 (no wheel for its Python: "builds from its source archive") was
    not named GPU-only on a CPU target: only kept and changed entries were looked at."""
    from types import SimpleNamespace

    from gpuenv.importers.decide import _gpu_only
    from gpuenv.importers.report import MEDIUM, NEEDS_BUILD, Entry
    from gpuenv.knowledge.foreign import foreign_knowledge

    entry = Entry(NEEDS_BUILD, "cuml-cu11", "it builds from its source archive", risk=MEDIUM)
    d = SimpleNamespace(plan=SimpleNamespace(hardware=SimpleNamespace(cpu=True)), entries=[entry])
    _gpu_only(d, foreign_knowledge())  # type: ignore[arg-type]
    assert d.entries[0].risk_text == "RAPIDS cuML runs on an NVIDIA GPU only: the target has no GPU"
