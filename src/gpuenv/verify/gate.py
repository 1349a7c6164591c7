"""The one gate of ``gpuenv run``, ``shell`` and ``activate``: a prefix is usable only
when it is the build of the project's current lock, and it holds a passing record
for that lock and this machine's fingerprint.

This runs on every ``gpuenv run``, so the common path is a handful of reads: the
lock's bytes (hashed, never parsed: the project's lock state says which content
hash each target has in the lock with those bytes), the completion marker, and one
record. The fingerprint is read from ``/proc`` first (no NVML); only when that
cannot answer (WSL2, some containers) and no record matched is NVML asked, as
``gpuenv verify`` does when it writes a record. A refusal says why, by case.
"""

from __future__ import annotations

import os

from gpuenv import _fsread, _marker, _sha256
from gpuenv.errors import FileFormatError, NotInstalled, NotVerified
from gpuenv.verify._recordcheck import (
    all_records,
    has_passing_record,
    is_passing,
    load_record,
    record_file,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuenv.runtime import Selected

LOCK_FILENAME = "gpuenv.lock"  # gpuenv.lock.format.LOCK_FILENAME, without importing it


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


# --- the prefix is the current lock's ---------------------------------------------------------


def _parsed_hash(path: str, data: bytes, digest: str, project: str, target: str) -> str | None:
    """The slow path: parse and check the lock (once per change of its bytes), and
    remember what it holds in the project's lock state."""
    from gpuenv.lock.format import parse_lock_text

    reading = parse_lock_text(_fsread.decode_utf8(data, path), file=path)
    reading.require([target])  # this target's entry edited or damaged: exit 2, say so
    held = {name: t.content_hash for name, t in reading.lock.targets.items()}
    _marker.write_lock_state(project, digest=digest, targets=held)
    return held.get(target)


def check_lock(selected: Selected) -> list[str]:
    """Nothing when the prefix was built from the project's current lock; a warning
    when the user rolled the target back to it on purpose; else ``NotInstalled``."""
    project, target = selected.project, selected.target
    path = os.path.join(project, LOCK_FILENAME)
    try:
        data = _fsread.read_bytes(path, limit=_fsread.LOCK_LIMIT, what="gpuenv.lock")
    except FileNotFoundError:
        raise NotInstalled(
            f"target {target}: {path} is missing, so its environment cannot be checked against it",
            hint=f"restore gpuenv.lock (or run 'gpuenv lock'), then 'gpuenv install --target "
            f"{target}'",
        ) from None
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot read: {exc.strerror}") from None
    digest = _sha256.hexdigest(data)
    state = _marker.read_lock_state(project)
    current = _marker.known_hash(state, digest, target)
    if current is None:
        current = _parsed_hash(path, data, digest, project, target)
    installed = selected.marker.lock_hash
    if current == installed:
        return []
    if _marker.rolled_back(state, target) == installed:
        return [
            f"target {target} is rolled back to an earlier generation; gpuenv.lock has "
            f"changed since ('gpuenv install --target {target}' returns to it)"
        ]
    gone = "" if current is not None else f" (it no longer has a target {target})"
    raise NotInstalled(
        f"target {target}: gpuenv.lock changed since this environment was installed{gone}: "
        "run gpuenv install",
        hint=f"gpuenv install --target {target}",
    )


# --- the prefix passed verification here ----------------------------------------------------------


def _short(lock_hash: object) -> str:
    return str(lock_hash).removeprefix("sha256:")[:12]


def _failed_checks(record: dict[str, object]) -> str:
    probe = record.get("probe")
    checks = probe.get("checks") if isinstance(probe, dict) else None
    names = [
        str(c.get("name"))
        for c in (checks if isinstance(checks, list) else [])
        if isinstance(c, dict) and c.get("passed") is not True
    ]
    reason = probe.get("reason") if isinstance(probe, dict) else None
    if isinstance(reason, str) and reason:
        names.append(f"probe ({reason[:120]})")
    return ", ".join(names[:12]) or "no check passed"


def refusal_reason(selected: Selected, here: dict[str, object]) -> str:
    """Why this machine has no passing record for the installed lock, by case."""
    lock_hash = selected.marker.lock_hash
    mine = load_record(record_file(selected.prefix, here))
    if isinstance(mine, dict) and mine.get("lock_hash") == lock_hash:
        when = mine.get("finished_at")
        at = f" ({when})" if isinstance(when, str) else ""
        return f"its last verification here failed{at}: {_failed_checks(mine)}"
    if isinstance(mine, dict) and isinstance(mine.get("lock_hash"), str):
        return (
            f"it was verified here for another lock ({_short(mine['lock_hash'])}), not for the "
            f"one installed ({_short(lock_hash)})"
        )
    if selected.marker.cuda and not here.get("driver"):
        return f"this machine has no NVIDIA driver, and it is a CUDA {selected.marker.cuda} build"
    others = sum(is_passing(raw, lock_hash, None) for raw in all_records(selected.prefix))
    if others:
        machines = f"{others} machine{'s' if others != 1 else ''}"
        return f"it passed on other hardware ({machines}), not on this machine ({_describe(here)})"
    if not selected.marker.cuda and not here.get("driver"):  # a CPU build needs none: it misled
        return "it has never been verified here"
    return f"it has never been verified here ({_describe(here)})"


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
        f"target {selected.target} has not passed verification on this machine: "
        f"{refusal_reason(selected, here)}"
    )
    if unverified:
        return [f"{message}; running anyway (--unverified)"]
    no_driver = bool(selected.marker.cuda) and not here.get("driver")
    raise NotVerified(message, hint=_verify_hint(selected.target, no_driver=no_driver))


def only_on_its_hardware(target: str) -> str:
    """What a CUDA target on a machine without an NVIDIA driver is told: verifying it
    here cannot pass, so the hint must not send the user to 'gpuenv verify' here."""
    return (
        f"a CUDA build can only be verified on its hardware: there, 'gpuenv verify "
        f"--target {target}' (on a Slurm cluster, 'gpuenv verify --target {target} --slurm' "
        "from the login node); here, --unverified runs it without that check"
    )


def _verify_hint(target: str, *, no_driver: bool = False) -> str:
    """The command that verifies this machine: on a Slurm node, the one for every node;
    on a machine without a driver, none (it cannot pass here)."""
    import os

    if no_driver:
        return only_on_its_hardware(target)
    if os.environ.get("SLURM_JOB_ID"):
        return f"run 'gpuenv verify --target {target} --slurm' (on the login node; or --unverified)"
    return f"run 'gpuenv verify --target {target}' (or pass --unverified)"


def admit(selected: Selected, *, unverified: bool) -> list[str]:
    """The gate itself, the same for run, shell and activate: the prefix is the current
    lock's (``--unverified`` does not change that), then it is verified here (or
    ``unverified``). Returns the warnings to print. Using a project's pointers also
    registers them as gc roots again (a moved project keeps its prefixes)."""
    warnings = check_lock(selected)
    _marker.refresh_roots(selected.project, selected.target)
    return warnings + check_gate(selected, unverified=unverified)


def passing_machines(prefix: object) -> int:
    """How many machines verified ``prefix`` for the lock it holds (for ``gpuenv list``)."""
    from gpuenv._marker import read_marker
    from gpuenv.verify._recordcheck import passing_machines as count

    path = os.fspath(prefix)  # type: ignore[call-overload]
    marker = read_marker(path)
    return count(path, marker.lock_hash) if marker else 0


def failed_here(prefix: object, here: dict[str, object] | None = None) -> bool:
    """Whether this machine's last verification of ``prefix``, for the lock it holds,
    failed (``gpuenv list`` says so where ``run`` would, not "not verified"). ``here``:
    this machine's fingerprint, when the caller asks of many prefixes."""
    from gpuenv._marker import read_marker

    path = os.fspath(prefix)  # type: ignore[call-overload]
    marker = read_marker(path)
    if marker is None:
        return False
    if here is None:
        here = machine_fingerprint(nvml_fallback=False)
    mine = load_record(record_file(path, here))
    return (
        isinstance(mine, dict)
        and mine.get("lock_hash") == marker.lock_hash
        and not is_passing(mine, marker.lock_hash, None)
    )
