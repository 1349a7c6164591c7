"""Verifying an installed target: the probe run by the prefix's own interpreter
(``python -I``) under the prefix's activation environment, against what the lock
says, and the result recorded in the prefix for this machine."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.knowledge import KnowledgeBase
from gpuenv.lock.model import Lock, LockedTarget
from gpuenv.runtime import Selected, child_environment
from gpuenv.verify._run import run_probe
from gpuenv.verify.gate import machine_fingerprint
from gpuenv.verify.model import Expectations, ProbeResult
from gpuenv.verify.record import VerificationRecord, make_record, write_record

if TYPE_CHECKING:
    from gpuenv.spec import Verify


@dataclass(frozen=True)
class TargetVerification:
    """One verification of an installed target: the probe's result, the record made of it
    for this machine, and the path it was written to."""

    result: ProbeResult
    record: VerificationRecord
    record_path: Path


def expectations_for(
    target: LockedTarget, prefix: Path, kb: KnowledgeBase | None, extra: tuple[str, ...]
) -> Expectations:
    """What the prefix must show: the locked versions and build, loaded from itself.
    Without ``kb``, a failed arch check cannot name the builds that would fit."""
    stack = target.stack

    def version(name: str) -> str | None:
        package = target.pip_package(name)
        return package.version if package else None

    from gpuenv.builds.install import extensions_of

    release = kb.torch_release(stack.torch) if kb is not None else None
    release = release.on(target.platform) if release else None
    builds = {b.tag: tuple(str(a) for a in b.arch) for b in release.cuda_builds} if release else {}
    # The wheels' own pins (read at lock time) are what the prefix holds.
    read = target.wheel_facts
    return Expectations(
        torch=version("torch") or stack.torch,
        torchvision=version("torchvision") if stack.torchvision else None,
        torchaudio=version("torchaudio") if stack.torchaudio else None,
        cuda=stack.cuda,
        cudnn=(read.cudnn if read and read.cudnn else stack.cudnn),
        nccl=(read.nccl if read and read.nccl else stack.nccl),
        arch_list=stack.arch_list,
        # A CPU target with build = "pypi" runs PyPI's CUDA build: the CPU checks, with
        # the build's CUDA expected of torch.
        cpu=stack.cuda is None or target.hardware.cpu,
        mps=target.platform == "osx-arm64",
        prefix=prefix,
        extra=extra,
        builds=builds,
        extensions=extensions_of(prefix),
    )


def where_it_ran(environ: Mapping[str, str]) -> dict[str, str]:
    """The host (and the Slurm node and job) a verification ran on, for its record."""
    import socket

    found = {"host": socket.gethostname()}
    for key, variable in (("slurm_node", "SLURMD_NODENAME"), ("slurm_job", "SLURM_JOB_ID")):
        if environ.get(variable):
            found[key] = environ[variable]
    return found


def verify_target(
    selected: Selected,
    target: LockedTarget,
    kb: KnowledgeBase,
    *,
    extra: tuple[str, ...] = (),
    timeout: float,
    progress: Callable[[str], None] | None = None,
) -> TargetVerification:
    """Run the probe in the prefix and record the outcome for this machine. A failed,
    crashed or timed-out probe is recorded as failed: it replaces an earlier pass."""
    prefix = Path(selected.prefix)
    env, _notes = child_environment(selected, os.environ)
    started = datetime.now(timezone.utc)
    result = run_probe(
        prefix / "bin" / "python",
        expectations_for(target, prefix, kb, extra),
        env=env,
        timeout=timeout,
        progress=progress,
    )
    record = make_record(
        lock_hash=selected.marker.lock_hash,
        fingerprint=machine_fingerprint(),
        result=result,
        started_at=started,
        finished_at=datetime.now(timezone.utc),
        target=target.name,
        extra=where_it_ran(os.environ),
    )
    return TargetVerification(result, record, write_record(prefix, record))


def verify_installed(
    spec_file: Path,
    target: str | None,
    *,
    cache_dir: Path | None,
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[Selected, TargetVerification]:
    """``gpuenv verify --target`` (and each node of ``--slurm``): the project's installed
    prefix of ``target`` (or of its only target), checked to be the build of the current
    lock, then probed and recorded (``verify_target``). ``timeout`` None: the spec's.

    Raises ``NotInstalled`` when the prefix is missing or is not the lock's build."""
    from gpuenv import runtime
    from gpuenv.knowledge import knowledge_base
    from gpuenv.lock.format import LOCK_FILENAME, read_lock
    from gpuenv.spec import load_spec

    kb = knowledge_base()
    loaded = load_spec(spec_file, kb=kb, cache_dir=cache_dir)
    if target is not None:  # a Mac's or a Windows target verifies there: exit 2 here
        runtime.refuse_foreign(str(spec_file), target, "verify")
    selected = runtime.select(runtime.project_of(str(spec_file)), target, spec=str(spec_file))
    lock = read_lock(
        spec_file.parent / LOCK_FILENAME, cache_dir=cache_dir, targets=[selected.target]
    )
    locked = lock.target(selected.target) if lock else None
    verification = verify_locked(
        selected, locked, kb, loaded.spec.verify, timeout=timeout, progress=progress
    )
    return selected, verification


def verify_locked(
    selected: Selected,
    locked: LockedTarget | None,
    kb: KnowledgeBase,
    settings: Verify,
    *,
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> TargetVerification:
    """The prefix ``selected``, checked to be the build of ``locked`` (``NotInstalled``
    when it is not, or nothing is locked), probed with the spec's ``[verify]`` settings
    (``timeout`` None: the spec's) and recorded (``verify_target``): ``verify_installed``
    and ``gpuenv install --verify``."""
    from gpuenv.errors import NotInstalled

    if locked is None or locked.content_hash != selected.marker.lock_hash:
        raise NotInstalled(
            f"target {selected.target}: the installed prefix does not match gpuenv.lock",
            hint=f"run 'gpuenv install --target {selected.target}' first",
        )
    return verify_target(
        selected,
        locked,
        kb,
        extra=settings.extra,
        timeout=timeout or float(settings.timeout),
        progress=progress,
    )


def verify_targets(
    project: str,
    targets: Iterable[str],
    lock: Lock,
    kb: KnowledgeBase,
    settings: Verify,
    *,
    progress: Callable[[str], None],
) -> dict[str, bool]:
    """``gpuenv install --verify``: each of ``targets`` just installed in ``project``
    (the prefix its pointer names) verified on this machine (``verify_locked``) and
    recorded; whether each passed."""
    from gpuenv import runtime
    from gpuenv._progress import Prefixed

    outcome = {}
    for name in targets:
        selected = runtime.select(project, name)  # the pointer install just set
        verification = verify_locked(
            selected, lock.target(name), kb, settings, progress=Prefixed(progress, f"{name}: ")
        )
        outcome[name] = verification.result.passed
    return outcome
