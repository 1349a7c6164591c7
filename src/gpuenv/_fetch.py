"""The one fetcher and the store's content-addressed artifacts.

Every artifact a lock names (pip wheels and sdists, conda archives, build sources) is
kept once in the store, by its sha256::

    <store>/cache/artifacts/<sha256>/<file name>        the exact bytes the lock names
    <store>/cache/artifacts/<sha256>/.<file name>.ok    "checked": size, mtime, inode then
    <store>/locks/artifacts/<sha256>.lock               one fetch of it at a time

``install`` fetches what its target names into it and hands uv and rattler the local
files; builds take their sdists from it; ``pack`` streams the archive from it (so a pack
after an install downloads nothing); ``install --from`` unpacks an archive into it.

A file counts as stored only once its hashes were checked (sha256 always, md5 only for
conda archives, which the lock gives one): a download is streamed into a temporary file
beside its final place while it is hashed, and renamed only when the hashes match. The
``.ok`` stamp records the file's size, modification time and inode when it was checked:
while they are unchanged the file is used without hashing it again (every byte is
hashed once per fetch); a file whose stamp no longer matches (it was rewritten, damaged
by a writer, truncated) is hashed again and, if it no longer matches, removed and
fetched again. The readers that stream a stored file hash it too (``pack`` while it
writes the archive, uv when it first unpacks a wheel), so damage that kept the time
stamp is still caught where it would matter.

``download`` is the one function that talks HTTP(S) (or reads ``file://``): retries with
a back-off on connection failures and on 408/429/5xx, resumes a broken transfer with a
``Range`` request where the server honours it (else starts over), reports progress,
refuses more than ``max_size`` bytes, and sends credentials from the caller (the
index URLs the user configured) or ``~/.netrc``, never from or into a URL that is shown.
One error type says the bytes are not the locked ones: ``HashMismatch``.
"""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from gpuenv import __version__
from gpuenv._artifacts import ArtifactSources
from gpuenv._flock import FileLock, LockTimeout
from gpuenv._fs import remove_made, storage_error, temporary_beside
from gpuenv._network import (
    Index,
    Mirrors,
    download_cap,
    env_key,
    netrc_auth,
    strip_userinfo,
    uv_environment,
)
from gpuenv._redact import redact_url, remember_secret
from gpuenv.errors import DownloadError, HashMismatch, InstallError

CHUNK = 1 << 20
TIMEOUT = 60.0
ATTEMPTS = 4  # one try and three retries
BACKOFF = 0.5  # seconds before the first retry, doubled each time
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
LOCK_TIMEOUT = 6 * 3600.0  # another process fetching the same multi-GB artifact

# host[:port] -> (user, password), from the index URLs the user configured
Credentials = Mapping[str, tuple[str, str]]
Advance = Callable[[int, int | None], None]  # (bytes so far, total when known)

# Wheel, sdist and conda archive names: letters, digits and . _ + - (and ! for epochs).
_FILENAME = re.compile(r"^[A-Za-z0-9_+!-][A-Za-z0-9._+!-]{0,254}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def safe_filename(name: str) -> bool:
    """A single plain file name: no separator, no ``..``, no leading dot, no control."""
    return bool(_FILENAME.match(name)) and ".." not in name


def filename_of(url: str) -> str:
    """The file name a URL ends with (percent-decoded)."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def _quiet(_done: int, _total: int | None) -> None:
    pass


def _number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value >= 0 else default


def network_limits() -> tuple[int, float]:
    """(attempts, timeout in seconds): uv's own settings, ``UV_HTTP_RETRIES`` and
    ``UV_HTTP_TIMEOUT``, apply to gpuenv's downloads too (one knob for both)."""
    retries = int(_number("UV_HTTP_RETRIES", ATTEMPTS - 1))
    return retries + 1, _number("UV_HTTP_TIMEOUT", TIMEOUT) or TIMEOUT


@dataclass(frozen=True)
class Artifact:
    """An artifact a lock names: its bytes are identified by sha256 (and md5 for conda)."""

    urls: tuple[str, ...]
    filename: str
    sha256: str
    kind: str  # "pip" (wheels and sdists) or "conda"
    md5: str | None = None
    size: int | None = None  # when the lock or a manifest says it
    label: str = ""  # how messages name it ("conda package x 1.0 (h0_1)"); default the file

    @property
    def shown(self) -> str:
        return self.label or self.filename


class Digests:
    """The running hashes of a byte stream: sha256 always, md5 only when asked for."""

    def __init__(self, *, md5: bool = False) -> None:
        self._with_md5 = md5
        self.reset()

    def reset(self) -> None:
        import hashlib  # OpenSSL's (fast on large files), loaded only when bytes are hashed

        self._sha256 = hashlib.sha256()
        self._md5 = hashlib.md5(usedforsecurity=False) if self._with_md5 else None
        self.size = 0

    def update(self, data: bytes) -> None:
        self._sha256.update(data)
        if self._md5 is not None:
            self._md5.update(data)
        self.size += len(data)

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    @property
    def md5(self) -> str | None:
        return self._md5.hexdigest() if self._md5 is not None else None

    def mismatch(self, artifact: Artifact) -> str | None:
        """Which hash does not match ``artifact``'s ("sha256", "md5"), or None."""
        if self.sha256 != artifact.sha256:
            return "sha256"
        if artifact.md5 is not None and self.md5 != artifact.md5:
            return "md5"
        return None


def hash_file(path: Path | str, *, md5: bool = False) -> Digests:
    """The hashes of the regular file at ``path``, read once (a FIFO or a device is
    refused at once, never waited on). ``OSError`` when it cannot be read."""
    digests = Digests(md5=md5)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        while chunk := os.read(fd, CHUNK):
            digests.update(chunk)
    finally:
        os.close(fd)
    return digests


def file_sha256(path: Path | str) -> str:
    """The sha256 of the file at ``path`` (hex)."""
    return hash_file(path).sha256


def mismatch_error(artifact: Artifact, where: str, digests: Digests, which: str) -> HashMismatch:
    """The one refusal of bytes that are not the locked ones."""
    got = digests.sha256 if which == "sha256" else digests.md5
    locked = artifact.sha256 if which == "sha256" else artifact.md5
    return HashMismatch(
        f"refused: {artifact.shown} from {redact_url(where)} does not match the {which} in "
        f"gpuenv.lock (got {got}, locked {locked}): tampered with or corrupted; nothing "
        "was stored or installed",
        hint="check the index, channel or mirror serving it; if the change is legitimate, "
        "run 'gpuenv lock'",
    )


# --- credentials ------------------------------------------------------------------------------


def credentials_from(urls: Iterable[str | None]) -> dict[str, tuple[str, str]]:
    """host[:port] -> (user, password) from the ``user:password@`` of configured index URLs
    (the spec's, ``GPUENV_INDEX_URL``): the lock strips them, downloads need them."""
    found: dict[str, tuple[str, str]] = {}
    for url in urls:
        if not url or "@" not in url:
            continue
        parts = urlsplit(url)
        if parts.username is None:
            continue
        host = parts.netloc.rsplit("@", 1)[1]
        found[host] = (unquote(parts.username), unquote(parts.password or ""))
    return found


def credentials_of(
    indexes: Iterable[Index], environ: Mapping[str, str] | None = None
) -> dict[str, tuple[str, str]]:
    """host[:port] -> (user, password) of the indexes, found where uv finds them: the
    index URL, uv's ``UV_INDEX_<NAME>_USERNAME``/``_PASSWORD`` variables, and (with
    ``UV_KEYRING_PROVIDER=subprocess`` and a user but no password) ``keyring get``."""
    env = os.environ if environ is None else environ
    found: dict[str, tuple[str, str]] = {}
    for index in indexes:
        key = env_key(index.name)
        user = env.get(f"UV_INDEX_{key}_USERNAME") or index.username
        password = env.get(f"UV_INDEX_{key}_PASSWORD") or index.password
        if user and password is None and env.get("UV_KEYRING_PROVIDER") == "subprocess":
            password = _keyring(index.url, user)
        if user is None and password is None:
            continue
        remember_secret(password)
        found[urlsplit(index.url).netloc] = (user or "", password or "")
    return found


def fetch_credentials(
    indexes: Iterable[Index], mirrors: Mirrors, environ: Mapping[str, str] | None = None
) -> dict[str, tuple[str, str]]:
    """``credentials_of`` the indexes and the mirrors, as uv is given them
    (``uv_environment``): a mirror also takes the credentials given by the name of the
    index it serves, and back. What gpuenv fetches itself through a mirror (install's
    downloads, lock's read of the torch wheels' METADATA) then authenticates as uv did."""
    env = os.environ if environ is None else environ
    named = (*indexes, *mirrors.indexes())
    return credentials_of(named, uv_environment(env, named, mirrors=mirrors))


def _keyring(url: str, user: str) -> str | None:
    """The password ``keyring get URL USER`` prints, as uv's subprocess provider asks."""
    from gpuenv import _proc
    from gpuenv.errors import ExternalToolError

    try:
        done = _proc.run(["keyring", "get", url, user], timeout=30, check=False, what="keyring")
    except (OSError, ExternalToolError):
        return None
    password = done.stdout.strip()
    return password if done.returncode == 0 and password else None


def _netrc_auth(host: str) -> tuple[str, str] | None:
    return netrc_auth(host)  # bounded: a FIFO or non-UTF-8 ~/.netrc gives none


def authorization(url: str, credentials: Credentials) -> str | None:
    """The basic ``Authorization`` header for ``url``: the credentials given for its
    host, else its own userinfo (a mirror URL that carries it), else ``~/.netrc``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return None
    netloc = parts.netloc.rsplit("@", 1)[-1]
    pair = credentials.get(netloc) or credentials.get(parts.hostname or "")
    if pair is None and parts.username is not None:  # a mirror URL that carries its own
        pair = (unquote(parts.username), unquote(parts.password or ""))
    pair = pair or _netrc_auth(parts.hostname or "")
    if pair is None:
        return None
    import base64  # with binascii: only for a download that authenticates

    token = base64.b64encode(f"{pair[0]}:{pair[1]}".encode()).decode()
    return f"Basic {token}"


# --- downloading ----------------------------------------------------------------------------


class _Retry(Exception):
    """A failure worth another try (the connection broke, the server was busy)."""

    def __init__(self, error: DownloadError) -> None:
        super().__init__(error.message)
        self.error = error


class _OverLimit(DownloadError):
    """A body longer than the most a download may send (``download``'s ``max_size``)."""


def _over_limit(url: str, reason: str) -> _OverLimit:
    return _OverLimit(
        f"cannot download {redact_url(url)}: {reason}",
        hint="the server sends more than this artifact can be: check the index or mirror",
    )


def _failed(url: str, reason: str, status: int | None) -> DownloadError:
    shown = redact_url(url)
    hint = (
        "give the index's credentials in the spec's index URL, GPUENV_INDEX_URL or ~/.netrc"
        if status in (401, 403)
        else "check the network and the index or channel serving it (a proxy: HTTPS_PROXY)"
    )
    return DownloadError(f"cannot download {shown}: {reason}", hint=hint)


def _open(
    url: str, credentials: Credentials, offset: int, timeout: float
) -> tuple[Any, int | None, bool]:
    """(response, total size when known, whether it starts at ``offset``)."""
    import urllib.error
    import urllib.request

    from gpuenv import _http

    headers = {"User-Agent": f"gpuenv/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(strip_userinfo(url), headers=headers)  # noqa: S310
    header = authorization(url, credentials)
    if header:
        request.add_unredirected_header("Authorization", header)
    try:
        response = _http.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        error = _failed(url, f"HTTP {exc.code} {exc.reason}", exc.code)
        if exc.code == 416 and offset:  # the partial file is complete or stale: start over
            raise _Retry(error) from None
        raise (_Retry(error) if exc.code in RETRY_STATUS else error) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        error = _failed(url, str(reason), None)
        if urlsplit(url).scheme in ("http", "https") and not isinstance(exc, ValueError):
            raise _Retry(error) from None
        raise error from None
    resumed = offset > 0 and getattr(response, "status", 200) == 206
    length = response.headers.get("Content-Length")
    size = int(length) if length and length.isdigit() else None
    total = (size + offset if resumed else size) if size is not None else None
    return response, total, resumed


def download(
    url: str,
    out: IO[bytes],
    digests: Digests,
    *,
    credentials: Credentials | None = None,
    advance: Advance = _quiet,
    max_size: int | None = None,
    attempts: int | None = None,
) -> int:
    """Stream ``url`` into ``out`` (at its start), hashing into ``digests``; returns the
    byte count. Retries what is worth retrying, resuming with ``Range`` where the server
    honours it. ``DownloadError`` when it cannot; more than ``max_size`` bytes is refused."""
    credentials = credentials or {}
    tries, timeout = network_limits()
    attempts = attempts or tries
    done = 0
    failures = 0
    while True:
        try:
            response, total, resumed = _open(url, credentials, done, timeout)
            if not resumed and done:  # the server sent the whole file again: start over
                out.seek(0)
                out.truncate()
                digests.reset()
                done = 0
            if max_size is not None and total is not None and total > max_size:
                response.close()
                raise _over_limit(url, f"it is {total} bytes, over the limit of {max_size}")
            with response:
                while True:
                    try:
                        chunk = response.read(CHUNK)
                    except OSError as exc:
                        raise _Retry(_failed(url, f"the connection broke ({exc})", None)) from None
                    if not chunk:
                        break
                    if max_size is not None and done + len(chunk) > max_size:
                        raise _over_limit(url, f"it sends more than {max_size} bytes")
                    digests.update(chunk)
                    out.write(chunk)
                    done += len(chunk)
                    advance(done, total)
            if total is not None and done < total:
                raise _Retry(
                    _failed(url, f"the connection closed after {done} of {total} bytes", None)
                )
            return done
        except _Retry as retry:
            failures += 1
            if failures >= attempts:
                raise retry.error from None
            time.sleep(BACKOFF * 2 ** (failures - 1))


# --- the disk budget ---------------------------------------------------------------------

UNPACK_FACTOR = 2.5  # a wheel or conda archive takes about this much again once unpacked
# Beyond the bytes, whole blocks: each artifact is a file in the store, and its package a
# folder and a .dist-info of half a dozen files in uv's cache and in the prefix, each at
# least one 4 KiB block (a 1 KiB wheel takes about 90 KiB of disk in all, measured); and
# the environment itself (interpreter links, activation scripts, gpuenv's records).
PER_ARTIFACT_DISK = 96 << 10
ENVIRONMENT_DISK = 256 << 10


def disk_needed(download: int, artifacts: int) -> int:
    """About how much disk fetching ``artifacts`` (``download`` bytes) and installing
    them into a new environment takes: what the disk budget checks and install says."""
    return int(download * (1 + UNPACK_FACTOR)) + artifacts * PER_ARTIFACT_DISK + ENVIRONMENT_DISK


def human_size(n: float) -> str:
    """``2048`` -> ``2.0 KiB``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    step = 0
    while n >= 1024 and step < len(units) - 1:
        n /= 1024
        step += 1
    return f"{n:.0f} B" if step == 0 else f"{n:.1f} {units[step]}"


def remote_size(
    url: str, credentials: Credentials | None = None, slow: set[str] | None = None
) -> int | None:
    """The size a server gives for ``url`` (a HEAD request; a local file's size), or None.
    ``slow``: hosts that did not answer in time, asked nothing more (a host that accepts
    connections and never answers held an install silent for two minutes of HEADs
    before its downloads timed out as well); a timeout adds the host."""
    import urllib.request

    from gpuenv import _http

    parts = urlsplit(url)
    if parts.scheme == "file":
        try:
            return Path(unquote(parts.path)).stat().st_size
        except OSError:
            return None
    request = urllib.request.Request(  # noqa: S310 - lock URLs
        strip_userinfo(url), method="HEAD", headers={"User-Agent": f"gpuenv/{__version__}"}
    )
    header = authorization(url, credentials or {})
    if header:
        request.add_unredirected_header("Authorization", header)
    host = parts.netloc.rpartition("@")[2]
    if slow is not None and host in slow:
        return None
    try:
        with _http.urlopen(request, timeout=network_limits()[1]) as response:
            length = response.headers.get("Content-Length")
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)  # urllib wraps a timeout in URLError
        if slow is not None and isinstance(reason, TimeoutError):
            slow.add(host)
        return None
    return int(length) if length and length.isdigit() else None


HEAD_WORKERS = 8  # size look-ups at once (``budget``); 24 were no faster (68 artifacts)


@dataclass(frozen=True)
class Budget:
    """What fetching some artifacts costs, said before it starts."""

    count: int  # artifacts to download
    download: int  # their bytes, where the server said
    unknown: int  # how many of them the server gave no size for
    sizes: tuple[int | None, ...] = ()  # each artifact's, in the order asked

    @property
    def shown(self) -> str:
        more = f" (and {self.unknown} of unknown size)" if self.unknown else ""
        return f"{human_size(self.download)} to download{more}"


def budget(
    artifacts: list[Artifact],
    sources: ArtifactSources | None = None,
    credentials: Credentials | None = None,
) -> Budget:
    """The download sizes of ``artifacts`` (asked several at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    fetch = sources or ArtifactSources()
    slow: set[str] = set()  # hosts that timed out: their other sizes stay unknown

    def size(artifact: Artifact) -> int | None:
        if artifact.size is not None:
            return artifact.size
        return remote_size(fetch.url_for(artifact.urls[0]), credentials, slow)

    if not artifacts:
        return Budget(0, 0, 0)
    # Each HEAD is a connection of its own (urllib keeps none alive); the host is looked
    # up once (gpuenv._http). 68 artifacts: 1.6-1.9 s, 2.2-7 s with a lookup per HEAD.
    with ThreadPoolExecutor(max_workers=min(HEAD_WORKERS, len(artifacts))) as pool:
        sizes = list(pool.map(size, artifacts))
    known = [s for s in sizes if s is not None]
    return Budget(len(artifacts), sum(known), len(sizes) - len(known), tuple(sizes))


def require_space(path: Path, needed: int, what: str) -> None:
    """Refuse early, naming ``path``, when its file system has less free than ``needed``."""
    from gpuenv._diskuse import available_bytes
    from gpuenv.errors import StorageError

    free = available_bytes(path)
    if free is None or free >= needed:
        return
    raise StorageError(
        f"{what} needs about {human_size(needed)} free under {path}; {human_size(free)} are",
        path=str(path),
        errno_name="ENOSPC",
        hint="free some space (gpuenv gc; gpuenv list shows what each prefix holds), or "
        "point GPUENV_HOME at a larger disk",
    )


# --- the store ------------------------------------------------------------------------------


class ArtifactStore:
    """``<store>/cache/artifacts``: each artifact's exact bytes, once, by sha256."""

    def __init__(self, root: Path, locks: Path | None = None) -> None:
        self.root = root
        self.locks = locks or root / ".locks"
        # Fetches run side by side; one of them makes the locks folder. Without this a
        # failed mkdir could pass unseen when a sibling made the folder meanwhile
        # (pathlib's exist_ok swallows any error once the folder is there).
        self._locks_made = False
        self._locks_guard = threading.Lock()

    def path(self, artifact: Artifact) -> Path:
        if not safe_filename(artifact.filename) or not _SHA256.match(artifact.sha256):
            raise InstallError(
                f"the lock names an artifact {artifact.filename!r} (sha256 "
                f"{artifact.sha256!r}), which is not a plain file name and hash",
                hint="the lock is damaged or hostile: run 'gpuenv lock' again",
            )
        return self.root / artifact.sha256 / artifact.filename

    # --- checked copies -------------------------------------------------------------------

    @staticmethod
    def _stamp_file(path: Path) -> Path:
        return path.with_name(f".{path.name}.ok")

    @staticmethod
    def _stamp_text(info: os.stat_result) -> str:
        return f"{info.st_size} {info.st_mtime_ns} {info.st_ino}\n"

    def _stamp(self, path: Path) -> None:
        """Record that ``path`` was checked, as it is now (a courtesy: without the stamp
        the next use hashes the file again)."""
        with suppress(OSError):
            text = self._stamp_text(path.stat())
            stamp = self._stamp_file(path)
            tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="ascii")
            tmp.replace(stamp)

    def _stamped(self, path: Path, info: os.stat_result) -> bool:
        try:
            return self._stamp_file(path).read_text(encoding="ascii") == self._stamp_text(info)
        except (OSError, UnicodeDecodeError):
            return False

    def discard(self, artifact: Artifact) -> None:
        """Remove the stored copy (damaged: it is fetched again when next needed)."""
        path = self.path(artifact)
        for doomed in (self._stamp_file(path), path):
            with suppress(FileNotFoundError):
                doomed.unlink()

    def find(self, artifact: Artifact) -> Path | None:
        """The stored copy of ``artifact``: used as is while its stamp matches, else
        hashed again; a damaged copy is removed (None: fetch it)."""
        path = self.path(artifact)
        try:
            info = path.lstat()
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode) or (
            artifact.size is not None and info.st_size != artifact.size
        ):
            self._remove_damaged(path)
            return None
        if self._stamped(path, info):
            return path
        try:
            digests = hash_file(path, md5=artifact.md5 is not None)
        except OSError:
            return None
        if digests.mismatch(artifact) is not None:
            self._remove_damaged(path)
            return None
        self._stamp(path)
        return path

    def _remove_damaged(self, path: Path) -> None:
        for doomed in (self._stamp_file(path), path):
            with suppress(OSError):
                if doomed.is_dir() and not doomed.is_symlink():
                    return  # not ours to remove: the fetch below says it cannot write
                doomed.unlink()

    def missing(self, artifacts: Iterable[Artifact]) -> list[Artifact]:
        """Those not stored yet (a stat each; no hashing)."""
        return [a for a in artifacts if not self.path(a).is_file()]

    # --- writing --------------------------------------------------------------------------

    def _lock(self, artifact: Artifact) -> FileLock:
        locks = self.locks
        try:
            with self._locks_guard:
                if not self._locks_made:
                    locks.mkdir(parents=True, exist_ok=True)
                    self._locks_made = True
            lock = FileLock(str(locks / f"{artifact.sha256}.lock"))
            lock.acquire(LOCK_TIMEOUT)
        except LockTimeout:
            raise InstallError(
                f"another gpuenv has been fetching {artifact.filename} for over "
                f"{LOCK_TIMEOUT / 3600:.0f} h",
                hint=f"if no gpuenv is running, delete {locks / artifact.sha256}.lock",
            ) from None
        except OSError as exc:
            raise storage_error(exc, locks, "the store's artifact locks") from None
        return lock

    def add(
        self, artifact: Artifact, fill: Callable[[IO[bytes], Digests], None], where: str
    ) -> Path:
        """Store ``artifact`` from ``fill`` (which writes its bytes into a temporary
        file and hashes them into the digests given): kept only when the hashes match.
        A copy already stored (and checked) is kept; ``fill`` is not called then."""
        path = self.path(artifact)
        lock = self._lock(artifact)
        try:
            found = self.find(artifact)
            if found is not None:
                return found
            return self._write(artifact, path, fill, where)
        finally:
            lock.release()

    def _write(
        self,
        artifact: Artifact,
        path: Path,
        fill: Callable[[IO[bytes], Digests], None],
        where: str,
    ) -> Path:
        made: list[Path] = []  # the temporary file, removed on any way out (Ctrl-C too)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = temporary_beside(path, prefix=".incoming.", made=made)
        except BaseException as exc:
            remove_made(made)
            if isinstance(exc, OSError):
                raise storage_error(exc, path, "the store's artifacts") from None
            raise
        try:
            digests = Digests(md5=artifact.md5 is not None)
            with os.fdopen(fd, "w+b") as out:
                fill(out, digests)
                out.flush()
                written = os.fstat(out.fileno()).st_size
            which = digests.mismatch(artifact)
            if which is not None:
                raise mismatch_error(artifact, where, digests, which)
            if artifact.size is not None and written != artifact.size:
                # The right bytes, a wrong size: kept, every later use would find the
                # copy "damaged" by its size and fetch it again, without a word.
                raise InstallError(
                    f"{artifact.shown}: the lock gives its size as {artifact.size} bytes, "
                    f"but its locked bytes (sha256 checked) are {written}",
                    hint="the index reported a wrong size when it was locked: run "
                    "'gpuenv lock' again to record the size it has now",
                )
            tmp.chmod(0o444)  # read-only: a stray writer is refused, not silently trusted
            tmp.replace(path)
        except BaseException as exc:
            remove_made(made)
            if isinstance(exc, OSError) and not isinstance(exc, HashMismatch):
                raise storage_error(exc, path, "the store's artifacts") from None
            raise
        self._stamp(path)
        return path

    def fetch(
        self,
        artifact: Artifact,
        url: str,
        *,
        credentials: Credentials | None = None,
        advance: Advance = _quiet,
        max_size: int | None = None,
    ) -> Path:
        """Download ``url`` into the store as ``artifact`` (unless a checked copy is
        there already); ``HashMismatch`` when the bytes are not the locked ones."""

        def fill(out: IO[bytes], digests: Digests) -> None:
            # E24's bound: the declared size, else MAX_DOWNLOAD_BYTES (a body that never ends)
            limit = max_size if max_size is not None else download_cap(artifact.size)
            try:
                download(
                    url, out, digests, credentials=credentials, advance=advance, max_size=limit
                )
            except _OverLimit:
                if max_size is not None or artifact.size is None:
                    raise
                # Locked together, a size and a sha256: bytes past the one cannot be the
                # other's (a swapped archive, found by the integrity tests' double).
                raise HashMismatch(
                    f"refused: {artifact.shown} from {redact_url(url)} does not match the "
                    f"sha256 in gpuenv.lock (it is longer than the {artifact.size} bytes "
                    "locked with it): tampered with or corrupted; nothing was stored or "
                    "installed",
                    hint="check the index, channel or mirror serving it; if the change is "
                    "legitimate, run 'gpuenv lock'",
                ) from None

        return self.add(artifact, fill, url)

    def ensure(
        self,
        artifact: Artifact,
        sources: ArtifactSources | None = None,
        *,
        credentials: Credentials | None = None,
        advance: Advance = _quiet,
        max_size: int | None = None,
    ) -> Path:
        """The checked, stored copy of ``artifact``, fetched (through ``sources``, the
        one place locked URLs are rewritten) when it is not there yet."""
        found = self.find(artifact)
        if found is not None:
            return found
        url = (sources or ArtifactSources()).url_for(artifact.urls[0])
        return self.fetch(
            artifact, url, credentials=credentials, advance=advance, max_size=max_size
        )

    # --- what is there ------------------------------------------------------------------------

    def stored(self) -> list[tuple[str, Path]]:
        """Every stored file as (sha256, path)."""
        out: list[tuple[str, Path]] = []
        for folder in sorted(self.root.glob("*")) if self.root.is_dir() else []:
            if not _SHA256.match(folder.name):
                continue
            out.extend((folder.name, f) for f in sorted(folder.iterdir()) if safe_filename(f.name))
        return out
