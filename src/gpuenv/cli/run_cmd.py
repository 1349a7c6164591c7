"""`gpuenv run -- CMD`: run a command with a target's prefix activated.

The usual forms never reach this module: ``gpuenv.cli._fastrun`` handles them before
argparse is imported. This is the full parser's view (``--help``, odd spellings).
"""

from __future__ import annotations

import argparse

from gpuenv.cli import _common


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser, what="the installed target to use (default: the only one)")
    parser.add_argument(
        "--unverified",
        action="store_true",
        help="run even without a passing verification on this machine (warns)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")


def run(args: argparse.Namespace) -> int:
    from gpuenv.cli._fastrun import FastRun, execute
    from gpuenv.errors import UsageError

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("gpuenv run: no command given", hint="gpuenv run -- python train.py")
    return execute(FastRun(getattr(args, "file", None), args.target, args.unverified, command))
