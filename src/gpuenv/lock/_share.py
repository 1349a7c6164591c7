"""One resolution per distinct request within a lock.

Targets that describe the same machine class (four H100 nodes with the same driver,
say) build identical pip and conda requests: each is resolved once and every target
that asks again gets the same answer, or the same error. A request is identified by
its whole value (its ``repr``: the requirements, the Python, the platform, the
indexes, the preferences, the mirrors), so two requests share only when every part
that can change the answer is the same. A key is held while it is resolved: a target
asking for it meanwhile (from another thread) waits and reads the answer.

Distinct requests can also be started ahead (``SharedPip.prefetch``): the lock still
visits its targets one after another (its progress, its errors and their order are
those of a serial lock), but the next targets' resolutions already run beside the
current one, each in a daemon thread (an interrupted lock does not wait for them),
at most one per CPU at a time. Two distinct resolutions of the tests' index, each two
uv runs, took 179-228 ms side by side against 228-427 ms one after the other on the
2-CPU build machine (loaded, medians of 7).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from gpuenv.lock._background import Background
from gpuenv.lock.model import (
    CondaPackage,
    CondaRequest,
    CondaSolver,
    PipPackage,
    PipRequest,
    PipResolver,
)
from gpuenv.lock.torch_page import Pages

R = TypeVar("R")
A = TypeVar("A")


class _Memo(Generic[R, A]):
    """``call(request)`` once per distinct request; answers and errors are kept."""

    def __init__(self, call: Callable[[R], A]) -> None:
        self._call = call
        self._guard = threading.Lock()
        self._keys: dict[str, threading.Lock] = {}
        self._answers: dict[str, tuple[A | None, BaseException | None]] = {}
        self.calls = 0  # how many requests were really resolved

    def __call__(self, request: R) -> A:
        key = repr(request)
        with self._guard:
            key_lock = self._keys.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._answers:
                self.calls += 1
                try:
                    self._answers[key] = (self._call(request), None)
                except (KeyboardInterrupt, SystemExit):
                    raise  # nothing to share: the whole lock stops
                except BaseException as exc:  # noqa: BLE001 - raised again below, to each asker
                    self._answers[key] = (None, exc)
            answer, error = self._answers[key]
        if error is not None:
            raise error
        return answer  # type: ignore[return-value]


class SharedPip:
    """A ``PipResolver`` that resolves each distinct request once. It reads wheel
    metadata through the resolver it wraps when that one can (``wheel_metadata``)."""

    def __init__(self, inner: PipResolver) -> None:
        self.inner = inner
        self._resolve: _Memo[PipRequest, tuple[PipPackage, ...]] = _Memo(self._limited)
        self._slots: threading.BoundedSemaphore | None = None  # set by prefetch

    def _limited(self, request: PipRequest) -> tuple[PipPackage, ...]:
        """One resolution, in one of the slots when resolutions run side by side (the
        lock's own thread included, so no more than ``limit`` run at once)."""
        if self._slots is None:
            return self.inner.resolve(request)
        with self._slots:
            return self.inner.resolve(request)

    @property
    def resolutions(self) -> int:
        return self._resolve.calls

    def resolve(self, request: PipRequest) -> tuple[PipPackage, ...]:
        return self._resolve(request)

    def describe(self) -> str:
        return self.inner.describe()

    def prefetch(self, requests: Iterable[PipRequest], *, limit: int | None = None) -> None:
        """Start resolving the distinct ``requests`` in the background, ``limit`` (by
        default the CPUs) at a time; ``resolve`` then waits for each and keeps it. A
        failure is kept too, and raised by ``resolve`` where the lock asks."""
        distinct = list({repr(r): r for r in requests}.values())
        if len(distinct) < 2:
            return  # nothing to run beside: the lock resolves it itself
        self._slots = threading.BoundedSemaphore(max(1, limit or os.cpu_count() or 1))

        def run(request: PipRequest) -> None:
            with contextlib.suppress(Exception):  # kept in the memo for resolve()
                self._resolve(request)

        for request in distinct:
            Background(lambda r=request: run(r), name="gpuenv-prefetch")  # type: ignore[misc]


class SharedPipWithMetadata(SharedPip):
    """A ``SharedPip`` that also reads each wheel's METADATA once per lock (by its
    sha256): a read started ahead (``read_ahead``, beside the resolution) is waited for
    and its text used; one that failed is tried again by the asker, whose error it is."""

    def __init__(self, inner: PipResolver) -> None:
        super().__init__(inner)
        self._guard = threading.Lock()
        self._reading: dict[str, threading.Lock] = {}
        self._texts: dict[str, str] = {}
        self._default_index: Background[str | None] | None = None
        self.pages = Pages()

    # How long a read waits for the same wheel's read in flight (ahead) before it reads
    # on its own: a server that stalls the read ahead does not stall the lock twice.
    WAIT_FOR_AHEAD = 10.0

    def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
        key = package.sha256 or package.url
        with self._guard:
            reading = self._reading.setdefault(key, threading.Lock())
        if not reading.acquire(timeout=self.WAIT_FOR_AHEAD):
            return self.inner.wheel_metadata(package, request)  # type: ignore[attr-defined, no-any-return]
        try:  # the same wheel read before (ahead): its answer
            if key not in self._texts:
                text = self.inner.wheel_metadata(package, request)  # type: ignore[attr-defined]
                self._texts[key] = text
            return self._texts[key]
        finally:
            reading.release()

    def read_ahead(self, requests: Iterable[PipRequest]) -> None:
        """Start reading the METADATA of the family wheels each request will most likely
        resolve to (``lock.metadata_ahead``), while the resolutions run. Only beside a
        resolver that reads real indexes (one that can state its default index): a
        stand-in's requests name indexes nobody serves."""
        if not callable(getattr(self.inner, "stated_default_index", None)):
            return
        from gpuenv.lock.metadata_ahead import PAGE_TIMEOUT, read_ahead
        from gpuenv.lock.wheelcheck import read_wheel_metadata

        for request in {repr(r): r for r in requests}.values():
            read_ahead(
                request,
                lambda w, r: read_wheel_metadata(self, w, r),
                self._stated_default,
                lambda url: self.pages.fetch(url, timeout=PAGE_TIMEOUT),
            )

    def _stated_default(self) -> str | None:
        """The index uv uses when none is configured, asked once (offline, in a thread
        of its own) for all requests; None when uv says none."""
        with self._guard:
            if self._default_index is None:
                self._default_index = Background(self.inner.stated_default_index)  # type: ignore[attr-defined]
        return self._default_index.result()


class SharedConda:
    """A ``CondaSolver`` that solves each distinct request once."""

    def __init__(self, inner: CondaSolver) -> None:
        self.inner = inner
        self._resolve: _Memo[CondaRequest, tuple[CondaPackage, ...]] = _Memo(inner.resolve)

    def resolve(self, request: CondaRequest) -> tuple[CondaPackage, ...]:
        return self._resolve(request)

    def describe(self) -> str:
        return self.inner.describe()


def shared_pip(resolver: PipResolver) -> SharedPip:
    """``resolver`` behind a per-request memo (already shared: itself)."""
    if isinstance(resolver, SharedPip):
        return resolver
    from gpuenv.lock.wheelcheck import WheelMetadataSource

    if isinstance(resolver, WheelMetadataSource):
        return SharedPipWithMetadata(resolver)
    return SharedPip(resolver)


def shared_conda(solver: CondaSolver) -> SharedConda:
    return solver if isinstance(solver, SharedConda) else SharedConda(solver)
