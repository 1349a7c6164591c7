"""Decisions that must hold on every machine: platforms, GPU generations and their
drivers, one torch for all targets, refusals that point the right way (issue #11)."""

from __future__ import annotations

import pytest

from gpuenv.errors import NoCompatiblePlan, SpecError
from gpuenv.hardware import GpuFacts, HardwareFacts
from gpuenv.knowledge import knowledge_base
from gpuenv.plan import make_plan, plan_target
from gpuenv.spec import Spec, parse_spec_text
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion


def spec_of(stack: str, *targets: str) -> Spec:
    tables = "".join(f"[targets.t{i}]\n{t}\n" for i, t in enumerate(targets))
    text = f'[project]\nname = "t"\n[stack]\n{stack}\n{tables}'
    return parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec


def refusal(stack: str, *targets: str) -> NoCompatiblePlan:
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(spec_of(stack, *targets), knowledge_base())
    return caught.value


# --- aarch64 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("torch", "driver", "tag", "arch"),
    [
        ("2.4.*", "550.54.15", "cu124", ["9.0"]),  # 2.4/2.5: cu124 only, sm_90 only
        ("2.5.*", "550.54.15", "cu124", ["9.0"]),
        ("2.6.*", "560.35.05", "cu126", ["9.0"]),
        ("2.8.*", "575.51.03", "cu129", ["8.0", "9.0", "10.0", "12.0"]),
        ("2.9.*", "580.65.06", "cu130", ["8.0", "9.0", "10.0", "11.0", "12.0+PTX"]),
        ("2.12.*", "580.95.05", "cu130", ["8.0", "9.0", "10.0", "11.0", "12.0"]),
    ],
)
def test_gh200_is_planned_from_aarch64_builds(
    torch: str, driver: str, tag: str, arch: list[str]
) -> None:
    plan = make_plan(
        spec_of(f'python = "3.12"\ntorch = "{torch}"', f'gpu = "GH200"\ndriver = "{driver}"'),
        knowledge_base(),
    ).target("t0")
    assert plan.hardware.platform == "linux-aarch64"
    assert (plan.cu_tag, list(plan.arch_list)) == (tag, arch)
    assert any("GH200 systems are Arm" in r for r in plan.reasons)
    assert plan.index_url.endswith(f"/{tag}")


@pytest.mark.parametrize(
    ("torch", "driver", "expected"),
    [
        ("2.7.*", "570.86.15", ("2.7.1", "cu128")),
        ("*", "570.86.15", ("2.11.0", "cu128")),  # cu130 needs R580; cu128 ends with 2.11
        ("2.12.*", "580.95.05", ("2.12.1", "cu130")),
        ("*", "595.58.03", ("2.15.0", "cu132")),
    ],
)
def test_gb200_on_several_releases(torch: str, driver: str, expected: tuple[str, str]) -> None:
    plan = make_plan(
        spec_of(f'python = "3.12"\ntorch = "{torch}"', f'gpu = "GB200"\ndriver = "{driver}"'),
        knowledge_base(),
    ).target("t0")
    assert (plan.torch, plan.cu_tag, plan.hardware.platform) == (*expected, "linux-aarch64")


def test_gb200_on_torch_2_6_is_refused_naming_the_builds_that_cover_it() -> None:
    error = refusal('python = "3.12"\ntorch = "2.6.*"', 'gpu = "GB200"\ndriver = "570.86.15"')
    assert "no torch 2.6.* build for linux-aarch64 has kernels for sm_100" in error.message
    assert "cu128 (torch 2.7.0" in error.message
    assert error.alternatives[0].changes == {"stack.torch": "==2.7.1"}


def test_a100_on_aarch64_with_torch_2_5_is_refused_with_the_reason() -> None:
    error = refusal(
        'python = "3.12"\ntorch = "2.5.*"',
        'gpu = "A100"\nplatform = "linux-aarch64"\ndriver = "550.54.15"',
    )
    assert "linux-aarch64 has kernels for sm_80 (Ampere)" in error.message
    assert "cu129 (torch 2.8.0" in error.message  # the first aarch64 build with sm_80
    # the same A100 on x86_64 is fine
    spec = spec_of('python = "3.12"\ntorch = "2.5.*"', 'gpu = "A100"\ndriver = "550.54.15"')
    assert make_plan(spec, knowledge_base()).target("t0").cu_tag == "cu124"


def test_jetson_orin_is_refused_with_what_nvidia_publishes_instead() -> None:
    error = refusal('python = "3.10"', 'gpu = "Jetson AGX Orin"\ndriver = "540.4.0"')
    assert "L4T (JetPack)" in error.message and "PyTorch publishes no wheels" in error.message
    assert "install-pytorch-jetson-platform" in error.message
    assert [a.changes for a in error.alternatives] == [
        {"pip.torch-index": "<your JetPack wheel index>"},
        {"targets.t0.gpu": "none"},
    ]


def test_jetson_orin_is_planned_when_an_index_of_jetpack_builds_is_named() -> None:
    spec = spec_of(
        'python = "3.10"\ntorch = "2.9.*"',
        'gpu = "Jetson AGX Orin"\ndriver = "570.86.15"\n[pip]\ntorch-index = "https://jp.example/whl"',
    )
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert plan.index_url.startswith("https://jp.example/whl/")
    assert plan.hardware.platform == "linux-aarch64"


def test_jetson_thor_on_2_9_gets_cu130() -> None:
    spec = spec_of('python = "3.12"\ntorch = "2.9.*"', 'gpu = "Jetson Thor"\ndriver = "580.65.06"')
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert (plan.torch, plan.cu_tag, plan.hardware.platform) == ("2.9.1", "cu130", "linux-aarch64")
    assert "11.0" in plan.arch_list
    assert any(
        "cu128: arch list (8.0, 9.0, 10.0, 12.0) does not cover sm_110" in r for r in plan.reasons
    )


def test_a_gpu_that_exists_only_on_arm_contradicts_linux_64() -> None:
    with pytest.raises(SpecError, match="GH200 machines are linux-aarch64"):
        spec_of('python = "3.12"', 'gpu = "GH200"\nplatform = "linux-64"\ndriver = "580.65.06"')


# --- GPU generations and their drivers --------------------------------------------------------


def test_b200_on_driver_550_is_refused() -> None:
    with pytest.raises(
        SpecError, match="cannot drive a B200: Blackwell GPUs run driver branch R570"
    ):
        spec_of('python = "3.12"', 'gpu = "B200"\ndriver = "550.54.15"')


def test_k80_on_driver_550_is_refused() -> None:
    with pytest.raises(SpecError, match="Kepler GPUs run driver branches R295 to R470"):
        spec_of('python = "3.10"', 'gpu = "K80"\ndriver = "550.54.15"')


def test_v100_on_driver_590_is_refused() -> None:
    with pytest.raises(SpecError, match="Volta GPUs run driver branches R384 to R580"):
        spec_of('python = "3.10"', 'gpu = "V100"\ndriver = "590.44.01"')


def test_a_detected_gpu_on_a_driver_it_cannot_run_is_refused_by_the_planner() -> None:
    facts = HardwareFacts(
        gpus=(GpuFacts(0, "NVIDIA B200", "GPU-b", ComputeCapability(10, 0)),),
        driver_version=DriverVersion.parse("550.54.15"),
        cuda_driver_version=CudaVersion(12, 4),
        measured=True,
    )
    spec = spec_of('python = "3.12"', 'gpu = "detect"\ndriver = "detect"')
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(spec, knowledge_base(), detected=facts)
    assert "Blackwell GPUs run driver branch R570 or newer" in caught.value.message
    assert caught.value.alternatives[0].changes == {"targets.t0.driver": ">=570"}


def test_k80_on_470_with_torch_2_1_strict_refuses_without_a_driver_upgrade() -> None:
    error = refusal('python = "3.10"\ntorch = "2.1.*"', 'gpu = "K80"\ndriver = "470.256.02"')
    assert "cu118 needs driver >= 520.61.05" in error.message
    changes = [a.changes for a in error.alternatives]
    assert changes[0] == {"stack.driver-compat": "minor"}
    assert not any("targets.t0.driver" in c for c in changes)  # R470 is Kepler's last branch


def test_k80_on_470_with_torch_2_1_and_minor_compat_gets_cu118() -> None:
    spec = spec_of(
        'python = "3.10"\ntorch = "2.1.*"\ndriver-compat = "minor"',
        'gpu = "K80"\ndriver = "470.256.02"',
    )
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert (plan.torch, plan.cu_tag) == ("2.1.2", "cu118")


def test_minor_compat_is_never_offered_for_blackwell_below_r570() -> None:
    # The target itself is impossible: the refusal is about the driver, nothing else.
    facts = HardwareFacts(
        gpus=(GpuFacts(0, "NVIDIA GeForce RTX 5090", "GPU-r", ComputeCapability(12, 0)),),
        driver_version=DriverVersion.parse("560.35.05"),
        cuda_driver_version=CudaVersion(12, 6),
        measured=True,
    )
    spec = spec_of('python = "3.12"', 'gpu = "detect"\ndriver = "detect"')
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(spec, knowledge_base(), detected=facts)
    assert all("driver-compat" not in a.changes for a in caught.value.alternatives)


# --- refusals that point the right way -----------------------------------------------------------


def test_rtx_5090_with_torch_2_6_first_suggests_torch_2_7_cu128() -> None:
    error = refusal('python = "3.12"\ntorch = "2.6.*"', 'gpu = "RTX 5090"\ndriver = "570.86.16"')
    assert "builds that do: cu128 (torch 2.7.0 - 2.11.0, driver >= 570.26)" in error.message
    first = error.alternatives[0]
    assert first.changes == {"stack.torch": "==2.7.1"}
    assert "torch 2.7.1 cu128" in first.description


def test_the_same_release_is_offered_before_another_release() -> None:
    error = refusal(
        'python = "3.11"\ntorch = "2.4.*"\ncuda = "12.4"', 'gpu = "H100"\ndriver = "535.104.05"'
    )
    assert error.alternatives[0].changes == {"stack.cuda": "12.1"}
    assert error.alternatives[1].changes == {"stack.driver-compat": "minor"}


def test_torch_2_15_on_python_3_10_is_refused() -> None:
    error = refusal('python = "3.10"\ntorch = "2.15.*"', 'gpu = "none"')
    assert (
        "no torch 2.15.* release supports Python 3.10 (2.15.0 supports >=3.11,<3.16)"
        in error.message
    )
    changes = [a.changes for a in error.alternatives]
    assert {"stack.python": "3.11"} in changes  # the nearest Python, not the newest
    assert {"stack.torch": "==2.14.1"} in changes


def test_torchaudio_star_with_the_newest_torch_keeps_the_newest_torch() -> None:
    spec = spec_of('python = "3.12"\ntorchaudio = "*"\ntorchvision = "*"', 'gpu = "none"')
    plan = make_plan(spec, knowledge_base()).target("t0")
    assert (plan.torch, plan.torchvision, plan.torchaudio) == ("2.15.0", "0.29.2", "2.11.1")
    assert any("torchaudio 2.11.1 (stable ABI" in r for r in plan.reasons)


# --- one torch for all targets ---------------------------------------------------------------------


TWO = ('gpu = "H100"\ndriver = "550.54.15"', 'gpu = "none"')


def test_two_unconstrained_targets_get_one_torch_named_after_the_one_holding_it_back() -> None:
    plan = make_plan(spec_of('python = "3.12"', *TWO), knowledge_base())
    gpu, cpu = plan.target("t0"), plan.target("t1")
    assert gpu.torch == cpu.torch == "2.7.1"
    assert (gpu.torch_choice, cpu.torch_choice) == ("shared", "shared")
    reason = next(r for r in cpu.reasons if r.startswith("torch 2.7.1"))
    assert "this target alone could run 2.15.0" in reason
    assert "held back by t0 (H100 (sm_90), driver 550.54.15) cannot run torch 2.8.0" in reason


def test_plan_target_alone_agrees_with_the_whole_plan() -> None:
    spec = spec_of('python = "3.12"', *TWO)
    assert plan_target("t1", spec, knowledge_base()).torch == "2.7.1"


def test_same_torch_false_lets_targets_differ() -> None:
    plan = make_plan(spec_of('python = "3.12"\nsame-torch = false', *TWO), knowledge_base())
    assert (plan.target("t0").torch, plan.target("t1").torch) == ("2.7.1", "2.15.0")
    assert plan.target("t1").torch_choice == "free"


def test_a_target_with_its_own_torch_leaves_the_shared_one() -> None:
    spec = spec_of('python = "3.12"', TWO[0], 'gpu = "none"\ntorch = "2.15.*"')
    plan = make_plan(spec, knowledge_base())
    assert (plan.target("t0").torch, plan.target("t1").torch) == ("2.7.1", "2.15.0")
    assert plan.target("t1").torch_choice == "own"
    assert plan.to_json()["targets"]["t1"]["torch_choice"] == "own"


def test_targets_without_a_common_release_are_refused_with_ways_out() -> None:
    # The K80 on R470 runs torch 1.11 (the oldest with Python 3.10 wheels) and 1.12, up to
    # cu113; the RTX 5090 needs 2.7 or newer.
    error = refusal(
        'python = "3.10"',
        'gpu = "K80"\ndriver = "470.256.02"',
        'gpu = "RTX 5090"\ndriver = "570.86.16"',
    )
    assert "fits every target (same-torch): t0 runs torch 1.11.0 to 1.12.1" in error.message
    changes = [a.changes for a in error.alternatives]
    assert changes[0] == {"stack.same-torch": "false"}
    assert {"targets.t1.torch": "2.11.0"} in changes


# --- what the data marks unverified -----------------------------------------------------------------


def test_unverified_facts_are_marked_in_text_and_json() -> None:
    spec = spec_of('python = "3.12"', 'gpu = "GB200"\ndriver = "590.44.01"')
    plan = make_plan(spec, knowledge_base())
    target = plan.target("t0")
    assert target.cu_tag == "cu130"
    assert any(r.startswith("cu130 chosen") and r.endswith("(unverified)") for r in target.reasons)
    marked = plan.to_json()["targets"]["t0"]["unverified"]
    assert marked and marked[0]["where"] == "torch.toml: series 2.15, build cu130 (linux-aarch64)"


def test_read_facts_are_not_marked() -> None:
    spec = spec_of('python = "3.12"', 'gpu = "GB200"\ndriver = "595.58.03"')
    target = make_plan(spec, knowledge_base()).target("t0")
    assert target.cu_tag == "cu132" and target.unverified == ()
    assert not any("(unverified)" in r for r in target.reasons)


# --- a torch newer than the data --------------------------------------------------------------------


def test_a_pinned_torch_newer_than_the_data_says_so_plainly() -> None:
    error = refusal('python = "3.12"\ntorch = "2.16.0"', 'gpu = "none"')
    assert (
        "torch ==2.16.0 is newer than this gpuenv's knowledge, which stops at 2.15" in error.message
    )
    assert "upgrade gpuenv or add the facts in your facts file" in error.message


def test_a_newer_torch_seen_on_the_index_is_a_notice() -> None:
    spec = spec_of('python = "3.12"', 'gpu = "none"')
    plan = make_plan(spec, knowledge_base(), newest_on_index="2.16.0")
    assert plan.notices == (
        "torch 2.16.0 is on the index (seen by the last 'gpuenv lock') but this gpuenv's "
        "knowledge stops at 2.15: upgrade gpuenv or add the facts in your facts file "
        "($GPUENV_FACTS, default ~/.config/gpuenv/facts.toml)",
    )
    pinned = spec_of('python = "3.12"\ntorch = "2.14.*"', 'gpu = "none"')
    assert make_plan(pinned, knowledge_base(), newest_on_index="2.16.0").notices == ()


def test_a_targets_own_torch_is_what_the_alternatives_change() -> None:
    # The target's own torch wins over [stack]'s: proposing 'stack.torch = ==2.7.1'
    # would change nothing for it.
    error = refusal('python = "3.12"', 'gpu = "H100"\ndriver = "550.54.15"\ntorch = ">=2.8"')
    changes = [a.changes for a in error.alternatives]
    assert {"targets.t0.torch": "==2.7.1"} in changes
    assert not any("stack.torch" in c for c in changes), changes


@pytest.mark.parametrize(
    ("target", "torch", "driver", "build"),
    [
        # 2.15 has cu130 (R580) as well as cu132 (R595): the smaller upgrade is the one to name.
        ('gpu = "RTX 5090"\ndriver = "570.86.16"', "2.15.*", ">=580.65.06", "cu130"),
        ('gpu = "T4"\ndriver = "450.80.02"', "2.8.*", ">=560.28.03", "cu126"),
        ('gpu = "H100"\ndriver = "525.60.13"', "2.8.*", ">=560.28.03", "cu126"),
    ],
)
def test_the_driver_alternative_names_the_smallest_upgrade_that_works(
    target: str, torch: str, driver: str, build: str
) -> None:
    error = refusal(f'python = "3.11"\ntorch = "{torch}"', target)
    upgrade = next(a for a in error.alternatives if "targets.t0.driver" in a.changes)
    assert upgrade.changes == {"targets.t0.driver": driver}
    assert f" {build} " in upgrade.description


def test_naming_pytorchs_own_index_does_not_unlock_a_jetson() -> None:
    # PyTorch's index has no L4T builds: naming it is not naming JetPack builds.
    error = refusal(
        'python = "3.10"\ntorch = "2.9.*"',
        'gpu = "Jetson AGX Orin"\ndriver = "570.86.15"\n'
        '[pip]\ntorch-index = "https://download.pytorch.org/whl/"',
    )
    assert "L4T (JetPack)" in error.message
