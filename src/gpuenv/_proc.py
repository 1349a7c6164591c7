"""The one way gpuenv runs subprocesses.

Always an argument list (never a shell string), always a timeout, output captured,
and failures raised as ``ExternalToolError`` with the command and the tail of stderr.

Children die with gpuenv. Each child runs in its own session and process group
(``start_new_session``), so its whole tree (the probe's NCCL ranks, uv's workers) can
be killed at once; and the group is killed with SIGKILL on every way out of ``run``:
the child finished (stragglers it left behind), a timeout, an exception, Ctrl-C or
SIGTERM (which the console script turns into an exception, ``errors.Interrupted``);
one that arrives while the child starts is held back until the child is in hand
(``_popen``), or it would leave a child nothing holds. On Linux the child also asks
the kernel for SIGKILL when gpuenv dies (``PR_SET_PDEATHSIG``), which covers a SIGKILL
of gpuenv itself. That signal fires when the *thread* that started the child ends;
``run`` and ``stream`` wait for their child in the thread that started it, and so do
the callers of ``start`` (or abandon it there), so the child is always gone before that
thread can end. A grandchild does not
inherit the death signal: on a SIGKILL of gpuenv, one whose parent does not pass it on
(the probe's NCCL ranks ask for it, builds run under ``builds/_supervise.py``)
outlives it.

The child's stdin is ``/dev/null`` unless ``input_text`` is given: in its own session
it has no terminal to read, and nothing gpuenv runs should wait on one.

``running()`` names the children running now, so a progress display can say how much
they have read (``/proc/<pid>/io``: a download's bytes) without the library knowing
anything of displays; a child that only reads local files beside a download
(``metered=False``: install's early wheels) is left out of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from gpuenv.errors import ExternalToolError

# Nothing of pathlib, typing or dataclasses at run time (5-10 ms of imports together): a
# lock starts its first uv (lock.headstart) before anything else needs them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, TypeVar

    _Line = TypeVar("_Line", str, bytes)


def _debug(message: str, *args: object) -> None:
    """A debug record for a program that configured ``logging`` (a handler on the root
    logger or on gpuenv's): one that did has imported it, and with no handler a debug
    record goes nowhere, so the module (4 ms of imports: traceback, string, weakref) is
    never imported for it. Nor is logging's lock taken when nothing is configured
    (handlers read as plain attributes): every fork takes that lock, and Ctrl-C landing
    while a thread holds it left the uv run beside unable to start (uv.py's note)."""
    logging = sys.modules.get("logging")
    if logging is None:
        return
    loggers = logging.Logger.manager.loggerDict
    chain = (loggers.get(__name__), loggers.get("gpuenv"), logging.root)
    if any(getattr(logger, "handlers", None) for logger in chain):
        logging.getLogger(__name__).debug(message, *args)


STDERR_TAIL_LINES = 20
PR_SET_PDEATHSIG = 1
DRAIN_SECONDS = 5.0  # reading what a killed child left in its pipes
WAKE_SECONDS = 0.1  # how often a wait for a child wakes to run a pending signal handler


class ProcResult:
    """A finished child of ``run`` (or ``start``): its argv, exit status, captured output
    and wall-clock seconds."""

    __slots__ = ("argv", "returncode", "seconds", "stderr", "stdout")

    def __init__(
        self, argv: tuple[str, ...], returncode: int, stdout: str, stderr: str, seconds: float
    ) -> None:
        self.argv, self.returncode, self.seconds = argv, returncode, seconds
        self.stdout, self.stderr = stdout, stderr

    def __repr__(self) -> str:
        return f"ProcResult(argv={self.argv!r}, returncode={self.returncode})"


class Watch:
    """What a caller follows of a child while ``run`` runs it, each optional:
    ``on_stderr_line`` sees each line of stderr as it arrives (the probe names each check
    as it starts it; stderr is still captured whole); ``on_start`` is given the child's
    pid, its process group's too, as soon as it runs (a caller in another thread that may
    have to kill it); ``metered=False`` keeps it out of ``running()`` (a child that reads
    local files beside a download)."""

    __slots__ = ("metered", "on_start", "on_stderr_line")

    def __init__(
        self,
        on_stderr_line: Callable[[str], None] | None = None,
        on_start: Callable[[int], None] | None = None,
        metered: bool = True,
    ) -> None:
        self.on_stderr_line, self.on_start, self.metered = on_stderr_line, on_start, metered


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


_prctl: Callable[..., int] | None = None
_running: set[int] = set()  # pids of the children started here and not yet reaped
# Set by ``kill_running``: the command is ending, interrupted. A child a thread starts
# after it is killed at once (a resolution thread's uv, started as the interrupted lock
# removed its folders, wrote its output and made the folder again); ``resume`` clears it.
_ending: list[bool] = []  # [True] once set (a list: no threading import on run's path)


def _track(process: subprocess.Popen[Any]) -> None:
    """``process`` noted as running, or killed where the command is ending: added first,
    then checked, while ``kill_running`` sets the flag first, then looks, so that every
    child is either seen by it or sees the flag."""
    _running.add(process.pid)
    if _ending:
        kill_group(process)
        raise ExternalToolError("gpuenv is ending (interrupted): no new command is run")


def resume() -> None:
    """A new command in this process (the tests' in-process CLI): children may start."""
    _ending.clear()


def running() -> tuple[int, ...]:
    """The pids of the children gpuenv is running now (for progress displays)."""
    return tuple(_running)


def _death_signal(mask: set[int | signal.Signals] | None = None) -> Callable[[], None] | None:
    """The function a child runs between fork and exec (Linux): SIGKILL me when my
    parent dies; and if the parent already died in between, exit at once. ``mask``: the
    signal mask to run with (the parent held some back while it started the child)."""
    global _prctl  # noqa: PLW0603 - loaded once, before any fork
    if not sys.platform.startswith("linux"):
        return None
    if _prctl is None:
        try:
            import ctypes

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
            return None
    prctl, parent = _prctl, os.getpid()

    def child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if os.getppid() != parent:
            os._exit(1)

    return child


# The signals the console script turns into exceptions (cli._signals). A child started
# while one arrives was lost: Python raises it inside Popen, while it waits for the
# child's exec, and the Popen (the only handle on the child) never reaches the caller,
# so nothing killed the child's group (its own children outlived gpuenv). They are
# held back while a child starts, and raised once ``_popen`` holds it.
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _hold_signals() -> set[int | signal.Signals] | None:
    """Block ``_HELD`` in this thread (the main one: where Python runs its handlers);
    the mask before, or None where nothing was blocked."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    if not sys.platform.startswith("linux"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)


def _popen(args: tuple[str, ...], **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` in its own session, with the death signal, and no child lost
    to a signal that arrives while it starts: that signal is raised once the child is
    held, and the child's group is killed and reaped before it propagates."""
    held = _hold_signals()
    # Made first and started second: when a signal is raised inside Popen after all (it
    # went to another thread, which holds nothing back, and Python runs the handler in
    # this one at once), the object, and with it the pid of a child already forked, is
    # still here to kill and reap. A thread a test left running did that once in a full
    # run of the tests.
    popen = subprocess.Popen
    process = popen.__new__(popen)
    try:
        popen.__init__(  # an argument list, never a shell (S603 is off)
            process,
            args,
            start_new_session=True,  # its own process group: killed as one
            preexec_fn=_death_signal(held),  # prctl and the mask only (PLW1509)
            **options,
        )
    except BaseException:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        if getattr(process, "returncode", None) is None:  # else Popen reaped it (exec failed)
            _kill_forked(getattr(process, "pid", None))
        raise
    try:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a held signal raises here
    except BaseException:
        kill_group(process)
        _drain(process)
        raise
    return process


def _kill_forked(pid: int | None) -> None:
    """SIGKILL the group of a child that Popen forked but never handed back, and reap it
    (it leads its own group: ``start_new_session``). Only for a child not yet reaped:
    until then its pid cannot name another process."""
    if pid is None:
        return
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def kill_running() -> None:
    """SIGKILL every child started here that is still running, with its group, and wait
    until each has ended (left for its owner to reap: ``WNOWAIT``). For a command that
    was interrupted while threads of its own still run children: once this returns,
    none of them writes anything more (their folders can go)."""
    if not _ending:
        _ending.append(True)
    pids = tuple(_running)
    for pid in pids:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)
    if not sys.platform.startswith("linux"):
        return  # os.waitid: Linux's (macOS has none)
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def kill_group(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGKILL ``process`` and everything still in its process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        process.kill()


def _drain(process: subprocess.Popen[str]) -> tuple[str, str]:
    """What a killed child left in its pipes. A grandchild that escaped the group may
    hold them open: then give up reading after ``DRAIN_SECONDS``."""
    try:
        stdout, stderr = process.communicate(timeout=DRAIN_SECONDS)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        for pipe in (process.stdin, process.stdout, process.stderr):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        process.wait()
        return "", ""
    return stdout or "", stderr or ""


def _not_permitted(label: str, args: tuple[str, ...], exc: PermissionError) -> ExternalToolError:
    """A program this user may not run: not executable, on a file system mounted
    ``noexec`` (a store there cannot run its environments' Python), or a folder on its
    way (or the working folder) closed to this user. Said as the tool's failure, not as
    a write that failed."""
    where = os.fsdecode(exc.filename) if exc.filename is not None else args[0]
    return ExternalToolError(
        f"{label} cannot be started: {where}: permission denied",
        argv=args,
        hint="make it executable (chmod +x), or keep it off a file system mounted noexec "
        "(findmnt -T PATH shows the mount's options)",
    )


def _unstartable(label: str, args: tuple[str, ...], exc: ValueError) -> ExternalToolError:
    """What the net says of a value no process can be given (a NUL byte reached an
    argument or the environment): the input's checks should have refused it first."""
    return ExternalToolError(
        f"{label} cannot be started: {exc} (a NUL byte in one of its arguments or in "
        "the environment, which no process can be given)",
        argv=tuple(a.replace("\0", "\\0") for a in args),
    )


def _spawn(
    args: tuple[str, ...],
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
    with_input: bool,
) -> subprocess.Popen[str]:
    return _popen(
        args,
        stdin=subprocess.PIPE if with_input else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )


def _communicate(
    process: subprocess.Popen[str], input_text: str | None, timeout: float, label: str
) -> tuple[str, str]:
    """The child's output; on any way out its process group is killed. The wait wakes
    every ``WAKE_SECONDS`` (``communicate`` loses no output across its timeouts): a
    signal that another thread received (any thread that does not block it may take a
    process-directed one) has its handler run in this thread only when it next runs
    Python code, and one asleep in poll() until the child ended never did."""
    deadline = time.monotonic() + timeout
    sent = input_text  # given once: communicate refuses input again once it has begun
    try:
        while True:
            left = deadline - time.monotonic()
            try:
                stdout, stderr = process.communicate(
                    sent, timeout=max(0.0, min(left, WAKE_SECONDS))
                )
                break
            except subprocess.TimeoutExpired:
                if left <= WAKE_SECONDS:
                    raise
                sent = None
    except subprocess.TimeoutExpired:
        kill_group(process)
        _, stderr = _drain(process)
        raise ExternalToolError(
            f"{label} did not finish within {timeout:g} s",
            argv=tuple(str(a) for a in process.args),  # type: ignore[union-attr]
            stderr_tail=_tail(stderr),
        ) from None
    except BaseException:
        kill_group(process)
        _drain(process)
        raise
    kill_group(process)  # stragglers the child left in its group
    return stdout or "", stderr or ""


def _awake_lines(source: Iterable[_Line]) -> Iterator[_Line]:
    """The lines of ``source`` (a child's pipe), read by a helper thread and handed to
    this one, which wakes every ``WAKE_SECONDS`` meanwhile: a signal handler another
    thread's signal left pending runs here then (see ``_communicate``)."""
    import queue
    import threading

    handed: queue.SimpleQueue[object] = queue.SimpleQueue()
    end = object()

    def read() -> None:
        try:
            for line in source:
                handed.put(line)
        except (OSError, ValueError):  # closed under it on the way out
            pass
        finally:
            handed.put(end)

    threading.Thread(target=read, daemon=True).start()
    while True:
        try:
            item = handed.get(timeout=WAKE_SECONDS)
        except queue.Empty:
            continue
        if item is end:
            return
        yield item  # type: ignore[misc]


def _awake_wait(process: subprocess.Popen[Any]) -> int:
    """``process.wait()``, waking every ``WAKE_SECONDS`` (see ``_awake_lines``)."""
    while True:
        try:
            return process.wait(timeout=WAKE_SECONDS)
        except subprocess.TimeoutExpired:
            continue


def _watch_stderr(
    process: subprocess.Popen[str],
    input_text: str | None,
    timeout: float,
    label: str,
    on_line: Callable[[str], None],
) -> tuple[str, str]:
    """``_communicate``, handing each stderr line to ``on_line`` as it comes. stdout (and
    stdin) are served by a helper thread; this thread reads stderr and waits for the
    child, which keeps the death signal's thread rule (module doc)."""
    import threading

    chunks: list[str] = []

    def serve() -> None:
        with contextlib.suppress(OSError, ValueError):
            if process.stdin is not None:
                with process.stdin:
                    process.stdin.write(input_text or "")
            assert process.stdout is not None
            chunks.append(process.stdout.read())

    expired = threading.Event()

    def expire() -> None:
        expired.set()
        kill_group(process)

    helper = threading.Thread(target=serve, daemon=True)
    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    lines: list[str] = []
    helper.start()
    timer.start()
    try:
        assert process.stderr is not None
        for line in _awake_lines(process.stderr):
            lines.append(line)
            on_line(line.rstrip("\r\n"))
        _awake_wait(process)
        helper.join(DRAIN_SECONDS)
    except BaseException:
        kill_group(process)
        _drain(process)
        raise
    finally:
        timer.cancel()
    kill_group(process)  # stragglers the child left in its group
    stderr = "".join(lines)
    if expired.is_set():
        raise ExternalToolError(
            f"{label} did not finish within {timeout:g} s",
            argv=tuple(str(a) for a in process.args),  # type: ignore[union-attr]
            stderr_tail=_tail(stderr),
        )
    return "".join(chunks), stderr


def start(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input_text: str | None = None,
    check: bool = True,
    what: str | None = None,
    metered: bool = True,
) -> Started:
    """Start ``argv`` and return at once: what the caller does next runs beside the
    child (install checks its artifacts while uv makes the environment), and
    ``Started.wait`` then gives what ``run`` gives. The caller waits for it, or
    abandons it, in this thread (the death signal's rule, module doc); on a way out
    between the two, ``abandon`` kills it. Arguments as ``run``'s."""
    args = tuple(os.fspath(a) for a in argv)
    label = what or os.path.basename(args[0])  # noqa: PTH119 - pathlib not loaded here
    started = time.perf_counter()
    try:
        process = _spawn(args, env, cwd, input_text is not None)
    except FileNotFoundError as exc:
        raise ExternalToolError(f"{label}: program not found: {args[0]}", argv=args) from exc
    except PermissionError as exc:
        raise _not_permitted(label, args, exc) from exc
    except ValueError as exc:  # a NUL byte in an argument or the environment
        raise _unstartable(label, args, exc) from None
    try:
        if metered:
            _track(process)
        return Started(process, args, label, timeout, input_text, check, started)
    except BaseException:  # a signal before the caller holds the child
        kill_group(process)
        _drain(process)
        raise


class Started:
    """A child ``start`` started: ``wait`` for its result, or ``abandon`` it."""

    def __init__(
        self,
        process: subprocess.Popen[str],
        args: tuple[str, ...],
        label: str,
        timeout: float,
        input_text: str | None,
        check: bool,
        started: float,
    ) -> None:
        self.process = process
        self._args, self._label, self._timeout = args, label, timeout
        self._input, self._check, self._started = input_text, check, started
        self._result: ProcResult | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait(self, on_stderr_line: Callable[[str], None] | None = None) -> ProcResult:
        """The child's result once it ends (its group killed, as ``run`` does);
        ``ExternalToolError`` as ``run`` raises it. A second call gives the same
        result."""
        if self._result is not None:
            return self._result
        process, label = self.process, self._label
        try:
            if on_stderr_line is None:
                stdout, stderr = _communicate(process, self._input, self._timeout, label)
            else:
                stdout, stderr = _watch_stderr(
                    process, self._input, self._timeout, label, on_stderr_line
                )
        finally:
            _running.discard(process.pid)
        seconds = time.perf_counter() - self._started
        returncode = process.returncode
        _debug("ran %s in %.3f s (exit %d)", self._args, seconds, returncode)
        self._result = ProcResult(self._args, returncode, stdout, stderr, seconds)
        if self._check and returncode != 0:
            tail = _tail(stderr or stdout)
            raise ExternalToolError(
                f"{label} failed (exit {returncode})" + (f":\n{tail}" if tail else ""),
                argv=self._args,
                returncode=returncode,
                stderr_tail=tail,
            )
        return self._result

    def abandon(self) -> None:
        """Kill the child's group and reap it (nothing when it was waited for)."""
        if self._result is not None or self.process.returncode is not None:
            return
        kill_group(self.process)
        _drain(self.process)
        _running.discard(self.process.pid)


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input_text: str | None = None,
    check: bool = True,
    what: str | None = None,
    watch: Watch | None = None,
) -> ProcResult:
    """Run ``argv`` and return its captured output.

    ``check`` raises ``ExternalToolError`` on a non-zero exit; a missing program or a
    timeout always raises. ``what`` names the step for the error message ("uv pip
    compile"); it defaults to the program name. ``watch``: what the caller follows of
    the child while it runs.
    """
    watch = watch or Watch()
    child = start(
        argv,
        timeout=timeout,
        env=env,
        cwd=cwd,
        input_text=input_text,
        check=check,
        what=what,
        metered=watch.metered,
    )
    if watch.on_start is not None:
        try:
            watch.on_start(child.pid)
        except BaseException:
            child.abandon()
            raise
    return child.wait(watch.on_stderr_line)


class StreamResult:
    """A finished child of ``stream``: its argv, exit status (negative: killed by that
    signal) and wall-clock seconds (its output went to the caller, line by line)."""

    __slots__ = ("argv", "returncode", "seconds")

    def __init__(self, argv: tuple[str, ...], returncode: int, seconds: float) -> None:
        self.argv, self.returncode, self.seconds = argv, returncode, seconds


def stream(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    what: str | None = None,
) -> StreamResult:
    """Run ``argv`` in a process group of its own (a new session), its stdout and stderr
    merged, and hand each line to ``on_line`` as it arrives: for long builds, whose
    progress is shown while they run. The exit status is returned, not checked.

    On a timeout, an interrupt, or an exception raised by ``on_line``, the whole group is
    killed (every compiler the build started, not only its first process) before this
    returns or raises."""
    import threading

    args = tuple(os.fspath(a) for a in argv)
    label = what or os.path.basename(args[0])  # noqa: PTH119 - pathlib not loaded here
    started = time.perf_counter()
    try:
        process = _popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    except FileNotFoundError as exc:
        raise ExternalToolError(f"{label}: program not found: {args[0]}", argv=args) from exc
    except PermissionError as exc:
        raise _not_permitted(label, args, exc) from exc
    except ValueError as exc:  # a NUL byte in an argument or the environment
        raise _unstartable(label, args, exc) from None
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        kill_group(process)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        _track(process)
    except BaseException:
        timer.cancel()
        _drain(process)
        raise
    try:
        assert process.stdout is not None
        for raw in _awake_lines(process.stdout):
            on_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        returncode = _awake_wait(process)
    except BaseException:
        kill_group(process)
        process.wait()
        raise
    finally:
        _running.discard(process.pid)
        timer.cancel()
        if process.stdout is not None:
            process.stdout.close()
    kill_group(process)  # whatever the build left running in its group
    seconds = time.perf_counter() - started
    _debug("streamed %s in %.3f s (exit %d)", args, seconds, returncode)
    if expired.is_set():
        raise ExternalToolError(f"{label} did not finish within {timeout:g} s", argv=args)
    return StreamResult(args, returncode, seconds)
