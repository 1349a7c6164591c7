"""What a container image a Dockerfile starts ``FROM`` gave the paper: its torch (with
the CUDA build), Python and toolkit, from the tag and ``knowledge/data/images.toml``.

- ``pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-<runtime|devel>``: torch and its build;
  Python per torch series; devel images have nvcc.
- ``nvidia/cuda:<X.Y.Z>-[cudnn<N>-]<base|runtime|devel>-<os>``: the CUDA (a hint at the
  build pip then installed) and the OS's Python.
- ``nvcr.io/nvidia/pytorch:<YY.MM>-py3``: NVIDIA's own torch build, recorded as the
  published release it preceded, with the container's CUDA and Python.
- ``python:<X.Y>...``: the Python.

Facts an image implies carry the note ``IMPLIED`` so that anything the files state
outright wins over them.
"""

from __future__ import annotations

import re

from packaging.version import Version

from gpuenv.importers import era
from gpuenv.importers.model import (
    IMAGE,
    PYTHON,
    TOOLKIT,
    TORCH_BUILD,
    UNREADABLE,
    Ask,
    Origin,
    ReadingBuilder,
)
from gpuenv.knowledge.foreign import ForeignKnowledge

IMPLIED = "implied by the base image"

# Tags before 1.6 name the series only (1.5-cuda10.1-cudnn7-runtime: DETR's base image)
# and 1.1.0's named cuDNN's minor (1.1.0-cuda10.0-cudnn7.5-devel).
_PYTORCH_TAG = re.compile(
    r"^(?P<torch>\d+\.\d+(\.\d+)?)-cuda(?P<cuda>\d+\.\d+)-cudnn(?P<cudnn>\d+(\.\d+)?)"
    r"-(?P<flavor>runtime|devel)$"
)
_CUDA_TAG = re.compile(
    r"^(?P<cuda>\d+\.\d+)(\.\d+)?-(cudnn(?P<cudnn>\d*)-)?(?P<flavor>base|runtime|devel)"
    r"-(?P<os>[a-z]+\d+(\.\d+)?)$"
)
_NGC_TAG = re.compile(r"^(?P<release>\d{2}\.\d{2})-py3$")
_PYTHON_TAG = re.compile(r"^(?P<python>3\.\d{1,2})")
# tensorflow/tensorflow:1.14.0-gpu-py3, 2.11.0-gpu, 2.15.0; NGC: 23.03-tf1-py3, 23.03-tf2-py3
_TF_TAG = re.compile(r"^(?P<tf>\d+\.\d+(\.\d+)?)(-(?P<rest>[a-z0-9-]+))?$")
_NGC_TF_TAG = re.compile(r"^(?P<release>\d{2}\.\d{2})-tf(?P<major>[12])-py3")


def split_image(reference: str) -> tuple[str, str | None]:
    """``docker.io/library/python:3.8-slim@sha256:...`` -> ("python", "3.8-slim")."""
    ref = reference.split("@", 1)[0]
    name, tag = ref, None
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
    for prefix in ("docker.io/", "index.docker.io/", "registry.hub.docker.com/"):
        name = name.removeprefix(prefix)
    return name.removeprefix("library/"), tag


def _cu(cuda: str) -> str:
    major, minor = cuda.split(".")[:2]
    return f"cu{major}{minor}"


# pytorch/pytorch:nightly-devel-cuda10.0-cudnn7 (2018-2019): some nightly of that CUDA
_PYTORCH_NIGHTLY = re.compile(
    r"^nightly-(?P<flavor>runtime|devel)-cuda(?P<cuda>\d+\.\d+)-cudnn(?P<cudnn>\d+(\.\d+)?)$"
)


def _pytorch(tag: str, origin: Origin, builder: ReadingBuilder, kb: ForeignKnowledge) -> bool:
    match = _PYTORCH_TAG.match(tag)
    nightly = _PYTORCH_NIGHTLY.match(tag) if match is None else None
    if nightly is not None:
        # Which nightly was pulled is not recorded; its CUDA dates it (the newest release
        # built for that CUDA). NVIDIA/tacotron2 was refused as a TensorFlow project:
        # the image asked for no torch.
        builder.asks.append(Ask("torch", "", origin, manager="image", build=_cu(nightly["cuda"])))
        if nightly.group("flavor") == "devel":
            builder.fact(TOOLKIT, nightly.group("cuda"), origin, IMPLIED)
        return True
    if match is None:
        return False
    torch = match.group("torch")
    # A series tag was the series' first release's image; "==X.Y.*" says no more than it.
    specifier = f"=={torch}" if torch.count(".") == 2 else f"=={torch}.*"
    builder.asks.append(
        Ask("torch", specifier, origin, manager="image", build=_cu(match.group("cuda")))
    )
    version = Version(torch)
    found = kb.pytorch_image_python.get(f"{version.major}.{version.minor}")
    if found is not None:
        note = IMPLIED + (" (a fact gpuenv's data marks unverified)" if found[1].unverified else "")
        builder.fact(PYTHON, found[0], origin, note)
    if match.group("flavor") == "devel":
        builder.fact(TOOLKIT, match.group("cuda"), origin, IMPLIED)
    return True


def _cuda(tag: str, origin: Origin, builder: ReadingBuilder, kb: ForeignKnowledge) -> bool:
    match = _CUDA_TAG.match(tag)
    if match is None:
        return False
    builder.fact(TORCH_BUILD, _cu(match.group("cuda")), origin, IMPLIED)
    found = kb.os_python.get(match.group("os"))
    if found is not None:
        builder.fact(PYTHON, found[0], origin, f"{IMPLIED}: the OS's python3")
    if match.group("flavor") == "devel":
        builder.fact(TOOLKIT, match.group("cuda"), origin, IMPLIED)
    return True


def _ngc(tag: str, origin: Origin, builder: ReadingBuilder, kb: ForeignKnowledge) -> bool:
    match = _NGC_TAG.match(tag)
    if match is None:
        return False
    release = kb.ngc.get(match.group("release"))
    if release is None:
        # "it knows up to 25.01, 25.03, 25.12" read as if those three were all it knew
        ordered = sorted(kb.ngc)
        known = f"{len(ordered)} releases, {ordered[0]} to {ordered[-1]}" if ordered else "none"
        dated = era.ngc_era(match.group("release"), kb)
        what = "its torch, CUDA and Python are unknown"
        if dated is not None:
            what = f"its CUDA and Python are unknown; its torch is taken as {dated[0]}: {dated[1]}"
            builder.asks.append(Ask("torch", f"=={dated[0]}", origin, manager="image"))
        # Its CUDA release is unknown, not its nvcc: every NGC PyTorch container is a
        # development image with the CUDA toolkit (NVlabs/stylegan2-ada-pytorch's 20.12
        # compiles its ops with it at run time).
        builder.fact(TOOLKIT, "", origin, IMPLIED)
        builder.note(
            UNREADABLE,
            f"NGC PyTorch release {match.group('release')} is not in gpuenv's data "
            f"(it knows {known}): {what}",
            origin,
        )
        return True
    note = (
        f"NVIDIA's build {release.torch} in NGC {release.release} (CUDA {release.cuda}); "
        f"the nearest published release is {release.upstream}"
    )
    builder.asks.append(
        Ask("torch", f"=={release.upstream}", origin, manager="image", build=_cu(release.cuda))
    )
    builder.fact(IMAGE, f"ngc:{release.release}", origin, note)
    builder.fact(PYTHON, release.python, origin, IMPLIED)
    builder.fact(TOOLKIT, release.cuda, origin, IMPLIED)
    return True


def _tensorflow(tag: str, origin: Origin, builder: ReadingBuilder, kb: ForeignKnowledge) -> bool:
    """TensorFlow's own images: the image is TensorFlow, at the tag's version."""
    match = _TF_TAG.match(tag)
    if match is None:
        return False
    builder.asks.append(Ask("tensorflow", f"=={match.group('tf')}", origin, manager="image"))
    return True


def _ngc_tensorflow(
    tag: str, origin: Origin, builder: ReadingBuilder, kb: ForeignKnowledge
) -> bool:
    """NGC TensorFlow containers: TF 1.15 (``-tf1``) or a TF 2 release (``-tf2``)."""
    match = _NGC_TF_TAG.match(tag)
    if match is None:
        return False
    specifier = "==1.15.*" if match.group("major") == "1" else ">=2"
    builder.asks.append(Ask("tensorflow", specifier, origin, manager="image"))
    return True


def image_facts(
    reference: str, origin: Origin, builder: ReadingBuilder, kb: ForeignKnowledge
) -> None:
    """Record what the image ``reference`` implies."""
    name, tag = split_image(reference)
    builder.fact(IMAGE, reference, origin)
    if tag is None or tag == "latest":
        builder.note(
            UNREADABLE,
            f"{reference}: an untagged image is whatever was newest when it was pulled",
            origin,
        )
        return
    readers = {
        "pytorch/pytorch": _pytorch,
        "nvidia/cuda": _cuda,
        "nvcr.io/nvidia/cuda": _cuda,
        "nvcr.io/nvidia/pytorch": _ngc,
        "tensorflow/tensorflow": _tensorflow,
        "nvcr.io/nvidia/tensorflow": _ngc_tensorflow,
    }
    reader = readers.get(name)
    if reader is not None:
        if not reader(tag, origin, builder, kb):
            builder.note(UNREADABLE, f"{reference}: a tag gpuenv cannot read", origin)
        return
    if name == "python":
        match = _PYTHON_TAG.match(tag)
        if match:
            builder.fact(PYTHON, match.group("python"), origin, IMPLIED)
