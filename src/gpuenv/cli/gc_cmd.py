"""`gpuenv gc`: remove prefixes that no project points at, the build entries, artifacts
and tool-cache entries none of the kept ones uses, and say what was freed (counted per
inode, and checked against the file system's free space)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="only say what would go")
    parser.add_argument(
        "--grace",
        type=float,
        metavar="DAYS",
        default=None,
        help="keep the prefixes of a vanished (moved or deleted) project this long "
        "(default: 14 days)",
    )
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import datetime, timezone

    from gpuenv.errors import UsageError
    from gpuenv.store import GC_GRACE_DAYS

    grace = GC_GRACE_DAYS if args.grace is None else args.grace
    if not grace >= 0:  # also refuses nan
        raise UsageError(f"--grace {args.grace}: a number of days, 0 or more")
    store = settings.store()
    result = store.gc(dry_run=args.dry_run, grace_days=grace)

    def day(epoch: float) -> str:
        return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d")

    if args.json:
        _output.emit_json(
            {
                "removed": [str(p) for p in result.removed],
                "removed_builds": [str(p) for p in result.removed_builds],
                "freed_bytes": result.freed_bytes,
                "kept": result.kept,
                "graced": [
                    {"prefix": str(g.prefix), "pointer": str(g.pointer), "until": day(g.until)}
                    for g in result.graced
                ],
                "busy": [str(p) for p in result.busy],
                "removed_artifacts": [str(p) for p in result.removed_artifacts],
                "removed_cache_entries": result.removed_cache_entries,
                "caches_busy": result.caches_busy,
                "caches_read_only": result.caches_read_only,
                "interrupted": result.interrupted,
                "fs_freed_bytes": result.fs_freed_bytes,
                "dry_run": args.dry_run,
            }
        )
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for path in (*result.removed, *result.removed_builds):
        _output.out(f"{verb} {path}")
    for g in result.graced:
        _output.out(
            f"kept {g.prefix} until {day(g.until)}: its project is gone ({g.pointer} no longer "
            "exists; moved? 'gpuenv run' there keeps it for good, 'gpuenv gc --grace 0' drops it)"
        )
    for path in result.busy:
        _output.out(f"kept {path}: an install is using it right now")
    if result.interrupted:
        _output.out(
            f"{verb} {result.interrupted} folder(s) an earlier gc was stopped before deleting "
            "(its trash)"
        )
    if result.caches_busy:
        _output.out(
            "kept the artifacts and uv's and rattler's caches: an install or pack is running"
        )
    if result.caches_read_only:
        _output.out(
            "kept the artifacts and uv's and rattler's caches: the store is read-only here "
            "(run gpuenv gc where it is mounted read-write)"
        )
    mib = result.freed_bytes / 2**20
    _output.out(
        f"{verb} {len(result.removed)} prefix(es), {len(result.removed_builds)} cached "
        f"build(s), {len(result.removed_artifacts)} artifact(s) and "
        f"{result.removed_cache_entries} tool-cache entr(ies), "
        f"{'would free' if args.dry_run else 'freed'} {mib:.1f} MiB; kept {result.kept}"
    )
    if result.fs_freed_bytes is not None:
        _output.out(
            f"  the file system's free space grew by {result.fs_freed_bytes / 2**20:.1f} MiB"
        )
    return 0
