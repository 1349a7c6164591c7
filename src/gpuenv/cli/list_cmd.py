"""`gpuenv list`: the store's prefixes with size, target, lock hash and state."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_json_flag(parser)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _day(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%d", time.localtime(epoch))


def _unreferenced(kept_until: float | None) -> str:
    """What gc does with a prefix no project points at, in gc's words."""
    if kept_until is not None:
        return f"none: its project moved or was deleted; gc keeps it until {_day(kept_until)}"
    return "none: the next 'gpuenv gc' removes it"


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.verify.gate import failed_here, machine_fingerprint, passing_machines

    store = settings.store()
    prefixes = store.list(verified=passing_machines)
    # where none passed, whether this machine's last try failed (as run says), not "never"
    unverified = [p.path for p in prefixes if not p.verified_on and p.installed]
    here = machine_fingerprint(nvml_fallback=False) if unverified else None
    failed = {path for path in unverified if failed_here(path, here)}
    if args.json:
        _output.emit_json(
            {
                "store": str(store.root),
                "prefixes": [
                    {
                        "path": str(p.path),
                        "target": p.target,
                        "lock_hash": p.lock_hash,
                        "installed": p.installed,
                        "size_bytes": p.size_bytes,
                        "unique_bytes": p.unique_bytes,
                        "shared_bytes": p.shared_bytes,
                        "verified_machines": p.verified_on,
                        "failed_here": p.path in failed,
                        "referenced_by": [str(r) for r in p.referenced_by],
                        "kept_until": _day(p.kept_until) if p.kept_until else None,
                    }
                    for p in prefixes
                ],
            }
        )
        return 0
    if not prefixes:
        _output.out(f"no prefixes in {store.root}")
        return 0
    rows = [
        [
            p.path.name,
            p.target or "?",
            (p.lock_hash or "-").removeprefix("sha256:")[:12],
            _size(p.unique_bytes),
            _size(p.shared_bytes),
            "installed" if p.installed else "INCOMPLETE",
            _verified(p.verified_on, p.path in failed),
            ", ".join(str(r) for r in p.referenced_by) or _unreferenced(p.kept_until),
        ]
        for p in prefixes
    ]
    # own: what removing it frees; shared: hard links into uv's or rattler's cache
    headers = ["prefix", "target", "lock", "own", "shared", "state", "verified", "used by"]
    _output.out(_output.table(headers, rows))
    return 0


def _verified(machines: int, failed: bool) -> str:
    if machines:
        return f"{machines} machine{'s' if machines != 1 else ''}"
    return "failed here" if failed else "not verified"
