"""gpuenv's command line: parse flags, call one library function, render.

Commands are registered in a fixed table (``_parser.COMMANDS``, no package scanning)
and every command module imports only the standard library at module level; domain
modules are imported inside ``run``. ``gpuenv run`` goes further: ``main`` recognises
it before argparse is even imported (``_fastrun``), because its whole cost is added
to the user's command. ``main`` is the only place that turns a ``GpuenvError`` into
output and an exit status.
"""

from __future__ import annotations

import sys

from gpuenv.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, GpuenvError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def __getattr__(name: str) -> Any:
    # The parser lives in _parser so that importing gpuenv.cli stays cheap.
    if name in ("COMMANDS", "build_parser"):
        from gpuenv.cli import _parser

        return getattr(_parser, name)
    raise AttributeError(name)


def _head(argv: Sequence[str]) -> Sequence[str]:
    """The arguments before a ``--`` (what follows belongs to the user's command)."""
    return argv[: list(argv).index("--")] if "--" in argv else argv


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    from gpuenv.cli import _fastrun

    fast = _fastrun.parse(args_list)
    if fast is not None:
        return _fastrun.main(fast)
    return _full_main(args_list)


def entry() -> int:
    """The console script: ``main`` and then the exit.

    A process that used py-rattler ends with ``os._exit``: rattler's native runtime
    keeps worker threads that, torn down during interpreter finalization (after a
    failed solve especially), now and then crash the process with SIGSEGV after
    gpuenv has already said everything, turning exit 3 into -11. Everything is
    flushed first, and nothing of gpuenv's runs after this point anyway.
    """
    code = main()
    if "rattler" in sys.modules:
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _configure_caches() -> None:
    """Point the library's caches at gpuenv's cache dir (environment read here, once)."""
    from gpuenv import _settings
    from gpuenv.cli._common import cache_dir

    _settings.cache_dir = cache_dir()


def _full_main(argv: list[str]) -> int:
    from gpuenv.cli import _output, _parser

    as_json = "--json" in _head(argv)
    verbose = 0
    try:
        name = _parser.command_name(argv)
        parser = _parser.build_parser(only=name)
        args = parser.parse_args(argv)
        verbose = args.verbose or 0
        as_json = bool(getattr(args, "json", False))
        if args.command is None:
            parser.print_help()
            return 0
        command = _parser.load(args.command)
        _configure_caches()
        return command.run(args)
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
