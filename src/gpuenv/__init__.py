"""gpuenv: reproducible, verified GPU deep-learning environments.

Only ``__version__`` lives here, and the start-up guard below: importing the package
must stay free so that ``gpuenv run`` and ``gpuenv --help`` start fast.
"""

__version__ = "0.1.0"


def _startup_signal(signum: int, _frame: object) -> None:
    """Ctrl-C or SIGTERM before the CLI has started: nothing is running yet and
    nothing needs cleaning up, so one line and the exit status, never a traceback of
    whatever import was under way. ``gpuenv.cli.entry`` replaces this handler."""
    import os

    os.write(2, b"gpuenv: interrupted\n" if signum == 2 else b"gpuenv: terminated\n")
    os._exit(128 + signum)


def _guard_start_up(*, force: bool = False) -> None:
    # Only in the `gpuenv` console script (never when a program imports gpuenv):
    # this is the first gpuenv code it runs, before the CLI's imports.
    if not force:
        import sys

        main = sys.modules.get("__main__")
        script = str(getattr(main, "__file__", "") or "")
        if script.rsplit("/", 1)[-1] != "gpuenv":
            return
    import _signal  # type: ignore[import-not-found]  # builtin; `signal` would import enum

    for number in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(number, _startup_signal)


_guard_start_up()
