"""Checks of a structurally valid spec against the knowledge base.

Known GPU names (with suggestions), known CUDA releases, and contradictions between
keys that no single field's type can express (a CPU target with a driver, a GPU name
and a compute capability that disagree, torch in [pip], pytorch from conda).
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.requirements import Requirement

from gpuenv._tomlpos import Path as KeyPath
from gpuenv._tomlpos import line_of
from gpuenv.errors import SpecProblem
from gpuenv.knowledge import KnowledgeBase
from gpuenv.names import TRIO, normalize_name
from gpuenv.spec import CONDA_TORCH_NAMES, TORCH_FAMILY, Spec, Target
from gpuenv.spec._render import render_path
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion


class _Findings:
    """Problems found so far, each as (key path, message, hint)."""

    def __init__(self) -> None:
        self.items: list[tuple[KeyPath, str, str | None]] = []

    def add(self, path: KeyPath, message: str, hint: str | None = None) -> None:
        self.items.append((path, message, hint))


def _check_cpu_target(here: KeyPath, target: Target, found: _Findings) -> None:
    for key, value in (
        ("driver", target.driver),
        ("compute-capability", target.compute_capability),
    ):
        if value is not None:
            found.add(
                (*here, key),
                f'gpu = "{(target.gpu or "none").strip().lower()}" plans a CPU build, but {key} '
                "is set",
                f"remove {key}, or name the GPU",
            )


def _check_named_gpu(here: KeyPath, target: Target, kb: KnowledgeBase, found: _Findings) -> None:
    gpu = (target.gpu or "").strip()
    model = kb.find_gpu(gpu)
    if model is None and target.compute_capability is None:
        close = kb.suggest_gpus(gpu)
        found.add(
            (*here, "gpu"),
            f'"{gpu}" is not a GPU gpuenv knows; give compute-capability = "X.Y" too',
            f"did you mean {' or '.join(repr(c) for c in close)}?" if close else None,
        )
    elif model is not None and target.compute_capability is not None:
        declared = ComputeCapability.parse(target.compute_capability)
        if declared != model.cc:
            found.add(
                (*here, "compute-capability"),
                f'{declared} contradicts gpu "{gpu}", which is {model.cc} ({model.name})',
                "remove one of the two",
            )


def _check_platform_and_driver(
    here: KeyPath, target: Target, kb: KnowledgeBase, found: _Findings
) -> None:
    """A GPU that exists only on one platform, and a driver branch it cannot run."""
    model = kb.find_gpu(target.gpu or "") if target.gpu else None
    if model is not None and model.platform and target.platform not in (None, model.platform):
        found.add(
            (*here, "platform"),
            f'{model.name} machines are {model.platform}, not "{target.platform}"',
            "remove platform: it follows from the GPU",
        )
    cc = (
        ComputeCapability.parse(target.compute_capability)
        if target.compute_capability
        else (model.cc if model else None)
    )
    if cc is None or target.driver in (None, "detect"):
        return
    assert target.driver is not None
    driver = DriverVersion.parse(target.driver)
    drivers = kb.drivers_for(cc)
    if not drivers.admits(driver):
        what = model.name if model else f"compute capability {cc}"
        arch = kb.architecture_of(cc) or "its architecture"
        found.add(
            (*here, "driver"),
            f"driver {driver} cannot drive a {what}: {arch} GPUs run {drivers.describe()}",
            "declare the driver those machines really have"
            + (f" (source: {drivers.source})" if drivers.source else ""),
        )


def _check_foreign_os(here: KeyPath, target: Target, gpu: str, found: _Findings) -> bool:
    """macOS targets are CPU or MPS; MPS exists on macOS only. True: checked fully."""
    if gpu == "mps" and target.platform not in (None, "osx-arm64"):
        found.add(
            (*here, "gpu"),
            f'gpu = "mps" is a Mac\'s Apple GPU, but platform is "{target.platform}"',
            'use platform = "osx-arm64" (or remove it)',
        )
        return True
    if target.platform in ("osx-arm64", "win-64") and "detect" in (gpu, target.driver):
        found.add(
            (*here, "gpu" if gpu == "detect" else "driver"),
            f'"detect" reads this machine, but a {target.platform} target describes a Mac\'s '
            "or a Windows machine's hardware",
            "name the GPU and the driver of those machines",
        )
        return True
    if target.platform == "osx-arm64" and gpu not in ("none", "mps"):
        found.add(
            (*here, "gpu"),
            'an osx-arm64 target has no NVIDIA GPU: gpu = "none" (CPU) or "mps" (Apple GPU)',
            "PyTorch's macOS wheels run on the CPU and through MPS",
        )
        return True
    return False


def _check_target(name: str, target: Target, kb: KnowledgeBase, found: _Findings) -> None:
    here: KeyPath = ("targets", name)
    gpu = (target.gpu or "").strip().lower()
    if _check_foreign_os(here, target, gpu, found):
        return
    if gpu in ("none", "mps"):
        _check_cpu_target(here, target, found)
        return
    if target.build is not None:
        found.add(
            (*here, "build"),
            f'build = "{target.build}" is for CPU targets (gpu = "none")',
            "a GPU target takes PyPI's build when its CUDA is PyPI's: 'gpuenv plan' says "
            "which index each target needs",
        )
    if not gpu and target.compute_capability is None:
        found.add(
            here,
            'a GPU target needs gpu (a name, or "detect") or compute-capability',
            'use gpu = "none" for a CPU build',
        )
    elif gpu == "detect" and target.compute_capability is not None:
        found.add(
            (*here, "compute-capability"),
            'gpu = "detect" reads the compute capability from this machine; do not also set it',
        )
    elif gpu and gpu != "detect":
        _check_named_gpu(here, target, kb, found)
    if target.driver is None:
        found.add(
            (*here, "driver"),
            'a GPU target needs the driver of its machines (like "550.54.15") or "detect"',
        )
    elif gpu != "detect" and (gpu or target.compute_capability):
        _check_platform_and_driver(here, target, kb, found)


def _check_stack(spec: Spec, kb: KnowledgeBase, found: _Findings) -> None:
    stack = spec.stack
    if stack.cuda != "auto" and kb.cuda(CudaVersion.parse(stack.cuda)) is None:
        known = ", ".join(str(c.version) for c in kb.cuda_releases)
        found.add(
            ("stack", "cuda"), f'"{stack.cuda}" is not a known CUDA release', f"known: {known}"
        )
    toolkit = stack.toolkit
    pinned_toolkit = toolkit is not None and toolkit != "auto" and not toolkit.startswith("system:")
    if pinned_toolkit and stack.cuda != "auto":
        assert toolkit is not None
        if CudaVersion.parse(toolkit) != CudaVersion.parse(stack.cuda):
            found.add(
                ("stack", "toolkit"),
                f'toolkit "{toolkit}" differs from cuda "{stack.cuda}": '
                "extensions built with it would not match torch",
                'use toolkit = "auto"',
            )


def _pip_lists(spec: Spec) -> list[tuple[tuple[str | int, ...], tuple[str, ...]]]:
    """Every list of pip requirements in the spec, with its key."""
    lists: list[tuple[tuple[str | int, ...], tuple[str, ...]]] = [
        (("pip", "dependencies"), spec.pip.dependencies)
    ]
    lists += [(("pip", "groups", name), reqs) for name, reqs in spec.pip.groups.items()]
    lists += [
        (("targets", name, "pip", "dependencies"), t.dependencies)
        for name, t in spec.targets.items()
    ]
    return lists


def _check_packages(spec: Spec, found: _Findings) -> None:
    for key, lines in _pip_lists(spec):
        for index, text in enumerate(lines):
            name = normalize_name(Requirement(text).name)
            if name in TORCH_FAMILY:
                in_stack = name in TRIO
                found.add(
                    (*key, index),
                    f'"{text}": {name} is chosen by [stack] to match each target\'s CUDA build',
                    f"set {name} in [stack] instead" if in_stack else "remove it",
                )
    for name in spec.conda.dependency_names() if spec.conda else []:
        if name.lower() in CONDA_TORCH_NAMES:
            found.add(
                ("conda", "dependencies", name),
                f"{name} from conda would mix with the pip torch of [stack] "
                "(two copies, load order decides)",
                "remove it; [stack] installs the torch family",
            )


def check_against_knowledge(
    spec: Spec, kb: KnowledgeBase, file: str, lines: Mapping[KeyPath, int]
) -> list[SpecProblem]:
    found = _Findings()
    _check_stack(spec, kb, found)
    _check_packages(spec, found)
    for name, target in spec.targets.items():
        _check_target(name, target, kb, found)
    problems = [
        SpecProblem(file, line_of(dict(lines), path), render_path(path), message, hint)
        for path, message, hint in found.items
    ]
    return sorted(problems, key=lambda p: (p.line or 0, p.path))
