"""Two data files speak of the same packages from two sides: build/data/packages.toml
(how to compile them) and knowledge/data/companions.toml (how they move with torch, for
`gpuenv import`). Where both name a package, they must agree on whether and when it
is compiled, and whether against torch: one fact, not two that can drift apart.

One word differs by design: companions.toml's "jit" (deepspeed: its CUDA ops compile at
first use) is, for installing, a package whose sdist is built when no wheel exists."""

from __future__ import annotations

from gpuenv.builds.knowledge import packages
from gpuenv.knowledge.foreign import load_foreign_knowledge


def test_the_build_defaults_and_the_companion_facts_agree() -> None:
    companions = load_foreign_knowledge(None).companions
    shared = sorted(set(packages()) & set(companions))
    assert shared, "the two files share no package: nothing is checked"
    for name in shared:
        build, companion = packages()[name], companions[name]
        when = "when-no-wheel" if companion.build == "jit" else companion.build
        assert build.build == when, (name, build.build, companion.build)
        assert build.against_torch == companion.compiled_against_torch, name


def test_the_spec_refuses_exactly_the_variables_a_build_manages() -> None:
    """One list (gpuenv.names) for what spec validation refuses and what a build sets."""
    from gpuenv.builds.runner import MANAGED_ENV as set_by_builds
    from gpuenv.spec._values import MANAGED_ENV as refused_by_spec

    assert set_by_builds is refused_by_spec
    assert {"CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX"} <= refused_by_spec


def test_mamba_ssm_builds_the_kernels_mamba_1_runs() -> None:
    """state-spaces/mamba 2.3.2's setup.py compiles the selective-scan kernels only with
    MAMBA_KEEP_CUDA_BUILD=TRUE; without them Mamba-1 fails at run time."""
    env = dict(packages()["mamba-ssm"].env)
    assert env == {"MAMBA_FORCE_BUILD": "TRUE", "MAMBA_KEEP_CUDA_BUILD": "TRUE"}
