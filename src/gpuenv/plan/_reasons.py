"""Explaining a choice: one sentence per decision, and the unverified facts it rests on.

A fact from an entry the data marks unverified ends in "(unverified)"; one from the
user's facts file ends in "(from your facts file PATH)".
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuenv.knowledge import DriverCompat, GpuModel, KnowledgeBase
from gpuenv.plan._model import Constraints, TargetHardware, UnverifiedFact
from gpuenv.plan._search import Found, Notes, official_search, paired_companion, spec_text


@dataclass(frozen=True)
class Choice:
    """One target's choice, as its reasons explain it: the release, build and Python found,
    the target's hardware and GPU models, the index, and why this torch release."""

    name: str
    found: Found
    hw: TargetHardware
    index_url: str
    models: tuple[GpuModel, ...]
    torch_reason: str  # why this release (newest that fits, or the shared one)
    named_index: bool = False  # [pip] torch-index or GPUENV_TORCH_INDEX names the index


def _python_reason(choice: Choice, c: Constraints) -> str:
    release = choice.found.release
    supports = spec_text(release.python_of(choice.found.build))
    if choice.found.python in release.seen_pythons:
        return (
            f"python {choice.found.python}: as asked; the torch index lists its wheels of "
            f"torch {release.version} (seen on the index, not in the knowledge base)"
        )
    if not release.on_pypi(choice.found.python):
        return (
            f"python {choice.found.python}: as asked; experimental for torch {release.version} "
            "(RELEASE.md), its wheels are on the PyTorch index only" + release.provenance.label()
        )
    if choice.found.python == c.python:
        return f"python {c.python}: as asked (torch {release.version} supports {supports})"
    return (
        f"python {choice.found.python}: newest in {c.python!r} that torch {release.version} "
        "supports"
    )


def _gpu_reasons(choice: Choice, c: Constraints, kb: KnowledgeBase, notes: Notes) -> list[str]:
    hw, build = choice.hw, choice.found.build
    assert hw.driver is not None and build.cuda is not None
    jetpack = hw.jetpack
    if jetpack is not None:
        reasons = [
            f"driver {hw.driver} is the driver of {jetpack.describe()} (Jetson drivers are "
            f"numbered apart from desktop ones): it runs CUDA {jetpack.cuda}"
            + (
                " and older (strict)"
                if c.mode is DriverCompat.STRICT
                else f" and, with minor-version compatibility, any {jetpack.cuda.major}.x"
            )
            + jetpack.provenance.label()
        ]
    elif c.mode is DriverCompat.STRICT:
        ceiling = kb.newest_cuda_for_driver(hw.driver, hw.platform)
        reasons = [
            f"driver {hw.driver} runs CUDA builds up to {ceiling} "
            "(strict: each CUDA release's minimum driver)"
        ]
    else:
        reasons = [
            f"driver {hw.driver}: CUDA minor-version compatibility "
            '(opted in with driver-compat = "minor")'
        ]
    for cc in sorted(set(hw.compute_capabilities)):
        drivers = kb.drivers_for(cc)
        arch = kb.architecture(cc)
        if arch is not None and (drivers.first or drivers.last):
            reasons.append(
                f"{cc.sm} ({arch.name}) runs {drivers.describe()}: driver {hw.driver} is one"
                + arch.provenance.label()
            )
    own = f"{build.tag}:"
    notes_here = notes.build_notes.get(str(choice.found.release.version), [])
    reasons.extend(note for note in notes_here if not note.startswith(own))
    ccs = sorted(set(hw.compute_capabilities))
    how = "; ".join(cov.how(cc) for cc in ccs if (cov := build.covering(cc)) is not None)
    why = "as asked" if c.cuda is not None else "newest CUDA that fits"
    floor = kb.driver_floor(build.cuda, c.mode, hw.platform)
    runs = (
        f"{jetpack.describe()} runs CUDA {build.cuda} builds ({c.mode.value})"
        if jetpack is not None
        else f"driver {hw.driver} >= {floor}"
    )
    reasons.append(f"{build.tag} chosen ({why}): {runs}; {how}" + build.provenance.label())
    return reasons


def _companions(choice: Choice, c: Constraints) -> str | None:
    release = choice.found.release
    parts = []
    for package, version, wanted in (
        ("torchvision", paired_companion(release, "torchvision", c.torchvision), c.torchvision),
        ("torchaudio", paired_companion(release, "torchaudio", c.torchaudio), c.torchaudio),
    ):
        if version is None or wanted is False:
            continue
        native = version.major == 0 or version.release[:2] == release.version.release[:2]
        if package == "torchvision":  # 1.x: minor + 1 (1.7 -> 0.8); 2.x: minor + 15
            shift = 1 if release.version.major == 1 else 15
            native = version.release[:2] == (0, release.version.minor + shift)
        parts.append(
            f"{package} {version}"
            + (
                ""
                if native
                else f" (stable ABI: none was released with torch {release.version}; "
                "this one installs beside it)"
            )
        )
    if not parts:
        return None
    return f"{', '.join(parts)}: paired with torch {release.version}" + release.provenance.label()


def _package_reasons(choice: Choice, c: Constraints) -> list[str]:
    release, build = choice.found.release, choice.found.build
    reasons = [r for r in (_companions(choice, c),) if r]
    if choice.hw.cpu and build.cuda is not None:
        reasons.append(
            f"the {build.tag} build runs on a CPU, but brings the CUDA libraries (nvidia-* "
            "wheels): several GB more to download and store than the CPU build, which only the "
            "PyTorch index serves"
        )
    if build.cudnn or build.nccl:
        # what the data records, no more: "NCCL -" (torch 1.13.1) read as a value
        brought = " and ".join(
            f"{name} {version}"
            for name, version in (("cuDNN", build.cudnn), ("NCCL", build.nccl))
            if version
        )
        reasons.append(f"{build.tag} wheels bring {brought}" + build.provenance.label())
    if not release.on_pypi(choice.found.python):
        reasons.append(
            f"index {choice.index_url}: PyPI has no Python {choice.found.python} wheels of "
            f"torch {release.version} (they are on the PyTorch index only)"
        )
    elif release.pypi_default == build.tag and choice.named_index:
        reasons.append(
            f"index {choice.index_url}: PyPI's plain torch {release.version} "
            f"({release.platform}) is this same build, but [pip] torch-index or "
            "GPUENV_TORCH_INDEX names the torch index, so torch comes from there"
        )
    elif release.pypi_default == build.tag:
        reasons.append(
            f"PyPI's plain torch {release.version} ({release.platform}) is this same build: "
            f"it comes from the default index alone (the torch index {choice.index_url} only "
            "when [pip] torch-index or GPUENV_TORCH_INDEX names one)"
        )
    else:
        default = release.pypi_default or "unknown"
        reasons.append(
            f"index {choice.index_url}: PyPI's plain torch {release.version} "
            f"({release.platform}) is {default}, not {build.tag}"
        )
    return reasons


def compress(release_notes: list[str]) -> list[str]:
    """Runs of releases skipped for the same reason as one line:
    "torch 2.6.0 to 2.15.0 skipped (14 releases): no build fits"."""
    out: list[str] = []
    run: list[tuple[str, str]] = []

    def flush() -> None:
        if len(run) > 2:
            out.append(
                f"torch {run[-1][0]} to {run[0][0]} skipped ({len(run)} releases): {run[0][1]}"
            )
        else:
            out.extend(f"torch {v} skipped: {why}" for v, why in run)
        run.clear()

    for note in release_notes:
        head, sep, why = note.partition(" skipped: ")
        version = head.removeprefix("torch ")
        if not sep:
            flush()
            out.append(note)
        elif run and run[-1][1] != why:
            flush()
            run.append((version, why))
        else:
            run.append((version, why))
    flush()
    return out


def _off_matrix_reason(choice: Choice, c: Constraints, kb: KnowledgeBase) -> str:
    """Why a build outside its release's official CUDA matrix was taken: newest release
    first across every build, and what the official matrices alone would have given."""
    release, build = choice.found.release, choice.found.build
    older = [r for r in kb.torch_matching(c.torch) if r.version < release.version]
    official = official_search(older, choice.hw, c, kb)
    head = (
        f"{build.tag} is outside torch {release.version}'s official CUDA matrix (the PyTorch "
        "index serves it); newest release first across every build"
    )
    if official is None:
        return head + f": no older torch matching {c.torch_text!r} has an official build that fits"
    return head + (
        f": preferred over torch {official.release.version}'s official "
        f"{official.build.tag}, the newest official build that fits"
    )


def _cpu_reason(choice: Choice) -> str:
    hw, build = choice.hw, choice.found.build
    if hw.platform == "osx-arm64":
        macos = f"; its wheels need macOS {build.macos} or newer" if build.macos else ""
        use = "the Apple GPU through MPS" if hw.mps else "the CPU (MPS is there for later)"
        return f"cpu build: PyTorch's macOS arm64 wheel runs on {use}{macos}" + (
            build.provenance.label()
        )
    return "cpu build: the target has no GPU"


def reasons(choice: Choice, c: Constraints, kb: KnowledgeBase, notes: Notes) -> list[str]:
    gpu_labels = "".join(m.provenance.label() for m in choice.models)
    out = [f"target {choice.name}: {choice.hw.describe()} ({choice.hw.source}){gpu_labels}"]
    implied = [m for m in choice.models if m.platform]
    if implied:
        out.append(
            f"platform {choice.hw.platform}: {implied[0].name} systems are Arm (Grace/Jetson)"
        )
    out.extend(compress(notes.release_notes))
    out.append(choice.torch_reason + choice.found.release.provenance.label())
    if choice.found.build.off_matrix:
        out.append(_off_matrix_reason(choice, c, kb))
    out.append(_python_reason(choice, c))
    if choice.hw.cpu and choice.found.build.cuda is not None:
        out.append(
            f'{choice.found.build.tag} build: the target has no GPU, and build = "pypi" asks '
            "for PyPI's default build"
        )
    elif choice.hw.cpu:
        out.append(_cpu_reason(choice))
    else:
        out.extend(_gpu_reasons(choice, c, kb, notes))
    out.extend(_package_reasons(choice, c))
    if c.exclude_newer is not None:
        out.append(
            f"pip packages as of {c.exclude_newer} ([pip] exclude-newer): releases uploaded "
            "later are ignored, except the torch family's, chosen above, and exact pins"
        )
    days: dict[str, list[str]] = {}
    for name, day in c.exclude_newer_packages:
        days.setdefault(day, []).append(name)
    for day, names in sorted(days.items()):
        out.append(f"{', '.join(names)} as of {day} ([pip] exclude-newer-package)")
    return out


def unverified(choice: Choice, kb: KnowledgeBase) -> tuple[UnverifiedFact, ...]:
    release, build = choice.found.release, choice.found.build
    archs = {a.name: a for cc in choice.hw.compute_capabilities if (a := kb.architecture(cc))}
    kb_facts = [
        *(UnverifiedFact.of(f"{a.name} driver branches", a.provenance) for a in archs.values()),
        UnverifiedFact.of(f"torch {release.version}", release.provenance),
        UnverifiedFact.of(
            f"torch {release.version} {build.tag} build ({build.platform})", build.provenance
        ),
        *(UnverifiedFact.of(f"GPU {m.name}", m.provenance) for m in choice.models),
    ]
    if choice.hw.jetpack is not None:
        jetpack = choice.hw.jetpack
        kb_facts.append(UnverifiedFact.of(f"{jetpack.describe()}", jetpack.provenance))
    return tuple(f for f in kb_facts if f is not None)
