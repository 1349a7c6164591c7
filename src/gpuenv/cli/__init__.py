"""gpuenv's command line: parse flags, call one library function, render.

Commands are registered in a fixed table (``_parser.COMMANDS``, no package scanning)
and every command module imports only the standard library at module level; domain
modules are imported inside ``run``. ``gpuenv run`` goes further: ``main`` recognises
it before argparse is even imported (``_fastrun``), because its whole cost is added
to the user's command. ``main`` is the only place that turns a ``GpuenvError`` into
output and an exit status.

Signals. The console script (``entry``) turns SIGTERM and SIGHUP into
``errors.Interrupted`` (a ``KeyboardInterrupt``, as Ctrl-C is), raised wherever gpuenv
is: every clean-up on the way out runs (children killed, a half-built prefix
removed), then one line and exit 128 + the signal (130 for Ctrl-C, 143 for SIGTERM).
Before the CLI is imported, ``gpuenv.__init__`` guards the start-up the same way.
"""

from __future__ import annotations

import sys

from gpuenv.cli._signals import install_signal_handlers, interrupt_code, interrupt_received
from gpuenv.errors import EXIT_INTERNAL, GpuenvError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuenv.cli._common import Settings


def __getattr__(name: str) -> Any:
    # The parser lives in _parser so that importing gpuenv.cli stays cheap.
    if name in ("COMMANDS", "build_parser"):
        from gpuenv.cli import _parser

        return getattr(_parser, name)
    raise AttributeError(name)


GC_THRESHOLD = 100_000

# Set by ``entry``: this process is the console script, whose dataclasses may compile
# through gpuenv.cli._classcode's table (never a program that imports gpuenv).
_console: list[bool] = []


def _head(argv: Sequence[str]) -> Sequence[str]:
    """The arguments before a ``--`` (what follows belongs to the user's command)."""
    return argv[: list(argv).index("--")] if "--" in argv else argv


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    from gpuenv.cli import _fastrun

    fast = _fastrun.parse(args_list)
    if fast is not None:
        return _fastrun.main(fast)
    proc = sys.modules.get("gpuenv._proc")  # lock --check never loads it: not for this
    if proc is not None:
        proc.resume()  # a command interrupted before this one in the process (the tests')
    from gpuenv.cli import _fastlock

    plain = _fastlock.parse(args_list)
    if plain is None:
        return _full_main(args_list)
    from gpuenv.lock import headstart

    try:
        _fastlock.begin(plain)
        return _full_main(args_list)
    finally:
        # lock_cmd's own release (an interrupted lock's included), unless the command
        # never got that far: a parse error, a bad setting, an interrupt before it.
        headstart.release()


def entry() -> int:
    """The console script: ``main``, then the exit, with ``os._exit`` once stdout and
    stderr are flushed: nothing of gpuenv's runs after ``main`` and the interpreter's
    teardown buys nothing but two hazards. py-rattler's native runtime keeps worker
    threads that, torn down during finalization (after a failed solve especially),
    now and then crash the process with SIGSEGV after gpuenv has said everything,
    turning exit 3 into -11; and a Ctrl-C during teardown, once Python has put back
    the default handlers, would kill the process silently instead of the one line.
    """
    install_signal_handlers()
    _console.append(True)
    # The cyclic collector, every 100,000 container allocations instead of 700: a
    # command's start-up creates some 200 modules' worth of objects that all live to
    # its exit, and at 700 the collector ran ~60 times during a lock, walking them
    # again each time (9-13 ms of CPU; 6-8 ms of an install). Cycles are still
    # collected in a long command, at that pace.
    import gc

    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        code = main()
    except KeyboardInterrupt as interrupt:  # one arriving outside main's own handler
        from gpuenv.cli import _output

        _output.render_interrupt(interrupt, as_json=False)
        code = interrupt_code(interrupt)
    except Exception:
        # A signal's exception that the interpreter turned into another one on the way
        # out of ``main``: still the signal's line and code. Anything else is a bug and
        # keeps its traceback.
        received = interrupt_received()
        if received is None:
            raise
        from gpuenv.cli import _output

        _output.render_interrupt(received, as_json=False)
        code = interrupt_code(received)
    import contextlib
    import os

    import gpuenv

    try:
        gpuenv._guard_start_up(force=True)  # from here on a signal just ends the process
    except KeyboardInterrupt as late:  # one delivered again after an import (cli._signals)
        from gpuenv.cli import _output

        gpuenv._guard_start_up(force=True)
        _output.render_interrupt(late, as_json=False)
        code = interrupt_code(late)
    if code not in (129, 130, 143):  # interrupted: the tables stay as they were
        for name in ("gpuenv.cli._classcode", "gpuenv.cli._patterncode"):
            table = sys.modules.get(name)
            if table is not None:
                table.save()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe, or a stream closed before gpuenv started (None): nothing to say
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    os._exit(code)


def _configure(settings: Settings) -> None:
    """Point the library's caches at gpuenv's cache dir (environment read once, in
    ``settings``)."""
    from gpuenv import _settings

    _settings.cache_dir = settings.cache_dir
    _settings.state_dir = settings.state_dir
    _settings.facts_file = settings.facts_file


def _machine_fault(exc: OSError) -> GpuenvError | None:
    """A write that failed for the machine's reasons (a full disk or quota, a read-only
    file system, a permission, an I/O error) and that no write site translated: still
    the world's fault, not a bug in gpuenv. Every write site should use
    ``gpuenv._fs.writing``; this is the net under any that does not."""
    import errno

    from gpuenv._fs import storage_error

    faults = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
    if exc.errno not in faults:
        return None
    return storage_error(exc, exc.filename or "(unknown path)", "a file")


def _path_fault(exc: OSError) -> GpuenvError | None:
    """A path the user gave that no file system can hold (a name too long, a loop of
    symbolic links) and that no command checked: the input's fault, exit 2, not a bug
    in gpuenv (``pack -o``, ``export -o``, ``verify --python`` with a 10,000-character
    path ended in exit 70)."""
    import errno
    import os

    reasons = {
        errno.ENAMETOOLONG: "a name longer than the file system allows",
        errno.ELOOP: "a loop of symbolic links",
    }
    reason = reasons.get(exc.errno) if exc.errno is not None else None
    if reason is None:
        return None
    name = os.fsdecode(exc.filename) if exc.filename is not None else "(a path)"
    if len(name) > 100:
        name = f"{name[:60]}...{name[-20:]} ({len(name)} characters)"
    hint = "fix the links" if exc.errno == errno.ELOOP else "give a shorter path"
    return UsageError(f"{name}: {reason}", hint=hint)


def _unexpected(exc: Exception, *, as_json: bool, verbose: int) -> int:
    """An exception no command turned into a ``GpuenvError``: the disguise of a signal
    (its line and 128 + its number), a machine fault (exit 5, named as such) or a bug
    (exit 70, with the bug-report hint)."""
    from gpuenv.cli import _output

    received = interrupt_received()
    if received is not None:  # the signal's exception, disguised by where it landed
        _output.render_interrupt(received, as_json=as_json)
        return interrupt_code(received)
    storage = (_machine_fault(exc) or _path_fault(exc)) if isinstance(exc, OSError) else None
    if isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop from "):
        # pathlib's resolve() of a path through a loop of links (3.11: RuntimeError)
        import errno

        looped = str(exc).removeprefix("Symlink loop from ").strip("'")
        storage = _path_fault(OSError(errno.ELOOP, "Symlink loop", looped))
    if storage is not None:
        _output.render_error(storage, as_json=as_json, verbose=verbose)
        return storage.exit_code
    _output.render_internal(exc, as_json=as_json, verbose=verbose)
    return EXIT_INTERNAL


def _full_main(argv: list[str]) -> int:
    from gpuenv.cli import _output

    with _output.guarded_stdout():
        _output.fit_streams()
        return _command(argv)


def _no_empty_values(args: object) -> None:
    """An option given an empty value (a script's unset variable) is refused: `--target
    ''` meant every target, and `kernel install --prefix ''` wrote into the current
    folder."""
    from gpuenv.errors import UsageError

    for option in ("target", "prefix"):
        value = getattr(args, option, None)
        if "" in (value if isinstance(value, list) else [value]):
            raise UsageError(f"--{option} needs a value", hint=f"leave --{option} out, or name one")


def _command(argv: list[str]) -> int:
    from gpuenv.cli import _output, _parser

    as_json = "--json" in _head(argv)
    verbose = 0
    try:
        parser, args = _parser.parse(argv)
        verbose = args.verbose or 0
        as_json = bool(getattr(args, "json", False))
        if args.command is None:
            parser.print_help()
            return 0
        _no_empty_values(args)
        command = _parser.load(args.command)
        from gpuenv.cli._common import Settings

        settings = Settings()
        _configure(settings)
        if _console and settings.cache_dir is not None:
            from gpuenv.cli import _classcode

            _classcode.install(settings.cache_dir, args.command)
            from gpuenv.cli import _patterncode

            _patterncode.install(settings.cache_dir, args.command)
        code = command.run(args, settings)
        sys.stdout.flush()  # output that cannot be written fails the command, here
        return code
    except GpuenvError as err:
        if err.kind != "broken-pipe":  # its reader is gone: nothing to tell anyone
            _output.render_error(err, as_json=as_json, verbose=verbose)
        return err.exit_code
    except KeyboardInterrupt as interrupt:
        _output.render_interrupt(interrupt, as_json=as_json)
        return interrupt_code(interrupt)
    except SystemExit as exit_:  # --help / --version inside argparse
        return exit_.code if isinstance(exit_.code, int) else 0
    except Exception as exc:  # noqa: BLE001 - the one place unexpected errors are caught
        return _unexpected(exc, as_json=as_json, verbose=verbose)
