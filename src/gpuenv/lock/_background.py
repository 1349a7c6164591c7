"""Network look-ups beside the real work, in daemon threads: an interrupted ``lock``
(Ctrl-C) ends at once instead of waiting for a slow server's timeout, as a
``ThreadPoolExecutor`` (whose threads the interpreter joins at exit) would make it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Background(Generic[T]):
    """``call()`` run in a daemon thread; ``result()`` waits for it and returns its value
    or raises what it raised."""

    def __init__(self, call: Callable[[], T], name: str = "gpuenv-background") -> None:
        self._call = call
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._error = exc

    def result(self, timeout: float | None = None) -> T | None:
        """The value; None when ``timeout`` passed first (the thread is left behind)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            return None
        if self._error is not None:
            raise self._error
        return self._value
