"""``gpuenv run``, recognised before argparse is imported.

``gpuenv run [-f FILE] [-t T] [--unverified] [--] CMD ...`` adds its whole start-up
to the user's command, so it is parsed by hand here and executed with ``execvpe``:
the command replaces gpuenv, so its exit code and signals reach the caller as if
gpuenv were not there. Anything unusual (``--help``, an unknown option, no command)
falls back to the full parser (``run_cmd``), which shares ``execute``.
"""

from __future__ import annotations

import os
import sys

from gpuenv.errors import GpuenvError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


class FastRun:
    __slots__ = ("command", "file", "target", "unverified")

    def __init__(
        self, file: str | None, target: str | None, unverified: bool, command: list[str]
    ) -> None:
        self.file = file
        self.target = target
        self.unverified = unverified
        self.command = command


def _value(args: Sequence[str], index: int, option: str) -> tuple[str | None, int]:
    """The value of ``--opt=V`` or ``--opt V`` at ``index`` (None if malformed)."""
    arg = args[index]
    if arg.startswith(option + "="):
        return arg.split("=", 1)[1], index + 1
    if index + 1 < len(args):
        return args[index + 1], index + 2
    return None, index + 1


def parse(argv: Sequence[str]) -> FastRun | None:
    spec: str | None = None
    i = 0
    while i < len(argv) and argv[i] != "run":
        arg = argv[i]
        if arg in ("-f", "--file") or arg.startswith("--file="):
            spec, i = _value(argv, i, "--file" if arg.startswith("--") else "-f")
        elif arg in ("-v", "-vv"):
            i += 1
        else:
            return None
    if i >= len(argv):
        return None
    i += 1
    target, unverified = None, False
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-t", "--target") or arg.startswith("--target="):
            target, i = _value(argv, i, "--target" if arg.startswith("--") else "-t")
        elif arg == "--unverified":
            unverified, i = True, i + 1
        elif arg.startswith("-"):
            return None  # --help, or something the full parser should explain
        else:
            break
    command = list(argv[i:])
    return FastRun(spec, target, unverified, command) if command else None


def _say(line: str) -> None:
    from gpuenv.cli._printable import printable

    sys.stderr.write(printable(line) + "\n")


def execute(run: FastRun) -> int:
    """Activate and exec; returns only when something prevents running the command."""
    from gpuenv import _settings, runtime

    _settings.state_dir = _settings.default_state_dir(os.environ)
    spec = runtime.find_spec(run.file, os.getcwd())
    selected = runtime.select(runtime.project_of(spec), run.target, spec=spec)
    from gpuenv.verify.gate import admit

    for warning in admit(selected, unverified=run.unverified):
        _say(f"gpuenv: warning: {warning}")
    env, notes = runtime.child_environment(selected, os.environ)
    for note in notes:
        _say(note)
    sys.stderr.flush()
    try:
        os.execvpe(run.command[0], run.command, env)  # noqa: S606 - exec is the point
    except FileNotFoundError:
        _say(f"gpuenv: {run.command[0]}: command not found")
        return 127
    except PermissionError:
        _say(f"gpuenv: {run.command[0]}: permission denied")
        return 126


def main(run: FastRun) -> int:
    try:
        return execute(run)
    except GpuenvError as error:
        from gpuenv.cli import _output

        _output.render_error(error, as_json=False, verbose=0)
        return error.exit_code
    except KeyboardInterrupt as interrupt:
        from gpuenv.cli import _output, interrupt_code

        _output.render_interrupt(interrupt, as_json=False)
        return interrupt_code(interrupt)
