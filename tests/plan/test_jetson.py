"""Jetson drivers as NVIDIA numbers them (issue #26): a Jetson's driver comes with its
JetPack release (Thor on JetPack 7 reports "Driver Version: 580.00, CUDA Version: 13.0"),
is judged by that release's CUDA, and the way to a newer CUDA is a newer JetPack."""

from __future__ import annotations

import pytest

from gpuenv.errors import NoCompatiblePlan
from gpuenv.hardware import GpuFacts, HardwareFacts
from gpuenv.knowledge import DriverCompat, knowledge_base
from gpuenv.plan import make_plan
from gpuenv.spec import Spec, parse_spec_text
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

JETPACK_INDEX = '[pip]\ntorch-index = "https://jetpack.example/whl"'


def spec_of(stack: str, target: str) -> Spec:
    text = f'[project]\nname = "t"\n[stack]\n{stack}\n[targets.t0]\n{target}\n'
    return parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec


def refusal(stack: str, target: str) -> NoCompatiblePlan:
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(spec_of(stack, target), knowledge_base())
    return caught.value


def driver_changes(error: NoCompatiblePlan) -> list[str]:
    return [
        a.changes["targets.t0.driver"]
        for a in error.alternatives
        if "targets.t0.driver" in a.changes
    ]


@pytest.mark.parametrize(
    ("mode", "tag"),
    [("strict", "cu130"), ("minor", "cu132")],  # strict: 13.0 is the ceiling; minor: any 13.x
)
def test_thor_on_jetpack_7_driver_580_00_is_accepted(mode: str, tag: str) -> None:
    spec = spec_of(
        f'python = "3.12"\ndriver-compat = "{mode}"', 'gpu = "Jetson AGX Thor"\ndriver = "580.00"'
    )
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert (plan.torch, plan.cu_tag, plan.hardware.platform) == ("2.15.0", tag, "linux-aarch64")
    assert "11.0" in plan.arch_list
    assert plan.driver_cuda == "13.0"  # what nvidia-smi prints on Thor, not desktop's 12.9
    assert plan.virtual_packages["__cuda"] == "13.0"
    assert any("driver 580.00 is the driver of JetPack 7.0 (L4T 38.2)" in r for r in plan.reasons)
    chosen = next(r for r in plan.reasons if r.startswith(f"{tag} chosen"))
    assert "JetPack 7.0 (L4T 38.2) runs CUDA" in chosen and ">= 580.65.06" not in chosen


def test_thor_strict_says_why_cu132_is_passed_over() -> None:
    spec = spec_of('python = "3.12"', 'gpu = "Jetson Thor"\ndriver = "580.00"')
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert any(
        "cu132: needs CUDA 13.2; JetPack 7.0 (L4T 38.2) (driver 580.00) runs CUDA up to 13.0" in r
        for r in plan.reasons
    )


def test_thor_detected_through_nvml_is_judged_by_its_jetpack() -> None:
    facts = HardwareFacts(
        gpus=(GpuFacts(0, "NVIDIA Thor", "GPU-t", ComputeCapability(11, 0)),),
        driver_version=DriverVersion.parse("580.00"),
        cuda_driver_version=CudaVersion(13, 0),
        measured=True,
    )
    spec = spec_of('python = "3.12"\ntorch = "2.12.*"', 'gpu = "detect"\ndriver = "detect"')
    plan = make_plan(spec, knowledge_base(), detected=facts).target("t0")
    assert (plan.torch, plan.cu_tag, plan.hardware.platform) == ("2.12.1", "cu130", "linux-aarch64")


def test_thor_asking_for_cuda_13_2_is_never_offered_a_driver_upgrade() -> None:
    error = refusal('python = "3.12"\ncuda = "13.2"', 'gpu = "Jetson AGX Thor"\ndriver = "580.00"')
    assert "JetPack 7.0 (L4T 38.2) (driver 580.00) runs CUDA up to 13.0" in error.message
    assert driver_changes(error) == []  # no JetPack release known here runs 13.2
    assert {"stack.driver-compat": "minor"} in [a.changes for a in error.alternatives]
    assert {"stack.cuda": "13.0"} in [a.changes for a in error.alternatives]


def test_orin_on_jetpack_6_0_is_offered_jetpack_6_2_not_a_driver() -> None:
    error = refusal(
        'python = "3.12"\ntorch = "2.9.*"',
        f'gpu = "Jetson AGX Orin"\ndriver = "540.3.0"\n{JETPACK_INDEX}',
    )
    assert "JetPack 6.0 (L4T 36.3) (driver 540.3.0) runs CUDA up to 12.2" in error.message
    jetpack = next(a for a in error.alternatives if "targets.t0.driver" in a.changes)
    assert jetpack.changes == {"targets.t0.driver": "540.4.0"}
    assert jetpack.description.startswith("flash JetPack 6.2 (L4T 36.4)")
    assert "torch 2.9.1 cu126" in jetpack.description
    assert not any(c.startswith(">=") for c in driver_changes(error))


def test_orin_on_jetpack_6_2_runs_its_cuda_12_6() -> None:
    # 540.4.0 is below every desktop 12.x minimum above 12.4: judged as a desktop driver
    # it would run CUDA 12.4 at most and no aarch64 build of 2.9 would fit.
    spec = spec_of(
        'python = "3.12"\ntorch = "2.9.*"',
        f'gpu = "Jetson AGX Orin"\ndriver = "540.4.0"\n{JETPACK_INDEX}',
    )
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert (plan.cu_tag, plan.driver_cuda) == ("cu126", "12.6")


def test_a_jetson_driver_no_jetpack_names_is_judged_like_a_desktop_one() -> None:
    spec = spec_of('python = "3.12"\ntorch = "2.9.*"', 'gpu = "Jetson Thor"\ndriver = "580.65.06"')
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert plan.cu_tag == "cu130"
    assert not any("JetPack" in r for r in plan.reasons)


def test_a_desktop_gpu_on_an_unknown_driver_is_still_offered_a_driver() -> None:
    error = refusal('python = "3.12"\ncuda = "13.2"', 'gpu = "H100"\ndriver = "580.65.06"')
    assert any(c.startswith(">=") for c in driver_changes(error))


# --- the data -----------------------------------------------------------------------------------


def test_jetpack_boards_are_known_arm_gpus_and_their_cuda_is_known() -> None:
    kb = knowledge_base()
    assert kb.jetpacks
    for jetpack in kb.jetpacks:
        assert kb.cuda(jetpack.cuda) is not None, jetpack
        for name in jetpack.gpus:
            gpu = kb.find_gpu(name)
            assert gpu is not None and gpu.name == name, name
            assert gpu.platform == "linux-aarch64" and gpu.segment == "embedded", name


def test_a_boards_jetpack_releases_never_move_cuda_backwards() -> None:
    kb = knowledge_base()
    for gpu in kb.gpus:
        cudas = [j.cuda for j in kb.jetpacks_of(gpu)]
        assert cudas == sorted(cudas), gpu.name


def test_thor_is_a_jetpack_7_board_whose_driver_runs_13_x_under_minor_compat() -> None:
    kb = knowledge_base()
    thor = kb.find_gpu("Jetson AGX Thor")
    assert thor is not None
    jetpack = kb.jetpack_running(thor, DriverVersion.parse("580.00"))
    assert jetpack is not None and jetpack.version == "7.0"  # 7.1's driver is unverified
    assert jetpack.cuda == CudaVersion(13, 0)
    # NVIDIA's table 2 puts 13.x at ">= 580": the R580 branch, Thor's 580.00 included
    floor = kb.driver_floor(CudaVersion(13, 2), DriverCompat.MINOR)
    assert floor is not None and floor <= DriverVersion.parse("580.00")
