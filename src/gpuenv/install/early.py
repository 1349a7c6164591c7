"""Wheels unpacked into uv's cache while the rest are still downloading.

A cold install fetches every artifact into the store (``install.artifacts``: pack and
later installs read those files) before uv installs from them. For a CUDA stack that
was an 8 s download, then 20 s of uv unpacking 4 GiB of wheels into 10 GiB of files:
1.6x uv's own install, which unpacks while it downloads. Here each wheel goes to uv as
soon as it is in the store, so the unpacking runs beside the download: an early run
takes every wheel stored since the last began, and up to ``EARLY_RUNS`` run at once.

Each early run installs into a scratch folder of its own inside the prefix
(``uv pip install --target``), not into the prefix: what is wanted of it is the wheel
unpacked, and hashed, in uv's cache. uv holds a lock on an environment for the whole of
a ``pip install``, so runs into the prefix went one at a time: torch's 900 MB, stored
while a run of small wheels was under way, waited 8 s for it before its 6 s of
unpacking (one core: a wheel is unpacked by one thread) began, the last work of the
install. A scratch folder is hard links into the cache (0.3 s for torch's), removed
after its run.

The install after the fetch (``install.pip.install_pip``, the whole requirements, the
same file URLs and hashes) stays the authority. It finds each early wheel unpacked in
uv's cache and links it into the prefix, and installs what is left: sdists, and
anything an early run did not unpack. An early run that fails ends the early runs and
is otherwise forgotten: the full install meets the same problem and says it as ever.

On any way out of the fetch (a download failed, Ctrl-C) every running uv is killed and
waited for, so the caller discards a half-built prefix (scratch folders and all) nobody
is writing into.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv import _proc
from gpuenv._fs import release_cached, temporary_beside
from gpuenv.install.pip import INSTALL_TIMEOUT, requirement_line
from gpuenv.lock.model import PipPackage

if TYPE_CHECKING:
    from gpuenv._fetch import Artifact

ABORT_WAIT = 10.0  # seconds to wait for a killed early run to be reaped
# Two at once: a wheel stored while one run is under way starts unpacking at once,
# beside it (uv spreads the wheels of one run over the cores itself). With the large
# downloads two at a time (install.artifacts), a cold CUDA install on two cores took
# 26.5 s against 31.1 s with one run at a time into the prefix, uv 25.0 s (medians of 3,
# alternating, page cache dropped before each).
EARLY_RUNS = 2
SCRATCH = ".gpuenv-early"  # in the prefix: the early runs' --target folders
# Below this much to download, no early run: what they could unpack beside the download
# takes less than their cost (a uv start each, and the wheels linked twice). A cold
# install of the tests' index (13 artifacts, a few MB) took 0.51-0.52 s with them and
# 0.39-0.48 s without (bench/install.py --cold, medians of 5, uv 0.33 s).
EARLY_MIN = 64 << 20


class _Cancelled(Exception):
    """An early run that was to start after the early runs were stopped."""


class EarlyWheels:
    """The early runs of one install: ``stored`` is told of each artifact as the fetch
    puts it in the store (from the fetch's threads); threads of its own run uv."""

    def __init__(
        self, prefix: Path, packages: Iterable[PipPackage], uv: Path, env: Mapping[str, str]
    ) -> None:
        self._wheels = {p.sha256: p for p in packages if p.filename.endswith(".whl")}
        self._scratch = prefix / SCRATCH
        self._argv: list[str | os.PathLike[str]] = [
            uv,
            "pip",
            "install",
            "--no-config",
            "--quiet",
            "--python",  # the prefix's interpreter, for the wheels' tags
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
        self._stopped = False  # no more early runs (aborted, one failed, or not worth it)
        self._pids: set[int] = set()  # the early runs under way
        self.unpacked: list[str] = []  # names unpacked into uv's cache early
        self._threads = [
            threading.Thread(target=self._runs, args=(n,), name=f"gpuenv-early-{n}", daemon=True)
            for n in range(EARLY_RUNS)
        ]
        for thread in self._threads:
            thread.start()

    def stored(self, artifact: Artifact, path: Path) -> None:
        """``artifact`` is in the store at ``path`` (a wheel of the target's: queued)."""
        package = self._wheels.get(artifact.sha256)
        if package is None:
            return
        with self._changed:
            if not self._stopped:
                self._pending.append((package, path))
                self._changed.notify()

    def expect(self, download: int | None) -> None:
        """The fetch is about to download ``download`` bytes (None: not known): below
        ``EARLY_MIN``, or where uv's cache cannot be hard-linked into the prefix, the
        full install unpacks it all, and no early run starts."""
        small = download is not None and download < EARLY_MIN
        if small or not self._links_work():
            with self._changed:
                self._stopped = True
                self._changed.notify_all()

    def _links_work(self) -> bool:
        """Whether a file of uv's cache can be hard-linked into the scratch folder.
        Where it cannot (a file system without hard links, the cache on another), uv
        copies instead: the scratch folders would be full copies of every wheel, and
        the full install would copy them all again."""
        cache = self._env.get("UV_CACHE_DIR")
        if not cache:
            return True  # uv's default cache: not gpuenv's to probe
        made: list[Path] = []
        try:
            Path(cache).mkdir(parents=True, exist_ok=True)
            self._scratch.mkdir(parents=True, exist_ok=True)
            fd, probe = temporary_beside(Path(cache) / "probe", prefix=".gpuenv-link-", made=made)
            os.close(fd)
            linked = self._scratch / probe.name
            made.append(linked)
            os.link(probe, linked)
        except OSError:
            return False
        finally:
            for path in made:
                with contextlib.suppress(OSError):
                    path.unlink()
        return True

    def finish(self) -> None:
        """Every artifact is stored: wait for the early runs to unpack what is queued,
        then remove their scratch folders."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        for thread in self._threads:
            thread.join()
        self._remove_scratch()

    def abort(self) -> None:
        """Stop: every running uv is killed and reaped before this returns."""
        with self._changed:
            self._stopped = True
            self._pending.clear()
            self._changed.notify_all()
            for pid in self._pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        for thread in self._threads:
            thread.join(ABORT_WAIT)

    def _remove_scratch(self) -> None:
        """The scratch folders: links into uv's cache, nothing else needs them. A folder
        that cannot be removed is left in the prefix (harmless: it is not on any path)."""
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _next_batch(self) -> list[tuple[PipPackage, Path]]:
        with self._changed:
            while not self._pending and not self._closed and not self._stopped:
                self._changed.wait()
            if self._stopped:
                return []
            batch, self._pending = self._pending, []
            return batch

    def _runs(self, number: int) -> None:
        target = self._scratch / str(number)
        while batch := self._next_batch():
            started: list[int] = []
            try:
                lines = [requirement_line(p, path.absolute().as_uri()) for p, path in batch]
                _proc.run(  # the requirements on stdin: nothing written but by uv
                    [*self._argv, "--target", target, "-r", "-"],
                    input_text="\n".join(lines) + "\n",
                    timeout=INSTALL_TIMEOUT,
                    env=self._env,
                    what="uv pip install (early)",
                    # it reads the store's files, not the network: no download meter
                    watch=_proc.Watch(
                        on_start=functools.partial(self._started, started=started),
                        metered=False,
                    ),
                )
            except Exception:  # noqa: BLE001 - the full install meets it and says it
                with self._changed:
                    self._stopped = True
                return
            finally:
                with self._changed:
                    self._pids.difference_update(started)
            with self._changed:
                self.unpacked.extend(p.name for p, _ in batch)
            for _, path in batch:  # read once by uv; pack and later installs read the disk
                release_cached(path)
            # Removed now, beside the downloads: all removed after the last run, the
            # folders took 0.6 s at the end of a cold CUDA install.
            shutil.rmtree(target, ignore_errors=True)

    def _started(self, pid: int, started: list[int]) -> None:
        with self._changed:
            if self._stopped:
                raise _Cancelled  # _proc.run kills the child it just started
            self._pids.add(pid)
            started.append(pid)


@contextlib.contextmanager
def early_wheels(
    prefix: Path, packages: Iterable[PipPackage], uv: Path, env: Mapping[str, str]
) -> Iterator[EarlyWheels]:
    """Early runs of ``packages``' wheels for the fetch inside the block; waited for when
    it ends, killed when it raises (the exception goes on)."""
    early = EarlyWheels(prefix, packages, uv, env)
    try:
        yield early
        early.finish()  # Ctrl-C while waiting here kills the early runs too
    except BaseException:
        early.abort()
        raise
