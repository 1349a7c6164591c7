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
# A requirement's name as packaging's tokenizer reads it: blanks, then its IDENTIFIER.
_REQUIREMENT_NAME = re.compile(r"[ \t]*(\b[a-zA-Z0-9][a-zA-Z0-9._-]*\b)")


def normalize_name(name: str) -> str:
    """PEP 503: ``Flash_Attn`` -> ``flash-attn`` (``packaging.utils.canonicalize_name``)."""
    return _SEPARATORS.sub("-", name).lower()


def requirement_name(line: str) -> str:
    """The name of a requirement that ``packaging`` has accepted (a validated spec's
    dependency), as ``Requirement(line).name`` gives it, without the ~10 ms of imports
    ``packaging.requirements`` brings (``lock --check`` hashes the spec's dependencies
    and needs nothing else of it). A line that was never validated goes to packaging:
    this reads its start only. ``tests/test_names.py`` holds the two to the same answers."""
    found = _REQUIREMENT_NAME.match(line)
    if found is None:
        raise ValueError(f"not a requirement: {line!r}")
    return found.group(1)
