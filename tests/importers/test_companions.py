"""Companions and other frameworks move (or are reported) as companions.toml says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.importers.conftest import Imported

OLD = """torch==1.13.1+cu117
mmcv-full==1.7.0
torch-scatter==2.1.0
bitsandbytes==0.38.0
cupy-cuda11x==12.0.0
tensorflow==1.15.5
jax[cuda11_pip]==0.4.13
triton==2.0.0
vllm==0.2.1
"""

NEW = """torch==2.1.2
mmcv-full==1.7.0
cupy-cuda11x==12.0.0
tensorflow==2.14.0
flash-attn==2.8.0
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    return path


def test_companions_follow_torch_to_an_h100(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    imported = run_import(_write(tmp_path, OLD), target="h100")
    assert imported.result.code == 0, imported.result.out
    assert imported.torch() == "2.0.1+cu118"
    changed, builds = imported.entries("changed"), imported.entries("needs_build")
    lost, unmanaged = imported.entries("unreproducible"), imported.entries("unmanaged")
    assert builds["torch-scatter"]["to"] == "torch-scatter 2.1.1"
    assert "data.pyg.org/whl/torch-2.0.0+cu118.html" in builds["torch-scatter"]["why"]
    assert builds["mmcv-full"]["to"] == "1.7.0", "1.7.0 still supports torch 2.0"
    assert (changed["bitsandbytes"]["from"], changed["bitsandbytes"]["to"]) == ("0.38.0", "0.45.0")
    assert "sm_90" in changed["bitsandbytes"]["why"]
    assert "triton" in changed and "cupy-cuda11x" in imported.entries("kept")
    assert "no kernels for sm_90" in lost["tensorflow"]["why"]
    assert "jax" in unmanaged
    assert imported.entries("kept")["vllm"]["to"] == "0.2.1", "0.2.1 is built for torch 2.0.1"
    text = imported.spec.read_text()
    assert (
        "# left out: tensorflow==1.15.5" in text and "# left out: jax[cuda11_pip]==0.4.13" in text
    )
    assert (
        '"bitsandbytes==0.45.0"' in text
        and "triton" not in text.split("[pip]")[1].split("dependencies")[1]
    )


def test_cuda_12_torch_renames_cupy_and_retires_mmcv_full(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    imported = run_import(_write(tmp_path, NEW), target="h100")
    assert imported.result.code == 0, imported.result.out
    assert imported.torch() == "2.1.2+cu121"
    changed, builds = imported.entries("changed"), imported.entries("needs_build")
    assert (changed["cupy-cuda11x"]["to"]) == "cupy-cuda12x"
    assert builds["mmcv-full"]["to"] == "mmcv 2.2.0" and builds["mmcv-full"]["risk"] == "high"
    assert builds["flash-attn"]["nvcc"] == "12.1"
    assert "tensorflow" in imported.entries("unmanaged")
    assert '"mmcv==2.2.0"' in imported.spec.read_text()


def test_a_gpu_too_old_for_flash_attn_2(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = _write(tmp_path, "torch==2.1.2\nflash-attn==2.3.6\n")
    imported = run_import(path, target="h100")
    assert imported.entries("needs_build")["flash-attn"]["to"] == "2.3.6"
    old_gpu = run_import(path, target="t4")
    builds = old_gpu.entries("needs_build")
    assert builds["flash-attn"]["to"] == "1.0.9" and builds["flash-attn"]["risk"] == "high"
    assert "compute capability >= 8.0" in builds["flash-attn"]["why"]


# An OpenMMLab detection repository of early 2022: mmdet 2.20 with its mmcv-full, and
# a stray lite mmcv line from an older README.
MMDET = """torch==1.10.0
torchvision==0.11.1
mmcv==1.4.0
mmcv-full==1.7.0
mmdet==2.20.0
"""


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_an_mmdet_that_does_not_accept_the_written_mmcv_full_moves_with_it(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    # mmdet 2.20 accepts mmcv-full up to 1.5.0; 2.25.0 is its oldest release accepting 1.7.0
    imported = run_import(_write(tmp_path, MMDET), target=target)
    assert imported.result.code == 0, imported.result.out
    mmdet = imported.entries("changed")["mmdet"]
    assert (mmdet["from"], mmdet["to"], mmdet["risk"]) == ("2.20.0", "2.25.0", "medium")
    assert mmdet["why"] == (
        "mmdet 2.20.0 accepts mmcv-full<=1.5.0,>=1.3.17, and mmcv-full is written 1.7.0; "
        "2.25.0 is the oldest mmdet release that accepts it (mmcv-full<=1.7.0,>=1.3.17)"
    )
    assert mmdet["unverified_fact"] is True
    text = imported.spec.read_text()
    assert '"mmdet==2.25.0", # requirements.txt:5 mmdet==2.20.0 → 2.25.0: ' in text


def test_an_mmdet_that_cannot_follow_its_mmcv_is_reported(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # torch 2.1 takes mmcv-full 1.7.0 to its successor mmcv 2.2.0, which no mmdet 2.x
    # accepts: the family cannot move together, and mmdet keeps the paper's pin.
    text = "torch==2.1.2\nmmcv-full==1.7.0\nmmdet==2.20.0\n"
    imported = run_import(_write(tmp_path, text), target="h100")
    assert imported.result.code == 0, imported.result.out
    mmdet = imported.entries("kept")["mmdet"]
    assert mmdet["risk"] == "high"
    assert mmdet["risk_detail"] == (
        "mmdet 2.20.0 accepts mmcv-full<=1.5.0,>=1.3.17, and mmcv-full is written as mmcv 2.2.0: "
        "this family cannot move together; mmdet checks the version at import and fails"
    )
    assert '"mmdet==2.20.0"' in imported.spec.read_text()


def test_an_mmdet_that_accepts_the_written_mmcv_full_carries_no_family_risk(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # mmdet 2.28 accepts mmcv-full up to 1.7 (no rule in the data names it): no family risk.
    text = MMDET.replace("mmdet==2.20.0", "mmdet==2.28.2").replace("mmcv==1.4.0\n", "")
    imported = run_import(_write(tmp_path, text), target="h100")
    assert imported.result.code == 0, imported.result.out
    mmdet = imported.entries("kept")["mmdet"]
    assert (mmdet["to"], mmdet["risk"]) == ("==2.28.2", "none")
    assert "family" not in (mmdet.get("risk_detail") or "")


def test_an_mmdet_beside_a_range_moved_past_what_it_accepts_moves_too(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # mmcv-full>=1.7 is written 1.7.0 by the companion move: mmdet 2.20 does not accept it.
    text = "torch==1.10.0\nmmcv-full>=1.7\nmmdet==2.20.0\n"
    imported = run_import(_write(tmp_path, text), target="h100")
    assert imported.result.code == 0, imported.result.out
    mmdet = imported.entries("changed")["mmdet"]
    assert mmdet["to"] == "2.25.0"
    assert "mmcv-full is written 1.7.0" in mmdet["why"]


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_mmcv_full_written_beside_its_successor_mmcv_is_reported(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    # mmcv 1.4.0 (the pure-Python lite package, kept as pinned) and mmcv-full 1.7.0 beside
    # it install the same importable 'mmcv': the report says only one can be kept.
    imported = run_import(_write(tmp_path, MMDET), target=target)
    assert imported.result.code == 0, imported.result.out
    report = imported.report
    full = next(
        e
        for k in ("changed", "kept", "needs_build")
        for e in report.get(k, [])
        if e["package"] == "mmcv-full"
    )
    assert full["risk"] == "high"
    assert "mmcv-full and mmcv are both written" in full["risk_detail"]
