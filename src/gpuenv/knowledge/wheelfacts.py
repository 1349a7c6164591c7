"""Facts a torch-family wheel states about itself, read from its own metadata.

Pure functions over the text of a wheel's ``METADATA`` (``Requires-Python`` and
``Requires-Dist``) and over the arch-flags string compiled into torch
(``torch.cuda.get_arch_list()``'s source). Who fetches the text is someone else's
business (``gpuenv.lock.wheelmeta`` at lock time, ``tools/check_wheel_facts.py`` for
the data files): these only read it.

What torch's requirements say:

- the CUDA runtime: ``nvidia-cuda-runtime-cu12==12.4.127`` (up to CUDA 12),
  ``nvidia-cuda-runtime==13.0.96`` or ``cuda-toolkit[cudart,...]==13.2.2`` (CUDA 13);
- cuDNN: ``nvidia-cudnn-cu12==9.1.0.70``; NCCL: ``nvidia-nccl-cu12==2.20.5``;
- none of them: a CPU build (or a CUDA build that bundles its libraries, as the
  PyPI wheels before 1.13 did).

Markers are evaluated for the target (Linux, its machine, its Python): PyPI's aarch64
torch before 2.6 requires no CUDA wheel at all because its pins are marked
``platform_machine == "x86_64"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

MACHINES = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
_RUNTIME = re.compile(r"^(nvidia-cuda-runtime(-cu\d+)?|cuda-toolkit)$")
_CUDNN = re.compile(r"^nvidia-cudnn-cu\d+$")
_NCCL = re.compile(r"^nvidia-nccl-cu\d+$")
_FLAG = re.compile(r"^(sm|compute)_(\d{2,3})[af]?$")


@dataclass(frozen=True)
class TorchWheelFacts:
    """What one torch wheel's metadata says (``None``: it says nothing about it)."""

    requires_python: str | None
    cuda_runtime: str | None  # the pinned runtime, "12.4.127"; None: no CUDA wheel required
    cudnn: str | None
    nccl: str | None

    @property
    def cuda(self) -> str | None:
        """``"12.4"`` from the runtime pin."""
        if self.cuda_runtime is None:
            return None
        return ".".join(self.cuda_runtime.split(".")[:2])

    @property
    def tag(self) -> str:
        """The build this wheel is: ``cu124``, or ``cpu`` when it requires no CUDA."""
        if self.cuda is None:
            return "cpu"
        major, _, minor = self.cuda.partition(".")
        return f"cu{major}{minor}"


# platform_system, sys_platform, os_name, platform_machine per gpuenv platform
_SYSTEMS = {
    "linux-64": ("Linux", "linux", "posix", "x86_64"),
    "linux-aarch64": ("Linux", "linux", "posix", "aarch64"),
    "win-64": ("Windows", "win32", "nt", "AMD64"),
    "osx-arm64": ("Darwin", "darwin", "posix", "arm64"),
}


def _environment(platform: str, python: str) -> dict[str, str]:
    system, sys_platform, os_name, machine = _SYSTEMS.get(
        platform, ("Linux", "linux", "posix", platform)
    )
    return {
        "platform_system": system,
        "sys_platform": sys_platform,
        "os_name": os_name,
        "platform_machine": machine,
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def applicable(requires_dist: tuple[str, ...], platform: str, python: str) -> list[Requirement]:
    """The requirements that apply on ``platform`` with ``python`` (no extras).
    Lines that do not parse are skipped: a fact not stated is a fact not read."""
    environment = _environment(platform, python)
    out = []
    for line in requires_dist:
        try:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                out.append(requirement)
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
    return out


def _pin(requirement: Requirement) -> str | None:
    exact = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
    return exact[0] if len(exact) == 1 and "*" not in exact[0] else None


def torch_facts(
    requires_python: str | None, requires_dist: tuple[str, ...], *, platform: str, python: str
) -> TorchWheelFacts:
    """The CUDA runtime, cuDNN and NCCL a torch wheel pins for ``platform``/``python``."""
    found: dict[str, str | None] = {"runtime": None, "cudnn": None, "nccl": None}
    for requirement in applicable(requires_dist, platform, python):
        name = canonicalize_name(requirement.name)
        for key, pattern in (("runtime", _RUNTIME), ("cudnn", _CUDNN), ("nccl", _NCCL)):
            if pattern.match(name) and found[key] is None:
                found[key] = _pin(requirement)
    return TorchWheelFacts(requires_python, found["runtime"], found["cudnn"], found["nccl"])


def torch_requirement(
    requires_dist: tuple[str, ...], *, platform: str, python: str
) -> SpecifierSet | None:
    """What a torchvision or torchaudio wheel requires of torch (``==2.4.1``,
    ``>=2.11``); ``None`` when it does not name torch."""
    for requirement in applicable(requires_dist, platform, python):
        if canonicalize_name(requirement.name) == "torch":
            return requirement.specifier
    return None


def arch_list_from_flags(flags: str) -> tuple[str, ...]:
    """``"sm_75 sm_80 compute_80"`` (what ``torch.cuda.get_arch_list()`` returns, space
    separated) as data-file arch entries: ``("7.5", "8.0+PTX")``. A ``compute_XY``
    without its ``sm_XY`` is ``"X.Y+PTX"`` too. Raises ``ValueError`` on other tokens."""
    sass: set[tuple[int, int]] = set()
    ptx: set[tuple[int, int]] = set()
    for token in flags.split():
        match = _FLAG.match(token)
        if match is None:
            raise ValueError(f"not an arch flag: {token!r}")
        digits = match.group(2)
        cc = (int(digits[:-1]), int(digits[-1]))
        (sass if match.group(1) == "sm" else ptx).add(cc)
    return tuple(
        f"{major}.{minor}" + ("+PTX" if (major, minor) in ptx else "")
        for major, minor in sorted(sass | ptx)
    )


_FLAGS_IN_BINARY = re.compile(
    rb"((?:sm|compute)_\d{2,3}[af]?(?: (?:sm|compute)_\d{2,3}[af]?)+)\x00"
)


def arch_flags_in_binary(data: bytes) -> str | None:
    """The arch-flags string compiled into ``libtorch_python.so`` (``CUDA_ARCH_FLAGS``,
    which ``torch.cuda.get_arch_list()`` splits): the longest NUL-terminated run of at
    least two ``sm_XY``/``compute_XY`` tokens (the linker may merge it into the tail of
    another string, so what precedes it is not checked). ``None`` in a CPU build."""
    runs = [m.group(1).decode() for m in _FLAGS_IN_BINARY.finditer(data)]
    return max(runs, key=len) if runs else None


def parse_metadata(text: str) -> tuple[str | None, tuple[str, ...]]:
    """``(Requires-Python, Requires-Dist lines)`` of a METADATA text: its RFC 822 style
    headers, up to the first empty line (the description), continuation lines folded.
    (The ``email`` package would do the same at a start-up cost ``lock`` need not pay.)"""
    headers: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t" and headers:
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {line.strip()}")
        elif ":" in line:
            name, _, value = line.partition(":")
            headers.append((name.strip().lower(), value.strip()))
    python = next((v for n, v in headers if n == "requires-python"), None)
    return python, tuple(v for n, v in headers if n == "requires-dist")
