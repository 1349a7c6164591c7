"""``gpuenv run``, recognised before argparse is imported.

``gpuenv [-f FILE] [-v] [-q] run [-f FILE] [-t T] [--unverified] [-v] [-q] [--] CMD ...``
adds its whole start-up to the user's command, so it is parsed by hand here and
executed with ``execvpe``: the command replaces gpuenv, so its exit code and signals
reach the caller as if gpuenv were not there.

``split`` is the one place that decides where the user's command begins (after the
first ``--``, else at the first word that is not one of gpuenv's options): the fast
path and the full parser (``run_cmd``) both use it, so they never disagree on the
command. Anything unusual (``--help``, an unknown option, a missing value, no
command) falls back to the full parser, which explains it (exit 2) and shares
``execute``.
"""

from __future__ import annotations

import os
import sys

from gpuenv.errors import GpuenvError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# Options that take a value, in each of their spellings; before ``run`` only the
# global ones are known to argparse, after it both.
_GLOBAL_VALUE = ("-f", "--file")
_RUN_VALUE = ("-t", "--target")
# Flags the fast path understands: how much each adds to the verbosity.
_FLAGS = {"-q": 0, "--quiet": 0, "--verbose": 1, "-v": 1, "-vv": 2, "-vvv": 3}


class FastRun:
    __slots__ = ("command", "file", "target", "unverified", "verbose")

    def __init__(
        self,
        file: str | None,
        target: str | None,
        unverified: bool,
        command: list[str],
        verbose: int = 0,
    ) -> None:
        self.file = file
        self.target = target
        self.unverified = unverified
        self.command = command
        self.verbose = verbose

    def fields(self) -> tuple[object, ...]:
        """What the run is made of (the fast path and the full parser are compared by it)."""
        return tuple(getattr(self, name) for name in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"FastRun({fields})"


def split(argv: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """A ``gpuenv run`` command line cut in two: gpuenv's arguments (up to and
    including ``run``'s options, without the ``--``) and the user's command. None when
    ``argv`` is not a ``run`` command line."""
    args = list(argv)
    i = 0
    while i < len(args) and args[i] != "--":
        arg = args[i]
        if arg in _GLOBAL_VALUE:
            i += 2
        elif arg.startswith("-"):
            i += 1
        elif arg == "run":
            break
        else:
            return None
    if i >= len(args) or args[i] != "run":
        return None
    i += 1
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return args[:i], args[i + 1 :]
        if arg in _GLOBAL_VALUE + _RUN_VALUE:
            i += 2
        elif arg.startswith("-") and arg != "-":
            i += 1
        else:
            break
    return args[:i], args[i:]


def _value(args: Sequence[str], index: int) -> tuple[str | None, int]:
    """The value of the option at ``index`` (``--opt=V``, ``-tV`` or ``--opt V``), and
    the index after it; None when it is missing, empty or looks like an option (the
    full parser explains those)."""
    arg = args[index]
    if arg.startswith("--"):
        _name, equals, value = arg.partition("=")
        if not equals:
            if index + 1 >= len(args):
                return None, index + 1
            value, index = args[index + 1], index + 1
    elif len(arg) > 2:
        value = arg[2:]
    else:
        if index + 1 >= len(args):
            return None, index + 1
        value, index = args[index + 1], index + 1
    if not value or value.startswith("-"):
        return None, index + 1
    return value, index + 1


def parse(argv: Sequence[str]) -> FastRun | None:
    """The run to do, when ``argv`` is a ``run`` command line of the usual shapes;
    None for the full parser."""
    parts = split(argv)
    if parts is None:
        return None
    head, command = parts
    if not command:
        return None
    spec: str | None = None
    target: str | None = None
    unverified, verbose, after_run = False, 0, False
    seen: set[tuple[bool, str]] = set()
    i = 0
    while i < len(head):
        arg = head[i]
        if arg == "run" and not after_run:
            after_run, i = True, i + 1
        elif arg in _FLAGS:
            verbose, i = verbose + _FLAGS[arg], i + 1
        elif arg == "--unverified" and after_run:
            unverified, i = True, i + 1
        elif arg.split("=", 1)[0] in _GLOBAL_VALUE or arg[:2] == "-f":
            value, i = _value(head, i)
            # twice on one side of ``run``, differently: the full parser refuses it
            if value is None or (value != spec and (after_run, "-f") in seen):
                return None
            spec = value
            seen.add((after_run, "-f"))
        elif after_run and (arg.split("=", 1)[0] in _RUN_VALUE or arg[:2] == "-t"):
            value, i = _value(head, i)
            if value is None or (target is not None and value != target):
                return None
            target = value
        else:
            return None  # --help, or something the full parser should explain
    return FastRun(spec, target, unverified, command, verbose)


def _say(line: str) -> None:
    from gpuenv.cli._printable import printable

    try:  # noqa: SIM105 - contextlib is not imported on the run path; a full stderr loses the line
        sys.stderr.write(printable(line) + "\n")
    except (AttributeError, OSError, ValueError):
        pass


def default_signals() -> dict[int, object]:
    """The signals Python ignores (SIGPIPE, SIGXFSZ) back to their default before an
    exec, and what they were (put back by ``restore_signals`` when the exec fails): an
    ignored signal stays ignored across exec, so every command `gpuenv run` started
    ignored SIGPIPE (`gpuenv run -- yes | head -1` said "Broken pipe" and ended with 1,
    not 141). subprocess does the same for its children (restore_signals)."""
    import _signal  # type: ignore[import-not-found]  # builtin; `signal` would import enum

    before: dict[int, object] = {}
    for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ"):
        number = getattr(_signal, name, None)
        if number is not None:
            before[number] = _signal.signal(number, _signal.SIG_DFL)
    return before


def restore_signals(before: dict[int, object]) -> None:
    """The dispositions ``default_signals`` replaced, for a process that goes on (an
    exec that failed: gpuenv says why and writes to its own streams, where a SIGPIPE
    at its default would end it silently)."""
    import _signal

    for number, handler in before.items():
        _signal.signal(number, handler)


def execute(run: FastRun) -> int:
    """Activate and exec; returns only when something prevents running the command."""
    from gpuenv import _settings, runtime

    _settings.state_dir = _settings.default_state_dir(os.environ)
    spec = runtime.find_spec(run.file, os.getcwd())
    selected = runtime.select(
        runtime.project_of(spec), run.target, spec=spec, explicit=bool(run.file)
    )
    from gpuenv.verify.gate import admit

    for warning in admit(selected, unverified=run.unverified):
        _say(f"gpuenv: warning: {warning}")
    from gpuenv.editable.state import stale_note

    stale = stale_note(selected.prefix, selected.project or None)
    if stale is not None:
        _say(f"gpuenv: warning: {stale}")
    from gpuenv import _marker

    changed = _marker.inputs_changed(selected.project) if selected.project else []
    if changed:
        names = ", ".join(os.path.relpath(p, selected.project) for p in changed)
        _say(
            f"gpuenv: warning: {names} changed since this environment was installed: "
            "'gpuenv install' locks and installs the change"
        )
    env, notes = runtime.child_environment(selected, os.environ)
    for note in notes:
        _say(note)
    try:  # noqa: SIM105 - contextlib is not imported on the run path
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # closed (2>&-: None) or full
        pass
    name = run.command[0] if len(run.command[0]) <= 100 else f"{run.command[0][:60]}..."
    before = default_signals()
    try:
        os.execvpe(run.command[0], run.command, env)  # noqa: S606 - exec is the point
    except FileNotFoundError:
        _say(f"gpuenv: {name}: command not found")
        return 127
    except PermissionError:  # a folder too (`run -- /`), as a shell says it
        what = "is a directory" if os.path.isdir(run.command[0]) else "permission denied"
        _say(f"gpuenv: {name}: {what}")
        return 126
    except ValueError:  # an empty name (or a NUL byte): what a shell says of ''
        _say(f"gpuenv: {name!r}: command not found")
        return 127
    except OSError as exc:  # a name too long, an exec format error: as a shell, 126
        _say(f"gpuenv: {name}: cannot run it: {exc.strerror or exc}")
        return 126
    finally:  # only when the exec failed: this process goes on, as it was
        restore_signals(before)


def main(run: FastRun) -> int:
    try:
        return execute(run)
    except GpuenvError as error:
        from gpuenv.cli import _output

        _output.render_error(error, as_json=False, verbose=run.verbose)
        return error.exit_code
    except KeyboardInterrupt as interrupt:
        from gpuenv.cli import _output
        from gpuenv.cli._signals import interrupt_code

        _output.render_interrupt(interrupt, as_json=False)
        return interrupt_code(interrupt)
