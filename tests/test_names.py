"""The names every layer shares (gpuenv.names): normalisation agrees with packaging's
canonicalize_name, and the torch memberships nest as their users assume."""

from __future__ import annotations

import importlib
import random

import pytest
from packaging.requirements import InvalidRequirement, Requirement
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
    from gpuenv.importers import frameworks

    assert frameworks.TRIO is names.TRIO


@pytest.mark.parametrize("written", ["pytorch.triton==3.0.0", "PyTorch_Triton", "Torch"])
def test_the_spec_check_normalises_names_as_pep_503_does(written: str) -> None:
    """A torch-family package in [pip] is refused however its name is spelt: the check
    once folded only case and "_", so "pytorch.triton" got through."""
    from gpuenv.errors import SpecError
    from gpuenv.knowledge import knowledge_base
    from gpuenv.spec import parse_spec_text

    text = (
        '[project]\nname = "demo"\n\n[stack]\npython = "3.11"\ntorch = "2.4.*"\n\n'
        f'[pip]\ndependencies = ["{written}"]\n\n'
        '[targets.h100]\ngpu = "H100"\ndriver = "550.54.15"\n'
    )
    with pytest.raises(SpecError) as caught:
        parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base())
    assert "is chosen by [stack]" in str(caught.value)


@pytest.mark.parametrize(
    ("group", "dev"), [("Docs.Build", True), ("test_unit", True), ("vision", False)]
)
def test_dependency_groups_are_named_as_pep_735_normalises_them(group: str, dev: bool) -> None:
    from gpuenv.importers._devfiles import is_dev_group

    assert is_dev_group(group) is dev


@pytest.mark.parametrize(
    "line",
    [
        "torch==2.4.1",
        "flash-attn>=2.6; platform_machine == 'x86_64'",
        "  zope.interface [extra] ~= 5.0",
        "\tpkg_name_ @ https://example.invalid/pkg-1.0-py3-none-any.whl",
        "a",
        "Foo.Bar-Baz[x,y](>=1)",
        "name;python_version<'3.12'",
    ],
)
def test_requirement_name_is_packagings(line: str) -> None:
    assert names.requirement_name(line) == Requirement(line).name


def test_requirement_name_agrees_with_packaging_on_random_lines() -> None:
    """Every line packaging accepts, among strings made of the pieces a requirement is
    made of, gets packaging's name (a seeded sample: reproducible)."""
    words = ["foo", ">=1.0", " @ https://x.invalid/y.whl", "; python_version<'3.11'", "[extra]"]
    pieces = [*"aZ09._- \t[],;@><=!~*()'\"/:é", *words]
    rng = random.Random(7)
    accepted = 0
    for _ in range(60_000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        try:
            expected = Requirement(line).name
        except InvalidRequirement:
            continue
        accepted += 1
        assert names.requirement_name(line) == expected, line
    assert accepted > 1_000


def test_the_build_knowledge_requirements_have_packagings_names() -> None:
    from gpuenv.builds import knowledge

    lines = [r for entry in knowledge.packages().values() for r in entry.build_requires]
    assert lines
    for line in lines:
        assert names.requirement_name(line) == Requirement(line).name


def test_requirement_name_refuses_a_line_with_no_name() -> None:
    with pytest.raises(ValueError, match="not a requirement"):
        names.requirement_name(">=1.0")
