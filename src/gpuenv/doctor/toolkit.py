"""The CUDA toolkit an extension build would use, against the CUDA torch was built with.

Four answers can disagree: ``CUDA_HOME`` (or ``CUDA_PATH``), the ``nvcc`` first on
``PATH`` (its ``--version``), the ``/usr/local/cuda`` link, and ``torch.version.cuda``.
``torch.utils.cpp_extension`` takes the first of ``CUDA_HOME``/``CUDA_PATH``, ``which
nvcc`` and ``/usr/local/cuda``, and refuses a toolkit of another CUDA major than torch's.
A toolkit's version is read from its ``version.json`` (or ``version.txt``); ``nvcc
--version`` runs only for the ``nvcc`` on ``PATH`` or a toolkit without those files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuenv.doctor._context import Context
from gpuenv.doctor._cudalibs import toolkit_files_version
from gpuenv.doctor._fsafe import executable, is_dir, is_file
from gpuenv.doctor.model import Finding, Severity
from gpuenv.errors import ExternalToolError
from gpuenv.versions import CudaVersion, VersionFormatError

_NVCC_RELEASE = re.compile(r"release (\d+\.\d+)")
_NVCC_TIMEOUT = 20.0


@dataclass(frozen=True)
class Toolkit:
    """A CUDA toolkit an extension build could take, and how it would be found (``source``):
    its path, its version and where that was read."""

    source: str  # "CUDA_HOME", "nvcc on PATH", "/usr/local/cuda"
    path: Path
    version: CudaVersion | None
    version_from: str | None
    target: str | None = None  # where a link points

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": str(self.path)}
        if self.target is not None:
            out["target"] = self.target
        out["version"] = str(self.version) if self.version else None
        out["version_from"] = self.version_from
        return out

    def label(self) -> str:
        where = f"{self.path} -> {self.target}" if self.target else str(self.path)
        return f"{self.source} ({where}: {self.version or 'unknown version'})"


def nvcc_version(nvcc: Path) -> CudaVersion | None:
    from gpuenv import _proc

    try:
        result = _proc.run([nvcc, "--version"], timeout=_NVCC_TIMEOUT, check=False)
    except ExternalToolError:
        return None
    match = _NVCC_RELEASE.search(result.stdout)
    return CudaVersion.parse(match[1]) if match else None


def _parse(text: str) -> CudaVersion | None:
    try:
        return CudaVersion.parse(".".join(text.split(".")[:2]))
    except VersionFormatError:
        return None


def toolkit_version(root: Path) -> tuple[CudaVersion | None, str | None]:
    from_files = toolkit_files_version(root)
    found = _parse(from_files[0]) if from_files else None
    if found and from_files:
        return found, from_files[1]
    nvcc = root / "bin" / "nvcc"
    if executable(nvcc):
        found = nvcc_version(nvcc)
        return found, f"{nvcc} --version" if found else None
    return None, None


def which(program: str, path_value: str) -> Path | None:
    for entry in path_value.split(os.pathsep):
        if not entry:
            continue
        candidate = Path(entry) / program
        if is_file(candidate) and executable(candidate):
            return candidate
    return None


def toolkits(ctx: Context) -> list[Toolkit]:
    found = []
    environ = ctx.request.environ
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if home and is_dir(Path(home)):
        source = "CUDA_HOME" if environ.get("CUDA_HOME") else "CUDA_PATH"
        found.append(Toolkit(source, Path(home), *toolkit_version(Path(home))))
    nvcc = which("nvcc", environ.get("PATH", ""))
    if nvcc is not None:
        version = nvcc_version(nvcc)
        found.append(
            Toolkit("nvcc on PATH", nvcc, version, f"{nvcc} --version" if version else None)
        )
    link = ctx.request.host.path("/usr/local/cuda")
    if link.is_dir():
        target = str(link.readlink()) if link.is_symlink() else None
        found.append(Toolkit("/usr/local/cuda", link, *toolkit_version(link.resolve()), target))
    return found


def _invalid_home(ctx: Context) -> Finding | None:
    environ = ctx.request.environ
    name = "CUDA_HOME" if environ.get("CUDA_HOME") else "CUDA_PATH"
    home = environ.get(name)
    if not home:
        return None
    path = Path(home)
    if is_dir(path) and is_file(path / "bin" / "nvcc"):
        return None
    problem = "is not a directory" if not is_dir(path) else "has no bin/nvcc"
    return Finding(
        code="cuda-home-invalid",
        severity=Severity.WARNING,
        message=f"{name}={home} {problem}: extension builds will fail or fall back to "
        "another toolkit",
        evidence={name: home, "exists": is_dir(path), "nvcc": str(path / "bin" / "nvcc")},
        fix=f"point {name} at a CUDA toolkit matching torch's CUDA, or unset it",
    )


def _mismatch(ctx: Context, found: list[Toolkit]) -> Finding | None:
    torch = ctx.env.torch
    torch_cuda = torch.cuda if torch is not None else None
    versions = {t.version for t in found if t.version is not None}
    if torch_cuda is not None:
        versions.add(torch_cuda)
    if len(versions) < 2:
        return None
    used = found[0] if found else None  # found is in cpp_extension's order
    severity = Severity.WARNING
    used_version = used.version if used else None
    if torch_cuda is not None and used_version and used_version.major != torch_cuda.major:
        severity = Severity.ERROR
    builds = _builds_extensions(ctx)
    if builds is None:
        severity = Severity.INFO  # nothing here compiles against a toolkit
    parts = [t.label() for t in found]
    if torch_cuda is not None:
        parts.append(f"torch.version.cuda ({torch_cuda})")
    evidence: dict[str, Any] = {t.source: t.to_json() for t in found}
    evidence["torch_cuda"] = str(torch_cuda) if torch_cuda else None
    evidence["extension_builds_use"] = used.source if used else None
    evidence["builds_extensions"] = builds
    fix = (
        "set CUDA_HOME to a toolkit of torch's CUDA version and put its bin/ first on "
        "PATH, per shell (never edit the /usr/local/cuda link)"
    )
    return Finding(
        code="toolkit-mismatch",
        severity=severity,
        message="CUDA toolkits disagree: "
        + "; ".join(parts)
        + (f"; extension builds use {used.source}" if used else "")
        + (
            f"; it matters because {builds}"
            if builds
            else "; nothing here builds or JIT-compiles CUDA extensions, so it does not matter now"
        ),
        evidence=evidence,
        fix=fix if builds else f"nothing needed now; before building extensions: {fix}",
    )


# What says the environment compiles CUDA code (extensions, JIT) with a toolkit.
_BUILD_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST")
_BUILD_DISTS = ("ninja", "nvidia-cuda-nvcc-cu11", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc")


def _builds_extensions(ctx: Context) -> str | None:
    """Why the environment builds or JIT-compiles CUDA extensions, or None."""
    for name in _BUILD_VARIABLES:
        if ctx.request.environ.get(name):
            return f"{name} is set"
    for name in _BUILD_DISTS:
        if ctx.env.dist(name) is not None:
            return f"{name} is installed (torch.utils.cpp_extension builds with it)"
    if ctx.env.conda("cuda-nvcc") is not None:
        return "conda's cuda-nvcc is installed"
    return None


def check(ctx: Context) -> list[Finding]:
    found = toolkits(ctx)
    return [f for f in (_invalid_home(ctx), _mismatch(ctx, found)) if f is not None]
