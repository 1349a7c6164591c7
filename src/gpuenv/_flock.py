"""Advisory file locks between gpuenv processes (and threads): ``flock(2)`` on a lock
file, waited for up to a timeout.

gpuenv needs exactly this and nothing more: exclusive, blocking with a timeout, released
by the kernel when the holder dies (a SIGKILLed install never leaves a stale lock). It
used the ``filelock`` package for it, whose recent releases import asyncio, sqlite3 and
ssl for features gpuenv does not use: 180 ms on every install, lock and gc. Each
``acquire`` opens its own file description, so two threads of one process exclude each
other as two processes do.
"""

from __future__ import annotations

import fcntl
import os
import time

POLL_SECONDS = 0.05


class LockTimeout(TimeoutError):
    """The lock at ``lock_file`` was held by another for longer than the timeout."""

    def __init__(self, lock_file: str) -> None:
        super().__init__(f"timed out waiting for the lock {lock_file}")
        self.lock_file = lock_file


class FileLock:
    """One holder's lock on ``path`` (created if missing, never deleted: deleting a lock
    file another process is waiting on would let a third take a different one)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, timeout: float, *, shared: bool = False) -> None:
        """Hold the lock, waiting up to ``timeout`` seconds (0: try once); ``shared``:
        together with other shared holders, excluding an exclusive one."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockTimeout(self.path) from None
                time.sleep(POLL_SECONDS)
            except BaseException:
                os.close(fd)
                raise
            else:
                self._fd = fd
                return

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor releases the flock
