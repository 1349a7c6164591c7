"""torch 1.7 .. 1.11, the releases papers of 2020-2022 pin: planned from their own builds
where those run (sm_86 kernels on an sm_89 GPU, CUDA 11.x on a newer driver), refused
with what would work where they do not, and locked from the per-build index that lists
them (whl/cu111/ for 1.9.1+cu111; PyPI for the cu102 build, PyPI's plain torch)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from gpuenv.errors import NoCompatiblePlan
from gpuenv.knowledge import knowledge_base
from gpuenv.lock.builds import BuildNeeds
from gpuenv.lock.options import LockOptions
from gpuenv.lock.target import _job
from gpuenv.plan import TargetPlan, make_plan
from gpuenv.spec import Spec, parse_spec_text
from gpuenv.versions import CudaVersion

INDEX = "https://download.pytorch.org/whl"


def spec_of(stack: str, target: str) -> Spec:
    text = f'[project]\nname = "t"\n[stack]\n{stack}\n[targets.t0]\n{target}\n'
    return parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec


def plan_of(stack: str, target: str) -> TargetPlan:
    return make_plan(spec_of(stack, target), knowledge_base()).target("t0")


def refusal(stack: str, target: str) -> NoCompatiblePlan:
    with pytest.raises(NoCompatiblePlan) as caught:
        make_plan(spec_of(stack, target), knowledge_base())
    return caught.value


A100 = 'gpu = "A100"\ndriver = "535.183.01"'
RTX4090 = 'gpu = "RTX 4090"\ndriver = "535.183.01"'


def test_torch_1_10_2_on_an_a100_takes_the_newest_cuda_whose_list_has_sm_80() -> None:
    plan = plan_of('python = ">=3.8"\ntorch = "1.10.2"', A100)
    assert (plan.torch, plan.cu_tag, plan.python) == ("1.10.2", "cu113", "3.9")
    assert (plan.torchvision, plan.torchaudio) == ("0.11.3", "0.10.2")
    assert plan.index_url == f"{INDEX}/cu113" and not plan.pypi_default
    assert plan.cudnn == "8.2.0.53"
    assert "cu102: arch list (3.7, 5.0, 6.0, 7.0) does not cover sm_80" in plan.reasons
    assert any(r.startswith("cu113 chosen (newest CUDA that fits)") for r in plan.reasons)
    # 1.10's torchvision follows torch's minor + 1: no "stable ABI" sentence for it
    assert "torchvision 0.11.3, torchaudio 0.10.2: paired with torch 1.10.2 (unverified)" in (
        plan.reasons
    )
    # the previous-versions page has no 1.10.2 entry: the plan says its builds are assumed
    assert [u.fact for u in plan.unverified] == ["torch 1.10.2"]


def test_a_stylegan3_era_pin_runs_its_own_cu111_build_on_an_rtx_4090() -> None:
    plan = plan_of('python = "3.9"\ntorch = "1.9.1"', RTX4090)
    assert (plan.torch, plan.cu_tag, plan.torchvision) == ("1.9.1", "cu111", "0.10.1")
    assert plan.arch_list == ("3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6")
    assert any("sm_86 machine code runs on sm_89" in r for r in plan.reasons)
    assert any("driver 535.183.01 >= 455.23" in r for r in plan.reasons)  # CUDA 11.1's floor
    assert plan.unverified == ()


def test_the_lock_asks_the_per_build_index_that_lists_the_old_wheels() -> None:
    # test-infra's s3_management/manage.py indexes every whl/cuXYZ/ folder, old wheels too:
    # 1.9.1+cu111 is asked of whl/cu111, not of the find-links page whl/torch_stable.html.
    spec = spec_of('python = "3.9"\ntorch = "1.9.1"', RTX4090)
    plan = make_plan(spec, knowledge_base()).target("t0")
    request = _job(spec, plan, None, LockOptions()).pip_request(BuildNeeds())
    assert request.torch_index == f"{INDEX}/cu111"
    assert request.requirements[:3] == ("torch==1.9.1", "torchvision==0.10.1", "torchaudio==0.9.1")


def test_the_cu102_build_is_pypis_plain_torch_and_locks_from_the_default_index() -> None:
    spec = spec_of('python = "3.8"\ntorch = "1.8.1"', 'gpu = "V100"\ndriver = "450.80.02"')
    plan = make_plan(spec, knowledge_base()).target("t0")
    # driver 450.80.02 runs CUDA 11.0's GA floor (450.51.05) but not 11.1's (455.23)
    assert (plan.cu_tag, plan.pypi_default) == ("cu102", True)
    request = _job(spec, plan, None, LockOptions()).pip_request(BuildNeeds())
    assert request.torch_index is None


def test_an_old_build_without_the_gpus_arch_is_refused_with_the_builds_that_have_it() -> None:
    error = refusal('python = ">=3.8"\ntorch = "1.10.2"\ncuda = "10.2"', A100)
    assert (
        "the cu102 build of torch 1.10.2 has no kernels for sm_80 (Ampere): its arch list is "
        "3.7, 5.0, 6.0, 7.0; builds of torch 1.10.2 that do: cu111, cu113" in error.message
    )
    assert error.alternatives[0].changes == {"stack.cuda": "11.3"}


def test_a_hopper_gpu_is_refused_every_1_x_build_and_pointed_at_2_0() -> None:
    error = refusal('python = ">=3.8"\ntorch = "1.9.1"', 'gpu = "H100"\ndriver = "535.183.01"')
    assert "no torch 1.9.1 build for linux-64 has kernels for sm_90 (Hopper)" in error.message
    assert error.alternatives[0].changes == {"stack.torch": "==2.0.1"}


@pytest.mark.parametrize(
    ("driver", "tag"),
    [
        ("418.87.01", "cu101"),  # 10.1 needs 418.39; 10.2 needs 440.33
        ("410.48", "cu92"),  # 9.2.148 needs 396.37
        ("455.45.01", "cu110"),  # 11.0 GA 450.51.05; 1.7 has no cu111
    ],
)
def test_torch_1_7_on_a_pascal_gpu_follows_the_driver_down_to_cuda_9_2(
    driver: str, tag: str
) -> None:
    plan = plan_of('python = ">=3.8"\ntorch = "1.7.1"', f'gpu = "GTX 1080 Ti"\ndriver = "{driver}"')
    assert (plan.torch, plan.cu_tag) == ("1.7.1", tag)
    assert plan.index_url == f"{INDEX}/{tag}"
    assert CudaVersion.from_tag(tag).tag == tag  # cu92 is a two-digit tag


def test_a_driver_older_than_cuda_9_2_is_refused() -> None:
    error = refusal('python = ">=3.8"\ntorch = "1.7.1"', 'gpu = "GTX 1080 Ti"\ndriver = "390.46"')
    assert "driver 390.46 is older than every torch 1.7.1 build" in error.message


def test_torch_1_7_0_has_no_python_3_9_wheels() -> None:
    error = refusal('python = "3.9"\ntorch = "1.7.0"', RTX4090)
    assert "no torch 1.7.0 release supports Python 3.9 (1.7.0 supports >=3.6,<3.9)" in (
        error.message
    )
    changes = [a.changes for a in error.alternatives]
    assert {"stack.torch": "==1.7.1"} in changes and {"stack.python": "3.8"} in changes


def test_a_range_over_old_releases_takes_the_python_gpuenv_installs() -> None:
    # torch 1.8 supports 3.6 .. 3.9 and gpuenv installs 3.8 and later: the newest in range
    plan = plan_of('python = ">=3.6"\ntorch = "1.8.*"', RTX4090)
    assert (plan.torch, plan.cu_tag, plan.python) == ("1.8.1", "cu111", "3.9")


@pytest.mark.parametrize(
    ("torch", "vision", "planned"),
    [
        ("1.10.0", "*", "0.11.1"),  # a move writes the later re-release
        ("1.10.0", "0.11.0", "0.11.0"),  # a pin of the first one is planned as asked
        ("1.7.0", "0.8.0", "0.8.0"),
    ],
)
def test_a_same_day_torchvision_re_release_pairs_with_its_torch(
    torch: str, vision: str, planned: str
) -> None:
    stack = f'python = "3.8"\ntorch = "{torch}"\ntorchvision = "{vision}"'
    plan = plan_of(stack, RTX4090)
    assert (plan.torch, plan.torchvision) == (torch, planned)
    assert f"torchvision {planned}" in next(r for r in plan.reasons if "paired with" in r)
    kb = knowledge_base()
    release = kb.release_for_companion("torchvision", Version(planned))
    assert release is not None and str(release.version) == torch


def test_a_torchvision_made_for_another_release_is_still_refused() -> None:
    error = refusal('python = "3.8"\ntorch = "1.10.0"\ntorchvision = "0.10.1"', RTX4090)
    assert "torchvision 0.10.1 does not pair with torch 1.10.0" in error.message


def test_an_unknown_old_release_points_at_the_nearest_known_series() -> None:
    # 1.6.0 predates the data: the nearest release is 1.7's newest patch, not whichever
    # release has the highest patch number (1.10.2 before the asked version counted)
    error = refusal('python = "3.8"\ntorch = "1.6.0"', 'gpu = "RTX 3090"\ndriver = "535.54.03"')
    assert (
        "no torch release gpuenv knows matches '1.6.0', which predates its knowledge (it "
        "starts at 1.7.0)" in error.message
    )
    assert error.alternatives[0].changes == {"stack.torch": "==1.7.1"}


@pytest.mark.parametrize(
    ("torch", "predates"), [("==1.5.*", True), (">=1.5,<1.6", True), ("==1.7.9", False)]
)
def test_a_release_before_the_knowledge_is_named_as_such(torch: str, predates: bool) -> None:
    """facebookresearch/detr's torch>=1.5 with its Dockerfile's 1.5: "no torch release
    gpuenv knows matches" read as though 1.5 did not exist."""
    error = refusal(f'python = "3.8"\ntorch = "{torch}"', 'gpu = "RTX 3090"\ndriver = "535.54.03"')
    assert ("which predates its knowledge (it starts at 1.7.0)" in error.message) == predates


@pytest.mark.parametrize("python", ["3.6", "<3.8"])
def test_a_python_torch_supports_but_gpuenv_does_not_install_is_named_as_such(
    python: str,
) -> None:
    error = refusal(f'python = "{python}"\ntorch = "1.8.1"', RTX4090)
    assert (
        f"gpuenv installs Python 3.8 and later, not {python} (torch 1.8.1 supports >=3.6,<3.10)"
        in error.message
    )
    assert "release supports Python" not in error.message
    assert error.alternatives[0].changes == {"stack.python": "3.9"}


def test_a_python_no_release_supports_keeps_the_unsupported_sentence() -> None:
    error = refusal('python = "3.5"\ntorch = "1.8.1"', RTX4090)
    assert "no torch 1.8.1 release supports Python 3.5" in error.message


@pytest.mark.parametrize(
    ("platform", "torch", "planned"),
    [
        ("osx-arm64", "1.10.2", ("1.10.2", "cpu", "3.9")),  # Apple-silicon wheels cp38-cp39
        ("win-64", "1.9.1", ("1.9.1", "cpu", "3.9")),  # PyPI's Windows torch is the CPU build
        ("linux-aarch64", "1.11.0", ("1.11.0", "cpu", "3.10")),
    ],
)
def test_old_releases_plan_on_the_other_platforms_pypi_served(
    platform: str, torch: str, planned: tuple[str, str, str]
) -> None:
    plan = plan_of(f'python = ">=3.8"\ntorch = "{torch}"', f'platform = "{platform}"\ngpu = "none"')
    assert (plan.torch, plan.cu_tag, plan.python) == planned
    assert plan.pypi_default


@pytest.mark.parametrize("platform", ["osx-arm64", "linux-aarch64"])
def test_1_9_1_has_no_arm_wheels_and_1_9_0_is_offered(platform: str) -> None:
    error = refusal('python = ">=3.8"\ntorch = "1.9.1"', f'platform = "{platform}"\ngpu = "none"')
    assert error.alternatives[0].changes == {"stack.torch": "==1.9.0"}


def test_a_companion_pin_no_release_of_the_range_pairs_with_names_them_all() -> None:
    """'torchvision 0.18.* does not pair with torch 2.4.0' named one release of 2.4.*,
    while the plan's would have been 2.4.1; the fix reads as a spec line."""
    from gpuenv.cli import _output

    error = refusal('python = "3.11"\ntorch = "2.4.*"\ntorchvision = "0.18.*"', A100)
    assert "torchvision 0.18.* pairs with none of torch 2.4.0, 2.4.1" in error.message
    assert "(they pair with torchvision 0.19.0, 0.19.1)" in error.message
    assert _output._as_toml("stack.torch", "==2.3.1") == '[stack] torch = "==2.3.1"'
    assert _output._as_toml("stack.same-torch", "false") == "[stack] same-torch = false"


@pytest.mark.parametrize(
    ("torch", "said"),
    [
        # 1.13.1's cu117 wheels bundle NCCL; the data records none: "NCCL -" read as a value
        ("1.13.1", "cu117 wheels bring cuDNN 8.5.0.96"),
        ("2.1.2", "cu121 wheels bring cuDNN 8.9.2.26 and NCCL 2.18.1"),
    ],
)
def test_the_libraries_a_build_brings_are_named_as_the_data_records_them(
    torch: str, said: str
) -> None:
    plan = plan_of(f'python = "3.10"\ntorch = "{torch}"', RTX4090)
    assert [r for r in plan.reasons if "wheels bring" in r] == [said]
