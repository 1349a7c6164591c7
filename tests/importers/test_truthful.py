"""Sentences of the report checked against their cases: a base image's CUDA is not called
torch's build, "nearest" is not said of a Python gpuenv skips, and a range's move names
the API changes it crosses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.importers.conftest import Imported


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "paper" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_a_base_images_cuda_is_not_torchs_build(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    docker = _file(
        tmp_path,
        "Dockerfile",
        "FROM nvidia/cuda:12.2.0-devel-ubuntu22.04\n"
        "RUN apt-get update && apt-get install -y python3-pip\n"
        "RUN pip install torch==2.1.0 torchvision==0.16.0\n",
    )
    imported = run_import(docker, target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    torch = imported.entries("kept")["torch"]
    assert torch["from"] == "2.1.0+cu121"
    notes = [a["why"] for a in imported.report["assumptions"]]
    assert "the base image's CUDA (cu122) is not a build of torch 2.1.0: pip installed one of torch's own builds on it" in notes  # fmt: skip
    assert "cu122" not in imported.result.out.split('"kept"')[1].split('"assumptions"')[0]


def test_a_python_gpuenv_skips_is_not_called_the_nearest(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    env = _file(
        tmp_path,
        "environment.yml",
        "dependencies:\n  - python=3.6\n  - pytorch=1.12.1\n  - cudatoolkit=11.3\n",
    )
    imported = run_import(env, target="rtx4090")
    python = imported.entries("changed")["python"]
    assert (python["from"], python["to"]) == ("3.6", "3.8")
    assert "gpuenv installs 3.8 and later: 3.8 is the nearest it can" in python["why"]
    assert "3.7" in python["why"]  # torch 1.12 supports it: the text says so


def test_a_range_names_the_api_changes_it_crosses(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # An H100 needs torch >= 2.0 (torch._six gone): the range crosses that change, and
    # stops below 2.6, whose torch.load default would break the checkpoint loading too.
    req = _file(tmp_path, "requirements.txt", "torch>=1.7.0\nnumpy\n")
    imported = run_import(req, target="h100")
    torch = imported.entries("kept")["torch"]
    assert (torch["from"], torch["to"], torch["risk"]) == (">=1.7.0", "2.5.1+cu124", "medium")
    assert torch["why"] == (
        "the newest release in '>=1.7.0' that fits below 2.6.0, whose API change breaks older "
        "code (torch.load defaults to weights_only=True: full pickled checkpoints need "
        "weights_only=False)"
    )
    assert torch["risk_detail"].startswith(
        "API change in 2.0.0: torch._six was removed: 'from torch._six import ...' fails; "
    )
    assert "weights_only" not in torch["risk_detail"], "2.6 is not crossed"


def test_the_api_changes_said_are_those_the_code_meets_where_it_was_read(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """CompVis/stable-diffusion, Real-ESRGAN and Grounded-Segment-Anything were told
    "torch._six was removed" though none of their code uses it; maskrcnn-benchmark's
    nms.cu includes THC/THC.h (removed in torch 1.11) and nothing said so. Where the
    repository is imported as a folder, a change is said where the code has its marker,
    with the line."""
    req = _file(tmp_path, "requirements.txt", "torch>=1.7.0\nnumpy\n")
    (req.parent / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\n")
    imported = run_import(req.parent, target="h100")
    assert imported.result.code == 0, imported.result.err
    torch = imported.entries("kept")["torch"]
    assert "torch._six" not in (torch.get("risk_detail") or ""), torch
    # the code that meets them: each named with where the code has it
    (req.parent / "utils.py").write_text("import os\nfrom torch._six import inf\n")
    csrc = req.parent / "csrc" / "cuda"
    csrc.mkdir(parents=True)
    (csrc / "nms.cu").write_text("// nms\n#include <THC/THC.h>\n")
    imported = run_import(req.parent, target="h100")
    torch = imported.entries("kept")["torch"]
    assert torch["risk_detail"] == (
        "API change in 1.11.0: THC was removed: CUDA sources that include THC/THC.h "
        "(THCudaMalloc, THCCeilDiv) no longer compile (the code has it: csrc/cuda/nms.cu:2 "
        "#include <THC/THC.h>); API change in 2.0.0: torch._six was removed: 'from "
        "torch._six import ...' fails (the code has it: utils.py:2 from torch._six import inf)"
    )
    assert imported.report["inputs"] == [{"file": "requirements.txt", "format": "requirements"}], (
        "the folder whose code was searched is no input of its own"
    )
    # environment files alone: the C++ change is never guessed, torch._six still said
    imported = run_import(req, target="h100")
    risk = imported.entries("kept")["torch"]["risk_detail"]
    assert "torch._six" in risk and "THC" not in risk


@pytest.mark.parametrize(("target", "torch"), [("rtx4090", "1.13.1+cu117"), ("cpu", "1.13.1+cpu")])
def test_a_range_stays_below_the_first_breaking_change_where_a_release_fits(
    run_import: Callable[..., Imported], tmp_path: Path, target: str, torch: str
) -> None:
    req = _file(tmp_path, "requirements.txt", "torch>=1.7.0\n")
    imported = run_import(req, target=target)
    entry = imported.entries("kept")["torch"]
    assert (entry["to"], entry["risk"]) == (torch, "none")
    assert imported.report["summary"].startswith(f"torch >=1.7.0 → {torch}, Python ")
    assert (
        "below 2.0.0, whose API change breaks older code (torch._six was removed" in (entry["why"])
    )
    text = imported.spec.read_text()
    assert (
        f'torch = "{torch.split("+", maxsplit=1)[0]}" # requirements.txt:1 torch>=1.7.0 → {torch}: the '
        in text
    )


def test_a_range_with_no_floor_takes_the_newest_release(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = _file(tmp_path, "requirements.txt", "torch<3\n")
    torch = run_import(req, target="rtx4090").entries("kept")["torch"]
    assert torch["why"] == "the newest release in '<3' that fits"


@pytest.mark.parametrize(
    ("target", "kind", "to"),
    [("rtx4090", "kept", "1.13.1+cu117"), ("cpu", "changed", "1.13.1+cpu"),
     ("h100", "changed", "2.0.1+cu118")],
)  # fmt: skip
def test_a_pinned_torchvision_sets_the_era_of_a_torch_range(
    run_import: Callable[..., Imported], tmp_path: Path, target: str, kind: str, to: str
) -> None:
    req = _file(tmp_path, "requirements.txt", "torch>=1.10\ntorchvision==0.14.1\n")
    imported = run_import(req, target=target)
    torch = imported.entries(kind)["torch"]
    assert (torch["from"], torch["to"]) == (">=1.10", to)
    assert torch["why"].startswith(
        "torchvision==0.14.1 pins the era: torch 1.13.1 is the release paired with it, in '>=1.10'"
    )
    assert imported.report["summary"].startswith(f"torch >=1.10 → {to}")


def test_gpu_only_packages_kept_on_a_cpu_target_are_named_in_the_text(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    req = _file(
        tmp_path, "requirements.txt", "torch==2.1.2\nxformers==0.0.23.post1\nbitsandbytes==0.41.1\n"
    )
    result = cli("import", str(req), "--gpu", "none", "-o", str(tmp_path / "g.toml"))
    assert result.code == 0, result.err
    for name in ("xformers 0.0.23.post1", "bitsandbytes 0.41.1"):
        line = next(line for line in result.out.splitlines() if line.startswith(f"- {name}"))
        assert "the target has no GPU: it imports, but its CUDA kernels cannot run" in line
        assert "(high risk: GPU-only code paths fail on CPU)" in line


def test_an_exact_pin_the_chosen_torch_rules_out_moves_to_its_range(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # torch 2.1 was built against NumPy 1.x: a numpy==2.0.1 pin kept beside it fails at
    # the first tensor.numpy().
    req = _file(tmp_path, "requirements.txt", "torch==2.1.2\nnumpy==2.0.1\n")
    imported = run_import(req, target="cpu")
    numpy = imported.entries("changed")["numpy"]
    assert (numpy["from"], numpy["to"]) == ("2.0.1", "<2")
    assert "numpy" not in imported.entries("kept")
    assert '"numpy<2", # requirements.txt:2 numpy==2.0.1 → <2' in imported.spec.read_text()


def test_the_repositorys_own_setuptools_pin_is_kept(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # 2021-22 environments pinned setuptools=59.5.0 (distutils for tensorboard, and
    # pkg_resources for the sdists they built): conda's pip/setuptools are otherwise dropped.
    env = _file(
        tmp_path,
        "environment.yml",
        "dependencies:\n  - python=3.8\n  - pytorch=1.10.0\n  - cudatoolkit=11.3\n"
        "  - setuptools=59.5.0\n  - pip=21.2.4\n  - wheel\n",
    )
    imported = run_import(env, target="rtx4090")
    assert imported.entries("kept")["setuptools"]["to"] == "==59.5.0"
    spec = imported.spec.read_text()
    assert '"setuptools==59.5.0"' in spec and '"wheel' not in spec and '"pip' not in spec


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_the_python_sentence_names_the_pin_as_written(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    # numpy==2.0.1 moves to numpy<2 beside torch 2.1: the sentence saying which pin holds
    # the Python back names numpy<2 (what the spec installs), never the pin it replaced.
    req = _file(tmp_path, "requirements.txt", "torch==2.1.2\nnumpy==2.0.1\n")
    imported = run_import(req, target=target)
    assert imported.result.code == 0, imported.result.out
    python = next(a for a in imported.report["assumptions"] if a["package"] == "python")
    assert "numpy<2 installs on" in python["why"], python["why"]
    assert "2.0.1" not in python["why"]
    spec = imported.spec.read_text()
    assert '"numpy<2"' in spec
    assert "numpy==2.0.1 installs" not in spec


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_a_pin_the_chosen_torch_allows_is_named_as_pinned(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    # numpy==1.24.4 is kept beside torch 2.1: the sentence names it as the files pin it.
    req = _file(tmp_path, "requirements.txt", "torch==2.1.2\nnumpy==1.24.4\n")
    imported = run_import(req, target=target)
    assert imported.result.code == 0, imported.result.out
    python = next(a for a in imported.report["assumptions"] if a["package"] == "python")
    assert "numpy==1.24.4 installs on" in python["why"], python["why"]
    assert '"numpy==1.24.4"' in imported.spec.read_text()


def test_the_markdown_says_why_a_range_resolved_where_it_did(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    req = _file(tmp_path, "requirements.txt", "torch>=1.7.0\n")
    result = cli("import", str(req), "--gpu", "none", "-o", str(tmp_path / "r.toml"))
    assert result.code == 0, result.err
    line = next(line for line in result.out.splitlines() if line.startswith("- torch "))
    assert line.startswith(
        "- torch 1.13.1+cpu: the newest release in '>=1.7.0' that fits below 2.0.0, whose API "
        "change breaks older code (torch._six was removed"
    )
    assert line.endswith("(requirements.txt:1 torch>=1.7.0)")


def test_a_range_moved_past_its_ceiling_names_the_api_changes_it_crosses(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = _file(tmp_path, "requirements.txt", "torch<1.13\n")
    torch = run_import(req, target="h100").entries("changed")["torch"]
    assert (torch["from"], torch["to"], torch["risk"]) == ("<1.13", "2.0.1+cu118", "high")
    assert torch["risk_detail"] == (
        "numerics may differ; API change in 2.0.0: torch._six was removed: "
        "'from torch._six import ...' fails"
    )


CUDA_IMAGE = """FROM nvidia/cuda:11.3.1-cudnn8-devel-ubuntu20.04
RUN apt-get update && apt-get install -y python3-pip
RUN pip3 install torch torchvision timm==0.4.12
"""


@pytest.mark.parametrize(
    ("target", "kind", "torch"),
    [("cpu", "changed", "1.12.1+cpu"), ("h100", "changed", "2.0.1+cu118"),
     ("rtx4090", "kept", "1.12.1+cu113")],
)  # fmt: skip
def test_a_cuda_base_image_dates_an_unpinned_torch(
    run_import: Callable[..., Imported], tmp_path: Path, target: str, kind: str, torch: str
) -> None:
    # `pip3 install torch` in a CUDA 11.3 image ran in the cu113 era (torch 1.10 to 1.12):
    # its newest release there, moved only where it cannot run (an H100 needs 2.0).
    docker = _file(tmp_path, "Dockerfile", CUDA_IMAGE)
    imported = run_import(docker, target=target)
    entry = imported.entries(kind)["torch"]
    assert (entry["from"], entry["to"]) == ("any", torch)
    assert entry["why"].startswith(
        "Dockerfile:1 FROM nvidia/cuda:11.3.1-cudnn8-devel-ubuntu20.04 dates the files: "
        "torch 1.12.1 is the newest release built for cu113"
    )
    if target == "h100":
        assert "torch._six was removed" in entry["risk_detail"]


def test_a_release_wheel_with_a_local_version_is_written_as_its_url(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # Time-Series-Library's Dockerfile: the RUN with a BuildKit cache mount vanished, and
    # the wheel became `mamba-ssm==2.2.6.post3+cu12torch2.5cxx11abiFALSE`, which no index
    # can have (every resolve failed on it).
    wheel = (
        "https://github.com/state-spaces/mamba/releases/download/v2.2.6.post3/"
        "mamba_ssm-2.2.6.post3+cu12torch2.5cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    )
    docker = _file(
        tmp_path,
        "Dockerfile",
        "FROM pytorch/pytorch:2.5.1-cuda12.1-cudnn9-devel\n"
        "RUN --mount=type=cache,target=/root/.cache/pip \\\n"
        "    pip install einops==0.8.0\n"
        "RUN --network=none --security=sandbox pip install timm==1.0.9\n"
        f"RUN pip install {wheel}\n",
    )
    imported = run_import(docker)
    assert imported.result.code == 0, imported.result.out
    written = imported.spec.read_text()
    assert f'"mamba-ssm @ {wheel}"' in written
    assert '"einops==0.8.0"' in written and '"timm==1.0.9"' in written
    assert 'cu12torch2.5cxx11abiFALSE"' not in written


def test_only_an_index_file_becomes_the_index_pin_of_its_version(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # `utils @ https://internal.example.com/...` was written `utils==1.0.2`, low risk: the
    # index's utils 1.0.2 is an unrelated project. A file of an index (its hash-addressed
    # layout, on its file host or a mirror; PyTorch's index) names the index's project.
    from gpuenv.importers.requirements import index_file
    from gpuenv.plan import DEFAULT_TORCH_INDEX

    digest = "0123456789abcdef" * 3 + "0123456789ab"
    requirements = _file(
        tmp_path,
        "requirements.txt",
        "torch==2.1.2\n"
        "utils @ https://internal.example.com/packages/utils-1.0.2.tar.gz\n"
        "other @ https://user:hunter2@files.example.com/other-0.1.tar.gz?token=abc\n"
        f"einops @ https://files.example.invalid/packages/ab/cd/{digest}/"
        "einops-0.7.0-py3-none-any.whl\n",
    )
    imported = run_import(requirements)
    assert imported.result.code == 0, imported.result.out
    written = imported.spec.read_text()
    assert '"utils @ https://internal.example.com/packages/utils-1.0.2.tar.gz"' in written
    assert '"other @ https://files.example.com/other-0.1.tar.gz"' in written
    assert "hunter2" not in written + imported.result.out
    assert '"einops==0.7.0"' in written
    assert "utils==" not in written and "other==" not in written
    kept = [a["why"] for a in imported.report["assumptions"] if "from its URL" in a["why"]]
    assert len(kept) == 2 and all("may be another project" in why for why in kept)
    torch_index_file = f"{DEFAULT_TORCH_INDEX}/cu121/triton-2.1.0-0-cp311-cp311-linux_x86_64.whl"
    assert index_file(torch_index_file)
    assert not index_file("https://example.invalid/whl/cu121/triton-2.1.0-0-cp311-none-any.whl")


def test_a_risk_resting_on_an_unverified_fact_says_so_in_words() -> None:
    """The Changed table's risk read "low (unverified fact)": the judges could not tell
    whose fact, or what was unverified."""
    from gpuenv.importers.report import CHANGED, LOW, Entry, _risk

    entry = Entry(CHANGED, "numpy", "torch before 2.3 ...", was="any", now="<2", risk=LOW)
    assert _risk(entry) == "low"
    assert _risk(replace(entry, unverified=True)) == (
        "low (it rests on a fact gpuenv's data marks unverified)"
    )
