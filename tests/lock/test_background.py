"""Look-ups beside the work: values and errors come back; a slow one is left behind."""

from __future__ import annotations

import threading
import time

import pytest

from gpuenv.lock._background import Background


def test_the_value_and_the_error_come_back() -> None:
    assert Background(lambda: 42).result() == 42

    def fail() -> int:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        Background(fail).result()


def test_a_slow_look_up_is_left_behind_in_a_daemon_thread() -> None:
    release = threading.Event()
    slow = Background(lambda: release.wait(10))
    started = time.monotonic()
    assert slow.result(timeout=0.05) is None
    assert time.monotonic() - started < 2
    assert slow._thread.daemon  # an interrupted lock exits without waiting for it
    release.set()
