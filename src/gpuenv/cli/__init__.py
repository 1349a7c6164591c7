"""gpuenv's command line: parse flags, call one library function, render.

Commands are registered in a fixed table (no package scanning) and every command
module imports only the standard library at module level; domain modules are
imported inside ``run``. That keeps ``gpuenv --help`` and ``gpuenv run`` free of
pydantic, tomlkit, rich and rattler. ``main`` is the only place that turns a
``GpuenvError`` into output and an exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn, Protocol, cast

from gpuenv import __version__
from gpuenv.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, GpuenvError, UsageError

# name -> (module, one-line summary). Order is the order of `gpuenv --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("gpuenv.cli.init_cmd", "write a starter gpuenv.toml"),
    "plan": ("gpuenv.cli.plan_cmd", "show the stack chosen for each target, with reasons"),
    "doctor": ("gpuenv.cli.doctor_cmd", "diagnose an environment: what is broken, and the fix"),
}


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` instead of exiting, so ``main`` renders it
    (as JSON under ``--json``) with the same exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}", hint=f"see '{self.prog} --help'")


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
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS if suppress else 0,
        help="more detail; tracebacks on errors",
    )


def _load(name: str) -> CommandModule:
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
        _load(name).add_arguments(command_parser)
    return parser


def _head(argv: Sequence[str]) -> Sequence[str]:
    """The arguments before a ``--`` (what follows belongs to the user's command)."""
    return argv[: list(argv).index("--")] if "--" in argv else argv


def _command_name(argv: Sequence[str]) -> str | None:
    """The first argument that names a command, skipping global options."""
    skip_next = False
    for arg in _head(argv):
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from gpuenv.cli import _output

    as_json = "--json" in _head(argv)
    verbose = 0
    try:
        name = _command_name(argv)
        parser = build_parser(only=name)
        args = parser.parse_args(argv)
        verbose = args.verbose or 0
        as_json = bool(getattr(args, "json", False))
        if args.command is None:
            parser.print_help()
            return 0
        return _load(args.command).run(args)
    except GpuenvError as err:
        _output.render_error(err, as_json=as_json, verbose=verbose)
        return err.exit_code
    except KeyboardInterrupt:
        _output.render_interrupt(as_json=as_json)
        return EXIT_INTERRUPTED
    except SystemExit as exit_:  # --help / --version inside argparse
        return exit_.code if isinstance(exit_.code, int) else 0
    except Exception as exc:  # noqa: BLE001 - the one place unexpected errors are caught
        _output.render_internal(exc, as_json=as_json, verbose=verbose)
        return EXIT_INTERNAL
