"""Builds outside a release's official CUDA matrix, and experimental Pythons (issue #26):
the PyTorch index serves cu129 builds of 2.12.1 and 2.13.0 and cp315 wheels of 2.13 and
2.14 that PyPI lacks; newest release first across every build."""

from __future__ import annotations

import pytest

from gpuenv.errors import NoCompatiblePlan
from gpuenv.knowledge import knowledge_base
from gpuenv.plan import TargetPlan, make_plan
from gpuenv.spec import parse_spec_text


def plan_of(stack: str, target: str) -> TargetPlan:
    text = f'[project]\nname = "t"\n[stack]\n{stack}\n[targets.t0]\n{target}\n'
    spec = parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec
    return make_plan(spec, knowledge_base()).target("t0")


def test_rtx_5090_on_driver_575_pinned_to_2_13_gets_the_cu129_build() -> None:
    plan = plan_of('python = "3.12"\ntorch = "2.13.*"', 'gpu = "RTX 5090"\ndriver = "575.51.03"')
    assert (plan.torch, plan.cu_tag, plan.pypi_default) == ("2.13.0", "cu129", False)
    assert plan.index_url.endswith("/cu129")
    assert any(
        r.startswith("cu129 is outside torch 2.13.0's official CUDA matrix")
        and "no older torch matching '2.13.*' has an official build that fits" in r
        for r in plan.reasons
    )
    assert [u.fact for u in plan.unverified] == ["torch 2.13.0 cu129 build (linux-64)"]


@pytest.mark.parametrize("gpu", ["RTX 5090", "B200"])
def test_a_newer_releases_off_matrix_build_wins_over_an_older_official_one(gpu: str) -> None:
    plan = plan_of('python = "3.12"', f'gpu = "{gpu}"\ndriver = "575.51.03"')
    assert (plan.torch, plan.cu_tag) == ("2.13.0", "cu129")  # not 2.11.0's official cu128
    assert any(
        "newest release first across every build: preferred over torch 2.11.0's official cu128" in r
        for r in plan.reasons
    )


def test_an_official_build_carries_no_off_matrix_reason() -> None:
    plan = plan_of('python = "3.12"', 'gpu = "RTX 5090"\ndriver = "580.65.06"')
    assert plan.cu_tag == "cu130"
    assert not any("official CUDA matrix" in r for r in plan.reasons)


def test_2_12_0_has_no_cu129_build_but_2_12_1_has() -> None:
    with pytest.raises(NoCompatiblePlan) as caught:
        plan_of('python = "3.12"\ntorch = "==2.12.0"', 'gpu = "RTX 5090"\ndriver = "575.51.03"')
    nearest = next(a for a in caught.value.alternatives if "stack.torch" in a.changes)
    assert nearest.changes == {"stack.torch": "==2.12.1"}
    plan = plan_of('python = "3.12"\ntorch = "==2.12.1"', 'gpu = "RTX 5090"\ndriver = "575.51.03"')
    assert plan.cu_tag == "cu129"


@pytest.mark.parametrize("torch", ["2.13.*", "2.14.*"])
def test_python_3_15_is_served_by_the_pytorch_index_only(torch: str) -> None:
    plan = plan_of(f'python = "3.15"\ntorch = "{torch}"', 'gpu = "H100"\ndriver = "580.65.06"')
    assert (plan.python, plan.cu_tag) == ("3.15", "cu130")
    # cu130 is PyPI's build of these releases, but PyPI has no cp315 wheels of them
    assert plan.pypi_default is False
    assert any("experimental for torch" in r for r in plan.reasons)
    assert any("PyPI has no Python 3.15 wheels" in r for r in plan.reasons)


def test_a_python_range_prefers_what_pypi_has_over_an_experimental_python() -> None:
    plan = plan_of('python = ">=3.12"\ntorch = "2.14.*"', 'gpu = "H100"\ndriver = "580.65.06"')
    assert (plan.python, plan.pypi_default) == ("3.14", True)


def test_a_cpu_target_on_python_3_15_gets_2_13_experimental_wheels() -> None:
    plan = plan_of('python = "3.15"\ntorch = "2.13.*"', 'gpu = "none"')
    assert (plan.torch, plan.cu_tag, plan.pypi_default) == ("2.13.0", "cpu", False)


def test_python_3_15_before_2_13_is_refused_and_points_at_2_13() -> None:
    with pytest.raises(NoCompatiblePlan) as caught:
        plan_of('python = "3.15"\ntorch = "2.12.*"', 'gpu = "none"')
    assert "no torch 2.12.* release supports Python 3.15" in caught.value.message
    assert caught.value.alternatives[0].changes == {"stack.torch": "==2.13.0"}
