"""Run a build so that it cannot outlive gpuenv: ``python -I _supervise.py PID -- ARGV``.

A build is a tree of processes (uv, the build backend, ninja, a dozen nvcc/cicc/ptxas
jobs). gpuenv starts this script as the leader of a new process group; it asks the kernel
for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), then runs ARGV in the same
group. Whether gpuenv is interrupted, times out, or is killed with SIGKILL, the signal
reaches this script and it kills the whole group, every compile job included. It exits
with ARGV's status, or dies of the signal that killed ARGV.

Standard library only, run by path: it never imports gpuenv.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from types import FrameType

PR_SET_PDEATHSIG = 1


def _kill_group(signum: int | None, frame: FrameType | None) -> None:
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: _supervise.py PARENT_PID -- ARGV...\n")
        return 2
    parent = int(argv[0])
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _kill_group)
    # Not Linux: no death signal, but gpuenv's own group kill still applies.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request took effect
        _kill_group(None, None)
    child = subprocess.Popen(argv[2:])
    code = child.wait()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
