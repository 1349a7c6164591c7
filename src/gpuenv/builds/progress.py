"""Progress of a running build, read from its output: the elapsed time and the current
compile step (ninja's ``[12/48]`` counter, and the source file a compiler is working on),
handed to a plain callback."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

_NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s")
_SOURCE = re.compile(r"(?:^|\s)-c\s+(?:'|\")?(\S+?\.(?:cu|cpp|cxx|cc|c))(?:'|\")?(?:\s|$)")
_EXTENSION = re.compile(r"^building '([^']+)' extension")
HEARTBEAT_SECONDS = 10.0


@dataclass(frozen=True)
class BuildProgress:
    """One report on a running build: how long it has run and the step it is at (ninja's
    counter, the file being compiled); ``finished`` on the last."""

    package: str  # "flash-attn 2.6.3"
    elapsed: float  # seconds since the build started
    step: str | None = None  # "flash_fwd_hdim128.cu", "building 'flash_attn_2_cuda'"
    done: int | None = None  # ninja's counter
    total: int | None = None
    finished: bool = False

    def render(self) -> str:
        minutes, seconds = divmod(int(self.elapsed), 60)
        clock = f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
        where = f"[{self.done}/{self.total}] " if self.done is not None else ""
        what = f"{where}{self.step}" if self.step else where.strip() or "starting"
        state = "built" if self.finished else "building"
        return f"{state} {self.package} ({clock}): {what}"


ProgressCallback = Callable[[BuildProgress], None]


class Tracker:
    """Turns output lines into ``BuildProgress`` reports: one when the step changes, and
    a heartbeat at least every ``HEARTBEAT_SECONDS`` while lines keep coming."""

    def __init__(self, package: str, callback: ProgressCallback | None) -> None:
        self.package = package
        self.callback = callback
        self.started = time.monotonic()
        self.step: str | None = None
        self.done: int | None = None
        self.total: int | None = None
        self._last = 0.0

    def feed(self, line: str) -> None:
        changed = False
        ninja = _NINJA.match(line)
        if ninja:
            self.done, self.total = int(ninja.group(1)), int(ninja.group(2))
            changed = True
        source = _SOURCE.search(line)
        extension = _EXTENSION.match(line)
        if source:
            step = source.group(1).rsplit("/", 1)[-1]
            changed = changed or step != self.step
            self.step = step
        elif extension:
            self.step, changed = f"building {extension.group(1)}", True
        now = time.monotonic()
        if changed or now - self._last >= HEARTBEAT_SECONDS:
            self._report(now, finished=False)

    def start(self) -> None:
        """The first report: the build began (no step yet)."""
        self._report(time.monotonic(), finished=False)

    def finish(self) -> None:
        self._report(time.monotonic(), finished=True)

    def _report(self, now: float, *, finished: bool) -> None:
        self._last = now
        if self.callback is not None:
            self.callback(
                BuildProgress(
                    self.package, now - self.started, self.step, self.done, self.total, finished
                )
            )
