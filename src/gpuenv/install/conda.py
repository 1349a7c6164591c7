"""The conda half of a prefix: the lock's records linked in by rattler from their exact
URLs (no solve), hash-checked, ``file://`` archives checked here first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv._artifacts import ArtifactSources
from gpuenv._redact import redact
from gpuenv.errors import InstallError
from gpuenv.install.request import InstallRequest, network_failure, storage_failure
from gpuenv.lock.model import CondaPackage

if TYPE_CHECKING:
    pass


def _conda_records(
    packages: tuple[CondaPackage, ...], sources: ArtifactSources | None = None
) -> list[object]:
    """Rebuild rattler records from the lock: no solve, no repodata."""
    fetch = sources or ArtifactSources()
    from rattler import BuildString, NoArchType, PackageRecord, RepoDataRecord

    records: list[object] = []
    for c in packages:
        kinds = {"python": "python", "generic": "generic"}
        noarch = NoArchType(kinds[c.noarch]) if c.noarch in kinds else None  # type: ignore[arg-type]
        record = PackageRecord(
            name=c.name,
            version=c.version,
            build=BuildString(c.build),
            build_number=c.build_number,
            subdir=c.subdir,
            depends=list(c.depends),
            constrains=list(c.constrains),
            sha256=bytes.fromhex(c.sha256),
            md5=bytes.fromhex(c.md5),
            size=c.size,
            noarch=noarch,
        )
        file_name = c.url.rsplit("/", 1)[-1]
        records.append(RepoDataRecord(record, file_name, fetch.url_for(c.url), c.channel))
    return records


def _rattler_errors() -> tuple[type[BaseException], ...]:
    from rattler import exceptions as rattler_errors

    return tuple(
        value
        for value in vars(rattler_errors).values()
        if isinstance(value, type) and issubclass(value, Exception)
    )


def check_local_archives(
    packages: tuple[CondaPackage, ...], sources: ArtifactSources | None = None
) -> None:
    """rattler checks the hashes of what it downloads, but not of ``file://`` archives
    (it links whatever the file holds, and its conda-meta then claims the locked
    hash): those are checked here, sha256 and md5, before rattler sees any record. The
    URL checked is the one fetched (a local copy from ``install --from`` included)."""
    from urllib.parse import unquote, urlsplit

    from gpuenv._fetch import hash_file

    fetch = sources or ArtifactSources()
    for c in packages:
        if c.url in fetch.files:
            continue  # the store's copy: checked when it was stored (gpuenv._fetch)
        parts = urlsplit(fetch.url_for(c.url))
        if parts.scheme != "file":
            continue
        path = unquote(parts.path)
        try:
            digests = hash_file(path, md5=True)
            sha256, md5 = digests.sha256, digests.md5
        except OSError as exc:
            raise InstallError(
                f"conda package {c.name} {c.version}: cannot read {path}: {exc.strerror or exc}",
                hint="the channel has changed since gpuenv.lock was written: run 'gpuenv lock'",
            ) from None
        if (sha256, md5) != (c.sha256, c.md5):
            which = "sha256" if sha256 != c.sha256 else "md5"
            raise InstallError(
                f"refused: conda package {c.name} {c.version} ({c.build}) at {path} does not "
                f"match the {which} in gpuenv.lock (tampered with or corrupted); nothing "
                "was installed",
                hint="check the channel; if the change is legitimate, run 'gpuenv lock'",
            )


def install_conda(
    prefix: Path,
    packages: tuple[CondaPackage, ...],
    cache: Path,
    request: InstallRequest | None = None,
) -> None:
    import asyncio  # here: ~40 ms to import, and only conda installs need it

    import rattler
    from rattler import exceptions as rattler_errors

    failures = (
        rattler_errors.InstallerError,
        rattler_errors.TransactionError,
        rattler_errors.LinkError,
        rattler_errors.IoError,
        rattler_errors.ExtractError,
        rattler_errors.CacheDirError,
        rattler_errors.ValidatePackageRecordsError,
    )
    check_local_archives(packages, request.sources if request else None)
    malformed: tuple[type[BaseException], ...] = (ValueError, TypeError, *_rattler_errors())
    from gpuenv.lock.rattler import authenticated_client

    try:
        records = _conda_records(packages, request.sources if request else None)
    except malformed as exc:
        raise InstallError(
            f"the lock's conda records are malformed ({type(exc).__name__}: {exc})",
            hint="run 'gpuenv lock' to rewrite the lock",
        ) from None
    mirrors = request.sources.mirrors.entries if request else ()
    urls = [*request.channels, *(m.mirror for m in mirrors)] if request else []
    try:
        with authenticated_client(urls) as client:  # as the lock's solve authenticated
            asyncio.run(
                rattler.install(
                    records,  # type: ignore[arg-type]
                    target_prefix=prefix,
                    cache_dir=cache,
                    show_progress=False,
                    execute_link_scripts=False,
                    client=client,
                )
            )
    except failures as exc:
        text = redact(str(exc))
        if "hash mismatch" in text:
            raise InstallError(
                "refused: a downloaded conda package does not match the sha256 in gpuenv.lock "
                f"(tampered with or corrupted); nothing was installed:\n{text}",
                hint="check the channel or mirror serving it",
            ) from None
        storage = storage_failure(text, prefix, f"target prefix {prefix.name} (conda)")
        if storage is not None:
            raise storage from None
        network = network_failure("conda packages", text, request) if request else None
        if network is not None:
            raise network from None
        raise InstallError(f"conda packages could not be installed: {text}") from None
    except BaseException as exc:
        # A Rust panic inside rattler (a malformed URL in a hand-edited lock, say) is
        # pyo3's PanicException, a BaseException: a typed error, not a crash.
        if type(exc).__name__ != "PanicException":
            raise
        raise InstallError(
            f"rattler could not install the locked conda packages: {redact(str(exc)).strip()}",
            hint="the lock's conda records are malformed: run 'gpuenv lock' to rewrite it",
        ) from None
