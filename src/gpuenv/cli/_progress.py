"""Progress of long work, drawn on stderr while it runs.

Three modes, chosen once per command (``mode``):

- ``live`` (stderr is a terminal): a rich spinner with the current phase, its elapsed
  time, the phase's latest detail (a build's compile step) and what gpuenv and its
  tools have read so far with the rate (``/proc/<pid>/io``: a download's bytes, for uv's
  processes and for rattler, which runs inside gpuenv). Each finished phase stays as
  one line with its duration: ``✓ cpu: installing 42 pip packages  3.1 s``.
- ``lines`` (stderr is a file or a pipe, as in CI): one plain line per phase when it
  starts, nothing else: a log stays readable.
- ``off`` (``--json`` or ``-q/--quiet``): nothing at all.

The library reports through a plain callable (``gpuenv._progress``); this module is the
only one that draws. Every text passes through the same redaction and escaping as the
rest of gpuenv's output. rich is imported only in ``live`` mode.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gpuenv.cli._output import clean

if TYPE_CHECKING:
    from rich.live import Live

LIVE, LINES, OFF = "live", "lines", "off"
_MiB = 1024 * 1024
# Below this, what was read is gpuenv's own imports and small index pages, not news.
_SHOWN_FROM = 16 * _MiB


def mode(args: argparse.Namespace) -> str:
    """How this command shows progress: off under --json or -q, else by stderr."""
    if getattr(args, "json", False) or getattr(args, "quiet", False):
        return OFF
    try:
        return LIVE if sys.stderr.isatty() else LINES
    except (AttributeError, ValueError):  # stderr closed or replaced by an odd object
        return LINES


def _read_chars(pid: int | str) -> int | None:
    """Bytes ``pid`` has read so far (sockets and files: a download's bytes)."""
    try:
        with open(f"/proc/{pid}/io", "rb") as handle:
            for line in handle.read(4096).splitlines():
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class IoMeter:
    """What this process and its running children have read since the meter started,
    and the recent rate. Children come and go (``_proc.running``): each is counted from
    when it was first seen, and what it read stays counted after it exits."""

    def __init__(self) -> None:
        self._baseline = _read_chars("self") or 0
        self._children: dict[int, tuple[int, int]] = {}  # pid -> (first, last) reading
        self._samples: list[tuple[float, int]] = []

    def total(self) -> int:
        from gpuenv import _proc

        own = (_read_chars("self") or self._baseline) - self._baseline
        for pid in _proc.running():
            now = _read_chars(pid)
            if now is None:
                continue
            first, _last = self._children.get(pid, (now, now))
            self._children[pid] = (first, now)
        children = sum(last - first for first, last in self._children.values())
        return max(0, own) + children

    def sample(self) -> tuple[int, float]:
        """(bytes so far, bytes per second over the last few seconds)."""
        now, total = time.monotonic(), self.total()
        self._samples = [s for s in self._samples if now - s[0] <= 3.0]
        self._samples.append((now, total))
        first_at, first_total = self._samples[0]
        span = now - first_at
        return total, (total - first_total) / span if span > 0.2 else 0.0


def _size(count: float) -> str:
    if count >= 1024 * _MiB:
        return f"{count / (1024 * _MiB):.2f} GiB"
    return f"{count / _MiB:.1f} MiB"


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes}m{seconds:02d}s"


def say(text: str) -> None:
    """``text`` on stderr, flushed; a stderr that cannot take it (full, closed, a broken
    pipe) loses the line, not the command: ``verify 2>/dev/full`` recorded its own
    progress line's ENOSPC as the probe's failure, and ``lock`` stopped at its first."""
    stream = sys.stderr
    if stream is None:  # started with fd 2 closed
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


class Display:
    """The progress callable a command hands to the library (phases by calling it,
    details through ``detail``); a context manager that finishes the display on exit,
    marking the last phase failed if the work raised."""

    def __init__(self, how: str) -> None:
        self.mode = how
        self.started = time.monotonic()
        self._phase: str | None = None
        self._phase_started = self.started
        self._detail: str | None = None
        self._failed = False  # the current phase failed (the work went on)
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._meter: IoMeter | None = None

    # -- what the library calls ------------------------------------------------------------

    def __call__(self, text: str) -> None:
        text = clean(text)
        with self._lock:
            if text == self._phase:
                return
            finished, ok = (self._phase, self._phase_started), not self._failed
            self._phase, self._phase_started, self._detail = text, time.monotonic(), None
            self._failed = False
            self._print_finished(finished, ok=ok)
        if self.mode == LINES:
            say(f"gpuenv: {text}\n")

    def detail(self, text: str) -> None:
        if self.mode == LIVE:
            self._detail = clean(text)

    def failed(self) -> None:
        with self._lock:
            self._failed = True

    # -- the context manager -----------------------------------------------------------------

    def __enter__(self) -> Display:
        if self.mode == LIVE:
            from rich.live import Live

            from gpuenv.cli._output import console

            self._meter = IoMeter()
            self._live = Live(
                _Renderable(self),
                console=console(stderr=True),
                refresh_per_second=4,
                transient=True,
            )
            self._live.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self._lock:
            live, self._live = self._live, None
            if live is None:
                return
            live.stop()
            finished = self._phase, self._phase_started
            self._phase = None
            ok = kind is None and not self._failed
            self._print_finished(finished, ok=ok, console=live.console)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    # -- drawing -----------------------------------------------------------------------------

    def _print_finished(
        self, finished: tuple[str | None, float], *, ok: bool, console: Any = None
    ) -> None:
        """A finished phase as the line that stays: mark, text, duration."""
        phase, started = finished
        console = console or (self._live.console if self._live is not None else None)
        if phase is None or console is None:
            return
        from rich.markup import escape

        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        took = _seconds(time.monotonic() - started)
        console.print(f"{mark} {escape(phase)}  [dim]{took}[/]")

    def render(self) -> Any:
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text

        phase, started, detail = self._phase, self._phase_started, self._detail
        line = Text(phase or "working")
        line.append(f"  {_seconds(time.monotonic() - started)}", style="dim")
        if self._meter is not None:
            total, rate = self._meter.sample()
            if total >= _SHOWN_FROM:
                line.append(f"  read {_size(total)}", style="cyan")
                if rate >= 64 * 1024:
                    line.append(f" · {_size(rate)}/s", style="cyan")
        grid = Table.grid(padding=(0, 1))
        grid.add_row(Spinner("dots"), line)
        if detail:
            grid.add_row("", Text(detail, style="dim", overflow="ellipsis", no_wrap=True))
        return grid


class _Renderable:
    def __init__(self, display: Display) -> None:
        self._display = display

    def __rich__(self) -> Any:
        return self._display.render()


def display(args: argparse.Namespace) -> Display:
    """The display for this command's flags and stderr."""
    return Display(mode(args))
