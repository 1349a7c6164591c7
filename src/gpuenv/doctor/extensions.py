"""Compiled extensions (flash-attn, xformers, a project's own CUDAExtension) that do not
fit the environment they are installed in:

- ``extension-other-torch``: built against another torch, by the torch version gpuenv
  recorded at build time (``gpuenv-build.json`` in its ``.dist-info``), or, for an
  extension built elsewhere, by the ``c10::``/``at::`` symbols it needs that this
  environment's torch libraries do not export (the ``undefined symbol: _ZN3c10...`` its
  import would fail with);
- ``extension-other-cuda``: built for another CUDA major than the environment's torch
  (by the record, or by the ``libcudart.so.N`` it links);
- ``extension-no-gpu-code``: its fat binary has no machine code for a GPU of this
  machine and no PTX the driver could compile for it ("no kernel image is available").

An extension is a shared object listed in a distribution's ``RECORD`` that links torch's
libraries or needs torch symbols, or belongs to a distribution gpuenv built; torch's own
and NVIDIA's wheels are not examined. Files only: ELF headers, dynamic sections and
symbol tables, never an import.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from gpuenv.builds.elfscan import defined_symbols, gpu_code, undefined_symbols
from gpuenv.builds.wheelfile import RECORD_NAME
from gpuenv.doctor._context import Context
from gpuenv.doctor._elf import read_dynamic
from gpuenv.doctor._fsafe import read_bytes, read_text
from gpuenv.doctor.environment import Dist
from gpuenv.doctor.model import Finding, Severity

TORCH_LIBS = re.compile(r"^lib(c10|c10_cuda|torch|torch_cpu|torch_cuda|torch_python)\.so$")
_CUDART = re.compile(r"^libcudart\.so\.(\d+)")
_SKIPPED = re.compile(r"^(torch|triton|pytorch-triton|nvidia-.*)$")
_MAX_SO_PER_DIST = 256
_MAX_RECORD_BYTES = 1 << 24


@dataclass(frozen=True)
class Extension:
    """A compiled extension of a distribution: the shared object, the libraries it links and
    the symbols it needs from elsewhere."""

    dist: Dist
    path: Path
    needed: tuple[str, ...]
    undefined: frozenset[str]


def _shared_objects(dist: Dist) -> list[Path]:
    text = read_text(dist.path / "RECORD", _MAX_RECORD_BYTES + 1)
    if text is None or len(text) > _MAX_RECORD_BYTES:
        return []
    lines = text.splitlines()
    out = []
    for line in lines:
        rel = line.split(",", 1)[0]
        if rel.endswith(".so") or ".so." in rel.rsplit("/", 1)[-1]:
            path = (dist.site_packages / rel).resolve()
            if path.is_relative_to(dist.site_packages.resolve()) and path.is_file():
                out.append(path)
        if len(out) >= _MAX_SO_PER_DIST:
            break
    return out


def _record(dist: Dist) -> dict[str, Any] | None:
    path = dist.path / RECORD_NAME
    raw = read_bytes(path, (1 << 20) + 1)  # gpuenv writes a few hundred bytes
    if raw is None or len(raw) > 1 << 20:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


class _Scan:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @cached_property
    def extensions(self) -> list[Extension]:
        out = []
        for dist in self.ctx.env.dists:
            if _SKIPPED.match(dist.name):
                continue
            built_by_gpuenv = (dist.path / RECORD_NAME).is_file()
            for path in _shared_objects(dist):
                dynamic = read_dynamic(path)
                needed = dynamic.needed if dynamic else ()
                undefined = frozenset(undefined_symbols(path) or ())
                if built_by_gpuenv or undefined or any(TORCH_LIBS.match(n) for n in needed):
                    out.append(Extension(dist, path, needed, undefined))
        return out

    @cached_property
    def torch_symbols(self) -> frozenset[str] | None:
        """What the environment's torch libraries export (None: none to read)."""
        torch = self.ctx.env.torch
        if torch is None or not torch.lib_dir.is_dir():
            return None
        libs = [p for p in sorted(torch.lib_dir.iterdir()) if TORCH_LIBS.match(p.name)]
        found: set[str] = set()
        for lib in libs:
            found |= defined_symbols(lib) or set()
        return frozenset(found) if libs else None


def check(ctx: Context) -> list[Finding]:
    if ctx.env.torch is None:
        return []
    scan = _Scan(ctx)
    findings: list[Finding] = []
    seen: set[str] = set()
    for ext in scan.extensions:
        record = _record(ext.dist)
        if ext.dist.name not in seen:
            seen.add(ext.dist.name)
            findings += _by_record(ctx, ext, record)
        if record is None:
            findings += _by_symbols(ctx, scan, ext)
            findings += _by_cudart(ctx, ext)
        findings += _gpu_code(ctx, ext)
    return findings


def _rebuild_fix(ext: Extension) -> str:
    return (
        f"rebuild {ext.dist.name} against this environment's torch: with gpuenv, list it in "
        f"gpuenv.toml and 'gpuenv install' (the build's identity includes torch's wheel); "
        f"with pip, pip install --no-build-isolation --no-binary {ext.dist.name} "
        f"--force-reinstall {ext.dist.name}"
    )


def _by_record(ctx: Context, ext: Extension, record: dict[str, Any] | None) -> list[Finding]:
    torch = ctx.env.torch
    if record is None or torch is None:
        return []
    out = []
    built = record.get("torch")
    if isinstance(built, str) and built != torch.version:
        out.append(
            Finding(
                code="extension-other-torch",
                severity=Severity.ERROR,
                message=f"{ext.dist.name} {ext.dist.version} was built against torch {built}; "
                f"this environment has torch {torch.version}: its import fails with an "
                "undefined c10/at:: symbol, or it crashes",
                evidence={
                    "distribution": ext.dist.name,
                    "built_against": built,
                    "torch": torch.version,
                    "record": str(ext.dist.path / RECORD_NAME),
                },
                fix=_rebuild_fix(ext),
            )
        )
    cuda = record.get("cuda")
    if (
        isinstance(cuda, str)
        and torch.cuda is not None
        and cuda.split(".")[0] != str(torch.cuda.major)
    ):
        out.append(_other_cuda(ext, f"CUDA {cuda} (gpuenv's build record)", str(torch.cuda)))
    return out


def _by_symbols(ctx: Context, scan: _Scan, ext: Extension) -> list[Finding]:
    exported = scan.torch_symbols
    if not ext.undefined or exported is None:
        return []
    missing = sorted(ext.undefined - exported)
    if not missing:
        return []
    torch = ctx.env.torch
    assert torch is not None
    message = (
        f"{ext.path.name} ({ext.dist.name} {ext.dist.version}) needs {len(missing)} torch "
        f"symbol(s) that torch {torch.version} does not export: it was compiled against "
        f"another torch (import fails with 'undefined symbol: {missing[0]}')"
    )
    evidence = {
        "missing_symbols": missing[:5],
        "missing_count": len(missing),
        "torch": torch.version,
        "torch_libraries": str(torch.lib_dir),
    }
    return [_file_error(ext, "extension-other-torch", message, evidence, _rebuild_fix(ext))]


def _file_error(
    ext: Extension, code: str, message: str, evidence: dict[str, Any], fix: str
) -> Finding:
    """An error found in one of the extension's files: the evidence names the
    distribution and the file first."""
    return Finding(
        code=code,
        severity=Severity.ERROR,
        message=message,
        evidence={"distribution": ext.dist.name, "file": str(ext.path), **evidence},
        fix=fix,
    )


def _other_cuda(ext: Extension, built: str, env_cuda: str) -> Finding:
    message = (
        f"{ext.dist.name} {ext.dist.version} is built for {built}; this environment's torch "
        f"is for CUDA {env_cuda}: they load two CUDA runtimes, or fail to load"
    )
    evidence = {"built_for": built, "torch_cuda": env_cuda}
    fix = _rebuild_fix(ext) + f" (with a CUDA {env_cuda} toolkit)"
    return _file_error(ext, "extension-other-cuda", message, evidence, fix)


def _by_cudart(ctx: Context, ext: Extension) -> list[Finding]:
    torch = ctx.env.torch
    if torch is None or torch.cuda is None:
        return []
    for name in ext.needed:
        match = _CUDART.match(name)
        if match and int(match.group(1)) != torch.cuda.major:
            return [_other_cuda(ext, f"CUDA {match.group(1)} (it links {name})", str(torch.cuda))]
    return []


def _gpu_code(ctx: Context, ext: Extension) -> list[Finding]:
    code = gpu_code(ext.path)
    if code is None or code.empty:
        return []
    out = []
    for gpu in ctx.request.hardware.gpus:
        cc = gpu.compute_capability
        if cc is None or code.runs_on(cc.major, cc.minor) is not None:
            continue
        message = (
            f"{ext.path.name} ({ext.dist.name} {ext.dist.version}) has GPU code for "
            f"{' '.join(code.entries())} only: nothing runs on GPU {gpu.index} ({gpu.name}, "
            f"{cc.sm}) ('no kernel image is available')"
        )
        evidence = {"gpu_code": code.entries(), "gpu": gpu.name, "compute_capability": str(cc)}
        fix = (
            f"rebuild it with {cc} in TORCH_CUDA_ARCH_LIST (with gpuenv: a target whose gpu "
            "is this one, or extra-archs in [pip.build.<name>])"
        )
        out.append(_file_error(ext, "extension-no-gpu-code", message, evidence, fix))
    return out
