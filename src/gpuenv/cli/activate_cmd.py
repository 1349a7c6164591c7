"""`gpuenv activate --shell bash|zsh|fish`: print the activation script, for eval.

    eval "$(gpuenv activate --shell bash)"

The script was written at install time; this only prints it (no Python work).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuenv.cli import _common, _output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser, what="the installed target (default: the only one)")
    parser.add_argument("--shell", choices=("bash", "zsh", "fish", "sh"), default="bash")


def run(args: argparse.Namespace) -> int:
    from gpuenv import runtime
    from gpuenv.shells import activation_script

    spec = runtime.find_spec(getattr(args, "file", None), str(Path.cwd()))
    selected = runtime.select(runtime.project_of(spec), args.target)
    _output.raw(activation_script(Path(selected.prefix), args.shell).rstrip("\n"))
    return 0
