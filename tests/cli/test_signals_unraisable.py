"""An interrupt Python could not propagate (raised inside a weakref callback, an at-fork
hook, a __del__) is delivered again and raised in ordinary code, never lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_an_interrupt_raised_where_it_cannot_propagate_is_raised_again_after() -> None:
    # The interrupt lands in a __del__ (an "unraisable" place): Python would print
    # "Exception ignored" and carry on; the command must stop with it instead.
    probe = textwrap.dedent(
        """
        import _signal, os, sys, time
        from gpuenv.cli import _signals
        _signals.install_signal_handlers()

        class Dies:
            def __del__(self):
                _signal.raise_signal(_signal.SIGINT)
                for _ in range(1000):  # the handler runs here, inside __del__
                    pass

        try:
            Dies()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                sum(range(100))
            print("carried on")
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "interrupted", out.stdout + out.stderr
    assert "Exception ignored" not in out.stderr


class _Code:
    def __init__(self, filename: str) -> None:
        self.co_filename = filename


class _Frame:
    def __init__(self, filename: str, back: object = None) -> None:
        self.f_code = _Code(filename)
        self.f_back = back


def test_an_interrupt_inside_importlib_waits_for_the_import_to_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One Ctrl-C that landed in importlib's module-lock code while a background thread
    imported hung `gpuenv add` for good (6 of 172 tries). It is delivered again once the
    import is done; anywhere else it is raised at once."""
    from gpuenv.cli import _signals

    later: list[int] = []
    monkeypatch.setattr(_signals, "_deliver_after_the_import", later.append)
    monkeypatch.setattr(_signals, "_received", [])
    importing = _Frame("<frozen importlib._bootstrap>", _Frame("/src/gpuenv/lock/target.py"))
    _signals._raise_keyboard_interrupt(2, _Frame("/src/gpuenv/plan/_reasons.py", importing))
    _signals._raise_interrupted(15, importing)
    assert later == [2, 15] and _signals._received == []
    with pytest.raises(KeyboardInterrupt):
        _signals._raise_keyboard_interrupt(2, _Frame("/src/gpuenv/lock/target.py"))
    assert _signals._received == [2]
