"""What a target's lock depends on, and why a lock is out of date.

Staleness is judged without network: a target is stale when its input hash (the parts of
the spec it depends on, plus the knowledge base's digest) differs, when an index the
overrides or the spec name now is not the one the lock records (``lock._indexes``), or
when the planner now chooses a different stack than the lock holds. A target whose
entry fails the reader's checks (or is of an old format) is damaged, and relocked
whatever was asked for.
``check_lock`` is ``gpuenv lock --check``: both rules, and the targets the spec dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from gpuenv import _sha256
from gpuenv._network import literal_url
from gpuenv._redact import redact_url
from gpuenv.errors import CheckFailed
from gpuenv.lock._indexes import index_reasons
from gpuenv.lock.format import LATEST
from gpuenv.lock.model import Lock, StackSummary
from gpuenv.lock.options import LockOptions, LockSettings
from gpuenv.spec import LoadedSpec, Spec, Target

# The planner (and the knowledge base behind it) loads only when something is
# planned: `install` from a fresh lock never needs it (see stale_reasons).
if TYPE_CHECKING:
    from pathlib import Path

    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.lock.format import LockReading
    from gpuenv.plan import TargetPlan


def input_hash(spec: Spec, target: str, kb_digest: str) -> str:
    """What a target's lock depends on: the stack, the target's table, [pip], [conda],
    the lock format and the knowledge base. Not the project name, not [verify]."""
    # the build declarations (and packaging's requirement parser) load only to hash:
    # `install` of a lock found fresh before never hashes (``lock._fresh``)
    from gpuenv.lock import builds as build_lock
    from gpuenv.lock import extras

    t = spec.targets[target]
    # With one torch for all targets, every taking-part target's hardware decides it.
    shared = spec.stack.same_torch and t.torch is None
    payload = {
        "lock-version": LATEST,
        "knowledge": kb_digest,
        "stack": spec.stack.__dict__,
        "target": _target_inputs(t),
        "sharing": sorted(
            (name, _target_inputs(other))
            for name, other in spec.targets.items()
            if shared and name != target and other.torch is None
        ),
        "pip": _pip_inputs(spec),
        **extras.inputs(spec, target),
        "conda": (
            {
                "channels": list(spec.conda.channels),
                "dependencies": _jsonable(spec.conda.dependencies),
                "python": spec.conda.python,
            }
            if spec.conda
            else None
        ),
    }
    if build_lock.declared(spec):  # only then: other specs keep the hashes they had
        from gpuenv.builds import knowledge

        payload["build-knowledge"] = knowledge.digest()
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + _sha256.hexdigest(text.encode())


def _pip_inputs(spec: Spec) -> dict[str, object]:
    """[pip] as hashed: ``build`` and ``exclude-newer`` only when set, so that specs
    without them keep the input hashes (and locks) they had before the keys existed."""
    out: dict[str, object] = {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in spec.pip.__dict__.items()
        if k not in ("build", "groups", "exclude_newer_packages")
        and (k != "exclude_newer" or v is not None)
    }
    if spec.pip.exclude_newer_packages:
        out["exclude_newer_packages"] = dict(spec.pip.exclude_newer_packages)
    if spec.pip.build:
        out["build"] = {name: o.__dict__ for name, o in sorted(spec.pip.build.items())}
    return out


def _target_inputs(target: Target) -> dict[str, object]:
    """A target's table as its input hash reads it: ``build`` only when set, so the
    targets of specs without it keep the hashes (and locks) they had."""
    return {
        k: v
        for k, v in target.__dict__.items()
        if (k != "build" or v is not None) and k != "dependencies"  # see extras.inputs
    }


def _jsonable(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else list(value)  # type: ignore[call-overload]


def recorded_url(url: str) -> str:
    """A URL as the lock records it: no credential, no "${" for uv to expand."""
    return literal_url(redact_url(url))


def planned_stack(plan: TargetPlan, came_from: str | None = None) -> StackSummary:
    """The plan's stack; its index is the one torch came from (``came_from``: PyPI's own
    build resolved from the default index), else the plan's torch index."""
    return StackSummary(
        python=plan.python,
        cuda=plan.cuda,
        cu_tag=plan.cu_tag,
        torch=plan.torch,
        torchvision=plan.torchvision,
        torchaudio=plan.torchaudio,
        cudnn=plan.cudnn,
        nccl=plan.nccl,
        arch_list=plan.arch_list,
        index=recorded_url(came_from or plan.index_url),
    )


def stale_reasons(
    loaded: LoadedSpec,
    knowledge: Callable[[], KnowledgeBase],
    lock: Lock | None,
    *,
    kb_digest: str,
    options: LockOptions,
) -> dict[str, list[str]]:
    """Why each target's lock is out of date (empty when the lock is fresh). No network.

    A target's input hash covers the spec parts it depends on and the knowledge base's
    digest, and planning is a pure function of those, so an unchanged hash means an
    unchanged plan. Only "detect" targets, whose hardware is this machine's, are
    planned again to compare (``knowledge`` is called only then)."""
    spec = loaded.spec
    if lock is None:
        return {name: ["no lock file"] for name in spec.targets}
    reasons: dict[str, list[str]] = {}
    for name in sorted(set(lock.targets) - set(spec.targets)):
        reasons[name] = ["target is no longer in the spec"]
    for name in spec.targets:
        locked = lock.target(name)
        if locked is None:
            reasons[name] = ["target is not locked yet"]
            continue
        found = []
        if locked.input_hash != input_hash(spec, name, kb_digest):
            found.append("the spec (or gpuenv's knowledge base) changed since it was locked")
        else:  # the overrides are not in the input hash: the indexes the lock records
            found += index_reasons(
                spec,
                locked,
                torch_index=options.torch_index,
                index_url=options.index_url,
                mirrors=options.mirrors,
            )
        if not found and spec.targets[name].uses_detect:
            from gpuenv.plan import plan_target

            plan = plan_target(
                name, spec, knowledge(), detected=options.detected, torch_index=options.torch_index
            )
            # The index is where a build comes from (mirrors differ), not which build it is.
            if replace(planned_stack(plan), index="") != replace(locked.stack, index=""):
                found.append(f"the plan now chooses {plan.cu_tag} torch {plan.torch}")
        if found:
            reasons[name] = found
    return reasons


def damage_reasons(reading: LockReading | None, names: Iterable[str]) -> dict[str, list[str]]:
    """Why each of ``names`` that the lock holds damaged must be relocked."""
    if reading is None:
        return {}
    found = reading.problems(names)
    return {
        name: [f"its entry in {reading.path} fails gpuenv's checks: " + "; ".join(problems)]
        for name, problems in found.items()
    }


def out_of_date(
    loaded: LoadedSpec,
    knowledge: Callable[[], KnowledgeBase],
    reading: LockReading | None,
    *,
    kb_digest: str,
    options: LockOptions,
    dropped: bool = False,
) -> dict[str, list[str]]:
    """Why each selected target (``options.targets``, else every one) must be relocked:
    stale, or damaged in the file; with ``dropped``, also the targets the lock holds that
    the spec no longer has. Empty when all of them can be used as locked. No network."""
    selected = options.targets or tuple(loaded.spec.targets)
    existing = reading.lock if reading is not None else None
    stale = stale_reasons(loaded, knowledge, existing, kb_digest=kb_digest, options=options)
    found = {name: why for name, why in stale.items() if name in selected}
    if dropped:  # damaged or not
        found.update({n: ["target is no longer in the spec"] for n in _dropped(reading, loaded)})
    found.update(damage_reasons(reading, selected))
    return found


def check_lock(
    loaded: LoadedSpec,
    knowledge: Callable[[], KnowledgeBase],
    reading: LockReading | None,
    *,
    kb_digest: str,
    options: LockOptions,
    lock_path: str,
) -> None:
    """``gpuenv lock --check``: the selected targets (all without ``--target``) are locked,
    fresh, and pass every check a reader of the lock applies, and (without ``--target``)
    the lock holds no target the spec dropped; else ``CheckFailed`` (exit 1) says why.
    No network, nothing written."""
    found = out_of_date(
        loaded,
        knowledge,
        reading,
        kb_digest=kb_digest,
        options=options,
        dropped=options.targets is None,
    )
    if found:
        lines = [f"{name}: {'; '.join(why)}" for name, why in sorted(found.items())]
        raise CheckFailed(
            f"{lock_path} is out of date:\n" + "\n".join(lines),
            hint="run 'gpuenv lock'",
            details={"lock": lock_path, "stale": found},
        )


def check_spec_file(
    spec_file: Path,
    knowledge: Callable[[], KnowledgeBase],
    settings: LockSettings,
    *,
    targets: tuple[str, ...] | None,
    kb_digest: str,
    fresh: tuple[str, str] | None,
) -> Path:
    """``gpuenv lock --check`` of the project of ``spec_file`` (``check_lock``; a lock
    that cannot be read is an error here, not something to fix), then, when it is fresh,
    the cache's note of it (``lock._fresh``, named ``fresh`` as the caller found it):
    nothing else is written. The lock's path."""
    from gpuenv.lock import _fresh
    from gpuenv.lock.format import LOCK_FILENAME, load_lock
    from gpuenv.spec import check_target, load_spec

    # The knowledge base loads only when needed: a spec checked before is cached, and
    # `lock --check` plans nothing (but "detect" targets).
    loaded = load_spec(spec_file, kb=knowledge, cache_dir=settings.cache_dir)
    for name in targets or ():
        check_target(name, loaded.spec.targets)
    lock_path = spec_file.parent / LOCK_FILENAME
    reading = load_lock(lock_path, cache_dir=settings.cache_dir, legacy_ok=True)
    options = LockOptions.from_settings(settings, loaded.spec, targets=targets)
    check_lock(
        loaded, knowledge, reading, kb_digest=kb_digest, options=options, lock_path=str(lock_path)
    )
    # Noted only when no byte moved while it was checked, and no plan is this machine's.
    overrides = (settings.torch_index, settings.index_url)
    again = fresh and _fresh.check_name(
        settings.cache_dir, str(spec_file), kb_digest, targets, overrides
    )
    if fresh is not None and not loaded.spec.uses_detect and again == fresh:
        from gpuenv.spec._local import project_files

        _fresh.remember_fresh(*fresh, project_files(loaded))
    return lock_path


def _dropped(reading: LockReading | None, loaded: LoadedSpec) -> list[str]:
    """The targets the lock holds (readable or damaged) that the spec no longer has."""
    held = set(reading.damaged) | set(reading.lock.targets) if reading is not None else set()
    return sorted(held - set(loaded.spec.targets))


def relock_basis(reading: LockReading | None, spec: Spec) -> tuple[Lock | None, tuple[str, ...]]:
    """What relocking starts from: the lock's trusted targets, plus a version 1 lock's
    pins (as preferences only), and the spec's targets that must be relocked because
    their entry is damaged or of an old format (even when ``--target`` names others:
    a written lock never carries a target that fails its checks)."""
    if reading is None:
        return None, ()
    forced = tuple(name for name in spec.targets if name in reading.damaged)
    pins = {name: t for name, t in reading.pins.items() if name in spec.targets}
    return Lock(reading.lock.spec_hash, {**pins, **reading.lock.targets}), forced
