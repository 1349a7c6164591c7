"""``gpuenv doctor``: diagnose any environment (ours or not) from its files.

``diagnose(request)`` locates the environment, asks its interpreter once for its
``sys.path`` as the user gets it (torch is not imported; without a runnable interpreter
the path is modelled from the files), takes its inventory and runs each family of
checks; every check reads files (conda-meta, dist-info and RECORD, ELF dynamic
sections, ``ld.so.cache``, ``/proc``) and the environment variables the request carries.
Besides that question, only ``nvcc --version`` (for the ``nvcc`` on ``PATH``, or a
toolkit without a ``version.json``) starts a process, and only a configured mirror of
the PyTorch index is sent a request (``mirrors``: does it keep the index's layout).
``deep`` adds the verification probe and merges what it saw into the findings.
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
    mirrors,
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
    mirrors.check,
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
    environment = ctx.env.summary()
    if request.chosen_because:
        environment["chosen_because"] = request.chosen_because
    if ctx.env.ask_problem:
        environment["interpreter_not_asked"] = ctx.env.ask_problem
    if request.deep:
        findings, environment["deep"] = deep.merge(ctx, findings)
    findings.sort(key=lambda f: (f.severity.rank, f.code))
    return Report(tuple(findings), environment)
