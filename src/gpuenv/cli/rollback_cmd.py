"""`gpuenv rollback`: point a target back at its previous generation, atomically.

Exit 4 (not ready) when there is nothing to roll back to: no project, nothing
installed, or no previous generation (one exists once an install replaced another)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser, what="the target to roll back (default: the only one)")
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv import runtime
    from gpuenv.store import rollback

    spec = runtime.find_spec(getattr(args, "file", None), str(Path.cwd()))
    project = runtime.project_of(spec)
    explicit = bool(getattr(args, "file", None))
    if args.target is not None:  # a name the spec does not have is no "nothing to roll back"
        named = runtime.declared_targets(spec) if explicit else runtime._named_targets(spec)
        if named is not None:
            _common.check_target(args.target, list(named))
    target = args.target or runtime.select(project, None, spec=spec, explicit=explicit).target
    before, after = rollback(settings.store(), Path(project), target)
    if args.json:
        _output.emit_json({"target": target, "from": str(before), "to": str(after)})
    else:
        _output.out(f"{target}: now {after}\n  (was {before}; 'gpuenv rollback' again to undo)")
    return 0
