"""An interrupt Python could not propagate (raised inside a weakref callback, an at-fork
hook, a __del__) is delivered again and raised in ordinary code, never lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap


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
