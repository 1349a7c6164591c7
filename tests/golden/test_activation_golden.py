"""Byte-for-byte golden files for the activation scripts, the delta and the conda hooks.

Each scenario writes ``tests/golden/activation/<scenario>.<ext>`` for ``sh``, ``zsh``,
``fish`` and ``json`` (the delta); the quoting scenario also covers the conda hooks.
Run with ``GPUENV_UPDATE_GOLDEN=1`` to rewrite the files after an intended change, and
review the diff: these files are what users source.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuenv.activation import ActivationInputs, activation_files

GOLDEN = Path(__file__).parent / "activation"
STORE = Path("/home/u/.local/share/gpuenv/store")
P = STORE / "h100-3f2a9c"
SITE = P / "lib/python3.11/site-packages/nvidia"
NASTY = STORE / 'it\'s a "test" $(touch pwned) `id` \\n; *[x]'

SCENARIOS = {
    # CPU target: no CUDA, nothing pinned; CUDA_HOME and CUDA_PATH unset.
    "plain": ActivationInputs(
        prefix=P,
        name="cpu",
        store_root=STORE,
        bin_dirs=(P / "bin",),
        lib_dirs=(P / "lib",),
        cuda_home=None,
        cuda_version=None,
    ),
    # The prefix carries its own toolkit (conda cuda-nvcc or NVIDIA's wheels).
    "toolkit": ActivationInputs(
        prefix=P,
        name="h100",
        store_root=STORE,
        bin_dirs=(P / "bin",),
        lib_dirs=(P / "lib", SITE / "cudnn/lib", SITE / "nccl/lib"),
        cuda_home=P,
        cuda_version="12.4",
    ),
    # CUDA wheels but no toolkit: CUDA_HOME/CUDA_PATH unset so nothing finds a stray nvcc.
    "no-toolkit": ActivationInputs(
        prefix=P,
        name="h100",
        store_root=STORE,
        bin_dirs=(P / "bin",),
        lib_dirs=(P / "lib", SITE / "cudnn/lib"),
        cuda_home=None,
        cuda_version="12.4",
    ),
    # toolkit = "system:/usr/local/cuda-12.4"
    "system-toolkit": ActivationInputs(
        prefix=P,
        name="a100",
        store_root=STORE,
        bin_dirs=(P / "bin", Path("/usr/local/cuda-12.4/bin")),
        lib_dirs=(P / "lib",),
        cuda_home=Path("/usr/local/cuda-12.4"),
        cuda_version="12.4",
    ),
    # A prefix path with spaces, quotes, $(...), backticks, a backslash and globs.
    "quoting": ActivationInputs(
        prefix=NASTY,
        name="my env $(x)",
        store_root=STORE,
        bin_dirs=(NASTY / "bin",),
        lib_dirs=(NASTY / "lib",),
        cuda_home=NASTY,
        cuda_version="12.4",
    ),
}

SUFFIX = {
    "etc/gpuenv/activate.sh": "sh",
    "etc/gpuenv/activate.zsh": "zsh",
    "etc/gpuenv/activate.fish": "fish",
    "etc/gpuenv/env-delta.json": "json",
    "etc/conda/activate.d/gpuenv.sh": "conda-activate.sh",
    "etc/conda/deactivate.d/gpuenv.sh": "conda-deactivate.sh",
    "etc/conda/activate.d/gpuenv.fish": "conda-activate.fish",
    "etc/conda/deactivate.d/gpuenv.fish": "conda-deactivate.fish",
}
CONDA_HOOK_SCENARIOS = {"quoting"}


def _cases() -> list[tuple[str, str]]:
    cases = []
    for scenario in SCENARIOS:
        for rel, suffix in SUFFIX.items():
            if suffix.startswith("conda") and scenario not in CONDA_HOOK_SCENARIOS:
                continue
            cases.append((scenario, rel))
    return cases


@pytest.mark.parametrize(("scenario", "rel"), _cases())
def test_golden(scenario: str, rel: str) -> None:
    actual = activation_files(SCENARIOS[scenario])[rel].encode()
    path = GOLDEN / f"{scenario}.{SUFFIX[rel]}"
    if os.environ.get("GPUENV_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual)
    assert path.exists(), f"{path} missing: run with GPUENV_UPDATE_GOLDEN=1"
    assert path.read_bytes() == actual, f"{path} differs: rerun with GPUENV_UPDATE_GOLDEN=1"


def test_no_stale_golden_files() -> None:
    expected = {f"{scenario}.{SUFFIX[rel]}" for scenario, rel in _cases()}
    present = {p.name for p in GOLDEN.iterdir()}
    assert present == expected
