"""Offline archives: ``gpuenv pack`` where there is network, ``install --from`` where there
is none.

An archive is one uncompressed tar, its bytes fixed by the lock::

    gpuenv-pack/manifest.json                   what is inside (first member)
    gpuenv-pack/gpuenv.lock                     the lock, as the lock writer renders it
    gpuenv-pack/gpuenv.toml                     the spec it was locked from (when known)
    gpuenv-pack/artifacts/<sha256>/<file>       every artifact the packed targets name

``prepare`` gathers the artifacts through the store's artifact cache (downloading only
what is missing, hash-checked) and computes the archive's exact size; ``write`` writes
it (members sorted after the manifest, the lock and the spec; fixed times, owners and
modes) with progress. ``unpack`` reads an archive trusting nothing: the manifest first,
every member checked against it (type, name, size, hashes), the lock parsed by the lock
reader and matched against the manifest, every artifact hash-checked into the artifact
cache. Its result maps each locked URL to its checked local copy, for
``ArtifactSources``: install then runs exactly as it always does, without the network.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from gpuenv._artifacts import ArtifactSources
from gpuenv._fs import atomic_write_text
from gpuenv._redact import redact_urls
from gpuenv.errors import InstallError, UsageError
from gpuenv.lock.format import LOCK_FILENAME, parse_lock_text, read_lock, render_lock
from gpuenv.lock.model import Lock, LockedTarget
from gpuenv.pack import _fetch, _tar
from gpuenv.pack._fetch import Credentials, Wanted
from gpuenv.pack.manifest import (
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
    "PackPlan",
    "PackProgress",
    "PackRequest",
    "Unpacked",
    "default_name",
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
    lock: Lock
    targets: tuple[str, ...]
    project: str
    spec_file: Path | None  # packed beside the lock, so install --from can recreate the project
    store: Store
    sources: ArtifactSources = field(default_factory=ArtifactSources)
    credentials: Credentials = field(default_factory=dict)


@dataclass(frozen=True)
class PackPlan:
    manifest: Manifest
    entries: tuple[_tar.Entry, ...]
    size: int  # the archive's exact size in bytes
    downloaded: int  # artifacts fetched for this pack (the others came from the cache)


def human_size(n: float) -> str:
    """``2048`` -> ``2.0 KiB``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    step = 0
    while n >= 1024 and step < len(units) - 1:
        n /= 1024
        step += 1
    return f"{n:.0f} B" if step == 0 else f"{n:.1f} {units[step]}"


def default_name(project: str, targets: tuple[str, ...]) -> str:
    return f"{project}-{'-'.join(targets)}{SUFFIX}"


def _filename(url: str) -> str:
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def _build_sources(target: LockedTarget) -> list[tuple[str, str]]:
    """The sdists the target's builds compile (gpuenv.builds): packed like wheels."""
    out = []
    for build in target.builds:
        if build.source.kind != "sdist" or build.source.sha256 is None:
            raise UsageError(
                f"target {target.name} builds {build.name} from {build.source.url}: an archive "
                "cannot hold a git checkout yet",
                hint=f"depend on an sdist of {build.name} (a version on the index) to pack it",
            )
        out.append((build.source.url, build.source.sha256))
    return out


def wanted_artifacts(lock: Lock, targets: tuple[str, ...]) -> list[Wanted]:
    """Every artifact the targets name, once per (sha256, file name), sorted."""
    merged: dict[tuple[str, str], Wanted] = {}
    for name in targets:
        target = lock.target(name)
        if target is None:
            raise UsageError(f"gpuenv.lock has no target {name!r}", hint="run 'gpuenv lock' first")
        found = [Wanted((p.url,), p.filename, p.sha256, "pip") for p in target.pip]
        found += [Wanted((url,), _filename(url), sha, "pip") for url, sha in _build_sources(target)]
        found += [
            Wanted((c.url,), _filename(c.url), c.sha256, "conda", c.md5) for c in target.conda
        ]
        for wanted in found:
            key = (wanted.sha256, wanted.filename)
            known = merged.get(key)
            if known is not None and (known.kind, known.md5) != (wanted.kind, wanted.md5):
                raise InstallError(f"the lock names {wanted.filename} twice with other hashes")
            urls = tuple(sorted({*(known.urls if known else ()), *wanted.urls}))
            merged[key] = Wanted(urls, wanted.filename, wanted.sha256, wanted.kind, wanted.md5)
    return [merged[key] for key in sorted(merged)]


def _gather(request: PackRequest, report: Progress) -> tuple[list[PackedArtifact], list[Path], int]:
    cache = request.store.cache("artifacts")
    wanted = wanted_artifacts(request.lock, request.targets)
    artifacts, paths, downloaded = [], [], 0
    for index, item in enumerate(wanted, 1):

        def advance(done: int, total: int | None, item: Wanted = item, index: int = index) -> None:
            report(PackProgress("download", item.filename, done, total, index, len(wanted)))

        found = _fetch.cached(cache, item)
        if found is None:
            url = request.sources.url_for(item.urls[0])
            found = _fetch.download(item, cache, url, request.credentials, advance)
            downloaded += 1
        size = found.stat().st_size
        artifacts.append(
            PackedArtifact(item.urls, item.filename, item.sha256, size, item.kind, item.md5)
        )
        paths.append(found)
    return artifacts, paths, downloaded


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

    artifacts, paths, downloaded = _gather(request, progress or _quiet)
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
    return PackPlan(manifest, tuple(entries), _tar.archive_size(entries), downloaded)


def write(plan: PackPlan, output: Path, progress: Progress | None = None) -> int:
    """Write the archive to ``output`` (atomically); returns its size in bytes."""
    report = progress or _quiet
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        report(PackProgress("write", output.name, done, plan.size))

    _tar.write_archive(output, list(plan.entries), advance)
    return output.stat().st_size


# --- install --from --------------------------------------------------------------------------


@dataclass(frozen=True)
class Unpacked:
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


def _space(manifest: Manifest, cache: Path, archive: Path) -> None:
    """Refuse before extracting when the artifacts cannot fit (a huge member, a full disk)."""
    needed = sum(
        a.size for a in manifest.artifacts if not (cache / a.sha256 / a.filename).is_file()
    )
    probe = cache
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise InstallError(
            f"{archive} needs {human_size(needed)} free under {cache}; {human_size(free)} are",
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


def _check_member(
    wanted: Wanted, member: tarfile.TarInfo, sha256: str, md5: str, archive: Path
) -> None:
    if not _fetch.matches(wanted, sha256, md5):
        raise _tar.hostile(
            f"{member.name} has sha256 {sha256}; the lock and the manifest say "
            f"{wanted.sha256}: the archive was altered or damaged",
            archive,
        )


def _extract(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    artifact: PackedArtifact,
    cache: Path,
    archive: Path,
    advance: Callable[[int], None],
) -> Path:
    if member.size != artifact.size:
        raise _tar.hostile(
            f"{member.name} is {member.size} bytes, the manifest says {artifact.size}", archive
        )
    wanted = Wanted(artifact.urls, artifact.filename, artifact.sha256, artifact.kind, artifact.md5)
    found = _fetch.cached(cache, wanted)
    if found is not None:  # the archive's copy is still checked: an altered archive is refused
        sha256, md5 = _tar.copy_member(tar, member, _Discard(), archive, advance)
        _check_member(wanted, member, sha256, md5, archive)
        return found
    path = _fetch.cache_path(cache, artifact.sha256, artifact.filename)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=".unpack.")
    except OSError as exc:
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from None
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            sha256, md5 = _tar.copy_member(tar, member, out, archive, advance)
        _check_member(wanted, member, sha256, md5, archive)
        temporary.replace(path)
    except OSError as exc:
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with suppress(FileNotFoundError):
            temporary.unlink()
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
        locked += [(url, sha, None) for url, sha in _build_sources(target)]
        locked += [(c.url, c.sha256, c.md5) for c in target.conda]
        for url, sha256, md5 in locked:
            packed = by_url.get(url)
            if packed is None or packed.sha256 != sha256 or (md5 and packed.md5 != md5):
                raise _tar.hostile(f"the lock's artifact {url} is not in it as locked", archive)
            named.add(url)
    extra = sorted(set(by_url) - named)
    if extra:
        raise _tar.hostile(f"it holds artifacts the lock does not name: {extra[0]}", archive)


def unpack(archive: Path, store: Store, progress: Progress | None = None) -> Unpacked:
    """Check ``archive`` member by member and unpack its artifacts into the store's cache."""
    report = progress or _quiet
    cache = store.cache("artifacts")
    texts: dict[str, str] = {}
    paths: dict[str, Path] = {}
    with _tar.open_archive(archive) as tar:
        stream = _tar.members(tar, archive)
        manifest = _manifest(tar, next(stream, None), archive)
        _space(manifest, cache, archive)
        expected = {a.path: a for a in manifest.artifacts}
        total, done = manifest.payload_bytes, 0

        def advance(count: int) -> None:
            nonlocal done
            done += count
            report(PackProgress("unpack", archive.name, done, total))

        for member in stream:
            if member.name == LOCK:
                texts[LOCK] = _text(tar, member, manifest.lock, archive)
            elif member.name == SPEC and manifest.spec is not None:
                texts[SPEC] = _text(tar, member, manifest.spec, archive)
            elif member.name in expected:
                paths[member.name] = _extract(
                    tar, member, expected[member.name], cache, archive, advance
                )
            else:
                raise _tar.hostile(f"member {member.name!r} is not in its manifest", archive)
    missing = sorted({*expected, LOCK, *([SPEC] if manifest.spec else [])} - {*paths, *texts})
    if missing:
        raise _tar.hostile(f"it is truncated: {missing[0]} is missing", archive)
    # The archive's lock passes every check a lock on disk does (content hashes, consistency).
    lock = parse_lock_text(texts[LOCK], file=f"{archive}:{LOCK}").require()
    _cross_check(manifest, lock, archive)
    files = {url: paths[a.path] for a in manifest.artifacts for url in a.urls}
    return Unpacked(manifest, lock, texts[LOCK], texts.get(SPEC), files)


def place_project(unpacked: Unpacked, spec_file: Path) -> list[Path]:
    """Make ``spec_file``'s directory the archive's project: write the spec and the lock
    when there is none; otherwise its lock must hold the packed targets as the archive
    does. Returns the files written."""
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
    existing = read_lock(lock_file)
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
