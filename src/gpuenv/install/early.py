"""Wheels installed into the prefix while the rest are still downloading.

A cold install fetches every artifact into the store (``install.artifacts``: pack and
later installs read those files) before uv installs from them. For a CUDA stack that
was an 8 s download, then 20 s of uv unpacking 4 GiB of wheels into 10 GiB of files:
1.6x uv's own install, which unpacks while it downloads. Here each wheel goes to uv as
soon as it is in the store: one ``uv pip install`` at a time, each taking every wheel
stored since the last began, so the unpacking runs beside the download.

The install after the fetch (``install.pip.install_pip``, the whole requirements, the
same file URLs) stays the authority. It finds these packages installed from the same
files and checks them in milliseconds, and installs what is left: sdists, and anything
an early run did not install. An early run that fails ends the early runs and is
otherwise forgotten: the full install meets the same problem and says it as ever.

On any way out of the fetch (a download failed, Ctrl-C) the running uv is killed and
waited for, so the caller discards a half-built prefix nobody is writing into.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv import _proc
from gpuenv._fs import release_cached
from gpuenv.install.pip import INSTALL_TIMEOUT, requirement_line
from gpuenv.lock.model import PipPackage

if TYPE_CHECKING:
    from gpuenv._fetch import Artifact

ABORT_WAIT = 10.0  # seconds to wait for a killed early run to be reaped


class _Cancelled(Exception):
    """An early run that was to start after the early runs were stopped."""


class EarlyWheels:
    """The early runs of one install: ``stored`` is told of each artifact as the fetch
    puts it in the store (from the fetch's threads); a thread of its own runs uv."""

    def __init__(
        self, prefix: Path, packages: Iterable[PipPackage], uv: Path, env: Mapping[str, str]
    ) -> None:
        self._wheels = {p.sha256: p for p in packages if p.filename.endswith(".whl")}
        self._argv: list[str | os.PathLike[str]] = [
            uv,
            "pip",
            "install",
            "--no-config",
            "--quiet",
            "--python",
            prefix / "bin" / "python",
            "--no-deps",
            "--require-hashes",
            "--no-build",
            "--link-mode",
            "hardlink",
        ]
        self._env = {**env, "UV_OFFLINE": "1"}  # files in the store: nothing to fetch
        self._pending: list[tuple[PipPackage, Path]] = []
        self._changed = threading.Condition()
        self._closed = False  # the fetch is over: nothing more will be stored
        self._stopped = False  # no more early runs (aborted, or one failed)
        self._pid: int | None = None  # the early run under way
        self.installed: list[str] = []  # names installed early, in order
        self._thread = threading.Thread(target=self._runs, name="gpuenv-early", daemon=True)
        self._thread.start()

    def stored(self, artifact: Artifact, path: Path) -> None:
        """``artifact`` is in the store at ``path`` (a wheel of the target's: queued)."""
        package = self._wheels.get(artifact.sha256)
        if package is None:
            return
        with self._changed:
            if not self._stopped:
                self._pending.append((package, path))
                self._changed.notify()

    def finish(self) -> None:
        """Every artifact is stored: wait for the early runs to install what is queued."""
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join()

    def abort(self) -> None:
        """Stop: the running uv, if any, is killed and reaped before this returns."""
        with self._changed:
            self._stopped = True
            self._pending.clear()
            self._changed.notify()
            if self._pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._pid, signal.SIGKILL)
        self._thread.join(ABORT_WAIT)

    def _next_batch(self) -> list[tuple[PipPackage, Path]]:
        with self._changed:
            while not self._pending and not self._closed and not self._stopped:
                self._changed.wait()
            if self._stopped:
                return []
            batch, self._pending = self._pending, []
            return batch

    def _runs(self) -> None:
        while batch := self._next_batch():
            try:
                lines = [requirement_line(p, path.absolute().as_uri()) for p, path in batch]
                _proc.run(  # the requirements on stdin: nothing written but by uv
                    [*self._argv, "-r", "-"],
                    input_text="\n".join(lines) + "\n",
                    timeout=INSTALL_TIMEOUT,
                    env=self._env,
                    what="uv pip install (early)",
                    # it reads the store's files, not the network: no download meter
                    watch=_proc.Watch(on_start=self._started, metered=False),
                )
            except Exception:  # noqa: BLE001 - the full install meets it and says it
                with self._changed:
                    self._stopped = True
                return
            finally:
                with self._changed:
                    self._pid = None
            self.installed.extend(p.name for p, _ in batch)
            for _, path in batch:  # read once by uv; pack and later installs read the disk
                release_cached(path)

    def _started(self, pid: int) -> None:
        with self._changed:
            if self._stopped:
                raise _Cancelled  # _proc.run kills the child it just started
            self._pid = pid


@contextlib.contextmanager
def early_wheels(
    prefix: Path, packages: Iterable[PipPackage], uv: Path, env: Mapping[str, str]
) -> Iterator[EarlyWheels]:
    """Early runs of ``packages``' wheels for the fetch inside the block; waited for when
    it ends, killed when it raises (the exception goes on)."""
    early = EarlyWheels(prefix, packages, uv, env)
    try:
        yield early
        early.finish()  # Ctrl-C while waiting here kills the early run too
    except BaseException:
        early.abort()
        raise
