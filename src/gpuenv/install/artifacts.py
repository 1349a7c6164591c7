"""Every artifact a target names, fetched into the store's content-addressed artifacts
(``gpuenv._fetch``) before uv and rattler install from those files, and recorded in the
prefix so gc keeps them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv._artifacts import ArtifactSources
from gpuenv._fs import atomic_write_text
from gpuenv.errors import InstallError
from gpuenv.install.request import InstallRequest, Progress, network_failure
from gpuenv.lock.model import LockedTarget
from gpuenv.store import Store

if TYPE_CHECKING:
    from gpuenv._fetch import Artifact


FETCH_WORKERS = 8


def fetch_artifacts(
    store: Store, request: InstallRequest, progress: Progress, target: LockedTarget | None = None
) -> ArtifactSources:
    """Every artifact the target names, checked, in the store's artifacts (``gpuenv._fetch``:
    fetched only when missing, several at a time); the sources that hand uv and rattler
    those local files. A pack after this install downloads nothing."""
    from gpuenv._fetch import (
        budget,
        credentials_from,
        credentials_of,
        disk_needed,
        human_size,
        require_space,
    )
    from gpuenv.errors import DownloadError
    from gpuenv.lock.artifacts import merged, target_artifacts

    target = target or request.target  # without the dependency groups left out
    artifacts = merged(target_artifacts(target), ordered=False)  # the lock's order
    if not artifacts:
        return request.sources
    stored = store.artifacts()
    missing = stored.missing(artifacts)
    credentials = {**credentials_from(request.channels), **credentials_of(request.all_indexes)}
    if missing:  # said, and the disk checked, before anything is downloaded
        cost = budget(missing, request.sources, credentials)
        needed = disk_needed(cost.download, cost.count)
        progress(
            f"{target.name}: fetching {cost.count} of {len(artifacts)} artifacts into the "
            f"store: {cost.shown}, about {human_size(needed)} of disk with the environment"
        )
        require_space(store.root, needed, f"target {target.name}")
    if not missing:  # all stored: a stat and a stamp each, no threads
        found = {a: stored.find(a) for a in artifacts}
        files = {url: path for a, path in found.items() if path is not None for url in a.urls}
        if len(files) == sum(len(a.urls) for a in artifacts):
            return ArtifactSources(files=files, mirrors=request.sources.mirrors)
    # Only for downloads: concurrent.futures imports logging (4 ms, and a lock every
    # fork takes), which an install from the store never needs.
    import threading
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    stop = threading.Event()

    def advance(_done: int, _total: int | None) -> None:
        if stop.is_set():
            raise _Stopped("stopped: another download failed")

    def one(artifact: Artifact) -> Path:
        return stored.ensure(artifact, request.sources, credentials=credentials, advance=advance)

    pool = ThreadPoolExecutor(max_workers=min(FETCH_WORKERS, len(artifacts)))
    try:
        futures = [pool.submit(one, a) for a in artifacts]
        wait(futures, return_when=FIRST_EXCEPTION)
        if any(f.done() and f.exception() for f in futures):
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            # The first failure in the lock's order (not the first to finish): one message.
            errors = [f.exception() for f in futures if not f.cancelled()]
            raise next(e for e in errors if e is not None and not isinstance(e, _Stopped))
        paths = [f.result() for f in futures]
    except BaseException as exc:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(exc, DownloadError):
            network = network_failure(_artifact_kind(exc, artifacts), exc.message, request)
            if network is not None:
                raise network from None
        raise
    pool.shutdown()
    files = {url: path for a, path in zip(artifacts, paths, strict=True) for url in a.urls}
    return ArtifactSources(files=files, mirrors=request.sources.mirrors)


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
