"""The ``/proc/driver/nvidia`` texts, read with ``str`` methods alone.

The run-time fingerprint imports this module on every ``gpuenv run``, so it imports
nothing: not ``gpuenv.versions`` (its dataclasses and ``typing`` cost about 20 ms), not
even ``re`` (a few ms). It returns plain strings; ``gpuenv.hardware.parse`` builds typed
values on top of these.
"""

from __future__ import annotations

__all__ = ["plausible_driver_text", "plausible_uuid", "proc_driver_version", "proc_fields"]

_HEX = frozenset("0123456789abcdefABCDEF")
_UUID_GROUPS = (8, 4, 4, 4, 12)


def plausible_driver_text(text: str) -> bool:
    """``550.54.15`` or ``390.157``: what ``gpuenv.versions.DriverVersion`` accepts,
    with a plausible major (100-9999)."""
    parts = text.split(".")
    return (
        len(parts) in (2, 3)
        and all(p.isdigit() and p.isascii() for p in parts)
        and 3 <= len(parts[0]) <= 4
        and not parts[0].startswith("0")
        and all(len(p) <= 3 for p in parts[1:])
    )


def proc_driver_version(text: str) -> str | None:
    """The kernel module's version (``550.54.15``) from ``/proc/driver/nvidia/version``,
    or None when it carries no plausible one. The line reads ``NVRM version: NVIDIA UNIX
    x86_64 Kernel Module  550.54.15  <date>`` or, for the open module, ``... Open Kernel
    Module for x86_64  550.54.15  Release Build ...``."""
    for line in text.splitlines():
        if not line.startswith("NVRM version:") or "Module" not in line.split():
            continue
        words = line.split()
        after = words[words.index("Module") + 1 :]
        if after[:1] == ["for"]:
            after = after[2:]
        return after[0] if after and plausible_driver_text(after[0]) else None
    return None


def proc_fields(text: str) -> dict[str, str]:
    """``Key:<tabs> value`` lines of a ``gpus/*/information`` file, keys lower-cased."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields


def plausible_uuid(text: str | None) -> str | None:
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` (``MIG-`` for MIG instances); None
    for anything else, such as the question marks ``/proc`` shows for a GPU the driver
    has not initialised yet."""
    if not text:
        return None
    cleaned = text.strip()
    kind, _, rest = cleaned.partition("-")
    groups = rest.split("-")
    if kind not in ("GPU", "MIG") or tuple(len(g) for g in groups) != _UUID_GROUPS:
        return None
    return cleaned if all(c in _HEX for g in groups for c in g) else None
