"""The argument parser: a fixed table of commands, each a module with
``add_arguments`` and ``run`` (as pdm does), imported only when needed."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, cast

from gpuenv import __version__
from gpuenv.errors import UsageError

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

    from gpuenv.cli._common import Settings

# name -> (module, one-line summary). Order is the order of `gpuenv --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "detect": ("gpuenv.cli.detect_cmd", "this machine's GPUs, driver and CUDA version"),
    "init": ("gpuenv.cli.init_cmd", "write a starter gpuenv.toml"),
    "import": (
        "gpuenv.cli.import_cmd",
        "reproduce a paper's environment files on this hardware: write gpuenv.toml",
    ),
    "plan": ("gpuenv.cli.plan_cmd", "show the stack chosen for each target, with reasons"),
    "lock": ("gpuenv.cli.lock_cmd", "write or check gpuenv.lock: exact artifacts per target"),
    "add": ("gpuenv.cli.add_cmd", "add pip requirements to gpuenv.toml, relock and install"),
    "remove": ("gpuenv.cli.remove_cmd", "remove pip requirements from gpuenv.toml, relock"),
    "verify": ("gpuenv.cli.verify_cmd", "run real kernels on the GPU and check the libraries"),
    "install": ("gpuenv.cli.install_cmd", "materialise targets from the lock into store prefixes"),
    "export": ("gpuenv.cli.export_cmd", "write the lock for other tools: conda-lock, pylock, ..."),
    "pack": (
        "gpuenv.cli.pack_cmd",
        "one archive of the lock and its artifacts, for offline installs",
    ),
    "kernel": ("gpuenv.cli.kernel_cmd", "Jupyter kernels for the targets, started through run"),
    "shell": ("gpuenv.cli.shell_cmd", "start your shell with a target's prefix activated"),
    "run": ("gpuenv.cli.run_cmd", "run a command with a target's prefix activated"),
    "activate": ("gpuenv.cli.activate_cmd", "print a target's activation script (for eval)"),
    "doctor": (
        "gpuenv.cli.doctor_cmd",
        "diagnose any environment: mixed installs, libraries, toolkit",
    ),
    "list": ("gpuenv.cli.list_cmd", "list the store's prefixes: size, target, lock, verification"),
    "gc": ("gpuenv.cli.gc_cmd", "remove prefixes no project points at"),
    "rollback": ("gpuenv.cli.rollback_cmd", "point a target back at its previous generation"),
}


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, settings: Settings) -> int: ...


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store``, refusing an option given twice with different values:
    ``gpuenv add -g a -g b pkg`` silently added to ``b`` alone (clap, under uv, refuses
    a repeated single-value option too). The same value twice is harmless (scripts that
    build argument lists) and accepted."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        given: dict[str, Any] = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given and given[self.dest] != values and option_string is not None:
            spellings = "/".join(self.option_strings)
            raise argparse.ArgumentError(
                self, f"given twice ({given[self.dest]!r}, {values!r}): {spellings} takes one"
            )
        given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


_GIVEN = "_gpuenv_given"  # the namespace's record of the single-value options seen


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it ($COLUMNS, else the
    terminal of stdout, else 80), without importing shutil."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    stdout = sys.__stdout__
    if columns <= 0 and stdout is not None:
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, given its width: argparse would import shutil for it
    (with bz2 and lzma, about 3 ms of every command's start-up) whenever an argument is
    added, help or not."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = _columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` instead of exiting, so ``main`` renders it
    (as JSON under ``--json``) with the same exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}", hint=f"see '{self.prog} --help'")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        # argparse swallows a failed write (`gpuenv --version > /dev/full` said nothing,
        # exit 0): standard output's failure is gpuenv's (exit 5, or 141 for a reader
        # gone); a closed stream, as argparse has it, is nothing to say.
        stream = file if file is not None else sys.stderr
        if message and stream is not None:
            stream.write(message)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # `--torch=--`: argparse (3.10, 3.11) drops the "--" and hands the option an
        # empty list where every command expects a string.
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: '--' is not a value")
        return super()._get_values(action, arg_strings)


def _add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    # Defined on the main parser and again on each subcommand, so both
    # `gpuenv -f x.toml plan` and `gpuenv plan -f x.toml` work. On subcommands the
    # defaults are suppressed so they never overwrite a value given before the command.
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "-f",
        "--file",
        metavar="PATH",
        default=default,
        help="the spec file (default: ./gpuenv.toml)",
    )
    # After the command, -v counts into its own name: argparse copies a subcommand's
    # values over the main parser's, so `-v run -v` would be 1, not 2 (``parse`` adds).
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        dest="verbose_after" if suppress else "verbose",
        default=argparse.SUPPRESS if suppress else 0,
        help="more detail; an error's causes (a traceback only for a bug in gpuenv)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="no progress output (results and errors are still printed)",
    )


def load(name: str) -> CommandModule:
    module: ModuleType = importlib.import_module(COMMANDS[name][0])
    return cast(CommandModule, module)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``only``) one with just that command's subparser: the
    fast path for ``gpuenv run`` skips importing every other command module."""
    parser = _Parser(
        prog="gpuenv",
        description="Reproducible, verified GPU deep-learning environments.",
    )
    parser.add_argument("--version", action="version", version=f"gpuenv {__version__}")
    _add_common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (_, summary) in COMMANDS.items():
        if only is not None and name != only:
            continue
        command_parser = sub.add_parser(name, help=summary, description=summary)
        _add_common(command_parser, suppress=True)
        load(name).add_arguments(command_parser)
    return parser


def parse(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser (with the named command's subparser only) and what it read. A
    ``run`` line is cut where the user's command begins first (``_fastrun.split``,
    which the fast path uses too): argparse never sees the command, so none of its
    options is read as gpuenv's and both paths agree on what runs."""
    from gpuenv.cli import _fastrun

    name = command_name(argv)
    parser = build_parser(only=name)
    parts = _fastrun.split(argv) if name == "run" else None
    args, extra = parser.parse_known_args(argv if parts is None else parts[0])
    if extra:  # argparse's own words were "gpuenv: error: gpuenv: unrecognized arguments"
        where = " ".join(["gpuenv", *([name] if name else []), *_action_of(args)])
        # `gpuenv --json plan`: --json is the command's own flag, written after it.
        after = "--json" in extra and "json" in vars(args)
        raise UsageError(
            f"{where}: unexpected {'argument' if len(extra) == 1 else 'arguments'}: "
            + " ".join(extra),
            hint=f"--json goes after the command: {where} --json"
            if after
            else f"see '{where} --help'",
        )
    if parts is not None:
        args.argv = parts[1]
    elif args.command == "run" and args.argv[:1] == ["--"]:  # `--fil x run -- ...`
        args.argv = args.argv[1:]
    args.verbose = (args.verbose or 0) + vars(args).pop("verbose_after", 0)
    return parser, args


def _action_of(args: argparse.Namespace) -> list[str]:
    """A command's action, for commands that have them (``kernel install``)."""
    action = getattr(args, "action", None)
    return [action] if isinstance(action, str) else []


def command_name(argv: Sequence[str]) -> str | None:
    """The first argument that names a command, skipping global options."""
    head = argv[: list(argv).index("--")] if "--" in argv else argv
    skip_next = False
    for arg in head:
        if skip_next:
            skip_next = False
            continue
        if arg in ("-f", "--file"):
            skip_next = True
            continue
        if arg.startswith("-"):
            continue
        return arg if arg in COMMANDS else None
    return None
