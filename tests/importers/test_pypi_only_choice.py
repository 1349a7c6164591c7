"""The torch an import chooses where the PyTorch index cannot be reached (``Planning``'s
``pypi_only``): PyPI's own build of the nearest release whose PyPI build runs on the
target, so that ``gpuenv lock`` needs no torch index. Planned with the knowledge base
only: no network."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

from gpuenv.importers.torch_choice import PaperTorch, Planning, choose
from gpuenv.knowledge import knowledge_base
from gpuenv.spec import Target
from tests.importers.conftest import Imported


def _planning(gpu: str, driver: str | None, *, pypi_only: bool) -> Planning:
    target = Target(gpu=gpu, driver=driver)
    return Planning("paper", "t", target, knowledge_base(), pypi_only=pypi_only)


def _paper(version: str | None, build: str | None, python: str | None) -> PaperTorch:
    return PaperTorch(
        specifier=f"=={version}" if version else "",
        version=Version(version) if version else None,
        build=build,
        python=python,
        torchvision=False,
        torchaudio=False,
    )


@pytest.mark.parametrize(
    ("paper", "gpu", "driver", "anywhere", "pypi"),
    [
        # No torch pinned: the newest release's PyPI build is cu130 (driver 580+); the
        # newest whose PyPI build driver 570 runs is 2.10.0 (cu128).
        ((None, None, None), "H100", "570.133.20", None, ("2.10.0", "cu128")),
        # Torch 1.11 has no sm_90 kernels; 2.0's PyPI build (cu117) neither: 2.1.2's cu121.
        (("1.11.0", "cu113", "3.8"), "H100", "570.133.20", ("2.0.1", "cu118"), ("2.1.2", "cu121")),
        # The paper's release stays, in PyPI's build of it.
        (("2.4.1", "cu124", "3.11"), "H100", "550.54.15", ("2.4.1", "cu124"), ("2.4.1", "cu121")),
    ],
)
def test_the_nearest_pypi_build_is_chosen_where_the_torch_index_is_down(
    paper: tuple[str | None, str | None, str | None],
    gpu: str,
    driver: str,
    anywhere: tuple[str, str] | None,
    pypi: tuple[str, str],
) -> None:
    asked = _paper(*paper)
    chosen = choose(_planning(gpu, driver, pypi_only=True), asked).plan
    assert (chosen.torch, chosen.cu_tag) == pypi
    assert chosen.pypi_default, "the lock takes it from the default index alone"
    usual = choose(_planning(gpu, driver, pypi_only=False), asked).plan
    if anywhere is not None:
        assert (usual.torch, usual.cu_tag) == anywhere
    assert not usual.pypi_default, "the case needs the torch index where it is reachable"


def test_the_refused_build_says_why_and_that_the_index_is_down() -> None:
    choice = choose(
        _planning("H100", "570.133.20", pypi_only=True), _paper("1.11.0", "cu113", "3.8")
    )
    assert choice.rejected[0].startswith("PyPI's own build of torch 1.11.0 is cu102: ")
    assert "sm_90" in choice.rejected[0]
    # no 1.11.0 build of any kind has sm_90 kernels: the index is not what is missing
    assert not any("cannot be reached" in line for line in choice.rejected), choice.rejected


def test_a_cpu_target_is_planned_as_ever() -> None:
    """A CPU target's PyPI route is ``build = "pypi"``, which lock names: not chosen here."""
    paper = _paper("2.4.1", None, "3.11")
    down = choose(_planning("none", None, pypi_only=True), paper).plan
    usual = choose(_planning("none", None, pypi_only=False), paper).plan
    assert (down.torch, down.cu_tag) == (usual.torch, usual.cu_tag) == ("2.4.1", "cpu")


def test_a_refusal_names_the_papers_torch_and_what_would_work(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """stylegan2-ada-pytorch (2020: torch 1.7.1) on an RTX 3090 with driver 470, PyPI
    only: no PyPI build runs there (1.7.1's is cu102, without sm_86; from 1.13 on they
    need a newer driver). The refusal named torch 2.15.0, the walk's last try, and
    listed nothing instead."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==1.7.1\nclick\nimageio-ffmpeg==0.4.3\n")
    imported = run_import(requirements, target="rtx3090-470", extra=("--torch-builds", "pypi"))
    assert imported.result.code == 3, imported.result.err
    error = json.loads(imported.result.out)["error"]
    assert "(torch 1.7.1)" in error["message"] and "2.15" not in error["message"]
    assert "has no kernels for sm_86" in error["message"]
    changes = [a["changes"] for a in error["alternatives"]]
    assert changes == [{"--torch-builds": "any"}, {"--driver": "515.43.04"}]
    assert "torch 1.7.1 (cu110)" in error["alternatives"][0]["description"]
    assert "torch 1.13.1 (cu117)" in error["alternatives"][1]["description"]


def test_an_unreachable_index_is_blamed_only_where_another_build_would_fit() -> None:
    """DETR (torch 1.5) on an H100: no build of any kind has sm_90 kernels, so "the
    PyTorch index cannot be reached" is no reason; torch 2.4.1's cu124 would fit, so
    there it is one."""
    from gpuenv.errors import NoCompatiblePlan
    from gpuenv.importers.torch_choice import _attempt

    planning = _planning("H100", "550.54.15", pypi_only=True)
    old = _attempt(planning, "==1.12.1", ("3.10",), "11.3", _paper("1.12.1", "cu113", "3.10"))
    assert isinstance(old, NoCompatiblePlan)
    assert "cannot be reached" not in old.message
    assert old.message.count("kernels for sm_90") == 1, old.message
    new = _attempt(planning, "==2.4.1", ("3.11",), "12.4", _paper("2.4.1", "cu124", "3.11"))
    assert not isinstance(new, NoCompatiblePlan) or "cannot be reached" in new.message


def test_a_walk_among_pypi_builds_says_so(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """stylegan3 on an RTX 3090, PyPI's builds only: "1.13.1 (cu117) is the newest release
    of the first later series whose builds do" read as if 1.10-1.12 had none, which have
    cu11x builds that run there, on the PyTorch index."""
    (tmp_path / "requirements.txt").write_text("torch==1.11.0\n")
    imported = run_import(tmp_path / "requirements.txt", extra=("--torch-builds", "pypi"))
    assert imported.result.code == 0, imported.result.err
    why = imported.entries("changed")["torch"]["why"]
    assert why.endswith(
        "; 2.1.2 (cu121) is the newest release of the first later series whose PyPI build does"
    ), why
