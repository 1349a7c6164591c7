"""The newest arch each CUDA's nvcc compiles for, read from cuda.toml alone (an install's
question) or from the whole knowledge base: the same answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv import _settings
from gpuenv.builds import model as builds_model
from gpuenv.knowledge import _cuda_releases, knowledge_base, nvcc_arch_max


def test_cuda_toml_alone_gives_the_knowledge_base_s_answer_for_every_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_settings, "facts_file", None)
    kb = knowledge_base()
    versions = [f"{r.version.major}.{r.version.minor}" for r in kb.cuda_releases]
    assert len(versions) == len(_cuda_releases()) > 20
    answers = {cuda: nvcc_arch_max(cuda) for cuda in versions}
    assert answers == {cuda: builds_model.nvcc_arch_max(kb, cuda) for cuda in versions}
    assert answers["12.8"] == "12.0"  # Blackwell's consumer cards: nvcc 12.8 first
    assert nvcc_arch_max("99.9") is None
    assert nvcc_arch_max(None) is None


FACTS = """schema = 1

[[release]]
cuda = "12.8"
linux_driver_min = "570.26"
arch_min = "5.0"
arch_max = "10.0"
source = "https://docs.nvidia.com/cuda/archive/12.8.0/cuda-toolkit-release-notes/"
checked = 2027-01-05
"""


def test_a_facts_file_s_release_replaces_cuda_toml_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = tmp_path / "facts.toml"
    facts.write_text(FACTS)
    monkeypatch.setattr(_settings, "facts_file", facts)
    assert nvcc_arch_max("12.8") == "10.0"
    assert nvcc_arch_max("12.8") == builds_model.nvcc_arch_max(knowledge_base(), "12.8")
    assert nvcc_arch_max("12.6") == "9.0"  # the rest stays cuda.toml's
    facts.unlink()  # gone: cuda.toml's again
    assert nvcc_arch_max("12.8") == "12.0"
