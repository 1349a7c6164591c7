""" "The locked torch is the planned build" is one rule (``_integrity.family_problems``):
the locker refuses a resolution with it, and every reader refuses a lock entry with it,
in the same words."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuenv.errors import ExternalToolError
from gpuenv.knowledge import knowledge_base
from gpuenv.lock import _integrity
from gpuenv.lock.inputs import planned_stack
from gpuenv.lock.model import PipPackage
from gpuenv.lock.target import check_against_plan
from gpuenv.plan import TargetPlan, plan_target
from gpuenv.spec import parse_spec_text
from tests.locked import cpu_target

SPEC = '[project]\nname = "t"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n'
SPEC += 'torchvision = false\ntorchaudio = false\n[targets.cpu]\ngpu = "none"\n'
CU124 = "https://download.pytorch.org/whl/cu124/torch-2.4.1%2Bcu124-cp311-cp311-linux_x86_64.whl"
PYPI = "https://files.example/torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl"


def _plan() -> TargetPlan:
    kb = knowledge_base()
    spec = parse_spec_text(SPEC, file="gpuenv.toml", kb=kb).spec
    return plan_target("cpu", spec, kb)


@pytest.mark.parametrize(
    ("pip", "said"),
    [
        # a mirror serving its CUDA build under the CPU index
        ((PipPackage("torch", "2.4.1+cu124", CU124, "a" * 64),), "is a cu124 build (planned cpu)"),
        # PyPI's own torch (a CUDA build on x86_64) in place of the +cpu one
        ((PipPackage("torch", "2.4.1", PYPI, "b" * 64),), "has no +cpu label"),
        # another version than planned
        ((PipPackage("torch", "2.4.0+cpu", CU124, "c" * 64),), "torch 2.4.1, but torch 2.4.0+cpu"),
    ],
)
def test_the_locker_and_the_reader_refuse_the_same_torch_in_the_same_words(
    pip: tuple[PipPackage, ...], said: str
) -> None:
    plan = _plan()
    with pytest.raises(ExternalToolError) as refused:
        check_against_plan(plan, pip)
    found = _integrity.family_problems(planned_stack(plan), pip, plan.hardware.platform)
    assert found and said in found[0]
    assert refused.value.message.endswith("\n".join(f"- {p}" for p in found))
    locked = replace(cpu_target(), stack=planned_stack(plan), pip=pip)
    assert [f"stack: {p}" for p in found] == [
        p for p in _integrity.stack_problems(locked) if "CPU-only target" not in p
    ]


def test_the_planned_build_passes_both() -> None:
    plan = _plan()
    pip = (PipPackage("torch", "2.4.1+cpu", CU124.replace("cu124", "cpu"), "d" * 64),)
    check_against_plan(plan, pip)
    locked = replace(cpu_target(), stack=planned_stack(plan), pip=pip)
    assert _integrity.stack_problems(locked) == []


def test_a_mislabelled_wheel_is_named_by_its_whole_url() -> None:
    """The URL says which index (or mirror) served it: shown whole, never cut short."""
    plan = _plan()
    pip = (PipPackage("torch", "2.4.1+cu124", CU124, "a" * 64),)
    found = _integrity.family_problems(planned_stack(plan), pip, plan.hardware.platform)
    assert found[0].endswith(f"from {CU124}")


OLD_SPEC = '[project]\nname = "t"\n[stack]\npython = "3.8"\ntorch = "1.8.1"\n'
OLD_SPEC += 'torchvision = false\ntorchaudio = false\n[targets.v100]\ngpu = "V100"\n'
OLD_SPEC += 'driver = "450.80.02"\n'
OLD_PYPI = "https://files.example/torch-1.8.1-cp38-cp38-manylinux1_x86_64.whl"


def _old_plan() -> TargetPlan:
    # driver 450.80.02 runs CUDA 10.2 but not 11.1: the cu102 build, PyPI's plain torch 1.8.1
    kb = knowledge_base()
    spec = parse_spec_text(OLD_SPEC, file="gpuenv.toml", kb=kb).spec
    plan = plan_target("v100", spec, kb)
    assert (plan.cu_tag, plan.pypi_default) == ("cu102", True)
    return plan


def test_pypis_torch_before_1_13_bundles_its_cuda_and_passes_both() -> None:
    """PyPI's 1.8.1 wheel pulls no nvidia-* wheel (its CUDA 10.2 is inside it): the lock
    refused it as 'comes with no CUDA runtime (planned CUDA 10.2)'."""
    plan = _old_plan()
    pip = (PipPackage("torch", "1.8.1", OLD_PYPI, "e" * 64),)
    check_against_plan(plan, pip)
    assert _integrity.family_problems(planned_stack(plan), pip, "linux-64") == []


def test_an_unlabelled_torch_that_pulls_another_cuda_is_still_refused() -> None:
    plan = _old_plan()
    runtime = "https://files.example/nvidia_cuda_runtime_cu11-11.7.99-py3-none-any.whl"
    pip = (
        PipPackage("torch", "1.8.1", OLD_PYPI, "e" * 64),
        PipPackage("nvidia-cuda-runtime-cu11", "11.7.99", runtime, "f" * 64),
    )
    found = _integrity.family_problems(planned_stack(plan), pip, "linux-64")
    assert found == ["torch 1.8.1 comes with CUDA runtime 11.7 (planned CUDA 10.2)"]
