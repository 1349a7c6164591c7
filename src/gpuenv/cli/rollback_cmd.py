"""`gpuenv rollback`: point a target back at its previous generation, atomically.

Exit 4 (not ready) when there is nothing to roll back to: no project, nothing
installed, or no previous generation (one exists once an install replaced another) or
one no longer there. The current generation may be gone (a prefix deleted by hand):
that is when the previous one is wanted, and rolling back says the one left is gone."""

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
    # the only target pointed at, its current prefix there or not (a deleted one is
    # what rollback is for)
    target = args.target or runtime.only_pointed(project, spec=spec, explicit=explicit)
    done = rollback(settings.store(), Path(project), target)
    if args.json:
        _output.emit_json(
            {
                "target": target,
                "from": str(done.left),
                "to": str(done.to),
                "from_installed": done.left_installed,
            }
        )
    elif done.left_installed:
        _output.out(
            f"{target}: now {done.to}\n  (was {done.left}; 'gpuenv rollback' again to undo)"
        )
    else:
        _output.out(
            f"{target}: now {done.to}\n  (was {done.left}, which is no longer installed: "
            "nothing to undo to; 'gpuenv install' returns to the lock)"
        )
    return 0
