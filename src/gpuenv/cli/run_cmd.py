"""`gpuenv run -- CMD`: run a command with a target's prefix activated.

The usual forms never reach this module: ``gpuenv.cli._fastrun`` handles them before
argparse is imported. This is the full parser's view (``--help``, odd spellings, the
mistakes it explains). The command itself is cut off before argparse sees the line
(``_fastrun.split``, in ``gpuenv.cli._full_main``), so an option of the user's
command is never read as gpuenv's and both paths run the same command.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.cli._fastrun import FastRun


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser, what="the installed target to use (default: the only one)")
    parser.add_argument(
        "--unverified",
        action="store_true",
        help="run even without a passing verification on this machine (warns)",
    )
    # Not "command": that is the name of the chosen subcommand in the namespace.
    parser.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="the command and its arguments",
    )


def fast_run(args: argparse.Namespace) -> FastRun:
    """The ``_fastrun.FastRun`` this command line means (what ``run`` executes)."""
    from gpuenv.cli._fastrun import FastRun
    from gpuenv.errors import UsageError

    command = list(args.argv)
    if not command:
        raise UsageError(
            "gpuenv run: no command given",
            hint="name the command after '--': gpuenv run -- python train.py",
        )
    if args.target == "":
        raise UsageError("gpuenv run: --target needs a target's name", hint="gpuenv run --help")
    if getattr(args, "file", None) == "":
        raise UsageError("gpuenv run: --file needs a path", hint="gpuenv run --help")
    return FastRun(
        getattr(args, "file", None), args.target, args.unverified, command, args.verbose or 0
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.cli._fastrun import execute

    return execute(fast_run(args))
