"""The verification gate of ``gpuenv shell`` and ``gpuenv run``: a prefix is usable on
this machine only with a passing record for its lock and this machine's fingerprint.

This runs on every ``gpuenv run``. The fingerprint is read from ``/proc`` first (no
NVML); only when that cannot answer (WSL2, some containers) and no record matched is
NVML asked, as ``gpuenv verify`` does when it writes a record.
"""

from __future__ import annotations

from gpuenv.errors import NotVerified
from gpuenv.verify._recordcheck import has_passing_record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuenv.runtime import Selected


def machine_fingerprint(*, nvml_fallback: bool = True) -> dict[str, object]:
    """This machine as verification records name it: driver version and GPU UUIDs."""
    from gpuenv.hardware.fingerprint import fingerprint

    found = fingerprint(nvml_fallback=nvml_fallback)
    return {"driver": found.driver_version, "gpus": list(found.gpu_uuids)}


def _describe(fingerprint: dict[str, object]) -> str:
    gpus = fingerprint.get("gpus") or []
    if not fingerprint.get("driver"):
        return "no NVIDIA driver"
    count = len(gpus) if isinstance(gpus, list) else 0
    return f"driver {fingerprint['driver']}, {count} GPU{'s' if count != 1 else ''}"


def check_gate(selected: Selected, *, unverified: bool) -> list[str]:
    """Nothing when this machine holds a passing record; else ``NotVerified`` (exit 4),
    or with ``unverified`` a warning to print (and nothing is recorded)."""
    lock_hash = selected.marker.lock_hash
    cheap = machine_fingerprint(nvml_fallback=False)
    if has_passing_record(selected.prefix, lock_hash, cheap):
        return []
    here = cheap
    if cheap["driver"] is None:
        here = machine_fingerprint(nvml_fallback=True)
        if here != cheap and has_passing_record(selected.prefix, lock_hash, here):
            return []
    message = (
        f"target {selected.target} has not passed verification on this machine ({_describe(here)})"
    )
    if unverified:
        return [f"{message}; running anyway (--unverified)"]
    raise NotVerified(message, hint=_verify_hint(selected.target))


def _verify_hint(target: str) -> str:
    """The command that verifies this machine: on a Slurm node, the one for every node."""
    import os

    if os.environ.get("SLURM_JOB_ID"):
        return f"run 'gpuenv verify --target {target} --slurm' (on the login node; or --unverified)"
    return f"run 'gpuenv verify --target {target}' (or pass --unverified)"


def passing_machines(prefix: object) -> int:
    """How many machines verified ``prefix`` for the lock it holds (for ``gpuenv list``)."""
    import os

    from gpuenv._marker import read_marker
    from gpuenv.verify._recordcheck import passing_machines as count

    path = os.fspath(prefix)  # type: ignore[call-overload]
    marker = read_marker(path)
    return count(path, marker.lock_hash) if marker else 0
