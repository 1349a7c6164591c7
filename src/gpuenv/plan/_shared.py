"""One torch for all targets: the newest release every target of the project can run.

A target takes part unless it names its own ``torch`` or ``[stack] same-torch = false``.
Targets that nothing fits at all are left out (their own plan fails and says why); so
are ``detect`` targets when no facts were given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from gpuenv.errors import Alternative, NoCompatiblePlan
from gpuenv.hardware import HardwareFacts
from gpuenv.knowledge import KnowledgeBase, TorchRelease
from gpuenv.plan._hardware import driver_range_problem, gpu_models, l4t_problem, target_hardware
from gpuenv.plan._model import Constraints, TargetHardware
from gpuenv.plan._search import Notes, fit
from gpuenv.spec import Spec


@dataclass(frozen=True)
class Participant:
    """A target taking part in the project's one torch: its hardware and the releases it runs."""

    name: str
    hw: TargetHardware
    fits: tuple[Version, ...]  # matching releases this target can run, newest first


@dataclass(frozen=True)
class SharedTorch:
    """The project's one torch, and what decided it."""

    release: TorchRelease
    participants: Mapping[str, Participant]
    held_back_by: tuple[str, ...]  # targets whose own newest is the shared one

    def newest_of(self, name: str) -> Version:
        return self.participants[name].fits[0]


def participates(spec: Spec, name: str) -> bool:
    return spec.stack.same_torch and spec.targets[name].torch is None


def _participant(
    name: str,
    spec: Spec,
    kb: KnowledgeBase,
    c: Constraints,
    detected: HardwareFacts | None,
    torch_index: str | None,
) -> Participant | None:
    target = spec.targets[name]
    if target.uses_detect and detected is None:
        return None
    try:
        hw = target_hardware(name, target, kb, detected)
    except NoCompatiblePlan:
        return None
    if driver_range_problem(name, hw, kb) or l4t_problem(
        name, gpu_models(target, kb, detected), torch_index
    ):
        return None
    fits = tuple(r.version for r in kb.torch_matching(c.torch) if fit(r.on(hw.platform), hw, c, kb))
    return Participant(name, hw, fits) if fits else None


def shared_torch(
    spec: Spec,
    kb: KnowledgeBase,
    c: Constraints,
    *,
    detected: HardwareFacts | None,
    torch_index: str | None,
) -> SharedTorch | None:
    """The shared release, or None when fewer than two targets take part. Raises
    ``NoCompatiblePlan`` when the targets have no release in common."""
    names = [n for n in spec.targets if participates(spec, n)]
    found = [_participant(n, spec, kb, c, detected, torch_index) for n in names]
    participants = {p.name: p for p in found if p is not None}
    if len(participants) < 2:
        return None
    common = set.intersection(*(set(p.fits) for p in participants.values()))
    if not common:
        raise _no_common_release(participants, c)
    version = max(common)
    release = kb.torch_release(version)
    assert release is not None
    newest = {n: p.fits[0] for n, p in participants.items()}
    held = tuple(sorted(n for n, v in newest.items() if v == version))
    if all(v == version for v in newest.values()):
        held = ()
    return SharedTorch(release, participants, held)


def _no_common_release(participants: Mapping[str, Participant], c: Constraints) -> NoCompatiblePlan:
    spans = [
        f"{n} runs torch {p.fits[-1]}" + (f" to {p.fits[0]}" if len(p.fits) > 1 else "")
        for n, p in sorted(participants.items())
    ]
    names = sorted(participants)
    return NoCompatiblePlan(
        f"no torch {c.torch_text} release fits every target (same-torch): " + "; ".join(spans),
        alternatives=[
            Alternative("let each target have its own torch", {"stack.same-torch": "false"}),
            *(
                Alternative(
                    f"give {n} its own torch", {f"targets.{n}.torch": str(participants[n].fits[0])}
                )
                for n in names
            ),
        ],
    )


def why_held_back(shared: SharedTorch, kb: KnowledgeBase, c: Constraints) -> str:
    """A clause naming the target(s) that held the shared torch back, and why."""
    if not shared.held_back_by:
        return ""
    parts = []
    for name in shared.held_back_by:
        hw = shared.participants[name].hw
        newer = [r for r in kb.torch_matching(c.torch) if r.version > shared.release.version]
        if not newer:
            continue
        notes = Notes()
        nearest = newer[-1]
        fit(nearest.on(hw.platform), hw, c, kb, notes)
        detail = "; ".join(notes.build_notes.get(str(nearest.version), [])) or "; ".join(
            notes.release_notes
        )
        parts.append(f"{name} ({hw.describe()}) cannot run torch {nearest.version}: {detail}")
    return " (held back by " + " | ".join(parts) + ")" if parts else ""


def shared_reason(shared: SharedTorch, name: str, kb: KnowledgeBase, c: Constraints) -> str:
    version = shared.release.version
    others = ", ".join(sorted(n for n in shared.participants if n != name))
    own = shared.newest_of(name)
    head = (
        f"torch {version}: the project's one torch (same-torch), the newest release matching "
        f"{c.torch_text!r} that every target ({name}, {others}) can run"
    )
    if own > version:
        head += f"; this target alone could run {own}"
    return head + why_held_back(shared, kb, c)
