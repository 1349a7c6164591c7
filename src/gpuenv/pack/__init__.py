"""Offline archives: ``gpuenv pack`` where there is network, ``install --from`` where there
is none.

An archive is one uncompressed tar, its bytes fixed by the lock::

    gpuenv-pack/manifest.json                   what is inside (first member)
    gpuenv-pack/gpuenv.lock                     the lock, as the lock writer renders it
    gpuenv-pack/gpuenv.toml                     the spec it was locked from (when known)
    gpuenv-pack/artifacts/<sha256>/<file>       every artifact the packed targets name

``prepare`` gathers the artifacts in the store's artifacts (``gpuenv._fetch``: after an
install of the same targets nothing is downloaded; what is missing is fetched, checked)
and computes the archive's exact size; ``write`` streams them from the store into the
archive (members sorted after the manifest, the lock and the spec; fixed times, owners
and modes) with progress, hashing each byte once on the way: a stored file damaged
since it was checked is removed, fetched again, and the archive written again.

``unpack`` reads an archive trusting nothing: the manifest first, every member checked
against it (type, name, size, hashes), the lock parsed by the lock reader and matched
against the manifest, every artifact hashed once while it is copied into the store's
artifacts (one stored already is only read, to refuse an altered archive). Its result
maps each locked URL to its checked local copy, for ``ArtifactSources``: install then
runs exactly as it always does, without the network. When every packed target is
installed already, no artifact is read at all.
"""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gpuenv._artifacts import ArtifactSources
from gpuenv._fetch import (
    Artifact,
    ArtifactStore,
    Budget,
    Credentials,
    Digests,
    budget,
    human_size,
    require_space,
)
from gpuenv._fs import atomic_write_text, storage_error
from gpuenv._redact import redact_urls
from gpuenv.errors import InstallError, UsageError
from gpuenv.lock.artifacts import build_sources, lock_artifacts
from gpuenv.lock.format import LOCK_FILENAME, parse_lock_text, read_lock, render_lock
from gpuenv.lock.model import Lock
from gpuenv.pack import _tar
from gpuenv.pack.manifest import (
    ARTIFACTS,
    LOCK,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    SPEC,
    Manifest,
    Member,
    PackedArtifact,
    parse_manifest,
)
from gpuenv.store import Store

__all__ = [
    "Manifest",
    "PackBudget",
    "PackPlan",
    "PackProgress",
    "PackRequest",
    "Unpacked",
    "default_name",
    "human_size",
    "pack_budget",
    "place_project",
    "prepare",
    "unpack",
    "write",
]

SUFFIX = ".gpuenv.tar"


@dataclass(frozen=True)
class PackProgress:
    """How far a phase is: ``download`` (per file) or ``write`` / ``unpack`` (bytes)."""

    phase: str
    name: str
    done: int
    total: int | None  # None: not known (a download without Content-Length)
    index: int = 0  # the file number in this phase, from 1
    count: int = 0


Progress = Callable[[PackProgress], None]


def _quiet(_progress: PackProgress) -> None:
    pass


@dataclass(frozen=True)
class PackRequest:
    """What one ``gpuenv pack`` packs: the lock and which of its targets, the project's name
    and spec file, the store the artifacts are gathered in, and where and with which
    credentials the missing ones are fetched."""

    lock: Lock
    targets: tuple[str, ...]
    project: str
    spec_file: Path | None  # packed beside the lock, so install --from can recreate the project
    store: Store
    sources: ArtifactSources = field(default_factory=ArtifactSources)
    credentials: Credentials = field(default_factory=dict)


@dataclass(frozen=True)
class PackPlan:
    """An archive ``prepare`` has made ready to write: its manifest, its members in order,
    its exact size, and what was downloaded for it."""

    manifest: Manifest
    entries: tuple[_tar.Entry, ...]
    size: int  # the archive's exact size in bytes
    downloaded: int  # artifacts fetched for this pack (the others came from the store)
    downloaded_bytes: int = 0
    request: PackRequest | None = None  # to fetch again an artifact damaged in the store


@dataclass(frozen=True)
class PackBudget:
    """What a pack will cost, said before it starts."""

    download: Budget  # what is missing from the store
    archive: int  # about how large the archive will be


def pack_budget(request: PackRequest, output: Path) -> PackBudget:
    """What a pack will download and write, checked against the free space of the
    store and of the archive's directory before anything starts (``StorageError``)."""
    store = _artifacts(request)
    wanted = lock_artifacts(request.lock, request.targets)
    missing = store.missing(wanted)
    cost = budget(missing, request.sources, request.credentials)
    archive = _archive_estimate(request, store, wanted, missing, cost)
    require_space(store.root, cost.download, "pack (the artifacts it downloads)")
    require_space(output.absolute().parent, archive, f"the archive {output.name}")
    return PackBudget(cost, archive)


def _archive_estimate(
    request: PackRequest,
    store: ArtifactStore,
    wanted: list[Artifact],
    missing: list[Artifact],
    cost: Budget,
) -> int:
    """About how large the archive will be: each stored artifact's member exactly (a pax
    header for its long name, data padded to 512-byte blocks), each missing one at the
    size the server gave plus the most its member adds, the lock, the spec and a manifest
    line per artifact, rounded up to tar's 10 KiB records. (It said 44.5 KiB for an
    archive of 60.0 KiB: a small artifact's member is mostly its headers.)"""
    absent = {a.sha256 for a in missing}
    members = sum(
        _tar.member_size(f"{ARTIFACTS}/{a.sha256}/{a.filename}", store.path(a).stat().st_size)
        for a in wanted
        if a.sha256 not in absent
    )
    members += cost.download + cost.count * 4 * _tar.BLOCK  # headers, padding
    lock_size = len(render_lock(request.lock).encode("utf-8"))
    spec_size = _size_of(request.spec_file)
    members += _tar.member_size(LOCK, lock_size) + _tar.member_size(SPEC, spec_size)
    members += _tar.member_size(MANIFEST, 1024 + 512 * len(wanted)) + 2 * _tar.BLOCK
    return -(-members // _tar.RECORD) * _tar.RECORD


def _size_of(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def default_name(project: str, targets: tuple[str, ...]) -> str:
    return f"{project}-{'-'.join(targets)}{SUFFIX}"


def _artifacts(request: PackRequest) -> ArtifactStore:
    return request.store.artifacts()


def _fetch_one(
    request: PackRequest, item: Artifact, advance: Callable[[int, int | None], None]
) -> Path:
    return _artifacts(request).ensure(
        item, request.sources, credentials=request.credentials, advance=advance
    )


def _gather(
    request: PackRequest, report: Progress
) -> tuple[list[PackedArtifact], list[Path], int, int]:
    store = _artifacts(request)
    wanted = lock_artifacts(request.lock, request.targets)
    artifacts, paths, downloaded, downloaded_bytes = [], [], 0, 0
    for index, item in enumerate(wanted, 1):
        fetched = 0

        def advance(
            done: int, total: int | None, item: Artifact = item, index: int = index
        ) -> None:
            nonlocal fetched
            fetched = done
            report(PackProgress("download", item.filename, done, total, index, len(wanted)))

        found = store.find(item)  # checked when stored: not hashed again here
        if found is None:
            found = _fetch_one(request, item, advance)
            downloaded += 1
            downloaded_bytes += fetched
        size = found.stat().st_size
        artifacts.append(
            PackedArtifact(item.urls, item.filename, item.sha256, size, item.kind, item.md5)
        )
        paths.append(found)
    return artifacts, paths, downloaded, downloaded_bytes


def _read_spec(path: Path | None) -> bytes | None:
    """The spec as packed: credentials in its index URLs are removed (an archive never
    carries a secret, and where it is installed there is no index to log in to)."""
    if path is None:
        return None
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc})") from None
    return redact_urls(text).encode("utf-8")  # the one rule: userinfo to the last "@"


def prepare(request: PackRequest, progress: Progress | None = None) -> PackPlan:
    """Everything the archive will hold, hash-checked in the store's cache, and its size."""
    import hashlib

    artifacts, paths, downloaded, downloaded_bytes = _gather(request, progress or _quiet)
    lock_bytes = render_lock(request.lock).encode("utf-8")
    spec_bytes = _read_spec(request.spec_file)
    manifest = Manifest(
        project=request.project,
        targets={n: request.lock.targets[n].content_hash for n in request.targets},
        lock=Member(LOCK, len(lock_bytes), hashlib.sha256(lock_bytes).hexdigest()),
        spec=(
            Member(SPEC, len(spec_bytes), hashlib.sha256(spec_bytes).hexdigest())
            if spec_bytes is not None
            else None
        ),
        artifacts=tuple(artifacts),
    )
    head = manifest.dumps().encode("utf-8")
    entries = [_tar.Entry(MANIFEST, len(head), data=head)]
    entries.append(_tar.Entry(LOCK, len(lock_bytes), data=lock_bytes))
    if spec_bytes is not None:
        entries.append(_tar.Entry(SPEC, len(spec_bytes), data=spec_bytes))
    entries += [
        _tar.Entry(a.path, a.size, source=path, sha256=a.sha256)
        for a, path in sorted(zip(artifacts, paths, strict=True), key=lambda pair: pair[0].path)
    ]
    size = _tar.archive_size(entries)
    return PackPlan(manifest, tuple(entries), size, downloaded, downloaded_bytes, request)


def write(plan: PackPlan, output: Path, progress: Progress | None = None) -> int:
    """Write the archive to ``output`` (atomically); returns its size in bytes."""
    report = progress or _quiet
    refetched: set[Path] = set()
    while True:
        done = 0

        def advance(count: int) -> None:
            nonlocal done
            done += count
            report(PackProgress("write", output.name, done, plan.size))

        try:
            _tar.write_archive(output, list(plan.entries), advance)
        except _tar.DamagedSource as exc:
            if plan.request is None or exc.source in refetched:
                raise
            refetched.add(exc.source)  # removed from the store: fetch it again, write again
            by_path = {a.path: a for a in plan.manifest.artifacts}
            entry = next(e for e in plan.entries if e.source == exc.source)
            a = by_path[entry.name]
            item = Artifact(a.urls, a.filename, a.sha256, a.kind, a.md5)
            _fetch_one(plan.request, item, lambda _done, _total: None)
            continue
        return output.stat().st_size


# --- install --from --------------------------------------------------------------------------


@dataclass(frozen=True)
class Unpacked:
    """An archive ``unpack`` has read and checked: its manifest, its lock (parsed and as
    text), its spec's text, and the checked copy of each locked URL."""

    manifest: Manifest
    lock: Lock
    lock_text: str
    spec_text: str | None
    files: dict[str, Path]  # each locked URL of the packed targets -> its checked copy

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(sorted(self.manifest.targets))

    def sources(self) -> ArtifactSources:
        return ArtifactSources(files=dict(self.files))


def _manifest(tar: tarfile.TarFile, first: tarfile.TarInfo | None, archive: Path) -> Manifest:
    if first is None or first.name != MANIFEST:
        found = first.name if first is not None else "nothing"
        raise _tar.hostile(f"the first member is {found!r}, not {MANIFEST!r}", archive)
    if first.size > MAX_MANIFEST_BYTES:
        raise _tar.hostile(f"the manifest claims {first.size} bytes", archive)
    return parse_manifest(_tar.read_bytes(tar, first, archive))


def _space(manifest: Manifest, store: ArtifactStore, archive: Path) -> None:
    """Refuse before extracting when the artifacts cannot fit (a huge member, a full disk)."""
    needed = sum(
        a.size
        for a in manifest.artifacts
        if not store.path(Artifact(a.urls, a.filename, a.sha256, a.kind)).is_file()
    )
    probe = store.root
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise InstallError(
            f"{archive} needs {human_size(needed)} free under {store.root}; {human_size(free)} are",
            hint="free some space (gpuenv gc), or point GPUENV_HOME at a larger disk",
        )


def _text(tar: tarfile.TarFile, member: tarfile.TarInfo, expected: Member, archive: Path) -> str:
    import hashlib

    if member.size != expected.size:
        raise _tar.hostile(
            f"{member.name} is {member.size} bytes, the manifest says {expected.size}", archive
        )
    data = _tar.read_bytes(tar, member, archive)
    if hashlib.sha256(data).hexdigest() != expected.sha256:
        raise _tar.hostile(f"{member.name} does not match its sha256 in the manifest", archive)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _tar.hostile(f"{member.name} is not UTF-8 text", archive) from None


class _Discard:
    """A sink for member data that only needs hashing."""

    def write(self, data: bytes) -> int:
        return len(data)


def _check_member(item: Artifact, member: tarfile.TarInfo, digests: Digests, archive: Path) -> None:
    if digests.mismatch(item) is not None:
        raise _tar.hostile(
            f"{member.name} has sha256 {digests.sha256}; the lock and the manifest say "
            f"{item.sha256}: the archive was altered or damaged",
            archive,
        )


def _extract(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    artifact: PackedArtifact,
    store: ArtifactStore,
    archive: Path,
    advance: Callable[[int], None],
) -> Path:
    """The member, hashed once while it is copied into the store (or, when the store
    holds it already, while it is read: an altered archive is refused either way)."""
    if member.size != artifact.size:
        raise _tar.hostile(
            f"{member.name} is {member.size} bytes, the manifest says {artifact.size}", archive
        )
    item = Artifact(
        artifact.urls,
        artifact.filename,
        artifact.sha256,
        artifact.kind,
        artifact.md5,
        artifact.size,
    )
    copied = False

    def fill(out: IO[bytes], digests: Digests) -> None:
        nonlocal copied
        copied = True
        _tar.copy_member(tar, member, out, archive, advance, digests)
        _check_member(item, member, digests, archive)

    try:
        path = store.add(item, fill, str(archive))
    except OSError as exc:
        raise storage_error(exc, store.path(item), "the store's artifacts") from None
    if not copied:
        digests = Digests(md5=item.md5 is not None)
        _tar.copy_member(tar, member, _Discard(), archive, advance, digests)
        _check_member(item, member, digests, archive)
    return path


def _cross_check(manifest: Manifest, lock: Lock, archive: Path) -> None:
    """The manifest and the lock agree: the same targets, exactly the lock's artifacts."""
    by_url = manifest.by_url()
    named: set[str] = set()
    for name, content_hash in manifest.targets.items():
        target = lock.target(name)
        if target is None or target.content_hash != content_hash:
            raise _tar.hostile(
                f"its lock does not hold target {name} as the manifest says", archive
            )
        locked: list[tuple[str, str, str | None]] = [(p.url, p.sha256, None) for p in target.pip]
        locked += [(url, sha, None) for url, sha in build_sources(target, strict=True)]
        locked += [(c.url, c.sha256, c.md5) for c in target.conda]
        for url, sha256, md5 in locked:
            packed = by_url.get(url)
            if packed is None or packed.sha256 != sha256 or (md5 and packed.md5 != md5):
                raise _tar.hostile(f"the lock's artifact {url} is not in it as locked", archive)
            named.add(url)
    extra = sorted(set(by_url) - named)
    if extra:
        raise _tar.hostile(f"it holds artifacts the lock does not name: {extra[0]}", archive)


def unpack(
    archive: Path,
    store: Store,
    progress: Progress | None = None,
    *,
    installed: Callable[[Lock, tuple[str, ...]], bool] | None = None,
    cache_dir: Path | None = None,
) -> Unpacked:
    """Check ``archive`` member by member and unpack its artifacts into the store's
    artifacts, hashing each once. ``installed(lock, targets)``: asked once the manifest,
    the lock and the spec (the archive's first members) are read and checked; when it
    answers True (every packed target is installed already), no artifact is read and
    ``Unpacked.files`` is empty: nothing would be installed from them. ``cache_dir``:
    gpuenv's cache, where a lock whose exact bytes passed the schema before skips it
    (and pydantic's import), as a lock on disk does; every other check still runs."""
    report = progress or _quiet
    stored = store.artifacts()
    texts: dict[str, str] = {}
    paths: dict[str, Path] = {}
    with _tar.open_archive(archive) as tar:
        stream = _tar.members(tar, archive)
        manifest = _manifest(tar, next(stream, None), archive)
        expected = {a.path: a for a in manifest.artifacts}
        heads = {LOCK, *([SPEC] if manifest.spec else [])}
        total, done = manifest.payload_bytes, 0

        def advance(count: int) -> None:
            nonlocal done
            done += count
            report(PackProgress("unpack", archive.name, done, total))

        checked_space = False
        for member in stream:
            if member.name == LOCK:
                texts[LOCK] = _text(tar, member, manifest.lock, archive)
            elif member.name == SPEC and manifest.spec is not None:
                texts[SPEC] = _text(tar, member, manifest.spec, archive)
            elif member.name in expected:
                if not checked_space:
                    _space(manifest, stored, archive)
                    checked_space = True
                paths[member.name] = _extract(
                    tar, member, expected[member.name], stored, archive, advance
                )
            else:
                raise _tar.hostile(f"member {member.name!r} is not in its manifest", archive)
            if installed is not None and not paths and heads <= set(texts):
                lock = _checked_lock(texts[LOCK], manifest, archive, cache_dir)
                if installed(lock, tuple(sorted(manifest.targets))):
                    return Unpacked(manifest, lock, texts[LOCK], texts.get(SPEC), {})
                installed = None  # asked once
    missing = sorted({*expected, *heads} - {*paths, *texts})
    if missing:
        raise _tar.hostile(f"it is truncated: {missing[0]} is missing", archive)
    lock = _checked_lock(texts[LOCK], manifest, archive, cache_dir)
    files = {url: paths[a.path] for a in manifest.artifacts for url in a.urls}
    return Unpacked(manifest, lock, texts[LOCK], texts.get(SPEC), files)


def _checked_lock(text: str, manifest: Manifest, archive: Path, cache_dir: Path | None) -> Lock:
    """The archive's lock, passing every check a lock on disk does (content hashes,
    consistency), and agreeing with the manifest."""
    lock = parse_lock_text(text, file=f"{archive}:{LOCK}", cache_dir=cache_dir).require()
    _cross_check(manifest, lock, archive)
    return lock


def place_project(unpacked: Unpacked, spec_file: Path, cache_dir: Path | None = None) -> list[Path]:
    """Make ``spec_file``'s directory the archive's project: write the spec and the lock
    when there is none; otherwise its lock must hold the packed targets as the archive
    does (read as ``read_lock`` reads it, with gpuenv's cache). Returns the files written."""
    lock_file = spec_file.parent / LOCK_FILENAME
    if not spec_file.exists():
        if unpacked.spec_text is None:
            raise UsageError(
                f"no {spec_file.name} in {spec_file.parent}, and the archive holds none",
                hint="run install --from in the project's directory",
            )
        if lock_file.exists():
            raise UsageError(f"{lock_file} exists without a {spec_file.name} beside it")
        atomic_write_text(spec_file, unpacked.spec_text)
        atomic_write_text(lock_file, unpacked.lock_text)
        return [spec_file, lock_file]
    existing = read_lock(lock_file, cache_dir=cache_dir)
    if existing is None:
        atomic_write_text(lock_file, unpacked.lock_text)
        return [lock_file]
    for name, content_hash in sorted(unpacked.manifest.targets.items()):
        target = existing.target(name)
        if target is None or target.content_hash != content_hash:
            raise UsageError(
                f"{lock_file} locks target {name} differently from the archive",
                hint="run install --from in an empty directory, or pack again from this lock",
            )
    return []
