"""The nvcc wheel a toolkit asks for is data: CUDA 13's lost its ``-cu13`` suffix (the
suffixed name holds a 0.0.1 placeholder: a lock of FastVideo's torch 2.12 cu130 with a
CUDA extension failed, exit 3), and CUDA before 11.7 has none (fairseq's V100 era spec,
cu102: a 404 for ``nvidia-cuda-nvcc-cu10``, a package the user never named)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gpuenv.errors import UsageError
from gpuenv.knowledge import knowledge_base
from gpuenv.lock.target import _nvcc_wheel
from gpuenv.versions import CudaVersion


def _ask(cuda: str, toolkit: str | None = "auto") -> str:
    spec: Any = SimpleNamespace(stack=SimpleNamespace(toolkit=toolkit))
    plan: Any = SimpleNamespace(cuda=cuda, target="gpu")
    return _nvcc_wheel(spec, plan)


@pytest.mark.parametrize(
    ("cuda", "wheel"),
    [
        ("11.8", "nvidia-cuda-nvcc-cu11==11.8.*"),
        ("12.4", "nvidia-cuda-nvcc-cu12==12.4.*"),
        ("13.0", "nvidia-cuda-nvcc==13.0.*"),
    ],
)
def test_each_cuda_asks_the_wheel_nvidia_publishes(cuda: str, wheel: str) -> None:
    assert _ask(cuda) == wheel


@pytest.mark.parametrize("cuda", ["10.2", "11.3", "11.6"])
def test_a_cuda_without_a_wheel_is_refused_with_the_ways_that_work(cuda: str) -> None:
    with pytest.raises(UsageError) as caught:
        _ask(cuda)
    assert f"none for CUDA {cuda}" in caught.value.message
    assert "[conda]" in (caught.value.hint or "")
    assert f'toolkit = "system:/usr/local/cuda-{cuda}"' in (caught.value.hint or "")


def test_the_data_names_a_wheel_from_its_first_minor_on() -> None:
    kb = knowledge_base()
    assert kb.nvcc_wheel(CudaVersion.parse("11.6")) is None
    assert kb.nvcc_wheel(CudaVersion.parse("11.7")) == "nvidia-cuda-nvcc-cu11"
    assert kb.nvcc_wheel(CudaVersion.parse("13.2")) == "nvidia-cuda-nvcc"
