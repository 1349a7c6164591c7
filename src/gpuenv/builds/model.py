"""A build as the lock records it: its source, its build inputs, and the identity
that names it, computed from both.

A *build* is a package gpuenv compiles instead of downloading: a requirement with no
wheel for the target (an sdist), or one the knowledge base says must be compiled against
torch. Like a Nix derivation, it is named by a hash of everything that goes into it:

- the source: the sdist's URL and sha256 (or a git URL and the resolved commit);
- the torch wheel it is compiled against (its sha256), when it is;
- the toolkit (nvcc's version) and the torch CUDA it must agree with;
- ``TORCH_CUDA_ARCH_LIST``, from the target's compute capabilities (+PTX on the highest);
- the Python (major.minor) and platform;
- the host compiler (family and major, ``gcc-12``), for builds that compile against torch
  or with nvcc;
- the options that change the result: build isolation, the environment variables, the
  build requirements installed in the prefix first (each by its locked sha256).

``MAX_JOBS`` is not an input: it changes how long a build takes, not what it produces.

This module is pure: no files, no processes. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuenv import _sha256
from gpuenv.errors import FileFormatError
from gpuenv.names import ENV_NAME, MANAGED_ENV
from gpuenv.versions import CudaVersion

if TYPE_CHECKING:
    from gpuenv.knowledge import KnowledgeBase

IDENTITY_FORMAT = 1
SOURCE_KINDS = ("sdist", "git")
_ARCH = re.compile(r"(\d{1,2})\.(\d)(\+PTX)?\Z", re.IGNORECASE)


@dataclass(frozen=True)
class BuildSource:
    """Where a build's source comes from, exactly."""

    kind: str  # "sdist" or "git"
    url: str  # credentials stripped
    sha256: str | None = None  # an sdist's
    commit: str | None = None  # a git source's resolved commit (40 hex digits)

    def to_json(self) -> dict[str, str]:
        out = {"kind": self.kind, "url": self.url}
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        if self.commit is not None:
            out["commit"] = self.commit
        return out


@dataclass(frozen=True)
class BuildInputs:
    """Everything besides the source that goes into a build (see the module doc)."""

    python: str  # "3.11"
    platform: str  # "linux-64"
    against_torch: bool
    no_build_isolation: bool
    torch: str | None = None  # "2.4.1+cu124"
    torch_sha256: str | None = None
    cuda: str | None = None  # torch's CUDA, "12.4"
    toolkit: str | None = None  # nvcc's version, "12.4.131"; None: no toolkit
    arch_list: str | None = None  # TORCH_CUDA_ARCH_LIST, "8.0;9.0+PTX"
    host_compiler: str | None = None  # "gcc-12"
    env: tuple[tuple[str, str], ...] = ()  # sorted by name
    build_requires: tuple[str, ...] = ()  # normalised names, locked in the target's pip list

    def to_json(self, hashes: Mapping[str, str]) -> dict[str, object]:
        return {
            "python": self.python,
            "platform": self.platform,
            "against_torch": self.against_torch,
            "no_build_isolation": self.no_build_isolation,
            "torch": self.torch,
            "torch_sha256": self.torch_sha256,
            "cuda": self.cuda,
            "toolkit": self.toolkit,
            "arch_list": self.arch_list,
            "host_compiler": self.host_compiler,
            "env": [list(pair) for pair in self.env],
            "build_requires": [[name, hashes.get(name)] for name in self.build_requires],
        }


@dataclass(frozen=True)
class BuildEntry:
    """One build of one target, as locked."""

    name: str  # PEP 503-normalised
    version: str
    source: BuildSource
    inputs: BuildInputs
    identity: str  # "sha256:<64 hex>", as recorded in the lock
    requires: tuple[str, ...] = ()  # normalised names of its runtime dependencies
    max_jobs: int | None = None  # the spec's limit; None: from cores and memory

    @property
    def digest(self) -> str:
        """The identity's hex digits: the cache entry's name."""
        return self.identity.removeprefix("sha256:")

    @property
    def needs_toolkit(self) -> bool:
        return self.inputs.toolkit is not None

    def label(self) -> str:
        return f"{self.name} {self.version}"


def compute_identity(
    name: str,
    version: str,
    source: BuildSource,
    inputs: BuildInputs,
    hashes: Mapping[str, str],
) -> str:
    """The identity of a build: sha256 of its inputs in canonical JSON. ``hashes`` maps
    each build requirement's name to its locked sha256."""
    payload = {
        "format": IDENTITY_FORMAT,
        "name": name,
        "version": version,
        "source": source.to_json(),
        "inputs": inputs.to_json(hashes),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + _sha256.hexdigest(text.encode())


def check_entry(entry: BuildEntry, pip_hashes: Mapping[str, str], *, where: str) -> None:
    """Raise ``FileFormatError`` unless ``entry`` is consistent: a known source kind, its
    build requirements and torch locked beside it, and the recorded identity equal to the
    one its inputs give (a lock edited by hand, or damaged, fails here)."""
    problems = []
    if entry.source.kind not in SOURCE_KINDS:
        problems.append(f"source kind {entry.source.kind!r} (known: {', '.join(SOURCE_KINDS)})")
    if entry.source.kind == "sdist" and not entry.source.sha256:
        problems.append("an sdist source without its sha256")
    if entry.source.kind == "git" and not re.fullmatch(r"[0-9a-f]{40}", entry.source.commit or ""):
        problems.append("a git source without a resolved commit")
    missing = [n for n in entry.inputs.build_requires if n not in pip_hashes]
    if missing:
        problems.append(f"build requirements not in the lock's pip list: {', '.join(missing)}")
    torch_hash = pip_hashes.get("torch")
    if entry.inputs.against_torch and entry.inputs.torch_sha256 != torch_hash:
        problems.append("torch-sha256 differs from the locked torch wheel's")
    for key, value in entry.inputs.env:
        problems.extend(env_problems(key, value))
    expected = compute_identity(entry.name, entry.version, entry.source, entry.inputs, pip_hashes)
    if not problems and expected != entry.identity:
        problems.append("its identity does not match its inputs (edited by hand?)")
    if problems:
        raise FileFormatError(
            f"{where}: build {entry.name}: " + "; ".join(problems),
            hint="run 'gpuenv lock' to rewrite the lock",
        )


def env_problems(name: str, value: str) -> list[str]:
    """Why ``name=value`` cannot be passed to a build (empty when it can). Values are
    passed as they are, never through a shell: any printable text is allowed (control
    characters are refused: the lock holds printable text only)."""
    problems = []
    if not ENV_NAME.match(name):
        problems.append(f"{name!r} is not an environment variable name")
    elif name in MANAGED_ENV:
        problems.append(f"{name} is set by gpuenv from the lock")
    if "\0" in value:
        problems.append(f"the value of {name} contains a NUL byte")
    elif not value.isprintable():
        problems.append(f"the value of {name} contains a control character")
    return problems


# --- TORCH_CUDA_ARCH_LIST ------------------------------------------------------------


def _arch_key(entry: str) -> tuple[int, int]:
    match = _ARCH.match(entry)
    if match is None:
        raise ValueError(f"{entry!r} is not an arch entry like '9.0' or '9.0+PTX'")
    return int(match.group(1)), int(match.group(2))


def _within(
    key: tuple[int, int], ceiling: tuple[int, int], torch_archs: Sequence[str]
) -> tuple[tuple[int, int], bool]:
    """The arch to compile for a GPU of ``key`` with an nvcc whose newest arch is
    ``ceiling``: the GPU's own when nvcc knows it; else the newest arch of torch's own
    build of the same major (machine code for X.y runs on X.z, z >= y: what torch's
    kernels run on there too); else nvcc's newest, as PTX the driver compiles."""
    if key <= ceiling:
        return key, False
    same_major = [
        k
        for k in (_arch_key(a.strip().split("+")[0]) for a in torch_archs)
        if k[0] == key[0] and k <= ceiling
    ]
    return (max(same_major), False) if same_major else (ceiling, True)


def arch_numbers(arch_list: str) -> str:
    """``TORCH_CUDA_ARCH_LIST`` as the numbers CMake-style variables take: "8.6;8.9+PTX"
    is "86;89" (tiny-cuda-nn's TCNN_CUDA_ARCHITECTURES)."""
    keys = [_arch_key(entry.strip().upper().removesuffix("+PTX")) for entry in arch_list.split(";")]
    return ";".join(f"{major}{minor}" for major, minor in dict.fromkeys(keys))


def compiled_arch(
    compute_capability: str, nvcc_max: str | None, torch_archs: Sequence[str] = ()
) -> str | None:
    """What a build compiles for a GPU of ``compute_capability`` when nvcc cannot target
    it (``_within``): "8.6" (machine code that runs on it), or "9.0+PTX" (what the driver
    compiles); None when nvcc targets the GPU itself, or its newest arch is not known."""
    if nvcc_max is None:
        return None
    key = _arch_key(compute_capability)
    (major, minor), ptx = _within(key, _arch_key(nvcc_max), torch_archs)
    if (major, minor) == key:
        return None
    return f"{major}.{minor}" + ("+PTX" if ptx else "")


def arch_list(
    compute_capabilities: Sequence[str],
    extra: Sequence[str] = (),
    *,
    nvcc_max: str | None = None,
    torch_archs: Sequence[str] = (),
) -> str | None:
    """``TORCH_CUDA_ARCH_LIST`` for GPUs of these compute capabilities, plus ``extra``
    entries: machine code for each, sorted, and PTX of the highest so that newer GPUs
    still run (the driver JIT-compiles it). None for a CPU target.

    ``nvcc_max`` is the newest arch the toolkit's nvcc generates code for: a GPU newer
    than that (an RTX 4090, 8.9, with torch 1.13's CUDA 11.7) is given the arch torch's
    own build (``torch_archs``) runs on it with, as nvcc refuses an arch it does not know."""
    ceiling = _arch_key(nvcc_max) if nvcc_max else None
    wanted: dict[tuple[int, int], bool] = {}
    for entry in compute_capabilities:
        key = _arch_key(entry.strip())
        ptx = entry.strip().upper().endswith("+PTX")
        if ceiling is not None:
            key, forced = _within(key, ceiling, torch_archs)
            ptx = ptx or forced
        wanted[key] = wanted.get(key, False) or ptx
    for entry in extra:
        key = _arch_key(entry.strip())
        wanted[key] = wanted.get(key, False) or entry.strip().upper().endswith("+PTX")
    if not wanted:
        return None
    keys = sorted(wanted)
    parts = [
        f"{major}.{minor}" + ("+PTX" if wanted[(major, minor)] else "") for major, minor in keys
    ]
    if not parts[-1].endswith("+PTX"):
        parts[-1] += "+PTX"
    return ";".join(parts)


def nvcc_arch_max(kb: KnowledgeBase, cuda: str | None) -> str | None:
    """The newest arch the nvcc of this CUDA generates code for (None: not known)."""
    release = kb.cuda(CudaVersion.parse(cuda)) if cuda else None
    if release is None or release.arch_max is None:
        return None
    return str(release.arch_max)


def arch_problem(entry: str) -> str | None:
    """Why ``entry`` is not an arch entry (None when it is)."""
    try:
        _arch_key(entry.strip())
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class BuildOutcome:
    """What installing one build did: built it now, or reused the cache."""

    name: str
    version: str
    identity: str
    cached: bool
    seconds: float
    wheel: str
    log: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "version": self.version,
            "identity": self.identity,
            "cached": self.cached,
            "seconds": round(self.seconds, 3),
            "wheel": self.wheel,
            "log": self.log,
            "notes": list(self.notes),
        }
