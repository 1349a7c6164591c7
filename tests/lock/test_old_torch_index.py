"""torch 1.x locked from where its wheels are: 1.9.1+cu111 from the per-build index
(``whl/cu111/``, which test-infra's manage.py writes for every folder, old wheels too),
PyPI's plain 1.9.1 (the cu102 build, CUDA bundled, no nvidia-* wheel) from the default
index; both pass the rule "the locked torch is the planned build"."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.knowledge import knowledge_base
from gpuenv.lock import _integrity
from gpuenv.lock.inputs import planned_stack
from gpuenv.lock.model import PipPackage, PipRequest
from gpuenv.lock.target import check_against_plan
from gpuenv.lock.uv import UvResolver
from gpuenv.plan import TargetPlan, plan_target
from gpuenv.spec import parse_spec_text
from tests.fixtures.pkgindex.plugin import PkgIndex

pytestmark = pytest.mark.usefixtures("pkgindex")


def _plan(gpu: str, driver: str, audio: str | None = "0.9.1") -> TargetPlan:
    """torch 1.9.1 for one GPU; ``audio`` None: no torchaudio."""
    torchaudio = "false" if audio is None else f'"{audio}"'
    text = '[project]\nname = "t"\n[stack]\npython = "3.9"\ntorch = "1.9.1"\n'
    text += f"torchvision = false\ntorchaudio = {torchaudio}\n"
    text += f'[targets.t]\ngpu = "{gpu}"\ndriver = "{driver}"\n'
    kb = knowledge_base()
    return plan_target("t", parse_spec_text(text, file="gpuenv.toml", kb=kb).spec, kb)


def _resolve(pkgindex: PkgIndex, tmp_path: Path, torch_index: str | None) -> list[PipPackage]:
    request = PipRequest(
        requirements=("torch==1.9.1", "torchaudio==0.9.1") if torch_index else ("torch==1.9.1",),
        python="3.9",
        default_index=pkgindex.default_index,
        torch_index=torch_index,
        cache_dir=tmp_path / "uv-cache",
    )
    return list(UvResolver(timeout=120).resolve(request))


def test_1_9_1_cu111_locks_from_the_per_build_index(pkgindex: PkgIndex, tmp_path: Path) -> None:
    plan = _plan("RTX 4090", "535.183.01")
    assert plan.cu_tag == "cu111" and plan.index_url.endswith("/whl/cu111")
    pip = _resolve(pkgindex, tmp_path, pkgindex.torch_index("cu111"))
    torch = next(p for p in pip if p.name == "torch")
    assert torch.version == "1.9.1+cu111"
    assert torch.index == pkgindex.torch_index("cu111")
    assert not [p for p in pip if p.name.startswith("nvidia-")]  # CUDA inside the wheel
    check_against_plan(plan, pip)
    assert _integrity.family_problems(planned_stack(plan), pip, "linux-64") == []


def test_pypis_plain_1_9_1_is_the_cu102_build_and_locks_as_planned(
    pkgindex: PkgIndex, tmp_path: Path
) -> None:
    plan = _plan("V100", "450.80.02", audio=None)  # R450 runs CUDA 10.2, not 11.1
    assert (plan.cu_tag, plan.pypi_default) == ("cu102", True)
    pip = _resolve(pkgindex, tmp_path, None)
    torch = next(p for p in pip if p.name == "torch")
    assert torch.version == "1.9.1" and torch.index == pkgindex.default_index
    assert not [p for p in pip if p.name.startswith("nvidia-")]
    check_against_plan(plan, pip)
    assert _integrity.family_problems(planned_stack(plan), pip, "linux-64") == []
