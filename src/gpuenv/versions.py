"""Small value types every layer shares: driver versions, CUDA versions, compute
capabilities. Pure, standard library only (hardware detection and the run-time
fingerprint use these too, so they must stay cheap to import)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

# ASCII digits only (``\d`` would take fullwidth and other scripts' digits), and ``\Z``
# (``$`` would accept a trailing newline).
_DRIVER_RE = re.compile(r"[0-9]{2,4}(\.[0-9]{1,3}){1,2}\Z")
_CUDA_RE = re.compile(r"([0-9]{1,2})\.([0-9]{1,2})\Z")
_CC_RE = re.compile(r"(?:sm_|compute_)?([0-9]{1,2})\.?([0-9])\Z")


class VersionFormatError(ValueError):
    """A string that is not the kind of version it claims to be."""


@dataclass(frozen=True, order=True)
class DriverVersion:
    """An NVIDIA driver version such as ``550.54.15``.

    Kept as the original text too: driver versions carry leading zeros
    (``535.104.05``) that a PEP 440 ``Version`` would normalise away.
    """

    key: tuple[int, ...]
    text: str = field(compare=False)

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        cleaned = text.strip()
        if not _DRIVER_RE.match(cleaned):
            raise VersionFormatError(f"{text!r} is not a driver version (like 550.54.15)")
        return cls(tuple(int(p) for p in cleaned.split(".")), cleaned)

    def __str__(self) -> str:
        return self.text


class CudaVersion(NamedTuple):
    """A CUDA release as ``major.minor`` (``12.4``); ``tag`` is the wheel tag ``cu124``."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        match = _CUDA_RE.match(text.strip())
        if not match:
            raise VersionFormatError(f"{text!r} is not a CUDA version (like 12.4)")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def from_tag(cls, tag: str) -> CudaVersion:
        """``cu124`` -> 12.4, ``cu118`` -> 11.8, ``cu102`` -> 10.2, ``cu92`` -> 9.2."""
        digits = tag.removeprefix("cu")
        if not tag.startswith("cu") or not digits.isdigit() or len(digits) < 2:
            raise VersionFormatError(f"{tag!r} is not a CUDA wheel tag (like cu124)")
        return cls(int(digits[:-1]), int(digits[-1]))

    @classmethod
    def from_nvml(cls, value: int) -> CudaVersion:
        """NVML's integer form: 12040 -> 12.4."""
        return cls(value // 1000, (value % 1000) // 10)

    @property
    def tag(self) -> str:
        return f"cu{self.major}{self.minor}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


class ComputeCapability(NamedTuple):
    """A GPU's compute capability (``9.0``), also written ``sm_90``."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> ComputeCapability:
        """Accepts ``9.0``, ``90``, ``sm_90`` and ``compute_90``."""
        match = _CC_RE.match(text.strip().lower())
        if not match:
            raise VersionFormatError(f"{text!r} is not a compute capability (like 8.6 or sm_86)")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class ArchTarget:
    """One entry of a build's arch list: SASS for ``cc``, plus PTX when ``ptx``.

    SASS for sm_XY runs on sm_XZ with Z >= Y (same major); PTX for compute_XY is
    JIT-compiled by the driver for any newer GPU.
    """

    cc: ComputeCapability
    ptx: bool = False

    @classmethod
    def parse(cls, text: str) -> ArchTarget:
        body, plus, suffix = text.strip().partition("+")
        if plus and suffix.upper() != "PTX":
            raise VersionFormatError(f"{text!r} is not an arch entry (like 8.6 or 9.0+PTX)")
        return cls(ComputeCapability.parse(body), ptx=bool(plus))

    def runs_on(self, gpu: ComputeCapability) -> bool:
        if self.cc.major == gpu.major and gpu.minor >= self.cc.minor:
            return True
        return self.ptx and gpu >= self.cc

    def how(self, gpu: ComputeCapability) -> str:
        """Why this entry covers ``gpu`` (only meaningful when ``runs_on``)."""
        if self.cc == gpu:
            return f"{gpu.sm} compiled in"
        if self.cc.major == gpu.major and gpu.minor >= self.cc.minor:
            return f"{self.cc.sm} machine code runs on {gpu.sm}"
        return f"PTX for compute_{self.cc.major}{self.cc.minor} is JIT-compiled for {gpu.sm}"

    def __str__(self) -> str:
        return f"{self.cc}+PTX" if self.ptx else str(self.cc)


def arch_covering(arch: tuple[ArchTarget, ...], gpu: ComputeCapability) -> ArchTarget | None:
    """The best entry of an arch list for ``gpu``: exact SASS, then same-major, then PTX."""
    exact = [a for a in arch if a.cc == gpu]
    if exact:
        return exact[0]
    sass = [a for a in arch if a.cc.major == gpu.major and a.cc.minor <= gpu.minor]
    if sass:
        return max(sass, key=lambda a: a.cc)
    ptx = [a for a in arch if a.ptx and a.cc <= gpu]
    return max(ptx, key=lambda a: a.cc) if ptx else None
