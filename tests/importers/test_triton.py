"""A repository's own triton requirement bounds the torch it can run with: torch's Linux
wheels pin an exact triton (knowledge/data/companions.toml), so mamba-ssm's
``triton>=3.5.0`` needs torch 2.9.0 or newer. The fixture is modelled on mamba-ssm's
pyproject.toml (2025): torch unpinned, triton and the CUDA extension's build tools beside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

from gpuenv.importers.companions import pinned_bound
from gpuenv.knowledge import knowledge_base
from gpuenv.knowledge.foreign import foreign_knowledge
from tests.conftest import CliResult
from tests.importers.conftest import Imported

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61.0.0", "wheel", "packaging", "ninja", "torch"]
build-backend = "setuptools.build_meta"

[project]
name = "ssm-kernels"
requires-python = ">= 3.10"
dependencies = [
    "torch",
    "triton>=3.5.0",
    "ninja",
    "einops",
    "packaging",
]
"""


def _known() -> list[Version]:
    return [r.version for r in knowledge_base().torch_releases]


@pytest.mark.parametrize(
    ("specifier", "bound"),
    [
        (">=3.5.0", ">=2.9.0"),
        ("==3.3.1", ">=2.7.1,<=2.7.1"),
        ("<3.0", ">=2.0.0,<=2.3.1"),
        ("~=3.1.0", ">=2.5.0,<=2.5.1"),
    ],
)
def test_a_triton_requirement_names_the_torch_releases_whose_wheels_pin_one_it_accepts(
    specifier: str, bound: str
) -> None:
    triton = foreign_knowledge().companion("triton")
    assert triton is not None
    assert pinned_bound(triton, specifier, _known()) == bound


def test_a_triton_requirement_no_torch_pins_excludes_every_release() -> None:
    triton = foreign_knowledge().companion("triton")
    assert triton is not None
    known = _known()
    assert pinned_bound(triton, ">=99", known) == f"<{min(known)}"
    assert pinned_bound(triton, "not a specifier", known) is None


def _run(cli: Callable[..., CliResult], tmp_path: Path, driver: str) -> Imported:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    spec = tmp_path / f"gpuenv-{driver}.toml"
    result = cli(
        "import", str(repo), "--gpu", "H100", "--driver", driver, "-o", str(spec), "--json"
    )
    assert result.code == 0, result.out + result.err
    return Imported(result, spec)


def test_where_a_torch_with_that_triton_fits_it_is_chosen(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    imported = _run(cli, tmp_path, "570.86.10")
    assert Version(imported.torch().split("+")[0]) >= Version("2.9.0")
    torch = imported.entries("changed")["torch"]
    assert "that triton>=3.5.0 (torch>=2.9.0) accepts" in torch["why"]
    triton = imported.entries("changed")["triton"]
    assert triton["risk"] == "low"


def test_where_none_fits_the_report_says_the_requirement_cannot_hold(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    # Driver 550 runs no torch 2.9 build (cu126 and up) under strict compatibility.
    imported = _run(cli, tmp_path, "550.54.15")
    torch = imported.torch().split("+")[0]
    triton = imported.entries("changed")["triton"]
    assert triton["risk"] == "high"
    own = triton["to"]
    assert Version(own) < Version("3.5.0")
    assert triton["why"] == (
        f"torch {torch}'s wheels require triton {own}, which '>=3.5.0' excludes: "
        "the files' triton requirement cannot hold beside this torch"
    )
