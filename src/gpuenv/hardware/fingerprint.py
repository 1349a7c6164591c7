"""A cheap identity for this machine's GPUs: driver version plus GPU UUIDs.

``gpuenv shell`` and ``gpuenv run`` compare it with the one a verification record was
made under, on every start, so it must cost milliseconds. This module imports only
``os``, ``re`` (through ``gpuenv.hardware.proctext``) and, for the fallback only, NVML's
reader; not pynvml, ``dataclasses`` or ``typing`` (tens of milliseconds together). It
reads, in this order:

1. ``/proc/driver/nvidia/version`` (the kernel module's version) and
   ``/proc/driver/nvidia/gpus/*/information`` (one file per GPU, with its UUID). Present
   on bare metal and in containers run with the NVIDIA container toolkit, which shows a
   container only its own GPUs there. No NVML initialisation, no process.
2. It falls back to NVML (importing pynvml, about 40 ms, plus NVML start-up) when the
   ``/proc`` files cannot answer: ``/proc/driver/nvidia`` is absent (WSL2, where the
   driver lives on the Windows host; some sandboxes), or a GPU's UUID shows as question
   marks (the driver prints those for a GPU it has not initialised yet, e.g. with
   persistence mode off and no process using it). ``fingerprint(nvml_fallback=False)``
   skips this step, and so does a machine with no NVIDIA user-space driver at all:
   when ``libnvidia-ml.so.1`` is nowhere the dynamic loader would look
   (``nvml_library_present``), NVML could only answer "library not found".
3. When neither answers, the fingerprint is empty (``driver_version`` is None): no
   NVIDIA driver is usable here, and no GPU-bound record can match it.
"""

from __future__ import annotations

import os

from gpuenv.hardware._identity import Fingerprint
from gpuenv.hardware.proctext import plausible_uuid, proc_driver_version, proc_fields

TYPE_CHECKING = False  # keeps typing off the `gpuenv run` path
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Fingerprint", "fingerprint", "read_proc_fingerprint"]


def _read(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


def read_proc_fingerprint(proc_root: str = "/proc") -> Fingerprint | None:
    """The fingerprint from ``/proc/driver/nvidia``, or ``None`` when it cannot answer
    (absent, unreadable, unparseable, or a GPU's UUID not known yet)."""
    base = os.path.join(proc_root, "driver", "nvidia")
    try:
        driver = proc_driver_version(_read(os.path.join(base, "version")))
        if driver is None:
            return None
        gpus_dir = os.path.join(base, "gpus")
        uuids: list[str] = []
        for bus in sorted(os.listdir(gpus_dir)):
            fields = proc_fields(_read(os.path.join(gpus_dir, bus, "information")))
            uuid = plausible_uuid(fields.get("gpu uuid"))
            if uuid is None:
                return None
            uuids.append(uuid)
    except OSError:
        return None
    return Fingerprint.of(driver, uuids, source="proc")


NVML_LIBRARY = "libnvidia-ml.so.1"
# Where the dynamic loader looks after LD_LIBRARY_PATH and its cache (its trusted
# directories), and where WSL2 puts the Windows driver's libraries.
_LIBRARY_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/lib/wsl/lib")
_LD_CACHE = "/etc/ld.so.cache"


def nvml_library_present(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``dlopen("libnvidia-ml.so.1")`` (what pynvml does) could find the library:
    in ``LD_LIBRARY_PATH``, in the loader's cache, or in its trusted directories. A few
    ``stat`` calls and one read of the cache file, instead of importing pynvml."""
    env = os.environ if environ is None else environ
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    if any(os.path.exists(os.path.join(d, NVML_LIBRARY)) for d in (*dirs, *_LIBRARY_DIRS)):
        return True
    try:
        with open(_LD_CACHE, "rb") as cache:
            return NVML_LIBRARY.encode() in cache.read(64 << 20)
    except OSError:
        return True  # no cache to read: let NVML's own search answer


def fingerprint(*, proc_root: str = "/proc", nvml_fallback: bool = True) -> Fingerprint:
    """This machine's fingerprint: ``/proc`` first, then NVML (see the module doc)."""
    found = read_proc_fingerprint(proc_root)
    if found is not None or not nvml_fallback or not nvml_library_present():
        return found or Fingerprint(None, (), "none")
    from gpuenv.hardware._nvml import nvml_fingerprint

    return nvml_fingerprint() or Fingerprint(None, (), "none")
