"""`gpuenv shell`: your shell, with a target's prefix activated and the prompt marked."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser, what="the installed target to use (default: the only one)")
    parser.add_argument(
        "--unverified", action="store_true", help="start even without a passing verification"
    )
    parser.add_argument(
        "--shell", choices=("bash", "zsh", "fish", "sh"), help="which shell (default: $SHELL)"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv import runtime
    from gpuenv.shells import shell_command

    spec = runtime.find_spec(getattr(args, "file", None), str(Path.cwd()))
    explicit = bool(getattr(args, "file", None))
    selected = runtime.select(runtime.project_of(spec), args.target, spec=spec, explicit=explicit)
    from gpuenv.verify.gate import admit

    for warning in admit(selected, unverified=args.unverified):
        _output_warning(warning)
    name = args.shell or Path(os.environ.get("SHELL", "bash")).name
    argv, env = shell_command(name, Path(selected.prefix), os.environ)
    from gpuenv.cli._fastrun import default_signals, restore_signals

    before = default_signals()  # the shell and what it starts must not inherit SIGPIPE ignored
    try:
        os.execvpe(argv[0], argv, env)  # noqa: S606 - replacing gpuenv with the shell is the point
    except OSError as exc:  # no such shell on PATH, or not executable: the caller's input
        from gpuenv.errors import UsageError

        raise UsageError(
            f"cannot start {argv[0]}: {exc.strerror} (looked for it on PATH)",
            hint="install that shell, or name another with --shell bash|zsh|fish|sh",
        ) from None
    finally:  # only when the exec failed: this process goes on, as it was
        restore_signals(before)


def _output_warning(text: str) -> None:
    from gpuenv.cli import _output

    _output.err(f"gpuenv: warning: {text}")
