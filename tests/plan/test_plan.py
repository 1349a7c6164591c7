"""The planner as a pure function: spec + knowledge base (+ facts) -> Plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.errors import NoCompatiblePlan
from gpuenv.hardware import GpuFacts, HardwareFacts
from gpuenv.knowledge import knowledge_base
from gpuenv.plan import DEFAULT_TORCH_INDEX, make_plan
from gpuenv.spec import Spec, load_spec, parse_spec_text
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

REPO = Path(__file__).resolve().parents[2]


def spec_of(stack: str, target: str) -> Spec:
    text = f'[project]\nname = "t"\n[stack]\npython = "3.11"\n{stack}\n[targets.t]\n{target}\n'
    return parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec


def test_plan_is_deterministic_and_serialisable() -> None:
    spec = spec_of('torch = "2.4.*"', 'gpu = "H100"\ndriver = "550.54.15"')
    first = make_plan(spec, knowledge_base()).to_json()
    second = make_plan(spec, knowledge_base()).to_json()
    assert first == second
    target = first["targets"]["t"]
    assert target["index_url"] == f"{DEFAULT_TORCH_INDEX}/cu124"
    assert target["virtual_packages"] == {
        "__cuda": "12.4",
        "__cuda_arch": "9.0",
        "__glibc": "2.28",
        "__linux": "5.10",
        "__unix": "0",
    }
    assert target["cudnn"] and target["nccl"]
    assert "9.0" in target["arch_list"]


def test_minor_compat_opt_in_allows_a_newer_build_on_an_older_driver() -> None:
    strict = spec_of('torch = "2.4.*"', 'gpu = "H100"\ndriver = "535.104.05"')
    minor = spec_of(
        'torch = "2.4.*"\ndriver-compat = "minor"', 'gpu = "H100"\ndriver = "535.104.05"'
    )
    assert make_plan(strict, knowledge_base()).target("t").cu_tag == "cu121"
    chosen = make_plan(minor, knowledge_base()).target("t")
    assert chosen.cu_tag == "cu124"
    assert any("minor-version compatibility" in r for r in chosen.reasons)


def test_strict_refusal_offers_minor_compat() -> None:
    spec = spec_of('torch = "2.4.*"\ncuda = "12.4"', 'gpu = "H100"\ndriver = "535.104.05"')
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(spec, knowledge_base())
    changes = [a.changes for a in caught.value.alternatives]
    assert {"stack.driver-compat": "minor"} in changes
    assert {"stack.cuda": "12.1"} in changes


def test_python_range_picks_the_newest_supported() -> None:
    text = '[project]\nname = "t"\n[stack]\npython = ">=3.10"\ntorch = "2.4.1"\n[targets.t]\ngpu = "none"\n'
    spec = parse_spec_text(text, file="x").spec
    assert make_plan(spec, knowledge_base()).target("t").python == "3.12"


def test_unsupported_python_is_refused_with_a_python_alternative() -> None:
    text = '[project]\nname = "t"\n[stack]\npython = "3.13"\ntorch = "2.4.*"\n[targets.t]\ngpu = "none"\n'
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(parse_spec_text(text, file="x").spec, knowledge_base())
    assert "Python 3.13" in caught.value.message
    assert {"stack.python": "3.12"} in [a.changes for a in caught.value.alternatives]


def test_excluded_companions_are_not_planned() -> None:
    spec = spec_of('torch = "2.4.*"\ntorchvision = false\ntorchaudio = false', 'gpu = "none"')
    target = make_plan(spec, knowledge_base()).target("t")
    assert target.torchvision is None and target.torchaudio is None


def test_compute_capability_alone_is_enough() -> None:
    spec = spec_of('torch = "2.4.*"', 'compute-capability = "8.6"\ndriver = "550.54.15"')
    target = make_plan(spec, knowledge_base()).target("t")
    assert target.cu_tag == "cu124"
    assert target.hardware.compute_capabilities == (ComputeCapability(8, 6),)


def test_detected_hardware_uses_every_gpu_and_is_marked_measured() -> None:
    facts = HardwareFacts(
        gpus=(
            GpuFacts(0, "NVIDIA A100-SXM4-80GB", "GPU-a", ComputeCapability(8, 0)),
            GpuFacts(1, "Tesla T4", "GPU-b", ComputeCapability(7, 5)),
        ),
        driver_version=DriverVersion.parse("550.54.15"),
        cuda_driver_version=CudaVersion(12, 4),
        sources={"gpus": "nvml"},
        measured=True,
    )
    spec = spec_of('torch = "2.4.*"', 'gpu = "detect"\ndriver = "detect"')
    target = make_plan(spec, knowledge_base(), detected=facts).target("t")
    assert target.hardware.source == "measured"
    assert target.virtual_packages["__cuda_arch"] == "7.5"
    assert target.cu_tag == "cu124"


def test_detect_without_gpus_is_unsatisfiable_with_cpu_alternative() -> None:
    facts = HardwareFacts((), None, None, measured=True, notes=("no NVIDIA driver loaded",))
    spec = spec_of('torch = "2.4.*"', 'gpu = "detect"\ndriver = "detect"')
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(spec, knowledge_base(), detected=facts)
    assert "no NVIDIA driver loaded" in caught.value.message
    assert caught.value.alternatives[0].changes == {"targets.t.gpu": "none"}


def test_torch_index_base_is_configurable() -> None:
    spec = spec_of('torch = "2.4.*"', 'gpu = "none"')
    target = make_plan(spec, knowledge_base(), torch_index="http://mirror.local/whl/").target("t")
    assert target.index_url == "http://mirror.local/whl/cpu"


@pytest.mark.parametrize("named", [None, "http://mirror.local/whl"])
def test_the_reason_says_where_pypis_own_build_comes_from(named: str | None) -> None:
    """plan said torch came "from the default index alone" for a spec that names a torch
    index, while the lock took it from that index."""
    spec = spec_of('torch = "2.4.1"', 'gpu = "T4"\ndriver = "535.104.05"')
    target = make_plan(spec, knowledge_base(), torch_index=named).target("t")
    assert target.cu_tag == "cu121" and target.pypi_default
    said = next(r for r in target.reasons if "is this same build" in r)
    if named:
        assert said.startswith("index http://mirror.local/whl/cu121: ")
        assert "names the torch index, so torch comes from there" in said
    else:
        assert "it comes from the default index alone" in said


def test_unknown_torch_release_is_refused() -> None:
    spec = spec_of('torch = "==9.9.9"', 'gpu = "none"')
    with pytest.raises(NoCompatiblePlan, match="no torch release gpuenv knows matches"):
        make_plan(spec, knowledge_base())


@pytest.mark.parametrize(
    "example", sorted((REPO / "examples").glob("*/gpuenv.toml")), ids=lambda p: p.parent.name
)
def test_every_example_plans(example: Path) -> None:
    loaded = load_spec(example, kb=knowledge_base())
    plan = make_plan(loaded.spec, knowledge_base())
    assert {t.target for t in plan.targets} == set(loaded.spec.targets)
    for target in plan.targets:
        assert target.reasons


def test_a_pinned_toolkit_decides_the_wheels_cuda() -> None:
    spec = spec_of('torch = "2.4.*"\ntoolkit = "12.1"', 'gpu = "H100"\ndriver = "550.54.15"')
    assert make_plan(spec, knowledge_base()).target("t").cu_tag == "cu121"
    auto = spec_of('torch = "2.4.*"\ntoolkit = "auto"', 'gpu = "H100"\ndriver = "550.54.15"')
    assert make_plan(auto, knowledge_base()).target("t").cu_tag == "cu124"
