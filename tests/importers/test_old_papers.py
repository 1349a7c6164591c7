"""Papers of 2020-2022 pin torch 1.7 .. 1.11: on a GPU their own build runs on (sm_86
kernels on an RTX 4090, CUDA 11.x on driver 535) the import keeps the paper's torch and
torchvision; on a Hopper GPU, where no 1.x build has kernels, it moves to the oldest
release that does and says why. Every written spec plans to what the report says."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult

# Shaped like NVlabs/stylegan3's environment.yml (2021): conda channels pytorch and nvidia,
# pytorch 1.9.1 beside cudatoolkit 11.1, pinned scientific packages, a pip section.
STYLEGAN3_LIKE = """\
name: gan3
channels:
  - pytorch
  - nvidia
dependencies:
  - python=3.9
  - pip
  - numpy>=1.20
  - click>=8.0
  - scipy=1.7.1
  - pytorch=1.9.1
  - torchvision=0.10.1
  - cudatoolkit=11.1
  - requests=2.26.0
  - tqdm=4.62.2
  - ninja=1.10.2
  - pip:
    - imageio-ffmpeg==0.4.3
    - pyspng
"""

# Shaped like CompVis/stable-diffusion's environment.yaml (2022): python 3.8.5,
# pytorch 1.11.0 with cudatoolkit 11.3 and torchvision 0.12.0.
LATENT_DIFFUSION_LIKE = """\
name: ldm
channels:
  - pytorch
  - defaults
dependencies:
  - python=3.8.5
  - pip=20.3
  - cudatoolkit=11.3
  - pytorch=1.11.0
  - torchvision=0.12.0
  - numpy=1.19.2
"""

DRIVER_535 = "535.183.01"


def _import(
    cli: Callable[..., CliResult], tmp_path: Path, text: str, gpu: str
) -> tuple[dict[str, Any], Path]:
    source = tmp_path / "paper" / "environment.yml"
    source.parent.mkdir(exist_ok=True)
    source.write_text(text)
    spec = tmp_path / f"gpuenv-{gpu.replace(' ', '')}.toml"
    args = ("--gpu", gpu, "--driver", DRIVER_535, "-o", str(spec), "--json")
    result = cli("import", str(source), *args)
    assert result.code == 0, result.err or result.out
    report: dict[str, Any] = json.loads(result.out)
    return report, spec


def _entries(report: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {e["package"]: e for e in report[kind] if e["package"]}


def _planned(cli: Callable[..., CliResult], spec: Path) -> dict[str, Any]:
    result = cli("-f", str(spec), "plan", "--json")
    assert result.code == 0, result.err
    (target,) = result.json()["targets"].values()
    assert isinstance(target, dict)
    return target


def test_stylegan3_era_environment_keeps_its_torch_on_an_rtx_4090(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    report, spec = _import(cli, tmp_path, STYLEGAN3_LIKE, "RTX 4090")
    kept, changed = _entries(report, "kept"), _entries(report, "changed")
    assert kept["torch"]["to"] == "1.9.1+cu111", report["summary"]
    assert kept["torch"]["why"] == "runs on this target as built"
    assert kept["torchvision"]["to"] == "0.10.1"
    assert "torch" not in changed and "torchvision" not in changed
    assert "python" not in changed  # 3.9 is inside 1.9's 3.6 .. 3.9
    text = spec.read_text()
    assert 'torch = "1.9.1"' in text and 'python = "3.9"' in text and 'cuda = "11.1"' in text
    target = _planned(cli, spec)
    planned = (target["torch"], target["cu_tag"], target["torchvision"])
    assert planned == ("1.9.1", "cu111", "0.10.1")
    assert target["index_url"] == "https://download.pytorch.org/whl/cu111"


def test_stylegan3_era_environment_moves_on_an_h100_to_the_oldest_release_with_sm_90(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    report, spec = _import(cli, tmp_path, STYLEGAN3_LIKE, "H100")
    changed = _entries(report, "changed")
    assert changed["torch"]["from"].startswith("1.9.1")
    assert changed["torch"]["to"] == "2.0.1+cu118"
    why = changed["torch"]["why"]
    assert "no torch 1.9.1 build for linux-64 has kernels for sm_90 (Hopper)" in why
    assert "2.0.1 (cu118) is the newest release of the first later series whose builds do" in why
    assert changed["torchvision"]["to"] == "0.15.2"
    assert "predates" not in why  # 1.9.1 is known now: the reason is the GPU, not the data
    target = _planned(cli, spec)
    assert (target["torch"], target["cu_tag"]) == ("2.0.1", "cu118")


@pytest.mark.parametrize(("gpu", "expected"), [("RTX 4090", "cu113"), ("A100", "cu113")])
def test_latent_diffusion_era_environment_keeps_torch_1_11(
    cli: Callable[..., CliResult], tmp_path: Path, gpu: str, expected: str
) -> None:
    report, spec = _import(cli, tmp_path, LATENT_DIFFUSION_LIKE, gpu)
    kept = _entries(report, "kept")
    assert kept["torch"]["to"] == f"1.11.0+{expected}", report["summary"]
    assert kept["torchvision"]["to"] == "0.12.0"
    assert 'python = "3.8"' in spec.read_text()
    assert _planned(cli, spec)["cu_tag"] == expected


# A 2020 conda file: torch 1.7.0 with cudatoolkit 10.1, the torchvision of release day
# (0.8.0; 0.8.1 followed it the same day) and Python 3.7, below what gpuenv installs.
TORCH_17_LIKE = """\
name: x2020
channels:
  - pytorch
dependencies:
  - python=3.7
  - pytorch=1.7.0
  - torchvision=0.8.0
  - cudatoolkit=10.1
"""


@pytest.mark.parametrize(
    ("gpu", "driver", "torch", "why"),
    [
        # CUDA 10.1 needs 418.39: the paper's own build
        ("GTX 1080 Ti", "418.87.01", "1.7.0+cu101", "runs on this target as built"),
        # cu101's list stops at 7.5; cu110's sm_80 code runs on the A100 (R450 runs 11.0)
        (
            "A100",
            "470.57.02",
            "1.7.0+cu110",
            "its arch list (3.7, 5.0, 6.0, 7.0, 7.5) has no sm_80",
        ),
    ],
)
def test_a_2020_environment_keeps_torch_1_7_moving_only_its_build(
    cli: Callable[..., CliResult], tmp_path: Path, gpu: str, driver: str, torch: str, why: str
) -> None:
    source = tmp_path / "paper" / "environment.yml"
    source.parent.mkdir()
    source.write_text(TORCH_17_LIKE)
    spec = tmp_path / "gpuenv.toml"
    result = cli("import", str(source), "--gpu", gpu, "--driver", driver, "-o", str(spec), "--json")
    assert result.code == 0, result.err or result.out
    report = json.loads(result.out)
    entries = {e["package"]: e for e in report["changed"] + report["kept"] if e["package"]}
    assert entries["torch"]["to"] == torch and why in entries["torch"]["why"]
    assert "torchvision" in _entries(report, "kept")  # 0.8.0 was made for 1.7.0 too
    assert entries["torchvision"]["to"] == "0.8.0"
    assert entries["python"]["to"] == "3.8"
    assert "gpuenv installs 3.8 and later: 3.8 is the nearest it can" in entries["python"]["why"]
    assert 'torchvision = "0.8.0"' in spec.read_text()
    assert _planned(cli, spec)["torch"] == "1.7.0"
