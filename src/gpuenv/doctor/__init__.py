"""``gpuenv doctor``: diagnose any environment (ours or not) from its files.

``diagnose(request)`` locates the environment, takes its inventory and runs each family
of checks; every check reads files (conda-meta, dist-info, ELF dynamic sections,
``/proc``) and the environment variables the request carries. None imports torch.
Only ``nvcc --version`` (for the ``nvcc`` on ``PATH``, or a toolkit without a
``version.json``) and ``--python``'s one question start a process. ``deep`` adds the
verification probe.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuenv.doctor import (
    arch,
    base_env,
    deep,
    driver,
    driverlib,
    extensions,
    ldpath,
    libraries,
    managers,
    ownership,
    shadowing,
    source,
    toolkit,
    trio,
    wsl,
)
from gpuenv.doctor._context import Context
from gpuenv.doctor.environment import inventory, locate
from gpuenv.doctor.model import DoctorRequest, Finding, Host, Report, Severity

__all__ = ["DoctorRequest", "Finding", "Host", "Report", "Severity", "diagnose"]

CHECKS: tuple[Callable[[Context], list[Finding]], ...] = (
    shadowing.check,
    managers.check,
    ownership.check,
    libraries.check,
    ldpath.check,
    toolkit.check,
    driver.check,
    driverlib.check,
    arch.check,
    trio.check,
    source.check,
    wsl.check,
    base_env.check,
    extensions.check,
    deep.check,
)


def diagnose(request: DoctorRequest) -> Report:
    """Every finding about the requested environment, errors first.

    Raises ``UsageError`` when the environment cannot be found, and
    ``ExternalToolError`` when ``request.python`` cannot be asked where it lives.
    """
    location = locate(
        prefix=request.prefix,
        python=request.python,
        environ=request.environ,
        default_prefix=request.default_prefix,
        cwd=request.cwd,
    )
    ctx = Context(request, inventory(location))
    findings = [finding for check in CHECKS for finding in check(ctx)]
    findings.sort(key=lambda f: (f.severity.rank, f.code))
    return Report(tuple(findings), ctx.env.summary())
