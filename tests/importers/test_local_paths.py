"""A requirement that is a folder: the repository's own is a source to build, one on the
author's machine is in no file (the field test's Vim and gaussian-splatting)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.importers.conftest import Imported

# graphdeco-inria/gaussian-splatting's environment.yml (177653f4), and the line of
# submodules/simple-knn/setup.py that compiles CUDA code
GAUSSIAN_SPLATTING = """\
name: gaussian_splatting
channels:
  - pytorch
  - conda-forge
  - defaults
dependencies:
  - cudatoolkit=11.6
  - plyfile
  - python=3.7.13
  - pip=22.3.1
  - pytorch=1.12.1
  - torchaudio=0.12.1
  - torchvision=0.13.1
  - tqdm
  - pip:
    - submodules/diff-gaussian-rasterization
    - submodules/simple-knn
"""
SIMPLE_KNN = """\
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension, BuildExtension
import os

setup(
    name="simple_knn",
    ext_modules=[
        CUDAExtension(
            name="simple_knn._C",
            sources=["spatial.cu", "simple_knn.cu", "ext.cpp"])
        ],
    cmdclass={'build_ext': BuildExtension},
)
"""
# hustvl/Vim det/det-requirements.txt:6 and :23-24 (a pip freeze of the author's machine)
VIM_DET = """\
torch==2.1.1
apex @ file:///home/tiger/apex
# Editable install with no version control (colossalai==0.3.5)
-e /home/tiger/ColossalAI
"""


def _pip(imported: Imported) -> str:
    text = imported.spec.read_text()
    return text[text.index("[pip]") :]


def test_a_repository_folder_pip_installs_is_a_source_to_build(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    repo = tmp_path / "gaussian-splatting"
    (repo / "submodules" / "simple-knn").mkdir(parents=True)
    (repo / "environment.yml").write_text(GAUSSIAN_SPLATTING)
    (repo / "submodules" / "simple-knn" / "setup.py").write_text(SIMPLE_KNN)
    imported = run_import(repo, target="h100")
    assert imported.result.code == 0, imported.result.out
    builds = imported.entries("needs_build")
    knn = builds["simple-knn"]
    assert knn["why"] == (
        "a folder of the repository pip builds (submodules/simple-knn): not installed by "
        "gpuenv; after `gpuenv install`, `gpuenv run -- pip install --no-build-isolation "
        "./submodules/simple-knn` builds it against the environment's torch; it compiles CUDA "
        "code against torch (submodules/simple-knn/setup.py:2 from torch.utils.cpp_extension "
        "import CUDAExtension, BuildExtension)"
    )
    assert (knn["nvcc"], knn["file"]) == ("11.8", "environment.yml:17")
    # the other submodule is not checked out: named, with why its code is unknown
    assert builds["diff-gaussian-rasterization"]["why"].endswith(
        "; its folder is not in this checkout (a git submodule not fetched?)"
    )
    assert builds["diff-gaussian-rasterization"]["nvcc"] is None
    notes = [a["why"] for a in imported.report["assumptions"]]
    assert not [n for n in notes if "submodules" in n], notes
    assert "submodules" not in _pip(imported)
    assert 'toolkit = "auto" # nvcc 11.8' in imported.spec.read_text()


def test_a_path_on_the_authors_machine_is_not_reproducible_and_not_in_the_spec(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = tmp_path / "det" / "det-requirements.txt"
    path.parent.mkdir()
    path.write_text(VIM_DET)
    imported = run_import(path, target="h100")
    assert imported.result.code == 0, imported.result.out
    lost = imported.entries("unreproducible")
    assert sorted(lost) == ["ColossalAI", "apex"]
    assert lost["apex"]["entry"] == "apex @ file:///home/tiger/apex"
    assert lost["ColossalAI"]["file"] == "det-requirements.txt:4"
    for entry in lost.values():
        assert entry["risk"] == "high"
        assert "pip install -e ." not in entry["why"]
    assert "tiger" not in imported.spec.read_text()
    advice = [a["why"] for a in imported.report["assumptions"] if "-e ." in a["why"]]
    assert advice == []


def test_a_folder_beside_the_repository_is_not_reproducible(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    repo = tmp_path / "paper"
    repo.mkdir()
    (tmp_path / "ColossalAI").mkdir()
    (repo / "requirements.txt").write_text("torch==2.1.1\n-e ../ColossalAI\n-e .[dev]\n")
    imported = run_import(repo, target="h100")
    lost = imported.entries("unreproducible")["ColossalAI"]
    assert lost["why"].startswith("a folder outside the repository: ")
    own = [a["why"] for a in imported.report["assumptions"] if a["entry"] == "-e .[dev]"]
    assert own == [
        ".[dev]: a local path (the project itself): not installed by gpuenv; after `gpuenv "
        "install`, `gpuenv run -- pip install --no-deps -e .` installs the project itself"
    ]
    assert imported.entries("needs_build") == {}


def test_a_dockerfile_path_is_the_image_s_and_stays_the_project(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM pytorch/pytorch:2.1.2-cuda12.1-cudnn8-runtime\nCOPY . /workspace\n"
        "RUN pip install -e /workspace\n"
    )
    imported = run_import(path, target="h100")
    assert imported.entries("unreproducible") == {}
    # /workspace holds what `COPY . /workspace` put there: the project itself
    assert any(
        a["why"].startswith(".: a local path (the project itself)")
        and a["entry"] == "RUN pip install -e /workspace"
        for a in imported.report["assumptions"]
    )


@pytest.mark.parametrize(
    ("folder", "said"),
    [
        # microsoft/Swin-Transformer: the only setup.py is its fused-window kernel's
        ("kernels/window_process", " in kernels/window_process"),
        ("", ""),
    ],
)
def test_a_project_that_compiles_against_torch_says_where_the_spec_must_be(
    run_import: Callable[..., Imported], tmp_path: Path, folder: str, said: str
) -> None:
    """Swin-Transformer read "installs it editable (gpuenv.toml beside it: [project]
    path)", and the written spec named no path: it said where the spec is to be, as
    though it were."""
    repo = tmp_path / "swin"
    kernel = repo / folder if folder else repo
    kernel.mkdir(parents=True, exist_ok=True)
    (repo / "requirements.txt").write_text("torch==2.1.2\ntimm==0.4.12\n")
    (kernel / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        "setup(name='swin_window_process', ext_modules=[CUDAExtension('swin_window_process', "
        "['swin_window_process.cpp'])], cmdclass={'build_ext': BuildExtension})\n"
    )
    imported = run_import(repo, target="h100")
    assert imported.result.code == 0, imported.result.out
    why = imported.entries("needs_build")["swin_window_process"]["why"]
    assert why.endswith(
        "`gpuenv install` builds it for each target's GPUs and installs it editable from a "
        f"gpuenv.toml beside its setup.py{said}, or one whose [project] path names that folder"
    ), why


def test_a_subfolder_a_file_pip_installs_is_built_one_way_and_its_files_said_read(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """IDEA-Research/Grounded-Segment-Anything: its Dockerfile pip-installs GroundingDINO,
    whose setup.py compiles CUDA and reads its requirements.txt. The report said both
    "builds it from a gpuenv.toml beside its setup.py in GroundingDINO" and "not installed
    by gpuenv: pip install ./GroundingDINO", and both that GroundingDINO/requirements.txt
    was imported and that it was not."""
    repo = tmp_path / "gsa"
    dino = repo / "GroundingDINO"
    dino.mkdir(parents=True)
    (repo / "Dockerfile").write_text(
        "FROM pytorch/pytorch:2.0.1-cuda11.7-cudnn8-devel\n"
        "RUN mkdir -p /home/appuser/gsa\n"
        "COPY . /home/appuser/gsa/\n"
        "WORKDIR /home/appuser/gsa\n"
        "RUN python -m pip install --no-cache-dir -e GroundingDINO\n"
    )
    (repo / "requirements.txt").write_text("numpy==1.26.4\n")
    (dino / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import CUDAExtension, BuildExtension\n"
        "def parse_requirements(f):\n    return open(f).read().split()\n"
        "setup(name='groundingdino', ext_modules=[CUDAExtension('groundingdino._C', "
        "['vision.cpp', 'ms_deform_attn_cuda.cu'])], cmdclass={'build_ext': BuildExtension},\n"
        "      install_requires=parse_requirements('requirements.txt'))\n"
    )
    (dino / "requirements.txt").write_text("timm\ntransformers\n")
    imported = run_import(repo)
    assert imported.result.code == 0, imported.result.err
    builds = imported.report["needs_build"]
    assert [e["package"] for e in builds] == ["GroundingDINO"], builds
    assert "pip install --no-build-isolation ./GroundingDINO" in builds[0]["why"]
    said = [e["why"] for e in imported.report["assumptions"]]
    read = [i["file"] for i in imported.report["inputs"]]
    if "GroundingDINO/requirements.txt" in read:
        assert not any(w.startswith("GroundingDINO/requirements.txt not imported") for w in said)
