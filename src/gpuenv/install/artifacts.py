"""Every artifact a target names, fetched into the store's content-addressed artifacts
(``gpuenv._fetch``) before uv and rattler install from those files, and recorded in the
prefix so gc keeps them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv._artifacts import ArtifactSources
from gpuenv._fs import atomic_write_text, start_writeback
from gpuenv.errors import InstallError
from gpuenv.install.request import InstallRequest, Progress, network_failure
from gpuenv.lock.model import LockedTarget
from gpuenv.store import Store

if TYPE_CHECKING:
    from gpuenv._fetch import Artifact


FETCH_WORKERS = 8
# At most this many artifacts of ``LARGE`` bytes or more download at once, the largest
# first; the other workers take the rest. Eight side by side share the bandwidth and the
# CPU (on two cores the download is bound by TLS, hashing and writing), so the largest
# arrived last: torch's 900 MB at 16-18 s of a cold CUDA install, whose last 7 s were
# then uv unpacking it on one core. Two at a time, it is stored after 4 s and unpacked
# while the rest download. With more cores each download has more CPU: half the cores.
# The price: where each connection is slow (a long round trip) and the cores few, the
# large ones download at two connections' speed. Letting the other workers take large
# ones too, once the small ones were done (smallest first), stored torch at 15.6 s and
# took 28.1 s against these lanes' 26.0 s (uv 23.8 s; medians of 3, alternating).
LARGE_LANES = 2
LARGE = 64 << 20


def fetch_artifacts(
    store: Store,
    request: InstallRequest,
    progress: Progress,
    target: LockedTarget | None = None,
    *,
    on_stored: Callable[[Artifact, Path], None] | None = None,
    before_download: Callable[[int | None], None] | None = None,
) -> ArtifactSources:
    """Every artifact the target names, checked, in the store's artifacts (``gpuenv._fetch``:
    fetched only when missing, several at a time, the largest first); the sources that
    hand uv and rattler those local files. A pack after this install downloads nothing.
    When anything is fetched: ``before_download`` is given the bytes to download (None
    when a server did not say an artifact's size) once the cost is known and the disk
    checked, before the fetch is said and begins; ``on_stored`` is told of each
    artifact as it is in the store (from the fetching threads). ``install.early`` uses
    both."""
    from gpuenv._fetch import credentials_from, fetch_credentials
    from gpuenv.errors import DownloadError
    from gpuenv.lock.artifacts import merged, target_artifacts

    target = target or request.target  # without the dependency groups left out
    artifacts = merged(target_artifacts(target), ordered=False)  # the lock's order
    if not artifacts:
        return request.sources
    stored = store.artifacts()
    missing = stored.missing(artifacts)
    mirrors = request.sources.mirrors  # their credentials by either name, as uv takes them
    credentials = {
        **credentials_from(request.channels),
        **fetch_credentials(request.indexes, mirrors),
    }
    if not missing:  # all stored: a stat and a stamp each, no threads
        found = {a: stored.find(a) for a in artifacts}
        files = {url: path for a, path in found.items() if path is not None for url in a.urls}
        if len(files) == sum(len(a.urls) for a in artifacts):
            return ArtifactSources(files=files, mirrors=request.sources.mirrors)
    sizes, said = _cost(store, request, target, missing, len(artifacts), credentials)
    if before_download is not None:
        known = all(a.sha256 in sizes for a in missing)
        before_download(sum(sizes[a.sha256] for a in missing) if known else None)
    if said:
        progress(said)

    def one(artifact: Artifact, advance: Callable[[int, int | None], None]) -> Path:
        path = stored.ensure(artifact, request.sources, credentials=credentials, advance=advance)
        if on_stored is not None:
            on_stored(artifact, path)
            start_writeback(path)  # clean once uv has read it (then released): after uv knows
        return path

    try:
        paths = _download(artifacts, sizes, one)
    except DownloadError as exc:
        network = network_failure(_artifact_kind(exc, artifacts), exc.message, request)
        if network is not None:
            raise network from None
        raise
    files = {url: path for a, path in zip(artifacts, paths, strict=True) for url in a.urls}
    return ArtifactSources(files=files, mirrors=request.sources.mirrors)


def _cost(
    store: Store,
    request: InstallRequest,
    target: LockedTarget,
    missing: list[Artifact],
    count: int,
    credentials: Mapping[str, tuple[str, str]],
) -> tuple[dict[str, int], str]:
    """What the download costs, with the disk checked before anything is written: each
    missing artifact's size where its server said (by sha256), and the line to say."""
    from gpuenv._fetch import budget, disk_needed, human_size, require_space

    if not missing:  # stored, but a file went missing meanwhile: fetched again, unsaid
        return {}, ""
    cost = budget(missing, request.sources, credentials)
    needed = disk_needed(cost.download, cost.count)
    require_space(store.root, needed, f"target {target.name}")
    said = (
        f"{target.name}: fetching {cost.count} of {count} artifacts into the store: "
        f"{cost.shown}, about {human_size(needed)} more disk in the store, the new "
        "environment included"
    )
    return {a.sha256: n for a, n in zip(missing, cost.sizes, strict=False) if n is not None}, said


def _download(
    artifacts: list[Artifact],
    sizes: Mapping[str, int],
    one: Callable[[Artifact, Callable[[int, int | None], None]], Path],
) -> list[Path]:
    """``one(artifact, advance)`` for each artifact, several at a time, the largest first
    and only ``LARGE_LANES`` large ones at once (so that the largest is stored first and
    what unpacks it, install.early, has its longest work soonest); their paths in the
    lock's order. The first failure stops the others and is raised: the first in the
    lock's order, not the first to happen, so the message is one and the same on every
    run."""
    # Only for downloads: concurrent.futures imports logging (4 ms, and a lock every
    # fork takes), which an install from the store never needs.
    import threading
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    from gpuenv.builds.jobs import cores

    stop = threading.Event()

    def advance(_done: int, _total: int | None) -> None:
        if stop.is_set():
            raise _Stopped("stopped: another download failed")

    order = sorted(range(len(artifacts)), key=lambda i: -sizes.get(artifacts[i].sha256, 0))
    lanes = min(FETCH_WORKERS, max(LARGE_LANES, cores() // 2))
    # Threads start as work is submitted: a pool with nothing to do costs nothing.
    large = ThreadPoolExecutor(max_workers=lanes)
    rest = ThreadPoolExecutor(max_workers=max(1, FETCH_WORKERS - lanes))

    def pool(i: int) -> ThreadPoolExecutor:
        return large if sizes.get(artifacts[i].sha256, 0) >= LARGE else rest

    def shutdown(*, cancel: bool) -> None:
        for each in (large, rest):
            each.shutdown(wait=True, cancel_futures=cancel)

    try:
        submitted = {i: pool(i).submit(one, artifacts[i], advance) for i in order}
        futures = [submitted[i] for i in range(len(artifacts))]  # the lock's order
        wait(futures, return_when=FIRST_EXCEPTION)
        if any(f.done() and f.exception() for f in futures):
            stop.set()
            shutdown(cancel=True)
            errors = [f.exception() for f in futures if not f.cancelled()]
            raise next(e for e in errors if e is not None and not isinstance(e, _Stopped))
        paths = [f.result() for f in futures]
    except BaseException:
        stop.set()
        shutdown(cancel=True)
        raise
    shutdown(cancel=False)
    return paths


def record_artifacts(prefix: Path, sources: ArtifactSources) -> None:
    """``etc/gpuenv/artifacts.json``: the sha256 of every artifact the prefix is built
    from, so that gc keeps them while the prefix is kept (and a later pack finds them)."""
    import json

    from gpuenv.store import ARTIFACTS_RECORD

    digests = sorted({path.parent.name for path in sources.files.values()})
    atomic_write_text(
        prefix / ARTIFACTS_RECORD,
        json.dumps({"sha256": digests}, indent=1) + "\n",
        durable=False,
        what="the prefix's artifacts record",
    )


class _Stopped(InstallError):
    """A download given up because another one failed."""


def _artifact_kind(error: Exception, artifacts: list[Artifact]) -> str:
    """ "conda packages" or "pip packages": what the failed download was."""
    text = str(error)
    conda = any(a.kind == "conda" and a.filename in text for a in artifacts)
    return "conda packages" if conda else "pip packages"
