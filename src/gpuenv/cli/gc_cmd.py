"""`gpuenv gc`: remove prefixes that no project points at, and say what was freed."""

from __future__ import annotations

import argparse

from gpuenv.cli import _common, _output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="only say what would go")
    _common.add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    store = _common.store()
    result = store.gc(dry_run=args.dry_run)
    if args.json:
        _output.emit_json(
            {
                "removed": [str(p) for p in result.removed],
                "removed_builds": [str(p) for p in result.removed_builds],
                "freed_bytes": result.freed_bytes,
                "kept": result.kept,
                "dry_run": args.dry_run,
            }
        )
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for path in (*result.removed, *result.removed_builds):
        _output.out(f"{verb} {path}")
    mib = result.freed_bytes / 2**20
    _output.out(
        f"{verb} {len(result.removed)} prefix(es) and {len(result.removed_builds)} cached "
        f"build(s), {'would free' if args.dry_run else 'freed'} "
        f"{mib:.1f} MiB; kept {result.kept}"
    )
    return 0
