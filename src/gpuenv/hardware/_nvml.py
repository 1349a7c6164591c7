"""NVML through pynvml: the primary detection source.

pynvml is imported inside the functions (it costs about 40 ms), so only detection and
the fingerprint's fallback pay for it. pynvml loads ``libnvidia-ml.so.1`` with the
dynamic loader's search, which is also how the tests put a stand-in library in front.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from gpuenv.errors import HardwareDetectionError
from gpuenv.hardware._identity import Fingerprint
from gpuenv.hardware._reading import Reading
from gpuenv.hardware.model import SOURCE_NVML, GpuFacts, NoGpuReason
from gpuenv.hardware.parse import (
    plausible_compute_capability,
    plausible_cuda_driver_version,
    plausible_driver_version,
    plausible_memory_bytes,
    plausible_uuid,
)

# NVML return codes (nvml.h) that this module treats specially.
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_ARGUMENT_VERSION_MISMATCH = 25
# A field NVML cannot give for this GPU: left unknown, not an error.
_FIELD_UNAVAILABLE = frozenset({_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND})
_NVML_MEMORY_V2 = 0x02000028


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _init(pynvml: Any) -> Reading | None:
    """Start NVML; a ``Reading`` saying why not when it cannot start."""
    try:
        # NO_GPUS: a driver without devices is an answer ("no devices"), not an error.
        pynvml.nvmlInitWithFlags(pynvml.NVML_INIT_FLAG_NO_GPUS)
    except pynvml.NVMLError as exc:
        if exc.value == _LIBRARY_NOT_FOUND:
            note = "NVML: libnvidia-ml.so.1 not found (no NVIDIA user-space driver)"
            return Reading(SOURCE_NVML, no_gpu_reason=NoGpuReason.NO_DRIVER, notes=(note,))
        if exc.value == _DRIVER_NOT_LOADED:
            note = "NVML: the NVIDIA kernel driver is not loaded"
            return Reading(SOURCE_NVML, no_gpu_reason=NoGpuReason.DRIVER_NOT_LOADED, notes=(note,))
        return Reading(SOURCE_NVML, notes=(f"NVML failed to start: {exc}",))
    return None


def _optional(pynvml: Any, call: Any, *args: Any) -> Any:
    """``call(*args)``, or None when NVML cannot give that field for this GPU."""
    try:
        return call(*args)
    except pynvml.NVMLError as exc:
        if exc.value in _FIELD_UNAVAILABLE:
            return None
        raise


def _memory_total(pynvml: Any, handle: Any) -> int | None:
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=_NVML_MEMORY_V2)
    except pynvml.NVMLError as exc:
        if exc.value not in (_FUNCTION_NOT_FOUND, _ARGUMENT_VERSION_MISMATCH, _NOT_SUPPORTED):
            raise
        info = _optional(pynvml, pynvml.nvmlDeviceGetMemoryInfo, handle)
    return plausible_memory_bytes(int(info.total)) if info is not None else None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _gpu(pynvml: Any, index: int, notes: list[str]) -> GpuFacts:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(pynvml.nvmlDeviceGetName(handle)).strip() or "unknown NVIDIA GPU"
    raw_uuid = _optional(pynvml, pynvml.nvmlDeviceGetUUID, handle)
    uuid = plausible_uuid(_text(raw_uuid)) if raw_uuid is not None else None
    cc_pair = _optional(pynvml, pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    cc = plausible_compute_capability(*cc_pair) if cc_pair is not None else None
    if cc_pair is not None and cc is None:
        notes.append(f"NVML: GPU {index} reported compute capability {cc_pair}; ignored")
    return GpuFacts(index, name, uuid, cc, _memory_total(pynvml, handle))


def _cuda_version(pynvml: Any) -> int | None:
    try:
        return int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
    except pynvml.NVMLError as exc:
        if exc.value != _FUNCTION_NOT_FOUND:
            raise
    return int(pynvml.nvmlSystemGetCudaDriverVersion())


def _read_started(pynvml: Any) -> Reading:
    notes: list[str] = []
    raw_driver = _text(pynvml.nvmlSystemGetDriverVersion())
    driver = plausible_driver_version(raw_driver)
    if driver is None:
        notes.append(f"NVML: driver version {raw_driver!r} is not plausible; ignored")
    raw_cuda = _cuda_version(pynvml)
    cuda = plausible_cuda_driver_version(raw_cuda)
    if cuda is None:
        notes.append(f"NVML: CUDA driver version {raw_cuda} is not plausible; ignored")
    gpus = tuple(_gpu(pynvml, i, notes) for i in range(int(pynvml.nvmlDeviceGetCount())))
    reason = None
    if not gpus:
        reason = NoGpuReason.NO_DEVICES
        notes.append("NVML: the driver is running but sees no GPU")
    return Reading(
        SOURCE_NVML,
        driver_version=driver,
        cuda_driver_version=cuda,
        gpus=gpus,
        no_gpu_reason=reason,
        notes=tuple(notes),
        library=loaded_library("libnvidia-ml"),
    )


def read_nvml() -> Reading:
    """Everything NVML knows. "Not found" (no pynvml, no library, driver not loaded)
    and a failed start are readings that say why; an error while reading a started
    NVML (a GPU fallen off the bus, say) raises ``HardwareDetectionError``."""
    pynvml = _import_pynvml()
    if pynvml is None:
        note = "NVML: the pynvml module (nvidia-ml-py) is not installed"
        return Reading(SOURCE_NVML, notes=(note,))
    failed = _init(pynvml)
    if failed is not None:
        return failed
    try:
        return _read_started(pynvml)
    except pynvml.NVMLError as exc:
        raise HardwareDetectionError(
            f"NVML failed while reading the GPUs: {exc}",
            hint="'nvidia-smi' and the kernel log (dmesg) usually say more; "
            "a lost GPU needs a reset or a reboot",
        ) from exc
    finally:
        with suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def nvml_fingerprint() -> Fingerprint | None:
    """Driver version and GPU UUIDs from NVML, or None when NVML cannot answer."""
    pynvml = _import_pynvml()
    if pynvml is None or _init(pynvml) is not None:
        return None
    try:
        driver = plausible_driver_version(_text(pynvml.nvmlSystemGetDriverVersion()))
        handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(pynvml.nvmlDeviceGetCount()))
        ]
        uuids = [plausible_uuid(_text(pynvml.nvmlDeviceGetUUID(h))) for h in handles]
    except pynvml.NVMLError:
        return None
    finally:
        with suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    if driver is None or None in uuids:
        return None
    return Fingerprint.of(str(driver), (u for u in uuids if u), source=SOURCE_NVML)


def loaded_library(stem: str, maps_path: str = "/proc/self/maps") -> str | None:
    """The path of a shared library this process has loaded, from ``/proc/self/maps``."""
    try:
        with open(maps_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if path.startswith("/") and path.rsplit("/", 1)[-1].startswith(stem):
                    return path
    except OSError:
        return None
    return None
