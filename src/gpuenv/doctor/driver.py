"""The driver against the environment's CUDA build (and a CUDA build where there is
no driver at all).

The driver's "CUDA Version" is a ceiling: the newest CUDA runtime it runs. A build for a
newer CUDA of the same major may still run under NVIDIA's minor-version compatibility
when the driver meets the major's floor (a warning: no PTX JIT of newer PTX); below the
floor, or for another major, CUDA fails to initialise.
"""

from __future__ import annotations

from gpuenv.doctor._context import Context
from gpuenv.doctor.model import Finding, Severity
from gpuenv.knowledge import DriverCompat
from gpuenv.versions import CudaVersion


def _no_driver(ctx: Context, env_cuda: CudaVersion, read_from: str) -> Finding:
    facts = ctx.request.hardware
    why = "; ".join(facts.notes) or (facts.no_gpu_reason or "no driver found")
    return Finding(
        code="no-nvidia-driver",
        severity=Severity.WARNING,
        message=f"this environment is built for CUDA {env_cuda}, and this machine has no "
        f"usable NVIDIA driver ({why}): CUDA will not initialise here and 'gpuenv verify' fails",
        evidence={
            "environment_cuda": str(env_cuda),
            "environment_cuda_from": read_from,
            "no_gpu_reason": facts.no_gpu_reason,
            "hardware_notes": list(facts.notes),
            "hardware_source": dict(facts.sources),
        },
        fix="run this environment on a machine with an NVIDIA driver for CUDA "
        f"{env_cuda} or newer (gpuenv detect shows the driver), or install a CPU build here",
    )


def check(ctx: Context) -> list[Finding]:
    facts = ctx.request.hardware
    built = ctx.env_cuda
    if built is None:
        return []
    if facts.driver_version is None and facts.cuda_driver_version is None:
        torch = ctx.env.torch
        cpu_torch = torch is not None and torch.cuda is None  # leftover nvidia wheels only
        return [_no_driver(ctx, *built)] if not facts.gpus and not cpu_torch else []
    env_cuda, read_from = built
    ceiling = facts.cuda_driver_version
    if ceiling is None and facts.driver_version is not None:
        ceiling = ctx.kb.newest_cuda_for_driver(facts.driver_version)
    if ceiling is None or ceiling >= env_cuda:
        return []
    floor = ctx.kb.driver_floor(env_cuda, DriverCompat.MINOR)
    driver = facts.driver_version
    minor_ok = (
        ceiling.major == env_cuda.major
        and driver is not None
        and floor is not None
        and driver >= floor
    )
    evidence = {
        "driver_version": str(driver) if driver else None,
        "driver_cuda": str(ceiling),
        "environment_cuda": str(env_cuda),
        "environment_cuda_from": read_from,
        "minor_compat_driver_floor": str(floor) if floor else None,
        "hardware_source": dict(facts.sources),
    }
    if minor_ok:
        return [
            Finding(
                code="driver-too-old",
                severity=Severity.WARNING,
                message=f"driver {driver} runs CUDA up to {ceiling}, older than the "
                f"environment's CUDA {env_cuda}; it works only under minor-version "
                "compatibility (no JIT of newer PTX)",
                evidence=evidence,
                fix=f"upgrade the driver to one for CUDA {env_cuda}, or install a build for "
                f"CUDA {ceiling} or older",
            )
        ]
    return [
        Finding(
            code="driver-too-old",
            severity=Severity.ERROR,
            message=f"the driver ({driver or 'version unknown'}) runs CUDA up to {ceiling}, "
            f"older than the environment's CUDA {env_cuda}: CUDA will not initialise",
            evidence=evidence,
            fix=f"install a torch build for CUDA {ceiling} or older (gpuenv plan picks one), "
            f"or upgrade the driver to one for CUDA {env_cuda}",
        )
    ]
