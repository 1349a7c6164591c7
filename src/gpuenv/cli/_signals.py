"""Signals: SIGTERM and SIGHUP become ``errors.Interrupted`` and Ctrl-C a
``KeyboardInterrupt``, raised wherever gpuenv is; and the exit code of an interrupt.

Its own module, below both ``gpuenv.cli`` (``entry``, ``main``) and ``cli._fastrun``
(``gpuenv run``'s path, which reports an interrupt the same way), so that neither
imports the other for it. Standard library only, and little of it: it is on the
``gpuenv run`` path.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # builtin; ``signal`` would import enum
import sys

from gpuenv.errors import EXIT_INTERRUPTED, Interrupted

# Names written out: the handler must not import anything (``signal.Signals`` would
# import enum), since it can run in the middle of another import.
_SIGNAL_NAMES = {1: "SIGHUP", 2: "SIGINT", 15: "SIGTERM"}

# Every signal the handlers have seen, in order. An exception raised from a handler
# can land inside the interpreter's own bookkeeping (importlib's module locks, seen
# as a KeyError about a thread id) and come out as some other exception; this list
# is how ``_unexpected`` still knows the process was asked to stop, not broken.
_received: list[int] = []


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    if _in_import(frame):
        _deliver_after_the_import(signum)
        return
    _received.append(signum)
    raise KeyboardInterrupt


def _raise_interrupted(signum: int, frame: object) -> None:
    if _in_import(frame):
        _deliver_after_the_import(signum)
        return
    _received.append(signum)
    raise Interrupted(signum, _SIGNAL_NAMES.get(signum, f"signal {signum}"))


def _in_import(frame: object) -> bool:
    """Whether the main thread was inside importlib's own code. An exception raised
    there can leave a module lock held while a background thread imports: one Ctrl-C
    hung `gpuenv add` for good (6 of 172 tries), the spec edited and the lock old."""
    while frame is not None:
        if getattr(getattr(frame, "f_code", None), "co_filename", "").startswith(
            "<frozen importlib"
        ):
            return True
        frame = getattr(frame, "f_back", None)
    return False


def _deliver_after_the_import(signum: int) -> None:
    """The signal again in a moment, when the import is done (imports take
    milliseconds; should it still be importing, this runs again)."""
    import _thread

    _thread.start_new_thread(_deliver_later, (signum,))


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """An interrupt raised where Python cannot propagate it (importlib's module-lock
    weakref callback, seen at 50 ms into start-up; logging's at-fork hook) would be
    printed as "Exception ignored in ..." with a traceback and then lost. It is
    delivered again instead, to be raised in ordinary code; anything else goes to
    Python's own hook.

    Not from here: a signal raised in the hook has its handler run at the hook's next
    instruction, inside the hook, where the interrupt is ignored again (and the command
    carried on). A short-lived thread raises it a moment later, once the hook has
    returned; should it land in a hook again, this runs again."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _received:
        import _thread

        _thread.start_new_thread(_deliver_later, (_received[-1],))
        return
    sys.__unraisablehook__(unraisable)


def _deliver_later(signum: int) -> None:
    import time

    time.sleep(0.005)
    _signal.raise_signal(signum)  # the handler runs on the main thread, as for any signal


def install_signal_handlers() -> None:
    """Ctrl-C raises ``KeyboardInterrupt``; SIGTERM and SIGHUP raise ``Interrupted``.
    Through ``_signal``: the ``signal`` module imports ``enum``, milliseconds that
    ``gpuenv run`` would add to every command."""
    sys.unraisablehook = _unraisable
    _signal.signal(_signal.SIGINT, _raise_keyboard_interrupt)
    for number in (_signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(number, _raise_interrupted)


def interrupt_received() -> KeyboardInterrupt | None:
    """The interrupt a signal handler raised, if one did (the first signal wins)."""
    if not _received:
        return None
    signum = _received[0]
    if signum == 2:
        return KeyboardInterrupt()
    return Interrupted(signum, _SIGNAL_NAMES.get(signum, f"signal {signum}"))


def interrupt_code(interrupt: KeyboardInterrupt) -> int:
    return interrupt.exit_code if isinstance(interrupt, Interrupted) else EXIT_INTERRUPTED
