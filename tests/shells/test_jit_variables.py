"""JIT extensions (torch.utils.cpp_extension.load): activation sets TORCH_CUDA_ARCH_LIST
to the target's archs, TORCH_EXTENSIONS_DIR to the prefix's own folder and CUDA_HOME to
its toolkit, in real bash, zsh and fish (and sh, dash); deactivation restores them exactly,
set, empty or unset; and `gpuenv run`'s delta agrees with every shell."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.shells import test_real_shells as shells
from tests.shells.test_real_shells import ALL, Shell, base_env, check_round_trip, make_prefix

from gpuenv.activation import ActivationInputs, write_activation_files

workdir = shells.workdir  # the fixture


def _jit(store: Path, arch: str | None, *, toolkit: str = "own") -> ActivationInputs:
    inputs = make_prefix(store, toolkit=toolkit, cuda_version="12.4" if arch else None)
    jit = replace(
        inputs,
        torch_arch_list=arch,
        torch_extensions_dir=store.parent / "cache" / "torch-extensions" / inputs.prefix.name,
    )
    write_activation_files(jit.prefix, jit)
    return jit


@pytest.mark.parametrize("shell", ALL)
@pytest.mark.parametrize(
    "before",
    [
        {},
        {"TORCH_CUDA_ARCH_LIST": "", "TORCH_EXTENSIONS_DIR": ""},
        {
            "TORCH_CUDA_ARCH_LIST": "7.0;7.5 8.0",
            "TORCH_EXTENSIONS_DIR": "/home/u/.cache/torch_extensions",
            "CUDA_HOME": "/usr/local/cuda-11.8",
        },
    ],
    ids=["unset", "empty", "another-torchs"],
)
def test_jit_variables_are_set_and_restored_exactly(
    shell: Shell, before: dict[str, str], workdir: Path
) -> None:
    inputs = _jit(workdir / "store", "8.9;9.0+PTX")
    result = check_round_trip(shell, inputs, base_env(workdir, **before), workdir)
    start, during, _, after = result.dumps
    assert during["TORCH_CUDA_ARCH_LIST"] == "8.9;9.0+PTX"
    assert during["TORCH_EXTENSIONS_DIR"] == str(inputs.torch_extensions_dir)
    assert during["CUDA_HOME"] == str(inputs.prefix)
    assert after == start
    for key in ("TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR"):
        assert (key in after) == (key in before), f"{key}: unset stays unset"


@pytest.mark.parametrize("shell", ALL)
def test_a_cpu_environment_unsets_the_arch_list_and_restores_it(
    shell: Shell, workdir: Path
) -> None:
    inputs = _jit(workdir / "store", None, toolkit="none")
    env = base_env(workdir, TORCH_CUDA_ARCH_LIST="8.6", CUDA_HOME="/usr/local/cuda")
    result = check_round_trip(shell, inputs, env, workdir)
    _start, during, _, after = result.dumps
    assert "TORCH_CUDA_ARCH_LIST" not in during and "CUDA_HOME" not in during
    assert during["TORCH_EXTENSIONS_DIR"] == str(inputs.torch_extensions_dir)
    assert after["TORCH_CUDA_ARCH_LIST"] == "8.6" and after["CUDA_HOME"] == "/usr/local/cuda"
