"""A target's hardware as the planner sees it, and the hardware facts that rule it out
before any build is looked at: a driver the GPU cannot run, a Jetson's L4T software."""

from __future__ import annotations

from gpuenv.errors import Alternative, NoCompatiblePlan
from gpuenv.hardware import HardwareFacts
from gpuenv.knowledge import GpuModel, KnowledgeBase
from gpuenv.plan._model import DEFAULT_TORCH_INDEX, TargetHardware
from gpuenv.spec import Target
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion


def gpu_models(target: Target, kb: KnowledgeBase, detected: HardwareFacts | None) -> list[GpuModel]:
    """The known GPU models of a target: the named one, or each detected one."""
    gpu = (target.gpu or "").strip()
    if gpu.lower() in ("none", "mps"):
        return []
    if gpu.lower() == "detect":
        names = sorted({g.name for g in detected.gpus}) if detected else []
        found = [kb.find_gpu(n) for n in names]
        return [m for m in found if m is not None]
    model = kb.find_gpu(gpu) if gpu else None
    return [model] if model else []


def target_platform(target: Target, models: list[GpuModel]) -> str:
    """The declared platform, else the one the GPU exists on, else linux-64."""
    if target.platform:
        return target.platform
    if target.is_mps:
        return "osx-arm64"
    implied = {m.platform for m in models if m.platform}
    return implied.pop() if len(implied) == 1 else "linux-64"


def _detected_gpu(name: str, detected: HardwareFacts) -> tuple[tuple[ComputeCapability, ...], str]:
    ccs = tuple(g.compute_capability for g in detected.gpus if g.compute_capability)
    if not ccs:
        why = "; ".join(detected.notes) or "no NVIDIA GPU found"
        raise NoCompatiblePlan(
            f"target '{name}': gpu = \"detect\", but this machine has no usable GPU ({why})",
            target=name,
            alternatives=[Alternative("plan a CPU build", {f"targets.{name}.gpu": "none"})],
        )
    return ccs, " + ".join(sorted({g.name for g in detected.gpus}))


def _declared_gpu(
    name: str, target: Target, kb: KnowledgeBase
) -> tuple[tuple[ComputeCapability, ...], str]:
    gpu = (target.gpu or "").strip()
    model = kb.find_gpu(gpu) if gpu else None
    declared_cc = target.compute_capability
    cc = ComputeCapability.parse(declared_cc) if declared_cc else (model.cc if model else None)
    if cc is None:  # spec validation normally catches this first
        raise NoCompatiblePlan(f"target '{name}': unknown GPU {gpu!r}", target=name)
    return (cc,), model.name if model else (gpu or f"compute capability {cc}")


def _driver(name: str, target: Target, detected: HardwareFacts | None) -> DriverVersion:
    if target.driver != "detect":
        assert target.driver is not None
        return DriverVersion.parse(target.driver)
    assert detected is not None
    if detected.driver_version is None:
        raise NoCompatiblePlan(
            f"target '{name}': driver = \"detect\", but no NVIDIA driver was found here",
            target=name,
            alternatives=[
                Alternative("declare the driver", {f"targets.{name}.driver": "550.54.15"})
            ],
        )
    return detected.driver_version


def target_hardware(
    name: str, target: Target, kb: KnowledgeBase, detected: HardwareFacts | None
) -> TargetHardware:
    gpu = (target.gpu or "").strip()
    models = gpu_models(target, kb, detected)
    platform, glibc = target_platform(target, models), target.glibc
    if gpu.lower() in ("none", "mps"):
        mps = gpu.lower() == "mps"
        label = "Apple GPU (MPS)" if mps else None
        return TargetHardware(
            True, label, (), None, "declared", platform=platform, glibc=glibc, mps=mps
        )
    wants_detect = gpu.lower() == "detect" or target.driver == "detect"
    if wants_detect and detected is None:
        raise NoCompatiblePlan(
            f"target '{name}' asks to detect this machine's hardware, but no facts were given",
            target=name,
        )
    if gpu.lower() == "detect":
        assert detected is not None
        ccs, gpu_name = _detected_gpu(name, detected)
    else:
        ccs, gpu_name = _declared_gpu(name, target, kb)
    driver = _driver(name, target, detected)
    source = (
        ("measured" if detected and detected.measured else "file") if wants_detect else "declared"
    )
    board = next((m for m in models if kb.jetpacks_of(m)), None)
    jetpacks = kb.jetpacks_of(board) if board is not None else ()
    jetpack = kb.jetpack_running(board, driver) if board is not None else None
    return TargetHardware(
        False,
        gpu_name,
        ccs,
        driver,
        source,
        platform=platform,
        glibc=glibc,
        jetpacks=jetpacks,
        jetpack=jetpack,
    )


def cuda_ceiling(hw: TargetHardware, kb: KnowledgeBase) -> CudaVersion | None:
    """The newest CUDA the target's driver runs: its JetPack's on a Jetson whose driver a
    JetPack release names, else the newest CUDA release whose minimum driver it meets."""
    if hw.jetpack is not None:
        return hw.jetpack.cuda
    if hw.driver is None:
        return None
    return kb.newest_cuda_for_driver(hw.driver, hw.platform)


def driver_range_problem(
    name: str, hw: TargetHardware, kb: KnowledgeBase
) -> NoCompatiblePlan | None:
    """A driver outside the branches that drive the target's GPUs: nothing can run."""
    if hw.cpu or hw.driver is None:
        return None
    for cc in sorted(set(hw.compute_capabilities)):
        drivers = kb.drivers_for(cc)
        if drivers.admits(hw.driver):
            continue
        arch = kb.architecture_of(cc) or f"compute capability {cc}"
        first = drivers.first
        jetpack = next(
            (j for j in hw.jetpacks if j.driver and first and j.driver.key[0] >= first), None
        )
        if first is not None and hw.driver.key[0] < first and jetpack is not None:
            assert jetpack.driver is not None
            wanted, text = (
                str(jetpack.driver),
                f"flash {jetpack.describe()} (driver {jetpack.driver}, CUDA {jetpack.cuda}): "
                "a Jetson's driver comes with its JetPack",
            )
        elif first is not None and hw.driver.key[0] < first:
            wanted, text = (f">={first}", f"install a driver of branch R{first} or newer")
        else:
            wanted = f"<={drivers.last}.999"
            text = f"declare the driver those machines run: {arch} ends with branch R{drivers.last}"
        source = f" (source: {drivers.source})" if drivers.source else ""
        return NoCompatiblePlan(
            f"target '{name}' ({hw.describe()}): driver {hw.driver} cannot drive "
            f"{hw.gpu_name or cc.sm}: {arch} GPUs run {drivers.describe()}{source}",
            target=name,
            alternatives=[
                Alternative(text, {f"targets.{name}.driver": wanted}),
                Alternative("a CPU build", {f"targets.{name}.gpu": "none"}),
            ],
        )
    return None


def l4t_problem(
    name: str, models: list[GpuModel], torch_index: str | None
) -> NoCompatiblePlan | None:
    """A Jetson on L4T: PyTorch's wheels do not run there; NVIDIA's JetPack builds do."""
    jetson = next((m for m in models if m.l4t), None)
    jetpack = torch_index is not None and torch_index.rstrip("/") != DEFAULT_TORCH_INDEX
    if jetson is None or jetpack:  # PyTorch's own index, named, carries no L4T builds
        return None
    return NoCompatiblePlan(
        f"target '{name}': {jetson.name} ({jetson.cc.sm}): {jetson.l4t}",
        target=name,
        alternatives=[
            Alternative(
                "name an index of JetPack torch builds (laid out <base>/<cu tag>/)",
                {"pip.torch-index": "<your JetPack wheel index>"},
            ),
            Alternative(
                "a CPU build (PyTorch's aarch64 CPU wheels)", {f"targets.{name}.gpu": "none"}
            ),
        ],
    )
