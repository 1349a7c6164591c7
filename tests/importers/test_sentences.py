"""Every sentence kind of the import report, checked against a case that produces it.

``CASES`` imports small repositories modelled on real ones and asserts exact sentences
(an entry's ``why`` or ``risk_detail``). ``test_every_sentence_kind_has_a_case`` reads
the report's sentence templates from the importers' source (each ``why``/``risk_text``
string, its ``{...}`` parts as wildcards) and requires each to match a sentence asserted
here, or to be listed in ``ELSEWHERE`` (asserted by another test of tests/importers, or
not yet: that list may only shrink). A new sentence kind needs a case.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.pkgindex.index import serve
from tests.importers.conftest import Imported

IMPORTERS = Path(__file__).parents[2] / "src" / "gpuenv" / "importers"
NUMPY_1 = (
    "torch before 2.3 was built against NumPy 1.x: with NumPy 2 its numpy interop fails "
    "('Numpy is not available')"
)

# name: (requirements.txt, target, [(kind, package, field, sentence)])
CASES: dict[str, tuple[str, str, list[tuple[str, str, str, str]]]] = {
    "flash-attn on a CPU": (
        "torch==2.1.2\nflash-attn==2.3.3\n",
        "cpu",
        [
            ("unreproducible", "flash-attn", "why",
             "flash-attn has no CPU implementation: the target has no GPU"),
            ("changed", "torch", "why", "the target has no GPU: torch's CPU build"),
            ("changed", "torch", "risk_detail",
             "CUDA-only code (.cuda(), custom kernels) fails on CPU"),
            ("changed", "numpy", "why", NUMPY_1),
            ("assumptions", "torch", "why",
             "no CUDA build named for torch 2.1.2: assumed PyPI's default build of that "
             "release (cu121)"),
            ("assumptions", "python", "why",
             "no Python named in the files: Python 3.11, the newest torch 2.1.2 supports"),
        ],
    ),
    "flash-attn built for an RTX 4090": (
        "torch==2.1.2\nflash-attn==1.0.9\n",
        "rtx4090",
        [
            ("needs_build", "flash-attn", "why",
             "flash-attn has no prebuilt wheels gpuenv can use: compiled against torch "
             "2.1.2+cu121 for sm_89, with no build isolation"),
            ("needs_build", "flash-attn", "risk_detail",
             "a source build; it takes a while and needs a host compiler nvcc accepts"),
        ],
    ),
    "bitsandbytes on an H100": (
        "torch==2.0.1\nbitsandbytes==0.37.0\n",
        "h100",
        [
            ("changed", "bitsandbytes", "why",
             "0.37.0 has no LLM.int8() (8-bit matmul: load_in_8bit) for sm_90; 0.45.0 is "
             "the first that has"),
            ("changed", "bitsandbytes", "risk_detail",
             "another release: quantisation kernels may differ"),
            ("changed", "torch", "why",
             "the cu117 build cannot run here (its arch list (3.7, 5.0, 6.0, 7.0, 7.5, 8.0, "
             "8.6) has no sm_90 kernels); cu118 can"),
            ("changed", "torch", "risk_detail",
             "numerics may differ slightly (other CUDA and cuDNN kernels)"),
        ],
    ),
    "tensorflow's add-ons beside a tensorflow left out": (
        "torch==2.1.2\ntensorflow==2.4.0\ntensorflow-datasets==3.1.0\ntf-keras==2.15.0\n",
        "rtx4090",
        [
            ("unmanaged", "tensorflow-datasets", "why",
             "left out of the spec: an add-on of tensorflow (it imports it), which is left out"),
            ("unmanaged", "tf-keras", "why",
             "left out of the spec: an add-on of tensorflow (it imports it), which is left out"),
        ],
    ),
    "bitsandbytes that covers the GPU": (
        "torch==2.4.1\nbitsandbytes==0.35.0\n",
        "rtx4090",
        [("kept", "bitsandbytes", "why", "its binaries cover this target")],
    ),
    "cupy for CUDA 11 beside a CUDA 12 torch": (
        "torch==2.4.1\ncupy-cuda11x==12.0.0\n",
        "h100",
        [("changed", "cupy-cuda11x", "why", "torch's CUDA is 12.1: cupy's CUDA 12 project")],
    ),
    "cupy matching torch's CUDA": (
        "torch==2.0.1\ncupy-cuda11x==12.0.0\n",
        "h100",
        [("kept", "cupy-cuda11x", "why", "matches torch's CUDA major")],
    ),
    "TensorFlow 1 and JAX beside torch": (
        "torch==2.0.1\ntensorflow-gpu==1.15.5\njax==0.4.13\n",
        "h100",
        [
            ("unreproducible", "tensorflow-gpu", "why",
             "tensorflow-gpu 1.15.5 was built for GPUs up to compute capability 7.5: no "
             "kernels for sm_90"),
            ("unmanaged", "jax", "why",
             "left out of the spec: JAX's CUDA support comes from jaxlib / jax-cuda*-plugin "
             "wheels with their own CUDA pins"),
        ],
    ),
    "an unpinned PyG extension on a CPU": (
        "torch==2.1.2\ntorch-spline-conv\n",
        "cpu",
        [
            ("needs_build", "torch-spline-conv", "why",
             "1.2.2 is the torch-spline-conv release with wheels for torch 2.1.2; gpuenv's "
             "lock cannot read its wheel page yet (https://data.pyg.org/whl/"
             "torch-2.1.0+cpu.html): compiled against torch 2.1.2+cpu (CPU-only), with no "
             "build isolation"),
            ("needs_build", "torch-spline-conv", "risk_detail",
             "another release: its ops may differ"),
        ],
    ),
    "NumPy 2 beside torch 2.1": (
        "torch==2.1.2\nnumpy==2.0.1\n",
        "rtx4090",
        [
            ("changed", "numpy", "why", f"{NUMPY_1}; the lock takes the newest release in '<2'"),
            ("changed", "numpy", "risk_detail", "another release: behaviour may differ"),
            ("assumptions", "python", "why",
             "no Python named in the files: Python 3.11, the newest torch 2.1.2 supports "
             "and numpy<2 installs on"),
        ],
    ),
    "a direct URL and a pre-release": (
        "torch==2.1.2\nrequests @ https://files.example.invalid/packages/ab/cd/"
        + "0" * 60
        + "/requests-2.31.0.tar.gz\ntransformers==4.40.0rc1\n",
        "rtx4090",
        [
            ("changed", "requests", "why", "a direct URL: the same version from the index"),
            ("kept", "transformers", "why", "a pre-release pin"),
        ],
    ),
    # a private host's archive is not the index's project of that name (which exists,
    # and is another project)
    "a direct URL on a private host": (
        "torch==2.1.2\nutils @ https://internal.example.com/packages/utils-1.0.2.tar.gz\n",
        "h100",
        [
            ("kept", "utils", "why", "a direct URL"),
            ("assumptions", "utils", "why",
             "utils is installed from its URL: it is no package index's file, and the "
             "index's utils may be another project"),
        ],
    ),
    "git sources": (
        "torch==2.1.2\ngit+https://github.com/org/tagged.git@v1.2.0#egg=tagged\n"
        "svn+https://example.org/other#egg=other\n"
        "git+https://github.com/org/moving.git@main#egg=moving\n"
        "git+https://github.com/org/fixed.git@0123456789abcdef0123456789abcdef01234567"
        "#egg=fixed\n",
        "rtx4090",
        [
            ("kept", "tagged", "why",
             "a git checkout at tag v1.2.0: the lock pins the commit the tag names when it "
             "is written (a tag can be moved)"),
            ("unreproducible", "other", "why",
             "only git+https:// and git+ssh:// sources can be locked: install it into the "
             "prefix after `gpuenv install` (gpuenv run -- pip install "
             "'svn+https://example.org/other')"),
            ("changed", "moving", "why",
             "branch main of the repository has moved since the paper and no commit is "
             "recorded: the lock freezes the commit it has when written; pin a commit from "
             "the paper's date if you know it"),
            ("changed", "moving", "risk_detail", "another revision of the code than the paper's"),
            ("kept", "fixed", "why",
             "a git checkout at commit 0123456789abcdef0123456789abcdef01234567: the lock "
             "pins it and install builds it"),
        ],
    ),
    "xformers without Hopper kernels": (
        "torch==2.0.1\nxformers==0.0.20\n",
        "h100",
        [
            ("needs_build", "xformers", "why",
             "xformers 0.0.20's wheels carry no sm_90 kernels (they arrived in 0.0.21): "
             "compiled against torch 2.0.1+cu118 for sm_90, with no build isolation"),
        ],
    ),
    "vllm moved with torch": (
        "torch==2.0.1\nvllm==0.1.0\n",
        "h100",
        [
            ("changed", "vllm", "why", "0.1.0 is not built for torch 2.0.1; 0.2.1 is"),
            ("changed", "vllm", "risk_detail",
             "another release of the package: behaviour and numerics may differ"),
        ],
    ),
    "xformers within its range": (
        "torch==2.0.1\nxformers>=0.0.20\n",
        "h100",
        [
            ("changed", "xformers", "why",
             "0.0.22 is the newest release in '>=0.0.20' that fits torch 2.0.1 on this target"),
        ],
    ),
    "xformers outside its range": (
        "torch==2.0.1\nxformers<0.0.20\n",
        "h100",
        [
            ("changed", "xformers", "why",
             "no release in '<0.0.20' fits torch 2.0.1 on this target; 0.0.22 does"),
        ],
    ),
    "tiny-cuda-nn on a CPU": (
        "torch==2.0.1\ntinycudann\n",
        "cpu",
        [("unreproducible", "tinycudann", "why",
          "tinycudann has no CPU implementation: the target has no GPU")],
    ),
    "deepspeed on an H100": (
        "torch==2.0.1\ndeepspeed==0.9.5\n",
        "h100",
        [
            ("needs_build", "deepspeed", "why",
             "its ops are compiled at first use (JIT) for sm_90 against torch 2.0.1+cu118"),
            ("needs_build", "deepspeed", "risk_detail",
             "the first run compiles; nvcc must be the toolkit gpuenv adds"),
        ],
    ),
    "deepspeed on a CPU": (
        "torch==2.0.1\ndeepspeed==0.9.5\n",
        "cpu",
        [("kept", "deepspeed", "why", "CPU: its CUDA ops are not used")],
    ),
    "a torchvision from another release": (
        "torch==2.4.1\ntorchvision==0.18.0\n",
        "rtx4090",
        [
            ("changed", "torchvision", "why",
             "torch 2.4.1 pairs with torchvision 0.19.1, not 0.18.0"),
            # No build named: PyPI's default (what a bare pip install took) runs here.
            ("kept", "torch", "why", "runs on this target as built"),
            ("kept", "torch", "to", "2.4.1+cu121"),
        ],
    ),
    "torchvision moved in lock step": (
        "torch==1.13.1\ntorchvision==0.14.1\n",
        "h100",
        [("changed", "torchvision", "why",
          "the release paired with torch 2.0.1 (torch, torchvision and torchaudio move in "
          "lock step)")],
    ),
    "a torch build that runs as built": (
        "torch==2.4.1+cu124\nscipy==1.11.4\n",
        "rtx4090",
        [
            ("kept", "torch", "why", "runs on this target as built"),
            ("kept", "scipy", "why", "as pinned"),
        ],
    ),
    "torchvision alone names its torch": (
        "torchvision==0.14.1\n",
        "rtx4090",
        [("kept", "torchvision", "why", "released with torch 1.13.1")],
    ),
    "xformers moved on a CPU": (
        "torch==2.1.2\nxformers==0.0.23\n",
        "cpu",
        [("changed", "xformers", "risk_detail",
          "another release of the package: behaviour and numerics may differ; the target "
          "has no GPU: it imports, but its CUDA kernels cannot run")],
    ),
    "apex built on a CPU": (
        "torch==1.13.1\napex\n",
        "cpu",
        [
            ("needs_build", "apex", "why",
             "apex installs from its git repository only (PyPI has no build of it): compiled "
             "against torch 1.13.1+cpu (CPU-only), with no build isolation"),
            ("needs_build", "apex", "risk_detail",
             "a source build; it takes a while and needs a host compiler nvcc accepts; "
             "apex.amp is deprecated for PyTorch's own AMP (torch.amp, torch.cuda.amp before "
             "torch 2.4: autocast and GradScaler), and gone from apex's default branch since "
             "2025 (NVIDIA/apex issue 1912), which code importing it (from apex import amp) "
             "needs a commit before; apex.parallel.DistributedDataParallel gives way to "
             "torch.nn.parallel.DistributedDataParallel; no release named: the lock "
             "freezes the commit its default branch has when written; the target has no GPU: "
             "it imports, but its CUDA kernels cannot run"),
        ],
    ),
    "detectron2 from its git tag": (
        "torch==2.1.2\n"
        "detectron2 @ git+https://github.com/facebookresearch/detectron2.git@v0.6\n",
        "rtx4090",
        [("needs_build", "detectron2", "why",
          "installed from git+https://github.com/facebookresearch/detectron2.git@v0.6: "
          "compiled against torch 2.1.2+cu121 for sm_89, with no build isolation")],
    ),
    "detectron2 pinned as its prebuilt wheel": (
        "torch==1.12.1\ndetectron2==0.6\n",
        "rtx4090",
        [("needs_build", "detectron2", "why",
          "detectron2 0.6's prebuilt wheels (find-links pages per CUDA build and torch "
          "series) cover torch 1.8, 1.9, 1.10 only, none for torch 1.12.1+cu116: compiled "
          "against torch 1.12.1+cu116 for sm_89 (as sm_86: nvcc 11.6 generates no sm_89 "
          "code, and sm_86 code runs on it), with no build isolation")],
    ),
    # bitsandbytes loads the binary for torch's CUDA: 0.45's wheels stop at CUDA 12.6,
    # and an RTX 5090 needs torch's cu128 build.
    "bitsandbytes without binaries for torch's CUDA": (
        "torch==2.7.1\nbitsandbytes==0.45.1\n",
        "rtx5090",
        [("changed", "bitsandbytes", "why",
          "0.45.1's wheels carry binaries for CUDA >=11.0,<12.7, not torch's 12.8; 0.46.0 "
          "does")],
    ),
    "an old bitsandbytes on a CPU": (
        "torch==2.4.1\nbitsandbytes==0.42.0\n",
        "cpu",
        [("kept", "bitsandbytes", "why",
          "the target has no GPU: it imports, but its CUDA kernels cannot run (bitsandbytes "
          "0.48.1 and later run on CPU, with torch >=2.3)")],
    ),
    "xformers kept on a CPU": (
        "torch==2.1.2\nxformers==0.0.23.post1\n",
        "cpu",
        [
            ("kept", "xformers", "why",
             "the target has no GPU: it imports, but its CUDA kernels cannot run"),
            ("kept", "xformers", "risk_detail", "GPU-only code paths fail on CPU"),
        ],
    ),
    "triton pinned by hand": (
        "torch==2.1.2\ntriton==2.0.0\n",
        "rtx4090",
        [("changed", "triton", "why",
          "torch 2.1.2's wheels require triton 2.1.0, which '==2.0.0' excludes: "
          "the files' triton requirement cannot hold beside this torch")],
    ),
    "triton that torch's own satisfies": (
        "torch==2.1.2\ntriton>=2.0\n",
        "rtx4090",
        [("changed", "triton", "why", "torch 2.1.2's wheels require their own exact triton")],
    ),
    "a URL without a version": (
        "torch==2.1.2\npkg @ https://example.org/archive/main.zip\n",
        "rtx4090",
        [("unreproducible", "pkg", "why",
          "a URL that names no version: what it serves has likely changed since the paper")],
    ),
    "xformers that predates torch": (
        "torch==1.12.1\nxformers\n",
        "rtx4090",
        [("unreproducible", "xformers", "why", "no xformers release is built for torch 1.12.1")],
    ),
    "a range with no floor": (
        "torch<3\n",
        "rtx4090",
        [("kept", "torch", "why", "the newest release in '<3' that fits")],
    ),
    "a nightly": (
        "--pre\ntorch==2.1.0.dev20230415+cu118\n",
        "h100",
        [("unreproducible", "torch", "why",
          "nightly and pre-release builds are removed from PyTorch's indexes after a while: "
          "this build cannot be had again")],
    ),
    "flash-attn newer than torch allows": (
        "torch==2.1.2\nflash-attn==2.8.0\n",
        "rtx4090",
        [
            ("needs_build", "flash-attn", "why",
             "2.8.0 needs torch >=2.2; 2.7.4.post1 builds with it: compiled against torch "
             "2.1.2+cu121 for sm_89, with no build isolation"),
            ("needs_build", "flash-attn", "risk_detail", "another release, compiled from source"),
        ],
    ),
    "mmcv-full past its last torch": (
        "torch==2.7.1\nmmcv-full==1.7.0\n",
        "rtx4090",
        [("needs_build", "mmcv-full", "why",
          "no mmcv-full release is known to support torch 2.7.1; gpuenv's lock cannot read "
          "its wheel page yet (https://download.openmmlab.com/mmcv/dist/cu118/torch2.7/"
          "index.html): compiled against torch 2.7.1+cu118 for sm_89, with no build "
          "isolation; mmcv-full 1.7.0 is built from its sdist, and its setup.py imports "
          "pkg_resources, which setuptools 82.0.0 removed: built in the prefix with ninja, "
          "wheel, setuptools<82")],
    ),
    "no torch version beside mmcv-full": (
        "torch\nmmcv-full==1.7.0\n",
        "h100",
        [("changed", "torch", "why",
          "the files pin no torch version; 2.0.1 is the newest release that fits and that "
          "mmcv-full==1.7.0 (torch<2.1,>=1.8) accepts")],
    ),
    "a torch range beside xformers": (
        "torch>=1.7\nxformers==0.0.20\n",
        "rtx4090",
        [("kept", "torch", "why",
          "the newest release in '>=1.7' that fits and that xformers==0.0.20 (torch==2.0.1) "
          "accepts below 2.6.0, whose API change breaks older code (torch.load defaults to "
          "weights_only=True: full pickled checkpoints need weights_only=False)")],
    ),
    "bitsandbytes newer than torch allows": (
        "torch==1.13.1\nbitsandbytes==0.45.1\n",
        "rtx4090",
        [("changed", "bitsandbytes", "why", "0.45.1 does not support torch 1.13.1; 0.43.2 does")],
    ),
    "mmdet follows mmcv-full": (
        "torch==1.10.0\nmmcv-full==1.7.0\nmmdet==2.20.0\n",
        "rtx4090",
        [("changed", "mmdet", "risk_detail",
          "another release of the package: its API and results may differ")],
    ),
    "an old sdist beside a setuptools without pkg_resources": (
        "torch==2.0.1\nalbumentations==0.4.3\nsetuptools==82.0.0\n",
        "rtx4090",
        [
            ("needs_build", "albumentations", "why",
             "albumentations 0.4.3 is built from its sdist, and its setup.py imports "
             "pkg_resources, which setuptools 82.0.0 removed: built in the prefix with wheel, "
             "setuptools<82"),
            ("needs_build", "albumentations", "risk_detail",
             "the repository pins setuptools==82.0.0, which has no pkg_resources: the build "
             "needs the older one"),
        ],
    ),
    "index options": (
        "--extra-index-url https://download.pytorch.org/whl/cu118\n"
        "--extra-index-url https://my.mirror.example/simple\ntorch==2.0.1\n",
        "rtx4090",
        [
            ("assumptions", "", "why",
             "https://download.pytorch.org/whl/cu118: PyTorch's index: gpuenv chooses the "
             "torch index for the target's build"),
            ("assumptions", "", "why",
             "https://my.mirror.example/simple: extra-index-url not carried over: add it to "
             "[pip] extra-index-urls if the paper's packages need it"),
        ],
    ),
    "the LTS torch the data lacks": (
        "torch==1.8.2\n",
        "rtx4090",
        [("changed", "torch", "why",
          "torch 1.8.2 is not a release gpuenv knows (it knows 1.8.1 and 1.9.0 either side); "
          "1.8.1 is the nearest known release that fits")],
    ),
    "a 2020 conda file": (
        "name: x\ndependencies:\n  - python=3.6\n  - pytorch=1.10.0\n  - ffmpeg\n",
        "rtx4090",
        [
            ("changed", "python", "why",
             "torch 1.10.0 supports Python >=3.6,<3.10, but gpuenv installs 3.8 and later: "
             "3.8 is the nearest it can"),
            ("changed", "python", "risk_detail", "other packages' pins may not install on it"),
            ("kept", "ffmpeg", "why", "a conda-only package"),
        ],
    ),
    "PyG's wheel page beside a moved torch": (
        "-f https://data.pyg.org/whl/torch-1.13.0+cu117.html\ntorch==1.13.1\n"
        "torch-scatter==2.1.0+pt113cu117\n",
        "cpu",
        [("assumptions", "", "why",
          "https://data.pyg.org/whl/torch-1.13.0+cu117.html: the wheel page of torch-scatter "
          "for torch 1.13 (cu117), not the page of torch 1.13.1+cpu: gpuenv's lock cannot "
          "read find-links pages, and the packages it served are built from source (their "
          "entries say for which torch)")],
    ),
    "OpenMMLab's wheel page for the same torch": (
        "torch==2.0.1+cu118\n"
        "-f https://download.openmmlab.com/mmcv/dist/cu118/torch2.0/index.html\nmmcv==2.1.0\n",
        "h100",
        [("assumptions", "", "why",
          "https://download.openmmlab.com/mmcv/dist/cu118/torch2.0/index.html: the wheel "
          "page of mmcv for torch 2.0 (cu118), this torch's page: gpuenv's lock cannot read "
          "find-links pages, and the packages it served are built from source (their entries "
          "say for which torch)")],
    ),
    "a CUDA base image dates an unpinned torch": (
        "FROM nvidia/cuda:11.3.1-cudnn8-devel-ubuntu20.04\n"
        "RUN apt-get update && apt-get install -y python3-pip\n"
        "RUN pip3 install torch torchvision timm==0.4.12\n",
        "rtx4090",
        [
            ("kept", "torch", "why",
             "Dockerfile:1 FROM nvidia/cuda:11.3.1-cudnn8-devel-ubuntu20.04 dates the files: "
             "torch 1.12.1 is the newest release built for cu113; runs on this target as "
             "built"),
            ("changed", "torchvision", "why", "the release paired with torch 1.12.1"),
        ],
    ),
    # Time-Series-Library's Dockerfile: a release asset with a local version, behind a
    # BuildKit cache mount
    "a release wheel with a local version": (
        "FROM pytorch/pytorch:2.5.1-cuda12.1-cudnn9-devel\n"
        "RUN --mount=type=cache,target=/root/.cache/pip \\\n"
        "    pip install einops==0.8.0\n"
        "RUN pip install https://github.com/state-spaces/mamba/releases/download/v2.2.6.post3/"
        "mamba_ssm-2.2.6.post3+cu12torch2.5cxx11abiFALSE-cp311-cp311-linux_x86_64.whl\n",
        "h100",
        [
            ("kept", "einops", "why", "as pinned"),
            ("kept", "mamba-ssm", "why", "a direct URL"),
            ("assumptions", "mamba-ssm", "why",
             "mamba-ssm is installed from its URL: 2.2.6.post3+cu12torch2.5cxx11abiFALSE is "
             "a local version, which no index serves"),
        ],
    ),
    # Time-Series-Library's Dockerfile:22-24 (and README.md:143)
    "a package installed without its dependencies": (
        "FROM pytorch/pytorch:2.5.1-cuda12.1-cudnn9-devel\n"
        "RUN --mount=type=cache,target=/root/.cache/pip \\\n"
        "    pip install uni2ts --no-deps\n",
        "h100",
        [
            ("kept", "uni2ts", "why", "as pinned"),
            ("assumptions", "", "why",
             "uni2ts: installed with --no-deps, without its dependencies; the spec cannot say "
             "so, and `gpuenv lock` resolves them too: where they conflict, remove it from "
             "[pip] and, after `gpuenv install`, run `gpuenv run -- pip install --no-deps "
             "'uni2ts'`"),
        ],
    ),
    # pixi-pytorch-onnx: cuda-version = "12.*" was "no CUDA version pinned", and an H100
    # with driver 550 got cu118
    "a CUDA major with no minor": (
        "name: x\ndependencies:\n  - python=3.10\n  - cuda-version=12\n  - pytorch\n",
        "h100",
        [("assumptions", "torch", "why",
          "cuda-version=12: a CUDA 12 build asked, any minor: cu124 is the newest that fits "
          "this target")],
    ),
    "a CUDA major the paper's torch has no build for": (
        "name: x\ndependencies:\n  - python=3.10\n  - cuda-version=12\n  - pytorch=1.13.1\n",
        "h100",
        [("assumptions", "torch", "why",
          "cuda-version=12: a CUDA 12 build asked, any minor: none fits this target; cu118 "
          "does")],
    ),
    "a NumPy older than the Python": (
        "name: x\ndependencies:\n  - python=3.11\n  - pytorch=2.1.2\n  - numpy=1.19.5\n",
        "rtx4090",
        [("changed", "numpy", "why",
          "1.19.5 has no wheels for Python 3.11; 1.23.2 is the oldest that has")],
    ),
    # FlashAttention 2 needs Ampere or newer, 1.x Turing or newer (its README): a V100
    # (sm_70) has no release to build, a T4 (sm_75) builds the 1.x series.
    "flash-attn on a V100": (
        "torch==2.1.2\nflash-attn==2.3.3\n",
        "v100",
        [("unreproducible", "flash-attn", "why",
          "no flash-attn release builds with torch 2.1.2, CUDA 12.1 for sm_70")],
    ),
    "flash-attn on a T4": (
        "torch==2.1.2\nflash-attn==2.3.3\n",
        "t4",
        [("needs_build", "flash-attn", "why",
          "2.3.3 needs compute capability >= 8.0; 1.0.9 builds with it: compiled against "
          "torch 2.1.2+cu121 for sm_75, with no build isolation")],
    ),
    # torch 1.13.1's cu116 wheels stop at cp310; its cu117 ones (PyPI's) reach cp311.
    "a cu116 torch beside Python 3.11": (
        "name: x\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n"
        "    - torch==1.13.1+cu116\n",
        "rtx4090",
        [("changed", "torch", "why",
          "the cu116 build runs on this GPU but has no wheels for Python 3.11 (they cover "
          ">=3.7,<3.11); cu117 does")],
    ),
    "a PyG wheel label that is not PyG's form": (
        "torch==1.12.1\ntorch-scatter==2.1.0+pt112\n",
        "cpu",
        [("needs_build", "torch-scatter", "why",
          "built for torch 1.12.1; gpuenv's lock cannot read its wheel page yet "
          "(https://data.pyg.org/whl/torch-1.12.0+cpu.html); its +pt112 label names a wheel "
          "the lock cannot fetch: written without it: compiled against torch 1.12.1+cpu "
          "(CPU-only), with no build isolation")],
    ),
    "flash-attn newer than torch's CUDA": (
        "torch==2.1.2+cu118\nflash-attn==2.7.4\n",
        "rtx4090",
        [("needs_build", "flash-attn", "why",
          "2.7.4 needs nvcc >=12.0; 2.7.3 builds with it: compiled against torch "
          "2.1.2+cu118 for sm_89, with no build isolation")],
    ),
    "a nightly torch": (
        "torch==2.1.0.dev20230801\n",
        "rtx4090",
        [("changed", "torch", "why",
          "2.1.0.dev20230801 is a nightly of 2023-08-01; 2.1.0 (published 2023-10-04) is the "
          "release it led to that fits: it has every change the nightly had, which torch "
          "2.0.1, the release current that day (2023-05-08), lacks")],
    ),
    # The driver (550) runs CUDA 12.4 at most: cu118 is the last build that carries torch
    # past 2.6, and its last release is 2.7.1.
    "an unpinned torch": (
        "torch\n",
        "rtx4090",
        [("changed", "torch", "why",
          "the files pin no torch version; 2.7.1 is what the planner chose here")],
    ),
    # the field test's scratch/odd/empty: "the files pin no torch version" said the
    # files asked for torch
    "an empty requirements file": (
        "",
        "rtx4090",
        [("changed", "torch", "why",
          "nothing in the files asks for torch; 2.7.1 is what the planner chose here")],
    ),
    "a torch too new for the driver": (
        "torch==2.9.0\n",
        "rtx4090",
        [("changed", "torch", "why",
          "no build of 2.9.0 or any later release fits this target (driver 550.54.15 is "
          "older than every torch 2.9.0 build that covers RTX 4090 needs (strict): cu126 "
          "needs driver >= 560.28.03; cu128 needs driver >= 570.26; cu129 needs driver >= "
          "575.51.03; cu130 needs driver >= 580.65.06); 2.7.1 does; with [stack] "
          "driver-compat = \"minor\" (CUDA minor-version compatibility) torch 2.9.0's cu126 "
          "build runs on driver 550.54.15")],
    ),
    "a cu126 torch on driver 550": (
        "torch==2.6.0+cu126\n",
        "rtx4090",
        [("changed", "torch", "why",
          "the cu126 build cannot run here (it needs driver >= 560.28.03; the target has "
          "550.54.15); cu124 can")],
    ),
    # PyTorch's cu118 wheels are x86_64 only; GH200 (aarch64) has cu124 for 2.4.1.
    "an x86-only build on a GH200": (
        "torch==2.4.1+cu118\n",
        "gh200",
        [("changed", "torch", "why",
          "the cu118 build cannot run here (torch 2.4.1 has no cu118 build for "
          "linux-aarch64); cu124 can")],
    ),
    "a 2023 conda file": (
        "name: x\ndependencies:\n  - python=3.10\n  - pytorch=2.1.2\n",
        "rtx4090",
        [("kept", "python", "why", "torch 2.1.2 supports it")],
    ),
    # hustvl/Vim det/det-requirements.txt:6 and :24, a freeze of the author's machine
    "paths on the author's machine": (
        "torch==2.1.1\napex @ file:///home/tiger/apex\n-e /home/tiger/ColossalAI\n",
        "h100",
        [("unreproducible", "apex", "why",
          "a path on the author's machine: not in the repository, so nothing in the files "
          "installs it; left out of the spec (install it by hand, or name the package it "
          "is)")],
    ),
    # gaussian-splatting's environment.yml, its submodule not checked out
    "a repository folder pip builds": (
        "name: x\ndependencies:\n  - python=3.7.13\n  - pytorch=1.12.1\n  - pip:\n"
        "    - submodules/simple-knn\n",
        "h100",
        [("needs_build", "simple-knn", "why",
          "a folder of the repository pip builds (submodules/simple-knn): not installed by "
          "gpuenv; after `gpuenv install`, `gpuenv run -- pip install --no-build-isolation "
          "./submodules/simple-knn` builds it against the environment's torch; its folder is "
          "not in this checkout (a git submodule not fetched?)")],
    ),
}  # fmt: skip

# Cases that need an index to ask for wheels: (environment.yml, target, {project: its
# PEP 503 page as (version, [cpXY tags], Requires-Python)}, expected). Served on loopback.
SCIPY_PAGE = [
    ("1.7.1", ["37", "38", "39"], ">=3.7,<3.10"),
    ("1.7.2", ["37", "38", "39", "310"], ">=3.7,<3.11"),  # 1.7.2 added Python 3.10 wheels
    ("1.7.3", ["37", "38", "39", "310"], ">=3.7,<3.11"),
]
INDEX_CASES: dict[
    str,
    tuple[str, str, dict[str, list[tuple[str, list[str], str]]], list[tuple[str, str, str, str]]],
] = {
    # torch 2.9 supports Python 3.10 and later (a CPU target: its CUDA builds need a
    # newer driver than the test targets'); the scipy pin left from an older requirements
    # file has wheels up to cp39: no Python fits both, scipy moves.
    "a scipy pin older than torch's Pythons": (
        "name: x\ndependencies:\n  - python=3.10\n  - scipy=1.7.1\n  - pip\n  - pip:\n"
        "    - torch==2.9.0\n",
        "cpu",
        {"scipy": SCIPY_PAGE},
        [
            ("changed", "scipy", "why",
             "1.7.1 has no wheel for Python 3.10 on the index; 1.7.2 is the nearest release "
             "that has one"),
            ("changed", "scipy", "risk_detail", "another release: behaviour may differ"),
            ("kept", "python", "why", "torch 2.9.0 supports it"),
        ],
    ),
    # huggingface/lerobot: uv.lock pins hebi-py 2.11.0, an sdist only, and pyproject.toml's
    # extra asks hebi-py>=2.8.0,<2.12.0; the nearest release with a wheel, 2.15.2 (which
    # needs numpy<2 beside the lock's numpy 2.2.6), is outside that range: kept, built.
    "a pin whose nearest wheel is outside another file's range": (
        "name: x\ndependencies:\n  - python=3.12\n  - pip\n  - pip:\n"
        "    - torch==2.9.0\n    - hebi-py==2.11.0\n    - hebi-py>=2.8.0,<2.12.0\n",
        "cpu",
        {"hebi-py": [("2.11.0", [], ">=3.8"), ("2.15.2", ["py3"], ">=3.8")]},
        [
            ("needs_build", "hebi-py", "why",
             "2.11.0 has no wheel on the index (source only); kept and built from its "
             "source archive at install: 2.15.2, the nearest release with a wheel, is outside "
             "'<2.12.0,>=2.8.0' (environment.yml:8)"),
        ],
    ),
    # lllyasviel/ControlNet's basicsr==1.4.2: every release from 1.3.3.4 on is a source
    # archive only; the move said "no wheel for Python 3.8", as though another had one.
    "a pin with no wheel for any Python": (
        "torch==2.1.2\nbasicsr==1.4.2\n",
        "cpu",
        {"basicsr": [("1.3.3.3", ["py3"], ">=3.6"), ("1.4.2", [], ">=3.6")]},
        [
            ("changed", "basicsr", "why",
             "1.4.2 has no wheel on the index (source only); 1.3.3.3 is the nearest release "
             "that has one"),
        ],
    ),
    # A 2021 requirements file (scipy 1.7.1 and pandas 1.3.0 have wheels up to cp39) that
    # later gained networkx 3.3 (Python >= 3.10): no Python has every wheel; 3.9 lacks the
    # fewest, and networkx steps back to 3.2.1, the last release for 3.9.
    "pins from two eras": (
        "torch==2.1.2\nscipy==1.7.1\npandas==1.3.0\nnetworkx==3.3\n",
        "cpu",
        {
            "scipy": SCIPY_PAGE,
            "pandas": [("1.3.0", ["37", "38", "39"], ">=3.7.1")],
            "networkx": [("3.2.1", ["py3"], ">=3.9"), ("3.3", ["py3"], ">=3.10")],
        },
        [
            ("assumptions", "python", "why",
             "no Python named in the files: Python 3.9, the newest torch 2.1.2 supports where "
             "the fewest pins lack a wheel (1) (scipy==1.7.1, pandas==1.3.0: no wheel for "
             "Python 3.11 on the index)"),
            ("changed", "networkx", "why",
             "3.3 has no wheel for Python 3.9 on the index; 3.2.1 is the nearest release that "
             "has one"),
        ],
    ),
}  # fmt: skip


def _page(project: str, files: list[tuple[str, list[str], str]]) -> str:
    links = []
    stem = project.replace("-", "_")  # a file name spells the project with underscores
    for version, pythons, requires in files:
        names = [
            f"{stem}-{version}-py3-none-any.whl"
            if py == "py3"
            else f"{stem}-{version}-cp{py}-cp{py}-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
            for py in pythons
        ] + [f"{stem}-{version}.tar.gz"]
        escaped = html.escape(requires)
        links += [
            f'<a href="../../files/{n}" data-requires-python="{escaped}">{n}</a>' for n in names
        ]
    return "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n"


# Templates asserted by other tests of tests/importers, or by no test yet (named by a
# literal part of the template). This list may only shrink: a new sentence kind gets a case.
ELSEWHERE = frozenset(
    {
        "is the nearest release that satisfies it",  # test_pillow
        "torch is chosen among PyPI's own builds",  # tests/e2e/test_pypi_only
        "own build of torch",  # test_pypi_only_choice
        "kept and built from its source archive at install",  # test_resolve_check
        "equally specific lines of",  # test_disagreement (HunyuanVideo's README)
        "equally specific statements of equal authority",  # test_disagreement
        "what the files state outright beats",  # test_disagreement
        "the most authoritative, most specific statement wins",  # test_disagreement
        "chosen first, does not resolve",  # test_era (the resolve check's conflict, stubbed)
        "pip packages resolve as of",  # test_era (PEP 700 upload days: a JSON index)
        "it would resolve to a release with no",  # test_era (bitsandbytes on an H100)
        "does not reach a git checkout",  # test_era
        "the repository is the Python project",  # test_discovery
        "or a release of that day from the index",  # test_era
        "a newer release than the files' day",  # test_era
        "publication day is not known",  # test_era
        "releases of the months between may be newer",  # test_era
        "as of torch's day",  # test_era (uv's resolution of torch alone, stubbed)
        "no pin or version range in the files has an upload day",  # test_era
        "written without the credentials its URL held",  # test_bad_inputs
        "is the nearest release that satisfies it with wheels for Python",  # test_pillow
        "is the oldest",  # test_companions (mmdet follows mmcv-full)
        "has a wheel for Python",  # test_wheels
        "the base image's CUDA",  # test_truthful
        "could not be read",  # test_wheels
        "not checked for wheels",
        "checked for wheels for Python",  # test_wheels, and the index cases here
        "are both written and install the same importable package",  # test_companions
        "this family cannot move together",  # test_companions
        "--prefer names",  # test_disagreement
        "are read (pip install, conda install/create)",  # test_real_repos (README-only)
        "the environment files name no torch version",  # test_real_repos (NeuScraper)
        "the environment files name no Python",  # test_real_repos (CodeFormer)
        "refuses to build without CUDA",  # test_real_repos (Deformable-DETR's ops)
        "cupy needs CUDA",  # unreachable today: cupy's cpu = "none" answers first
        "not read: ",  # test_tolerant, test_bad_inputs
        "wheel was built for torch",  # test_companion_system (PyG labels)
        "matches this torch, but only that page has it",  # test_companion_system
        "compiled here instead of the prebuilt wheel",  # test_companion_system
        "has a prebuilt wheel for torch",  # test_companion_system (detectron2's pages)
        "every pin has a wheel",  # test_wheels
        "was built for GPUs up to compute",  # test_frameworks; and the TensorFlow case here
        "is newer than gpuenv's knowledge",  # below: the knowledge's newest release moves
        "predates gpuenv's knowledge",  # below: so does its oldest
        "is the nearest known release that fits",  # below, both ends of the knowledge
        "is a nightly of",  # test_era, test_decisions, and the nightly case here
        "the oldest torch its neighbours allow",  # test_era (NGC tags)
        "is the nearest release that fits",  # test_era; below: a nightly on Hopper
        "the newest torch published by",  # test_era (NGC tags)
        "no release in ",  # below: the list of builds grows with the knowledge
        "the paper ran on",  # below: collect_env's GPU line
        "supports compute capability up to",  # below: no source companion has a gpu_max yet
        "ruled it out",  # below: a build the GPU runs is refused only for its Python today
        "and no release gpuenv knows does",  # below: every CUDA gpuenv plans has a release
        "its CUDA binaries may fail to load",  # below, likewise
        "not imported",  # test_discovery
        "the only folder with environment files",  # test_discovery
        "compiles",  # test_discovery (the project's own CUDA extension)
        "said again at",  # test_real_repos (icefall's Dockerfiles), test_containment
    }
)

TEXT_KEYS = {"why", "risk_text", "build_why", "text", "edge", "chosen", "said", "tail", "has"}
# Helpers whose returned strings become (part of) a report sentence.
HELPERS = re.compile(r"(_why|_reason|_refusal|_obstacle|_no_wheels|_label_why)$")


def _literal(node: ast.expr) -> str | None:
    """A template regex for a string expression: its literal parts, wildcards between."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(
            re.escape(v.value) if isinstance(v, ast.Constant) else "(.+?)" for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        if left is None and right is None:
            return None
        return (left or "(.*?)") + (right or "(.*?)")
    return None


def templates() -> dict[str, str]:
    """Each report sentence template of the importers: regex -> file:line."""
    found: dict[str, str] = {}
    for path in sorted(IMPORTERS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        returned = {
            id(node.value)
            for helper in ast.walk(tree)
            if isinstance(helper, ast.FunctionDef) and HELPERS.search(helper.name)
            for node in ast.walk(helper)
            if isinstance(node, ast.Return) and node.value is not None
        }
        for node in ast.walk(tree):
            values: list[ast.expr] = [node] if id(node) in returned else []  # type: ignore[list-item]
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in TEXT_KEYS:
                        values.append(node.value)
                    elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        values += [  # why, risk, text = ("...", MEDIUM, "...")
                            v
                            for t, v in zip(target.elts, node.value.elts, strict=False)
                            if isinstance(t, ast.Name) and t.id in TEXT_KEYS
                        ]
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name in ("Entry", "_entry") and len(node.args) >= 3:
                    values.append(node.args[2])
                values += [k.value for k in node.keywords if k.arg in ("why", "risk_text")]
            for value in values:
                parts = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                for part in parts:
                    regex = _literal(part)
                    literal = re.sub(r"\(\.[+*]\?\)", "", regex or "")
                    if regex and len(re.sub(r"\\(.)", r"\1", literal)) > 8:
                        found.setdefault(regex, f"{path.name}:{part.lineno}")
    return found


def _sentences(imported: Imported, kind: str, package: str, field: str) -> list[str]:
    report = imported.report
    key = "assumptions" if kind == "assumptions" else kind
    return [str(e.get(field)) for e in report[key] if (e["package"] or "") == package]


@pytest.mark.parametrize("name", list(CASES))
def test_each_sentence_is_true_of_its_case(
    run_import: Callable[..., Imported], tmp_path: Path, name: str
) -> None:
    text, target, expected = CASES[name]
    name = "environment.yml" if text.startswith("name:") else "requirements.txt"
    name = "Dockerfile" if text.startswith("FROM ") else name
    path = tmp_path / "paper" / name
    path.parent.mkdir()
    path.write_text(text)
    imported = run_import(path, target=target)
    assert imported.result.code == 0, imported.result.out
    for kind, package, field, sentence in expected:
        assert sentence in _sentences(imported, kind, package, field), (kind, package, field)


@pytest.mark.parametrize("name", list(INDEX_CASES))
def test_each_sentence_that_needs_the_index_is_true_of_its_case(
    run_import: Callable[..., Imported],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    text, target, pages, expected = INDEX_CASES[name]
    for project, files in pages.items():
        page = tmp_path / "index" / "simple" / project / "index.html"
        page.parent.mkdir(parents=True)
        page.write_text(_page(project, files))
    name = "environment.yml" if text.startswith("name:") else "requirements.txt"
    path = tmp_path / "paper" / name
    path.parent.mkdir()
    path.write_text(text)
    with serve(tmp_path / "index") as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        imported = run_import(path, target=target)
    assert imported.result.code == 0, imported.result.out
    for kind, package, field, sentence in expected:
        assert sentence in _sentences(imported, kind, package, field), (kind, package, field)
    checked = [a["why"] for a in imported.report["assumptions"] if "checked for" in a["why"]]
    python = re.search(r'python = "([\d.]+)"', imported.spec.read_text())
    assert python is not None
    count, plural = len(pages), "s" if len(pages) != 1 else ""
    assert checked == [
        f"{count} requirement{plural} checked for wheels for Python {python[1]} on {url}/simple"
    ]


def test_every_sentence_kind_has_a_case() -> None:
    asserted = [s for _, _, expected in CASES.values() for *_, s in expected]
    asserted += [s for *_, expected in INDEX_CASES.values() for *_, s in expected]
    uncovered = []
    for regex, where in templates().items():
        if any(re.fullmatch(regex, s) or re.search(regex, s) for s in asserted):
            continue
        if any(re.escape(fragment) in regex for fragment in ELSEWHERE):
            continue
        uncovered.append(f"{where}: {regex}")
    assert not uncovered, "sentence kinds with no case:\n" + "\n".join(uncovered)


def test_the_elsewhere_list_only_names_templates_that_exist() -> None:
    regexes = list(templates())
    stale = [f for f in ELSEWHERE if not any(re.escape(f) in r for r in regexes)]
    assert not stale, stale


# --- sentences whose case is computed, or not reachable through an import -----------------


def test_a_torch_newer_than_the_knowledge_names_where_it_ends(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    from gpuenv.knowledge import knowledge_base

    newest = max(r.version for r in knowledge_base().torch_releases)
    path = tmp_path / "requirements.txt"
    path.write_text("torch==99.0.0\n")
    why = run_import(path, target="cpu").entries("changed")["torch"]["why"]
    assert why.startswith(f"torch 99.0.0 is newer than gpuenv's knowledge (it ends at {newest}); ")
    assert why.endswith(" is the nearest known release that fits")


def test_a_torch_range_older_than_hopper_says_which_builds_have_its_kernels(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("torch>=1.8,<1.13\n")
    why = run_import(path, target="h100").entries("changed")["torch"]["why"]
    assert why.startswith(
        "no release in '<1.13,>=1.8' fits this target (no torch <1.13,>=1.8 build for "
        "linux-64 has kernels for sm_90 (Hopper); builds that do: cu118 (torch 2.0.0 - 2.7.1, "
        "driver >= 520.61.05), "
    )
    assert why.endswith("); 2.0.1 does")


def test_the_gpu_the_paper_ran_on_is_named_as_collect_env_reports_it(
    run_import: Callable[..., Imported],
) -> None:
    imported = run_import("collect-env/collect_env.txt", target="cpu")
    said = [a["why"] for a in imported.report["assumptions"] if "ran on" in a["why"]]
    assert said == ["the paper ran on NVIDIA A100-SXM4-40GB, driver 515.65.01"]


def test_a_source_release_beyond_its_newest_gpu_says_so() -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from gpuenv.importers import companions as moves
    from gpuenv.knowledge.foreign import CompanionRelease, Sourced
    from gpuenv.versions import ComputeCapability

    old = CompanionRelease(
        Version("1.0"),
        None,
        SpecifierSet(">=1.12"),
        None,
        None,
        ComputeCapability.parse("8.6"),
        Sourced("https://example.invalid/notes", False),
    )
    hopper = moves.Target(Version("2.1.2"), "cu121", "12.1", ComputeCapability.parse("9.0"))
    assert moves._source_reason(old, hopper) == "supports compute capability up to 8.6"


def test_a_build_refused_for_no_reason_gpuenv_knows_says_what_the_planner_said() -> None:
    from types import SimpleNamespace

    from packaging.version import Version

    from gpuenv.importers.decide import _build_refusal
    from gpuenv.knowledge import knowledge_base

    plan = SimpleNamespace(hardware=SimpleNamespace(platform="linux-64"), python="3.11")
    kb, version = knowledge_base(), Version("2.4.1")
    said = _build_refusal(kb, version, "cu124", plan, ("a reason",))  # type: ignore[arg-type]
    assert said == "the planner ruled it out (a reason)"
    assert _build_refusal(kb, version, "cu124", plan, ()) == "the plan ruled it out"  # type: ignore[arg-type]


def test_a_torch_older_than_the_knowledge_names_where_it_starts(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    from gpuenv.knowledge import knowledge_base

    oldest = min(r.version for r in knowledge_base().torch_releases)
    path = tmp_path / "requirements.txt"
    path.write_text("torch==1.0.0\n")
    why = run_import(path, target="cpu").entries("changed")["torch"]["why"]
    assert why.startswith(f"torch 1.0.0 predates gpuenv's knowledge (it starts at {oldest}); ")
    assert why.endswith(" is the nearest known release that fits")


def test_a_nightly_whose_release_does_not_fit_names_the_nearest_that_does(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("torch==1.13.0.dev20220801\n")
    why = run_import(path, target="h100").entries("changed")["torch"]["why"]
    assert why.startswith("1.13.0.dev20220801 is a nightly of 2022-08-01; 1.13.0 ")
    assert "; no torch 1.13.0 build for linux-64 has kernels for sm_90 (Hopper); " in why
    assert why.endswith(": 2.0.1 is the nearest release that fits")


def test_a_bitsandbytes_no_known_release_carries_binaries_for_is_kept_at_high_risk() -> None:
    from packaging.version import Version

    from gpuenv.importers import companions as moves
    from gpuenv.importers.merge import Resolved
    from gpuenv.importers.model import Ask, Origin
    from gpuenv.knowledge.foreign import foreign_knowledge
    from gpuenv.versions import ComputeCapability

    bnb = foreign_knowledge().companion("bitsandbytes")
    assert bnb is not None
    ask = Ask("bitsandbytes", "==0.43.0", Origin("requirements.txt", 2, "bitsandbytes==0.43.0"))
    resolved = Resolved("bitsandbytes", ask, "==0.43.0", None, (ask,))
    # a torch older than every release (1.9) with a CUDA no release's binaries reach
    target = moves.Target(Version("1.9.0"), "cu129", "12.9", ComputeCapability.parse("8.9"))
    entry = moves.move(bnb, resolved, target, None).entry
    assert (entry.kind, entry.now, entry.risk_text) == (
        "kept",
        "0.43.0",
        "its CUDA binaries may fail to load",
    )
    assert entry.why == (
        "0.43.0's wheels carry binaries for CUDA >=11.0,<12.4, not torch's 12.9, and no "
        "release gpuenv knows does"
    )
