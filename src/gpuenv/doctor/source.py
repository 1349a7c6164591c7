"""A CPU-only (or ROCm) torch where an NVIDIA GPU and driver are present: installed
from the wrong index, the commonest reason ``torch.cuda.is_available()`` is False."""

from __future__ import annotations

from gpuenv.doctor._context import Context
from gpuenv.doctor.model import Finding, Severity


def check(ctx: Context) -> list[Finding]:
    torch = ctx.env.torch
    facts = ctx.request.hardware
    if torch is None or torch.cuda is not None or not facts.gpus:
        return []
    kind = f"a ROCm (HIP {torch.hip})" if torch.hip else "a CPU-only"
    gpus = [f"{g.name} ({g.compute_capability or '?'})" for g in facts.gpus]
    return [
        Finding(
            code="cpu-torch-with-gpu",
            severity=Severity.ERROR,
            message=f"torch {torch.version} is {kind} build, but this machine has "
            f"{', '.join(gpus)} with driver {facts.driver_version or 'unknown'}",
            evidence={
                "torch": torch.version,
                "version_file": str(torch.version_file),
                "torch_cuda": None,
                "torch_hip": torch.hip,
                "gpus": gpus,
                "driver_version": str(facts.driver_version) if facts.driver_version else None,
            },
            fix="reinstall torch from the PyTorch index for a CUDA the driver runs "
            "(gpuenv plan names the index and cu tag)",
        )
    ]
