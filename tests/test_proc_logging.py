"""``_proc``'s debug records: logging's lock (which every fork takes) is never taken
when nothing is configured to receive them, and a configured handler gets them."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import logging, sys
from gpuenv import _proc
taken = []
real = logging._acquireLock
def counting():
    taken.append(1)
    real()
logging._acquireLock = counting
if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(name)s %(message)s")
    taken.clear()
_proc.run(["true"], timeout=10)
_proc.run(["true"], timeout=10)
print("lock taken", len(taken))
"""


def _probe(mode: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return out.stdout


def test_no_handler_no_record_and_no_lock() -> None:
    out = _probe("bare")
    assert out.splitlines() == ["lock taken 0"]


def test_a_configured_handler_gets_the_records() -> None:
    out = _probe("configured")
    assert out.count("gpuenv._proc ran ('true',)") == 2, out
