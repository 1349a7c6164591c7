"""The names every layer shares (gpuenv.names): normalisation agrees with packaging's
canonicalize_name, and the torch memberships nest as their users assume."""

from __future__ import annotations

import importlib

import pytest
from packaging.utils import canonicalize_name

from gpuenv import names


@pytest.mark.parametrize(
    "name",
    [
        "Flash_Attn",
        "flash-attn",
        "torch",
        "PyTorch-Triton",
        "zope.interface",
        "Foo__Bar--baz..Qux",
        "nvidia-cudnn-cu12",
        "A",
        "_leading",
        "trailing.",
        "mixed-_.separators",
        "ÄÖ_name",
    ],
)
def test_normalize_name_is_packagings_canonical_name(name: str) -> None:
    assert names.normalize_name(name) == canonicalize_name(name)


def test_the_torch_memberships_nest() -> None:
    assert names.TRIO == ("torch", "torchvision", "torchaudio")
    assert names.TRIO[1:] == names.COMPANIONS
    assert set(names.TRIO) < set(names.TORCH_IMPORTS) < set(names.TORCH_FAMILY)
    assert "pytorch-triton" in names.TORCH_FAMILY and "pytorch-triton" not in names.TORCH_IMPORTS


def test_each_user_takes_the_shared_definitions() -> None:
    from gpuenv.doctor import _records, shadowing, trio
    from gpuenv.lock import wheelcheck
    from gpuenv.lock.model import PipRequest
    from gpuenv.spec import TORCH_FAMILY

    assert frozenset(names.TORCH_FAMILY) == TORCH_FAMILY
    assert PipRequest.__dataclass_fields__["torch_family"].default == names.TORCH_FAMILY
    decide = importlib.import_module("gpuenv.importers.decide")  # the package exports decide()
    assert wheelcheck.FAMILY is names.TRIO and decide.TRIO is names.TRIO
    assert shadowing.PACKAGES is names.TORCH_IMPORTS is _records.STACK
    assert trio.COMPANIONS is names.COMPANIONS
