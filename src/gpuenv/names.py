"""Names every layer shares, defined once: the torch packages, the variables gpuenv sets
for every build, and how a package name is normalised.

Standard library only (``re``): the doctor (a 1 s budget on 50,000 files) and spec
loading use ``normalize_name``, which is ``packaging.utils.canonicalize_name``'s rule
without the ~15 ms import of ``packaging.tags`` that module brings; ``tests/test_names.py``
holds the two to the same answers.
"""

from __future__ import annotations

import re

# torch and the two libraries released in lock step with it (and paired per release).
TRIO = ("torch", "torchvision", "torchaudio")
COMPANIONS = TRIO[1:]
# What comes from the chosen build's index only, and what [pip] may not list: the trio
# and the Triton build torch pins (``pytorch-triton`` on the PyTorch index).
TORCH_FAMILY = (*TRIO, "triton", "pytorch-triton")
# The family's importable packages (``pytorch-triton`` installs ``triton``): what the
# doctor follows on ``sys.path`` and in RECORD files.
TORCH_IMPORTS = (*TRIO, "triton")

# An environment variable's name, as a build's ``env`` table and activation accept it.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Set by gpuenv for every build, from the lock: a spec's [pip.build.X] env may not set them.
MANAGED_ENV = frozenset(
    {
        "CUDA_HOME",
        "CUDA_PATH",
        "TORCH_CUDA_ARCH_LIST",
        "MAX_JOBS",
        "CC",
        "CXX",
        "NVCC_CCBIN",
        "PATH",
        "PYTHONPATH",
        "VIRTUAL_ENV",
    }
)

_SEPARATORS = re.compile(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503: ``Flash_Attn`` -> ``flash-attn`` (``packaging.utils.canonicalize_name``)."""
    return _SEPARATORS.sub("-", name).lower()
