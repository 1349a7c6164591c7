"""`gpuenv activate --shell bash|zsh|fish`: print the activation script, for eval.

    eval "$(gpuenv activate --shell bash)"

The script was written at install time; this only prints it, after the same gate as
``run`` and ``shell``: the prefix must be the current lock's and verified on this
machine (``--unverified`` skips the verification, with a warning on stderr). An
inherited ``_GPUENV_ACTIVE`` naming the prefix whose PATH or variables are not in place
(a login shell reset them) is forgotten first, so the script activates it again.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser, what="the installed target (default: the only one)")
    parser.add_argument("--shell", choices=("bash", "zsh", "fish", "sh"), default="bash")
    parser.add_argument(
        "--unverified",
        action="store_true",
        help="print it even without a passing verification on this machine (warns)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv import runtime
    from gpuenv.shells import activation_script

    spec = runtime.find_spec(getattr(args, "file", None), str(Path.cwd()))
    explicit = bool(getattr(args, "file", None))
    selected = runtime.select(runtime.project_of(spec), args.target, spec=spec, explicit=explicit)
    from gpuenv.verify.gate import admit

    for warning in admit(selected, unverified=args.unverified):
        _output.err(f"gpuenv: warning: {warning}")
    script = activation_script(Path(selected.prefix), args.shell).rstrip("\n")
    if runtime.stale_activation(selected, os.environ):  # a marker whose PATH is gone
        from gpuenv.activation import forget_stale

        script = forget_stale(selected.prefix, args.shell) + script
    _output.raw(script)
    return 0
