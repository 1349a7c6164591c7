"""What gpuenv knows about building extensions, read from ``gpuenv/knowledge/data``:

- ``packages.toml``: how the well-known extension packages are built (against torch,
  in the prefix, with a toolkit, the variables and build requirements they need, the
  memory one compile job takes), so that most specs say nothing about them;
- ``host_compilers.toml``: which GCC majors each CUDA release's nvcc accepts;
- ``diagnoses.toml``: what the known causes of a failed build look like in its log.

Every entry names its source. The files are package data, read with the standard
library; a malformed entry fails as a ``FileFormatError`` naming the file and entry.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from gpuenv.errors import FileFormatError
from gpuenv.knowledge._data import BUILD_FILES, data_toml, files_digest

DEFAULT_JOB_MEMORY_GB = 2.0


@dataclass(frozen=True)
class PackageDefaults:
    """How one package is built when the spec says nothing else."""

    name: str
    build: str = "when-no-wheel"  # or "always": its sdist even where wheels exist
    against_torch: bool = False
    no_build_isolation: bool = False
    toolkit: bool = False
    env: tuple[tuple[str, str], ...] = ()
    build_requires: tuple[str, ...] = ()
    requires_dist: tuple[str, ...] | None = None
    job_memory_gb: float = DEFAULT_JOB_MEMORY_GB
    source: str = ""
    # A variable of its own its build reads the archs from, set from the target's
    # TORCH_CUDA_ARCH_LIST as numbers ("86;89"): tiny-cuda-nn's TCNN_CUDA_ARCHITECTURES,
    # without which it builds for the build machine's GPU, or fails where it has none.
    arch_env: str | None = None


@dataclass(frozen=True)
class CompilerSupport:
    """The GCC majors one CUDA release's nvcc accepts, from ``host_compilers.toml``."""

    cuda: str  # "12.4"
    gcc_min: int
    gcc_max: int
    source: str


@dataclass(frozen=True)
class Cause:
    """One known cause of a failed build, from ``diagnoses.toml``: the log lines that show
    it, or the signal that killed the build, and what to do about it."""

    code: str
    title: str
    patterns: tuple[re.Pattern[str], ...]
    fix: str
    exit_signal: int | None
    source: str


DATA_FILES = BUILD_FILES


@functools.cache
def digest() -> str:
    """sha256 of the data files: a lock whose builds used other knowledge is stale."""
    return files_digest(BUILD_FILES)


def _read(name: str) -> dict[str, Any]:
    return data_toml(name)


def _bad(name: str, entry: str, exc: Exception) -> FileFormatError:
    return FileFormatError(f"gpuenv/knowledge/data/{name}: {entry}: malformed entry ({exc!r})")


def _package(name: str, raw: dict[str, Any]) -> PackageDefaults:
    requires = raw.get("requires_dist")
    build = str(raw.get("build", "when-no-wheel"))
    if build not in ("always", "when-no-wheel"):
        raise ValueError(f"build = {build!r}: 'always' or 'when-no-wheel'")
    return PackageDefaults(
        name=name,
        build=build,
        against_torch=bool(raw.get("against_torch", False)),
        no_build_isolation=bool(raw.get("no_build_isolation", False)),
        toolkit=bool(raw.get("toolkit", False)),
        env=tuple(sorted((str(k), str(v)) for k, v in raw.get("env", {}).items())),
        build_requires=tuple(str(r) for r in raw.get("build_requires", ())),
        requires_dist=tuple(str(r) for r in requires) if requires is not None else None,
        job_memory_gb=float(raw.get("job_memory_gb", DEFAULT_JOB_MEMORY_GB)),
        source=str(raw["source"]),
        arch_env=str(raw["arch_env"]) if raw.get("arch_env") else None,
    )


@functools.cache
def packages() -> dict[str, PackageDefaults]:
    out = {}
    for name, raw in _read("packages.toml").get("packages", {}).items():
        try:
            out[name] = _package(name, raw)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad("packages.toml", name, exc) from None
    return out


def defaults_for(name: str) -> PackageDefaults | None:
    """The knowledge base's defaults for a (normalised) package name, if it has any."""
    return packages().get(name)


@functools.cache
def compiler_support() -> dict[str, CompilerSupport]:
    out = {}
    for number, raw in enumerate(_read("host_compilers.toml").get("cuda", [])):
        try:
            entry = CompilerSupport(
                str(raw["cuda"]), int(raw["gcc_min"]), int(raw["gcc_max"]), str(raw["source"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad("host_compilers.toml", f"cuda[{number}]", exc) from None
        out[entry.cuda] = entry
    return out


def support_for(cuda: str) -> CompilerSupport | None:
    """The GCC range of the CUDA release ``cuda`` ("12.4", or "12.4.131": major.minor is used)."""
    return compiler_support().get(".".join(cuda.split(".")[:2]))


@functools.cache
def causes() -> tuple[Cause, ...]:
    out = []
    for number, raw in enumerate(_read("diagnoses.toml").get("cause", [])):
        try:
            signal = raw.get("exit_signal")
            out.append(
                Cause(
                    code=str(raw["code"]),
                    title=str(raw["title"]),
                    patterns=tuple(re.compile(p, re.MULTILINE) for p in raw.get("patterns", ())),
                    fix=str(raw["fix"]),
                    exit_signal=int(signal) if signal is not None else None,
                    source=str(raw["source"]),
                )
            )
        except (KeyError, TypeError, ValueError, re.error) as exc:
            raise _bad("diagnoses.toml", f"cause[{number}]", exc) from None
    return tuple(out)
