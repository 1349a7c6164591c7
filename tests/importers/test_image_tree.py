"""A Dockerfile's ``pip install .`` installs what the image holds in that folder: a
``git clone`` made there, a folder of the build context a ``COPY``/``ADD`` put there, or
the project itself. The Dockerfiles are real papers' and projects' (the lines that
matter, kept as they were written)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.importers._image_tree import Cloned, Copied, ImageTree
from gpuenv.importers.model import LOCAL_PACKAGE, UNMANAGED, UNREADABLE
from tests.importers.conftest import Imported
from tests.importers.test_readers import asks, read


def _notes(readings: list, kind: str) -> list[str]:  # type: ignore[type-arg]
    return [n.message for r in readings for n in r.notes if n.kind == kind]


# A SageMaker training image (2020): the project copied to /opt/ml/code and installed
# there, then NVIDIA apex cloned and built in the same RUN that enters it.
SAGEMAKER = """\
FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.4.0-gpu-py3
COPY . /opt/ml/code/
RUN pip install requests
RUN cd /opt/ml/code && \\
    pip install --editable . && \\
    rm setup.py
RUN git clone https://github.com/NVIDIA/apex && cd apex && pip install -v --no-cache-dir \
--global-option="--cpp_ext" --global-option="--cuda_ext" --global-option="--deprecated_fused_adam" ./
"""


def test_a_clone_entered_and_installed_in_one_run_is_that_repository(tmp_path: Path) -> None:
    readings = read(tmp_path, {"Dockerfile": SAGEMAKER})
    apex = asks(readings)["apex"]
    assert apex.url == "git+https://github.com/NVIDIA/apex"
    project = [n for n in _notes(readings, UNMANAGED) if "the project itself" in n]
    assert project == [".: a local path (the project itself)"]


# NeMo-style training image (2023): WORKDIR /opt, the clone in one RUN, the install after
# a `cd` in the next.
NEMO = """\
FROM nvcr.io/nvidia/pytorch:23.04-py3
WORKDIR /opt
RUN pip install --upgrade git+https://github.com/NVIDIA/TransformerEngine.git@release_v1.1
RUN pip uninstall -y apex
RUN git clone https://github.com/NVIDIA/apex.git
RUN cd apex && pip install -v --disable-pip-version-check --no-cache-dir --no-build-isolation \
--config-settings "--build-option=--cpp_ext" --config-settings "--build-option=--cuda_ext" ./
"""


def test_a_clone_in_one_run_and_its_install_in_the_next(tmp_path: Path) -> None:
    found = asks(read(tmp_path, {"Dockerfile": NEMO}))
    assert found["apex"].url == "git+https://github.com/NVIDIA/apex.git"


# NVIDIA/tacotron2 (2018): apex is a folder of the build context, added and entered.
TACOTRON2 = """\
FROM pytorch/pytorch:nightly-devel-cuda10.0-cudnn7
ENV PATH /usr/local/nvidia/bin:/usr/local/cuda/bin:${PATH}
RUN apt-get update -y
RUN pip install numpy scipy matplotlib librosa==0.6.0 tensorflow tensorboardX inflect==0.2.5 \
Unidecode==1.0.22 pillow jupyter
ADD apex /apex/
WORKDIR /apex/
RUN pip install -v --no-cache-dir --global-option="--cpp_ext" --global-option="--cuda_ext" .
"""


def test_a_context_folder_added_and_entered_is_that_folder_not_the_project(
    tmp_path: Path,
) -> None:
    readings = read(tmp_path, {"Dockerfile": TACOTRON2})
    local = [f for r in readings for f in r.facts if f.key == LOCAL_PACKAGE]
    assert [f.value for f in local] == ["apex"]
    assert "not in this checkout" in (local[0].note or "")
    assert not [n for n in _notes(readings, UNMANAGED) if "the project itself" in n]


def test_the_report_builds_a_context_folder_by_its_path_not_by_a_name(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    root = tmp_path / "tacotron2"
    root.mkdir()
    (root / "Dockerfile").write_text(TACOTRON2)
    imported = run_import(root, target="h100", extra=("--no-check-resolves", "--json"))
    assert imported.result.code == 0, imported.result.out
    built = imported.entries("needs_build")["apex"]
    # pip reads a bare `apex` as the index's unrelated project of that name
    assert "pip install --no-build-isolation ./apex`" in built["why"]


# facebookresearch/detectron2's docker/Dockerfile: the clone named, installed by that name.
DETECTRON2 = """\
FROM nvidia/cuda:11.1.1-cudnn8-devel-ubuntu18.04
WORKDIR /home/appuser
RUN pip install --user torch==1.10 torchvision==0.11.1 -f \
https://download.pytorch.org/whl/cu111/torch_stable.html
RUN git clone https://github.com/facebookresearch/detectron2 detectron2_repo
ENV FORCE_CUDA="1"
RUN pip install --user -e detectron2_repo
WORKDIR /home/appuser/detectron2_repo
"""


def test_a_clone_into_a_named_folder_installed_by_that_name(tmp_path: Path) -> None:
    found = asks(read(tmp_path, {"Dockerfile": DETECTRON2}))
    assert found["detectron2"].url == "git+https://github.com/facebookresearch/detectron2"
    assert not found["detectron2"].editable


def test_a_checkout_after_the_clone_pins_the_ref_and_setup_py_install_counts(
    tmp_path: Path,
) -> None:
    dockerfile = (
        "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-devel\n"
        "RUN git clone --depth 1 https://github.com/facebookresearch/pytorch3d.git && "
        "cd pytorch3d && git checkout v0.7.2 && python setup.py install\n"
        "RUN git clone -b 22.03 https://github.com/NVIDIA/apex /src/apex\n"
        "RUN pip install -e /src/apex/contrib/group_norm\n"
    )
    found = asks(read(tmp_path, {"Dockerfile": dockerfile}))
    assert found["pytorch3d"].url == "git+https://github.com/facebookresearch/pytorch3d.git@v0.7.2"
    apex = [a for a in found.values() if a.url and "apex" in a.url]
    assert [a.url for a in apex] == [
        "git+https://github.com/NVIDIA/apex@22.03#subdirectory=contrib/group_norm"
    ]


def test_a_requirements_file_of_a_clone_is_not_the_repositorys_own(tmp_path: Path) -> None:
    dockerfile = (
        "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-devel\n"
        "RUN git clone https://github.com/NVlabs/stylegan3 && cd stylegan3 && "
        "pip install -r requirements.txt\n"
        "COPY requirements.txt /tmp/reqs/\n"
        "RUN pip install -r /tmp/reqs/requirements.txt\n"
    )
    readings = read(
        tmp_path, {"Dockerfile": dockerfile, "requirements.txt": "einops==0.6.1\n"}, "Dockerfile"
    )
    assert any("cloned in the image" in n for n in _notes(readings, UNREADABLE))
    # the repository's own file, copied to /tmp/reqs, is read once: from the COPY
    assert asks(readings)["einops"].specifier == "==0.6.1"


def test_a_cd_lasts_for_its_own_run_only(tmp_path: Path) -> None:
    dockerfile = (
        "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-devel\n"
        "RUN cd /opt && git clone https://github.com/NVIDIA/apex\n"
        "RUN pip install -e apex\n"  # in /, where no clone is: read as before
    )
    readings = read(tmp_path, {"Dockerfile": dockerfile})
    assert "apex" not in asks(readings)
    assert any(n.startswith("apex: a local path") for n in _notes(readings, UNMANAGED))


# An ASR training image (2020): the requirements file copied into /tmp, which every image
# has as a folder, then installed from there.
ASR_TMP = """\
FROM nvidia/cuda:10.2-cudnn7-devel-ubuntu18.04
COPY requirements.txt /tmp
WORKDIR /tmp
RUN pip install -r requirements.txt
"""


def test_a_file_copied_to_a_folder_of_the_image_goes_into_it(tmp_path: Path) -> None:
    readings = read(
        tmp_path, {"Dockerfile": ASR_TMP, "requirements.txt": "librosa==0.8.0\n"}, "Dockerfile"
    )
    assert asks(readings)["librosa"].specifier == "==0.8.0"
    assert not [n for n in _notes(readings, UNREADABLE) if "not here" in n]


# A ParlAI chat bot image (2020): ParlAI cloned into /home/work_dir/parlai, then a conda
# file copied to /home/work_dir (a folder, made by mkdir): the clone is still there.
PARLAI_BOT = """\
FROM continuumio/anaconda3:latest
RUN mkdir /home/work_dir
RUN git clone https://github.com/facebookresearch/ParlAI.git /home/work_dir/parlai
COPY conda.yml /home/work_dir
RUN cd /home/work_dir/parlai && python setup.py develop
"""


def test_a_file_copied_beside_a_clone_leaves_the_clone(tmp_path: Path) -> None:
    readings = read(tmp_path, {"Dockerfile": PARLAI_BOT, "conda.yml": "dependencies: [pip]\n"})
    assert asks(readings)["parlai"].url == "git+https://github.com/facebookresearch/ParlAI.git"
    assert not [f for r in readings for f in r.facts if f.key == LOCAL_PACKAGE]


# A captioning service on bottom-up-attention.pytorch (2021): setup.py's commands chained,
# `build develop`, as that repository's (and detectron2's, maskrcnn-benchmark's) README says.
BOTTOM_UP = """\
FROM jjanzic/docker-python3-opencv
WORKDIR /code
RUN git clone https://github.com/NVIDIA/apex.git \\
    && cd apex \\
    && git checkout a0d99fdb2cfcc418809dde975f51097c3d6010ca \\
    && python setup.py install \\
    && cd .. \\
    && git clone --recursive https://github.com/MILVLG/bottom-up-attention.pytorch \\
    && cd bottom-up-attention.pytorch/detectron2 \\
    && pip install -e . \\
    && cd .. \\
    && python setup.py build develop
"""


def test_setup_py_commands_chained_before_develop_count(tmp_path: Path) -> None:
    readings = read(tmp_path, {"Dockerfile": BOTTOM_UP})
    urls = [a.url for r in readings for a in r.asks if a.url]
    assert urls == [
        "git+https://github.com/NVIDIA/apex.git@a0d99fdb2cfcc418809dde975f51097c3d6010ca",
        "git+https://github.com/MILVLG/bottom-up-attention.pytorch#subdirectory=detectron2",
        "git+https://github.com/MILVLG/bottom-up-attention.pytorch",
    ]


# facebookresearch/habitat-api's Dockerfile (2019): each step in `bash -c`, in the conda
# environment it activates.
HABITAT = """\
FROM nvidia/cudagl:10.1-devel-ubuntu16.04
RUN conda create -n habitat python=3.6
RUN git clone https://github.com/facebookresearch/habitat-sim.git
RUN /bin/bash -c ". activate habitat; cd habitat-sim; python setup.py install --headless"
RUN git clone https://github.com/facebookresearch/habitat-api.git
RUN /bin/bash -c ". activate habitat; cd habitat-api; pip install -e ."
"""


def test_a_bash_c_script_is_read_as_its_commands(tmp_path: Path) -> None:
    found = asks(read(tmp_path, {"Dockerfile": HABITAT}))
    assert found["habitat-sim"].url == "git+https://github.com/facebookresearch/habitat-sim.git"
    assert found["habitat-api"].url == "git+https://github.com/facebookresearch/habitat-api.git"


# A video model's image (2025): `SHELL ["conda", "run", ...]` and every pip in `conda run -n`.
CONDA_RUN = """\
FROM nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04
SHELL ["conda", "run", "-n", "eccv26", "/bin/bash", "-c"]
RUN conda run -n eccv26 pip install --no-cache-dir torch==2.0.1 torchvision==0.15.2 \
--index-url=https://download.pytorch.org/whl/cu118 -U
RUN git clone https://github.com/Dao-AILab/flash-attention.git && \\
    cd flash-attention && \\
    git checkout v2.5.4 && \\
    cd csrc/layer_norm && \\
    MAX_JOBS=16 conda run -n eccv26 pip install . --no-build-isolation
"""


def test_conda_run_runs_the_command_after_its_options(tmp_path: Path) -> None:
    readings = read(tmp_path, {"Dockerfile": CONDA_RUN})
    assert asks(readings)["torch"].specifier == "==2.0.1"
    urls = [a.url for r in readings for a in r.asks if a.url]
    assert (
        "git+https://github.com/Dao-AILab/flash-attention.git@v2.5.4#subdirectory=csrc/layer_norm"
        in urls
    )


# automatika-robotics/roboml's Dockerfile (2024): the project copied in and installed with
# an extra, `.[vision]`, which pip reads as the folder.
ROBOML = """\
FROM nvidia/cuda:12.1.0-cudnn8-runtime-ubuntu22.04 as model_server
WORKDIR /roboml
COPY . .
RUN pip install .[vision]
WORKDIR /
RUN git clone https://github.com/open-mmlab/mmdetection.git && pip install -v -e mmdetection/
"""


def test_the_project_with_an_extra_is_the_project(tmp_path: Path) -> None:
    readings = read(tmp_path, {"Dockerfile": ROBOML})
    project = [n for n in _notes(readings, UNMANAGED) if "the project itself" in n]
    assert project == [".[vision]: a local path (the project itself)"]
    assert not [n for n in _notes(readings, UNREADABLE) if "not a requirement" in n]
    assert asks(readings)["mmdetection"].url == "git+https://github.com/open-mmlab/mmdetection.git"


# A Dockerfile's RUN that starts with `[` but is no JSON is the shell form, as Docker reads
# it (caliban's image, 2020: `RUN [ $(getent group 1001) ] || groupadd ...`; the apex line
# as nv-tlabs/lyra's setup script writes it).
TEST_BRACKET = """\
FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-devel
RUN [ $(getent group 1001) ] || groupadd --gid 1001 1001
RUN [ -d apex ] || git clone https://github.com/NVIDIA/apex && cd apex && pip install ./
"""


def test_a_run_starting_with_a_test_bracket_is_the_shell_form(tmp_path: Path) -> None:
    readings = read(tmp_path, {"Dockerfile": TEST_BRACKET})
    assert asks(readings)["apex"].url == "git+https://github.com/NVIDIA/apex"
    assert not [n for r in readings for n in r.notes if "JSON" in n.message]


@pytest.mark.parametrize(
    ("steps", "path", "expected"),
    [
        # a later COPY of the whole context overlays the folder copied into it before
        (
            [("copy", ["apex"], "/app/apex"), ("copy", ["."], "/app")],
            "/app/apex",
            (Copied("."), "apex"),
        ),
        # several sources merge into the destination: none of them is it
        ([("copy", ["a", "b"], "/app/")], "/app", None),
        # a file copied into a folder keeps its name; a relative destination is the WORKDIR's
        (
            [("workdir", "/w"), ("copy", ["req.txt"], "deps/")],
            "/w/deps/req.txt",
            (Copied("req.txt"), "."),
        ),
        # git@host:owner/repo is an ssh URL pip can read
        (
            [("run", "git clone git@github.com:NVlabs/nvdiffrast.git")],
            "/nvdiffrast",
            (Cloned("ssh://git@github.com/NVlabs/nvdiffrast.git"), "."),
        ),
        # a checkout that makes a new branch names no ref
        (
            [("run", "git clone https://h/o/r && cd r && git checkout -b mine")],
            "/r",
            (Cloned("https://h/o/r"), "."),
        ),
        # kneron's OCR image (2023): a file copied to a clone's folder goes into it
        (
            [
                ("run", "git clone https://github.com/zihaomu/deep-text-recognition-benchmark.git"),
                ("copy", ["TPS-ResNet-BiLSTM-Attn.pth"], "deep-text-recognition-benchmark"),
            ],
            "/deep-text-recognition-benchmark",
            (Cloned("https://github.com/zihaomu/deep-text-recognition-benchmark.git"), "."),
        ),
        # a file copied with no trailing / to a folder nothing filled: only its own name
        # below it is known
        ([("copy", ["requirements.txt"], "/tmp"), ("run", "cd /")], "/tmp/other", None),
        # a variable in the WORKDIR: nothing below it is known
        ([("workdir", "$HOME"), ("run", "git clone https://h/o/r")], "r", None),
    ],
)
def test_the_tree(steps: list[tuple], path: str, expected: object) -> None:  # type: ignore[type-arg]
    tree = ImageTree()
    for step in steps:
        if step[0] == "copy":
            tree.copied(step[1], step[2], folders=["." not in s[1:] for s in step[1]])
        elif step[0] == "workdir":
            tree.set_workdir(step[1])
        else:
            tree.begin_run()
            for command in step[1].split(" && "):
                words = command.split()
                if words[0] == "cd":
                    tree.cd(words[1])
                else:
                    tree.git(words)
    assert tree.origin_of(path) == expected


def test_a_cd_inside_a_subshell_ends_with_it(tmp_path: Path) -> None:
    dockerfile = (
        "FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-devel\n"
        "COPY . /app\nWORKDIR /app\n"
        "RUN git clone https://github.com/NVIDIA/apex && (cd apex && pip install .) "
        "&& pip install -e .\n"
    )
    readings = read(tmp_path, {"Dockerfile": dockerfile})
    assert asks(readings)["apex"].url == "git+https://github.com/NVIDIA/apex"
    # the second install is in /app again: the project, not apex a second time
    assert any(
        n.startswith(".: a local path (the project itself)") for n in _notes(readings, UNMANAGED)
    )


# A multi-stage build (the shape of many CUDA images since 2019): the clone in a "base"
# stage, the build of it in a stage that starts FROM that one, WORKDIR inherited.
STAGES = """\
FROM nvidia/cuda:12.1.0-devel-ubuntu22.04 AS base
WORKDIR /opt
RUN git clone -b 24.04.01 https://github.com/NVIDIA/apex
FROM base AS build
RUN cd apex && pip install --no-build-isolation .
FROM python:3.11-slim AS other
RUN cd /opt/apex && pip install .
"""


def test_a_stage_from_an_earlier_stage_starts_from_its_folders(tmp_path: Path) -> None:
    """``FROM base`` starts from what the base stage put in the image (its clones, copies
    and WORKDIR); it used to start from an empty tree, so the clone was lost. A stage
    from another image starts empty, as before."""
    readings = read(tmp_path, {"Dockerfile": STAGES})
    apex = asks(readings)["apex"]
    assert apex.url == "git+https://github.com/NVIDIA/apex@24.04.01"
    tree = ImageTree()
    tree.set_workdir("/opt")
    tree.git(["git", "clone", "https://github.com/NVIDIA/apex"])
    later = tree.copy()
    later.begin_run()
    later.cd("apex")
    assert later.origin_of(".") is not None
    tree.new_stage()
    assert tree.origin_of("/opt/apex") is None and later.origin_of("/opt/apex") is not None
