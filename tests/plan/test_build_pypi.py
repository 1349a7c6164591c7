"""`[targets.<name>] build = "pypi"`: a CPU target takes PyPI's default torch build (a
CUDA build, which runs on a CPU) so it locks from the default index alone."""

from __future__ import annotations

import pytest

from gpuenv.errors import SpecError
from gpuenv.knowledge import knowledge_base
from gpuenv.lock.inputs import input_hash
from gpuenv.plan import plan_target
from gpuenv.spec import parse_spec_text

CPU = """[project]
name = "cpu-only"

[stack]
python = "3.11"
torch = "{torch}"

[targets.cpu]
gpu = "none"
{extra}
"""


def _spec(torch: str = "2.4.1", extra: str = 'build = "pypi"') -> object:
    return parse_spec_text(
        CPU.format(torch=torch, extra=extra), file="gpuenv.toml", kb=knowledge_base()
    ).spec


@pytest.mark.parametrize(
    ("torch", "tag", "cuda"), [("2.4.1", "cu121", "12.1"), ("2.6.0", "cu124", "12.4")]
)
def test_a_cpu_target_with_build_pypi_takes_pypis_default_build(
    torch: str, tag: str, cuda: str
) -> None:
    plan = plan_target("cpu", _spec(torch), knowledge_base())  # type: ignore[arg-type]
    assert (plan.cu_tag, plan.cuda, plan.pypi_default) == (tag, cuda, True)
    assert plan.hardware.cpu and "__cuda" not in plan.virtual_packages
    said = "\n".join(plan.reasons)
    assert f'{tag} build: the target has no GPU, and build = "pypi"' in said
    assert "several GB more to download and store than the CPU build" in said


def test_without_build_a_cpu_target_keeps_the_cpu_build() -> None:
    plan = plan_target("cpu", _spec(extra=""), knowledge_base())  # type: ignore[arg-type]
    assert (plan.cu_tag, plan.cuda, plan.pypi_default) == ("cpu", None, False)


def test_on_aarch64_pypis_build_is_the_cpu_one() -> None:
    spec = _spec(extra='build = "pypi"\nplatform = "linux-aarch64"')
    plan = plan_target("cpu", spec, knowledge_base())  # type: ignore[arg-type]
    assert (plan.cu_tag, plan.pypi_default) == ("cpu", True)


def test_build_on_a_gpu_target_is_refused_naming_the_key_and_line() -> None:
    text = CPU.format(torch="2.4.1", extra="").replace(
        'gpu = "none"', 'gpu = "H100"\ndriver = "535.104.05"\nbuild = "pypi"'
    )
    with pytest.raises(SpecError) as caught:
        parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base())
    (problem,) = caught.value.problems
    assert (problem.path, problem.line) == ("targets.cpu.build", 11)
    assert 'build = "pypi" is for CPU targets' in problem.message


def test_an_unknown_build_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        _spec(extra='build = "conda"')
    assert caught.value.problems[0].path == "targets.cpu.build"


def test_targets_without_build_keep_their_input_hash() -> None:
    """The new key enters a target's input hash only when set: every lock written
    before it stays fresh."""
    without = _spec(extra="")
    with_it = _spec()
    assert input_hash(without, "cpu", "kb") != input_hash(with_it, "cpu", "kb")  # type: ignore[arg-type]
    # The hash a spec without the key had before the key existed (pinned).
    assert input_hash(without, "cpu", "kb") == PINNED  # type: ignore[arg-type]


PINNED = "sha256:c7a2ffebb36b7f34969677a6584ee2866e92d9b2dbedf9abf09d93304c06acdf"


# -- the route offered when the torch index cannot be reached ------------------------------

GPU = """[project]
name = "gpu"

[stack]
python = "3.11"
torch = "{torch}"
{stack}

[targets.t]
gpu = "{gpu}"
driver = "{driver}"
"""


def _route(torch: str, gpu: str, driver: str, stack: str = "", pip: str = "") -> str | None:
    from gpuenv.lock._pypi_route import pypi_route

    text = GPU.format(torch=torch, gpu=gpu, driver=driver, stack=stack) + pip
    spec = parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec
    return pypi_route("t", spec, knowledge_base())


def test_a_gpu_target_is_offered_pypis_cuda_when_its_driver_runs_it() -> None:
    route = _route("2.4.1", "H100", "550.54.15")
    assert route == (
        'to lock t from the default index alone, set [stack] cuda = "12.1": '
        "torch 2.4.1 cu121 is PyPI's own build"
    )


@pytest.mark.parametrize(
    ("torch", "gpu", "driver", "stack", "pip", "why"),
    [
        ("2.4.1", "H100", "535.104.05", "", "", "already PyPI's build"),
        ("2.8.0", "V100", "550.54.15", "", "", "cu128 has no sm_70: no PyPI route"),
        ("2.8.0", "A100", "535.104.05", "", "", "driver 535 cannot run PyPI's cu128"),
        ("2.4.1", "H100", "550.54.15", 'toolkit = "12.4"', "", "the toolkit pins CUDA 12.4"),
        (
            "2.4.1",
            "H100",
            "550.54.15",
            "",
            '\n[pip]\ntorch-index = "https://mirror.invalid/whl"\n',
            "a torch index the user named",
        ),
    ],
)
def test_no_route_is_offered_when_none_fits(
    torch: str, gpu: str, driver: str, stack: str, pip: str, why: str
) -> None:
    assert _route(torch, gpu, driver, stack, pip) is None, why


@pytest.mark.parametrize(
    ("torch", "gpu", "driver", "route"),
    [
        (  # 2.11's PyPI build is cu130: driver 570 runs up to 12.8; 2.10's is cu128
            ">=2.8,<2.12",
            "H100",
            "570.133.20",
            'set [stack] torch = "2.10.0": torch 2.10.0 cu128 is PyPI\'s own build',
        ),
        (  # driver 525 runs up to CUDA 12.0: 2.1-2.5 are cu121/cu124 on PyPI; 2.0.1 is
            # cu117, and the planner alone would take cu118 from the torch index
            ">=2.0,<2.6",
            "A100",
            "525.60.13",
            'set [stack] torch = "2.0.1" and set [stack] cuda = "11.7": '
            "torch 2.0.1 cu117 is PyPI's own build",
        ),
    ],
)
def test_an_older_release_is_offered_when_pypis_build_of_the_planned_one_cannot_run(
    torch: str, gpu: str, driver: str, route: str
) -> None:
    """The newest torch the specifier allows has no PyPI build this target runs (a
    PyPI-only network then cannot lock it): the route is the newest older release whose
    PyPI build it runs, planned before it is offered."""
    assert _route(torch, gpu, driver) == f"to lock t from the default index alone, {route}"


def test_the_older_release_route_is_planned_and_stays_within_the_specifier() -> None:
    from gpuenv.plan import plan_target

    kb = knowledge_base()
    own = GPU.format(torch="*", gpu="H100", driver="570.133.20", stack="") + (
        'torch = ">=2.8,<2.12"\n'
    )
    spec = parse_spec_text(own, file="gpuenv.toml", kb=kb).spec
    from gpuenv.lock._pypi_route import pypi_route

    route = pypi_route("t", spec, kb)
    assert route is not None and 'set [targets.t] torch = "2.10.0":' in route, route
    # The change as offered gives PyPI's own build, planned.
    pinned = parse_spec_text(
        own.replace('torch = ">=2.8,<2.12"', 'torch = "2.10.0"'), file="gpuenv.toml", kb=kb
    ).spec
    assert plan_target("t", pinned, kb).pypi_default
    # A specifier with no older release whose PyPI build runs: nothing is offered.
    assert _route("2.11.*", "H100", "570.133.20") is None


def test_a_named_torch_index_is_offered_removed_when_the_build_is_pypis_own() -> None:
    """With [pip] torch-index (or GPUENV_TORCH_INDEX) naming an index that cannot be
    reached, for a build the default index carries too, the hint told the user to set
    the key that was set: the route that works is to remove it (or unset the variable)."""
    from gpuenv.lock._pypi_route import pypi_route

    pip = '\n[pip]\ntorch-index = "https://mirror.invalid/whl"\n'
    kb = knowledge_base()
    keyed = parse_spec_text(
        GPU.format(torch="2.4.1", gpu="H100", driver="535.104.05", stack="") + pip,
        file="gpuenv.toml",
        kb=kb,
    ).spec
    assert pypi_route("t", keyed, kb) == (
        "to lock t from the default index alone, remove [pip] torch-index: "
        "torch 2.4.1 cu121 is PyPI's own build"
    )
    both = pypi_route("t", keyed, kb, torch_index="https://other.invalid/whl")
    assert both is not None
    assert both.startswith(
        "to lock t from the default index alone, unset GPUENV_TORCH_INDEX and remove "
        "[pip] torch-index: "
    )
    plain = parse_spec_text(
        GPU.format(torch="2.4.1", gpu="H100", driver="535.104.05", stack=""),
        file="gpuenv.toml",
        kb=kb,
    ).spec
    assert pypi_route("t", plain, kb) is None, "already locks from the default index"
    variable = pypi_route("t", plain, kb, torch_index="https://user:pw-5@other.invalid/whl")
    assert variable == (
        "to lock t from the default index alone, unset GPUENV_TORCH_INDEX: "
        "torch 2.4.1 cu121 is PyPI's own build"
    )
