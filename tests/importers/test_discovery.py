"""Discovery walks the repository the way a person looks through it (bounded, skipping
vendored and data folders) and names what it found and did not use; the newer formats
(pixi, uv, Pipfile, .python-version) are read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.importers import read_inputs
from gpuenv.importers.discover import discover
from gpuenv.knowledge.foreign import foreign_knowledge
from tests.importers.conftest import IMPORTS, Imported

DOCKERFILE = "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-devel\nRUN pip install timm==0.6.12\n"
SETUP_OPS = (
    "from setuptools import setup\n"
    "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
    "setup(name='ops', ext_modules=[CUDAExtension('ops', ['src/a.cu'])],\n"
    "      cmdclass={'build_ext': BuildExtension})\n"
)
TREE = {
    "README.md": "# paper\n",
    "requirements.txt": "torch==1.13.1\ntorchvision==0.14.1\n",
    "requirements/base.txt": "einops==0.6.0\n",
    "requirements/dev.txt": "pytest\n",
    "requirements/cuda.in": "timm==0.6.12\n",
    "docker/cuda/Dockerfile": DOCKERFILE,
    "utils/docker/Dockerfile": DOCKERFILE,
    "training/Dockerfile": DOCKERFILE,
    "models/ops/setup.py": SETUP_OPS,
    "examples/colab/requirements.txt": "gradio\n",
    "docs/requirements.txt": "sphinx\n",
    "tools/requirements.txt": "wandb\n",
    "data/requirements.txt": "never-looked-at\n",
    "third_party/apex/setup.py": "raise SystemExit\n",
    "node_modules/x/Dockerfile": "FROM scratch\n",
    "a/b/c/d/e/Dockerfile": "FROM too-deep\n",
    "pixi.lock": "version: 5\n",
}


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_walk_finds_what_a_person_would_and_lists_the_rest(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo", TREE)
    found = discover(root)
    used = sorted(p.relative_to(root).as_posix() for p in found.files)
    assert used == [
        "docker/cuda/Dockerfile",
        "models/ops/setup.py",
        "requirements.txt",
        "requirements/base.txt",
        "requirements/cuda.in",
        "training/Dockerfile",
        "utils/docker/Dockerfile",
    ]
    listed = {p.relative_to(root).as_posix(): why for p, why in found.skipped}
    assert listed == {
        "pixi.lock": "pixi's lock holds every platform's solve: pixi.toml is read instead",
        "docs/requirements.txt": "in docs/: not the paper's environment (pass it to use it)",
        "requirements/dev.txt": "development requirements",
        "tools/requirements.txt": "in a subfolder: not used (pass it to use it)",
        "examples/colab/requirements.txt": (
            "in examples/: not the paper's environment (pass it to use it)"
        ),
    }


def test_the_subfolder_files_reach_the_report(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    root = _tree(tmp_path / "repo", TREE)
    imported = run_import(root, target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    inputs = {i["file"] for i in imported.report["inputs"]}
    assert {"utils/docker/Dockerfile", "models/ops/setup.py", "requirements/base.txt"} <= inputs
    assert "ops" in imported.entries("needs_build") or any(
        "compiles CUDA code" in e["why"] for e in imported.report["needs_build"]
    )
    notes = [a["why"] for a in imported.report["assumptions"]]
    assert any("tools/requirements.txt not imported: in a subfolder" in n for n in notes)


def test_a_project_kept_in_one_subfolder_is_found_there(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # NVlabs/eg3d: README and LICENSE at the top, the project and its environment.yml in
    # eg3d/; "no environment files found" sent the researcher away empty-handed.
    root = _tree(
        tmp_path / "repo",
        {
            "README.md": "# paper\n",
            "eg3d/environment.yml": (
                "name: eg3d\nchannels: [pytorch, nvidia]\ndependencies:\n"
                "  - python=3.9\n  - pytorch=1.13.1\n  - pip:\n    - einops==0.6.0\n"
            ),
            "eg3d/train.py": "import torch\n",
            "dataset_preprocessing/ffhq/preprocess.py": "import numpy\n",
        },
    )
    found = discover(root)
    assert found.files == [root / "eg3d" / "environment.yml"]
    assert found.project_folder == root / "eg3d" and found.skipped == []
    imported = run_import(root, target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    assert [i["file"] for i in imported.report["inputs"]] == ["eg3d/environment.yml"]
    assert imported.entries("kept")["einops"]["to"] == "==0.6.0"
    notes = [a["why"] for a in imported.report["assumptions"]]
    assert (
        "eg3d: the only folder with environment files (none at the top): read as the project's"
        in notes
    )


def test_two_subfolders_with_files_are_not_guessed_between(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "repo",
        {"a/environment.yml": "dependencies: [python=3.9]\n", "b/requirements.txt": "x\n"},
    )
    found = discover(root)
    assert found.files == [] and found.project_folder is None
    assert len(found.skipped) == 2


def test_a_pixi_project_is_read(run_import: Callable[..., Imported]) -> None:
    imported = run_import("pixi-seg", target="h100")
    assert imported.result.code == 0, imported.result.out
    inputs = {i["file"]: i["format"] for i in imported.report["inputs"]}
    assert inputs == {"pixi.toml": "pixi"}
    spec = imported.spec.read_text()
    assert 'python = "3.11"' in spec
    assert '"segmentation-models-pytorch==0.3.3"' in spec
    assert "pytest" not in spec  # the test feature is left out
    assert "libomp" not in spec  # another platform's table
    notes = [a["why"] for a in imported.report["assumptions"]]
    assert "pixi.lock not imported: pixi's lock holds every platform's solve: pixi.toml is read instead" in notes  # fmt: skip
    assert any("feature 'test' left out" in n for n in notes)
    # pytorch-cuda 12.1 of the cuda feature names the paper's build
    assert imported.torch().startswith("2.1.2")
    assert "ffmpeg" in spec.split("[conda]", 1)[-1]


def test_a_uv_project_with_its_lock_and_python_version(
    run_import: Callable[..., Imported],
) -> None:
    imported = run_import("uv-project", target="cpu")
    assert imported.result.code == 0, imported.result.out
    formats = {i["file"]: i["format"] for i in imported.report["inputs"]}
    assert formats == {
        ".python-version": "python-version",
        "pyproject.toml": "pyproject",
        "uv.lock": "uv-lock",
    }
    assert imported.torch().startswith("2.4.1")  # the lock's record beats the range
    spec = imported.spec.read_text()
    assert '"numpy==2.1.1"' in spec and '"einops==0.8.0"' in spec
    assert "tiny-diffusion" not in spec.split("[pip]", 1)[-1]  # the project itself


def test_a_pipenv_project(run_import: Callable[..., Imported]) -> None:
    imported = run_import("pipenv-gan", target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    formats = {i["file"]: i["format"] for i in imported.report["inputs"]}
    assert formats == {"Pipfile": "pipfile", "Pipfile.lock": "pipfile-lock"}
    assert imported.torch().startswith("1.13.1")
    spec = imported.spec.read_text()
    assert '"tensorboard==2.11.2' in spec and "pytest" not in spec and "black" not in spec
    python = imported.entries("kept").get("python") or imported.entries("changed")["python"]
    assert python["from"] == "3.9"


def test_readers_of_the_new_formats_on_their_own() -> None:
    readings, _ = read_inputs((IMPORTS / "pipenv-gan" / "Pipfile",), foreign_knowledge())
    (pipfile,) = readings
    asks = {a.name: a for a in pipfile.asks}
    assert asks["torch"].specifier == "==1.13.1" and asks["torchvision"].specifier == ""
    assert asks["stylegan-utils"].url == (
        "git+https://github.com/example/stylegan-utils.git@3f2a9c1"
    )
    assert [n.message for n in pipfile.notes if "dev-packages" in n.message]


def test_new_formats_with_values_of_the_wrong_type_are_never_a_crash(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """Found by mutating the fixtures (3,000 files, then 400 whole imports): extras that
    are not names were a TypeError (exit 70)."""
    cases = {
        "Pipfile": "[packages]\ntorch = {version = '==2.4.1', extras = [1]}\nnumpy = 7\n",
        "pixi.toml": "[dependencies]\npytorch = {version = 3}\n[pypi-dependencies]\nx = {extras = [2]}\n",
        "uv.lock": "version = 1\npackage = 'x'\n",
        "Pipfile.lock": '{"default": {"torch": {"version": 7}, "numpy": [1]}, "_meta": 3}',
        "poetry.lock": "[[package]]\nname = 5\nversion = '1.0'\n[[package]]\nname = 'a'\n",
    }
    for name, text in cases.items():
        folder = tmp_path / name.replace(".", "-")
        folder.mkdir()
        (folder / name).write_text(text)
        result = run_import(folder / name, target="cpu").result
        assert result.code in (0, 2), (name, result.code, result.err)


def test_development_files_with_any_separator_are_listed_not_used(tmp_path: Path) -> None:
    # coqui-ai/TTS imported requirements.dev.txt (black, pylint==2.10.2) and
    # requirements.notebooks.txt (bokeh==1.4.0); FastVideo its docs build's freeze,
    # requirements-mkdocs.txt, whose pins then beat the project's own.
    root = _tree(
        tmp_path / "repo",
        {
            "requirements.txt": "torch==2.1.0\n",
            "requirements.ja.txt": "cutlet\n",
            "requirements.dev.txt": "black\ncoverage\nisort\nnose2\npylint==2.10.2\n",
            "requirements_dev.txt": "pytest\n",
            "requirements-dev.txt": "pytest\n",
            "requirements.notebooks.txt": "bokeh==1.4.0\n",
            "requirements-mkdocs.txt": "babel==2.18.0\nmkdocs==1.6.1\n",
            "requirements-mkdocs.in": "mkdocs\n",
            "requirements.docs.txt": "sphinx\n",
            "environment.dev.yml": "dependencies: [black]\n",
        },
    )
    found = discover(root)
    used = sorted(p.name for p in found.files)
    assert used == ["requirements.ja.txt", "requirements.txt"]
    listed = {p.name: why for p, why in found.skipped}
    assert set(listed) == {
        "requirements.dev.txt",
        "requirements_dev.txt",
        "requirements-dev.txt",
        "requirements.notebooks.txt",
        "requirements-mkdocs.txt",
        "requirements-mkdocs.in",
        "requirements.docs.txt",
        "environment.dev.yml",
    }
    assert set(listed.values()) == {"development requirements"}


def test_a_rocm_dockerfile_is_set_aside_beside_the_cuda_one(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # FastVideo's docker/rocm7_1.Dockerfile (an AMD image) was imported as a Linux/CUDA file.
    root = _tree(
        tmp_path / "repo",
        {
            "docker/Dockerfile": DOCKERFILE,
            "docker/rocm7_1.Dockerfile": (
                "FROM rocm/pytorch:rocm7.1_ubuntu22.04_py3.10_pytorch_release_2.9.1\n"
                "RUN pip install einops==0.8.1\n"
            ),
        },
    )
    imported = run_import(root, target="rtx4090")
    assert imported.result.code == 0, imported.result.out
    notes = [a["why"] for a in imported.report["assumptions"]]
    assert (
        "docker/rocm7_1.Dockerfile set aside: it is for AMD GPUs (ROCm), not NVIDIA GPUs or a CPU"
        in notes
    )
    assert "einops" not in imported.spec.read_text()


def test_requirement_files_named_for_a_part_of_the_project_are_found(tmp_path: Path) -> None:
    # Vim (hustvl/Vim): the README's `pip install -r vim/vim_requirements.txt`, and
    # det/det-requirements.txt, seg/seg-requirements.txt were neither read nor listed.
    root = _tree(
        tmp_path / "repo",
        {
            "vim_requirements.txt": "addict==2.4.0\naiohttp==3.9.1\n",
            "dev-requirements.txt": "pytest\n",
            "docs_requirements.txt": "sphinx\n",
            "det/det-requirements.txt": "fvcore\n",
            "seg/seg-requirements.txt": "mmcv\n",
            "docker/gpu-requirements.txt": "einops==0.7.0\n",
        },
    )
    found = discover(root)
    used = sorted(p.relative_to(root).as_posix() for p in found.files)
    assert used == ["docker/gpu-requirements.txt", "vim_requirements.txt"]
    listed = {p.relative_to(root).as_posix(): why for p, why in found.skipped}
    assert listed == {
        "dev-requirements.txt": "development requirements",
        "docs_requirements.txt": "development requirements",
        "det/det-requirements.txt": "in a subfolder: not used (pass it to use it)",
        "seg/seg-requirements.txt": "in a subfolder: not used (pass it to use it)",
    }
    readings, _ = read_inputs((root / "vim_requirements.txt",), foreign_knowledge())
    assert [r.format for r in readings] == ["requirements"]


@pytest.mark.parametrize("asked", ["12.*", ">=12,<13"])
def test_a_pixi_cuda_major_asks_for_a_build_of_that_major(
    asked: str, run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # pixi-pytorch-onnx: `cuda-version = "12.*"` beside `pytorch-gpu = "*"` was "no CUDA
    # version pinned"; an H100 on driver 550 got torch's cu118 build (cu130 on driver 580).
    # The attack's ">=12,<13" (one major as a range) was read the same way.
    root = _tree(
        tmp_path / "repo",
        {
            "pixi.toml": (
                '[workspace]\nname = "p"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                f'[dependencies]\npython = "3.10.*"\ncuda-version = "{asked}"\npytorch-gpu = "*"\n'
            )
        },
    )
    for target, driver_cuda in (("h100", "12.4"), ("rtx5090", "12.8")):
        imported = run_import(root, target=target)
        assert imported.result.code == 0, imported.result.out
        tag = imported.torch().split("+")[1]
        assert tag.startswith("cu12") and tag <= "cu" + driver_cuda.replace(".", ""), tag
        notes = [a["why"] for a in imported.report["assumptions"]]
        assert not any("no CUDA version pinned" in n for n in notes)


def test_a_development_dockerfile_and_a_development_include_are_left_out(tmp_path: Path) -> None:
    """coqui-ai/TTS: dockerfiles/Dockerfile.dev and a recipe's Dockerfile -r'd
    requirements.dev.txt and requirements.notebooks.txt, and black, pylint==2.10.2 and
    bokeh==1.4.0 became the paper's environment although discovery left those files out."""
    root = _tree(
        tmp_path / "repo",
        {
            "requirements.txt": "torch==2.1.0\n",
            "requirements.dev.txt": "black\npylint==2.10.2\n",
            "requirements.notebooks.txt": "bokeh==1.4.0\n",
            "dockerfiles/Dockerfile.dev": "FROM python:3.10\nRUN pip install -r requirements.dev.txt\n",
            "recipes/prep/Dockerfile": (
                "FROM python:3.10\nADD requirements*.txt /a/\nWORKDIR /a\n"
                "RUN pip install -r requirements.txt -r requirements.dev.txt "
                "-r requirements.notebooks.txt\n"
            ),
        },
    )
    found = discover(root)
    assert "Dockerfile.dev" in {p.name for p, _ in found.skipped}
    readings, _ = read_inputs((root,), foreign_knowledge())
    names = {a.name for r in readings for a in r.asks}
    assert "black" not in names and "bokeh" not in names and "pylint" not in names


# kzl/decision-transformer (2021): a README at the top that sends the reader to each
# subfolder, and one conda_env.yml in each of gym/ and atari/.
DT_GYM_ENV = """name: decision-transformer-gym
channels:
- pytorch
dependencies:
- python=3.8.5
- anaconda
- cudatoolkit=10.
- numpy
- pip
- pip:
  - gym==0.18.3
  - torch==1.8.1
"""
DT_README = """# Decision Transformer

We provide code in two sub-directories: `atari` containing code for Atari experiments and
`gym` containing code for OpenAI Gym experiments.
See corresponding READMEs in each folder for instructions.
"""


def test_files_found_in_subfolders_are_named_when_nothing_is_used(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """The error said "no environment files found in this folder" and named neither
    conda_env.yml: the researcher was not told which file to pass."""
    root = _tree(
        tmp_path / "repo",
        {
            "README.md": DT_README,
            "gym/conda_env.yml": DT_GYM_ENV,
            "atari/conda_env.yml": DT_GYM_ENV.replace("gym", "atari"),
        },
    )
    imported = run_import(root, target="h100", extra=("--no-check-resolves",))
    assert imported.result.code == 2, imported.result.out
    error = imported.result.json()["error"]
    assert error["message"].startswith(
        f"{root}: no environment files found in this folder (found in subfolders, not used: "
        "atari/conda_env.yml, gym/conda_env.yml), and no install commands in README.md"
    ), error
    hint = error["problems"][0]["hint"]
    assert hint == f"pass the files themselves: gpuenv import {root}/atari/conda_env.yml"


def test_a_devel_requirements_file_is_listed_not_used(tmp_path: Path) -> None:
    # facebookresearch/fairseq2's requirements-devel.txt (black, flake8, mypy, pytest and
    # type stubs) was imported as the paper's environment beside its setup.py.
    root = _tree(
        tmp_path / "repo",
        {
            "setup.py": 'from setuptools import setup\nsetup(name="fairseq2")\n',
            "requirements-devel.txt": "black~=26.3\nflake8~=7.1\nmypy~=1.15\npytest~=8.4\n",
        },
    )
    found = discover(root)
    assert [p.name for p in found.files] == ["setup.py"]
    assert [(p.name, why) for p, why in found.skipped] == [
        ("requirements-devel.txt", "development requirements")
    ]


def test_files_past_the_listing_limit_are_not_counted_as_if_they_were_all(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """60 subfolders each with a conda_env.yml (decision-transformer's layout, many
    times): discovery lists 40, and the error said 'and 32 more' of 52."""
    files = {"README.md": DT_README}
    files |= {f"task{i:02}/conda_env.yml": DT_GYM_ENV for i in range(60)}
    root = _tree(tmp_path / "repo", files)
    imported = run_import(root, target="h100", extra=("--no-check-resolves",))
    assert imported.result.code == 2, imported.result.out
    message = imported.result.json()["error"]["message"]
    assert "task07/conda_env.yml and more), and no install commands" in message, message


def test_a_module_named_setup_py_is_listed_not_used(tmp_path: Path) -> None:
    """dinov2 (2023): ``dinov2/eval/setup.py`` is an evaluation helper that calls its own
    ``setup(args)``; the import listed it as a project's setup.py."""
    root = _tree(
        tmp_path / "repo",
        {
            "requirements.txt": "torch==2.0.0\n",
            "dinov2/eval/__init__.py": "",
            "dinov2/eval/setup.py": (
                "import argparse\nfrom dinov2.utils.config import setup\n\n"
                "def setup_and_build_model(args):\n    config = setup(args)\n"
            ),
            "ops/setup.py": "from setuptools import setup\nsetup(name='ops')\n",
        },
    )
    found = discover(root)
    used = sorted(p.relative_to(root).as_posix() for p in found.files)
    assert used == ["ops/setup.py", "requirements.txt"]
    listed = {p.relative_to(root).as_posix(): why for p, why in found.skipped}
    assert listed == {
        "dinov2/eval/setup.py": "a module named setup.py (no setuptools): not a project's"
    }


def test_a_readme_beside_environment_files_says_the_system_packages_it_installs(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """openai/whisper: requirements.txt names torch, and the README's `sudo apt install
    ffmpeg` (whisper/audio.py runs the ffmpeg binary) went unsaid: transcription failed
    with no warning. A README's apt line is said as a Dockerfile's is."""
    paper = tmp_path / "whisper"
    paper.mkdir()
    (paper / "requirements.txt").write_text("torch==2.4.1\nnumpy==1.26.4\n")
    (paper / "README.md").write_text(
        "# whisper\n\n```bash\npip install -U openai-whisper\n```\n\n```bash\n"
        "# on Ubuntu or Debian\nsudo apt update && sudo apt install ffmpeg\n```\n\n"
        "Some prose that says apt install nothing.\n"
    )
    imported = run_import(paper)
    assert imported.result.code == 0, imported.result.err
    said = [e for e in imported.report["unmanaged"] if "system packages" in e["why"]]
    assert [(e["why"], e["file"]) for e in said] == [
        ("system packages (ffmpeg): install them on the machine", "README.md:9")
    ], said


def test_a_repository_that_is_a_python_project_is_said_to_need_installing(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """xinntao/Real-ESRGAN: realesrgan/__init__.py imports version.py, which only its
    setup.py writes; the report said nothing of installing the project."""
    paper = tmp_path / "Real-ESRGAN"
    paper.mkdir()
    (paper / "requirements.txt").write_text("torch==2.4.1\nnumpy==1.26.4\n")
    (paper / "setup.py").write_text(
        "from setuptools import setup\nsetup(\n    name='realesrgan',\n    version='0.3.0',\n)\n"
    )
    imported = run_import(paper)
    assert imported.result.code == 0, imported.result.err
    said = [e["why"] for e in imported.report["assumptions"] if "Python project" in e["why"]]
    assert said == [
        "the repository is the Python project realesrgan: `gpuenv install` installs it "
        "editable when gpuenv.toml sits beside its setup.py; written elsewhere, set [project] "
        "path to the imported folder"
    ], said
