"""The store's artifact cache: each locked artifact's exact bytes, by sha256.

    <store>/cache/artifacts/<sha256>/<file name>

``gpuenv pack`` downloads what is missing here (once: later packs reuse it) and
``install --from`` unpacks an archive's artifacts into it. Nothing counts as cached
until its hashes were checked: a download is streamed into a temporary file beside
its final place while it is hashed, and renamed only when the sha256 (and, for conda
archives, the md5) matches the lock; a cached file is hashed again before it is used.
This module talks to the network: plain HTTP(S) (or ``file://``) GETs of the exact
URLs, through ``ArtifactSources`` (the one place locked URLs are rewritten), with
credentials from the caller or ``~/.netrc``, never from or into the URL that is shown.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gpuenv import __version__
from gpuenv._artifacts import ArtifactSources
from gpuenv._network import download_cap, netrc_auth, strip_userinfo
from gpuenv._redact import redact_url
from gpuenv.errors import DownloadError, InstallError
from gpuenv.pack.manifest import safe_filename

CHUNK = 1 << 20
TIMEOUT = 60.0

# host[:port] -> (user, password), from the index URLs the user configured
Credentials = Mapping[str, tuple[str, str]]
Advance = Callable[[int, int | None], None]  # (bytes so far, total when known)


@dataclass(frozen=True)
class Wanted:
    """An artifact the lock names: its bytes are identified by sha256 (and md5)."""

    urls: tuple[str, ...]
    filename: str
    sha256: str
    kind: str  # "pip" or "conda"
    md5: str | None = None


def cache_path(cache: Path, sha256: str, filename: str) -> Path:
    if not safe_filename(filename):
        raise InstallError(
            f"the lock names an artifact file {filename!r}, which is not a plain file name",
            hint="the lock is damaged or hostile: run 'gpuenv lock' again",
        )
    return cache / sha256 / filename


def hashes_of(path: Path) -> tuple[str, str, int]:
    """(sha256, md5, size) of the file at ``path``."""
    sha256, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            sha256.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return sha256.hexdigest(), md5.hexdigest(), size


def matches(wanted: Wanted, sha256: str, md5: str) -> bool:
    return sha256 == wanted.sha256 and (wanted.md5 is None or md5 == wanted.md5)


def cached(cache: Path, wanted: Wanted) -> Path | None:
    """The cached copy of ``wanted`` after re-checking its hashes; a damaged one is removed."""
    path = cache_path(cache, wanted.sha256, wanted.filename)
    try:
        sha256, md5, _size = hashes_of(path)
    except OSError:
        return None
    if matches(wanted, sha256, md5):
        return path
    with suppress(OSError):
        path.unlink()
    return None


def _netrc_auth(host: str) -> tuple[str, str] | None:
    return netrc_auth(host)  # bounded: a FIFO or non-UTF-8 ~/.netrc gives none


def _authorization(url: str, credentials: Credentials) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return None
    netloc = parts.netloc.rsplit("@", 1)[-1]
    pair = credentials.get(netloc) or credentials.get(parts.hostname or "")
    pair = pair or _netrc_auth(parts.hostname or "")
    if pair is None:
        return None
    token = base64.b64encode(f"{pair[0]}:{pair[1]}".encode()).decode()
    return f"Basic {token}"


def _open(url: str, credentials: Credentials) -> tuple[Any, int | None]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 - http(s) and file URLs from the lock
        strip_userinfo(url), headers={"User-Agent": f"gpuenv/{__version__}"}
    )
    authorization = _authorization(url, credentials)
    if authorization:
        request.add_unredirected_header("Authorization", authorization)
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310
    except urllib.error.HTTPError as exc:
        raise _failed(url, f"HTTP {exc.code} {exc.reason}", exc.code) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _failed(url, str(reason), None) from None
    length = response.headers.get("Content-Length")
    return response, int(length) if length and length.isdigit() else None


def _failed(url: str, reason: str, status: int | None) -> DownloadError:
    shown = redact_url(url)
    hint = (
        "give the index's credentials in the spec's index URL, GPUENV_INDEX_URL or ~/.netrc"
        if status in (401, 403)
        else "pack where the indexes and channels the lock names are reachable"
    )
    return DownloadError(f"cannot download {shown}: {reason}", hint=hint)


def download(
    wanted: Wanted, cache: Path, url: str, credentials: Credentials, advance: Advance
) -> Path:
    """Fetch ``url`` into the cache as ``wanted``; refused unless its hashes match."""
    path = cache_path(cache, wanted.sha256, wanted.filename)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".download.", dir=path.parent)
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        response, total = _open(url, credentials)
    except BaseException:
        os.close(fd)
        Path(tmp).unlink()
        raise
    sha256, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    done = 0
    try:
        with response, os.fdopen(fd, "wb") as out:
            while True:
                try:
                    chunk = response.read(CHUNK)
                except OSError as exc:
                    raise _failed(url, f"the connection broke ({exc})", None) from None
                if not chunk:
                    break
                sha256.update(chunk)
                md5.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if done > download_cap(None):  # a mirror whose body never ends
                    raise _failed(url, f"it sends more than {download_cap(None)} bytes", None)
                advance(done, total)
        if not matches(wanted, sha256.hexdigest(), md5.hexdigest()):
            raise InstallError(
                f"refused {wanted.filename} from {redact_url(url)}: its sha256 is "
                f"{sha256.hexdigest()}, the lock says {wanted.sha256} (tampered with or "
                "corrupted)",
                hint="nothing was cached; check the index or mirror serving it",
            )
        Path(tmp).replace(path)
    except BaseException as exc:
        with suppress(FileNotFoundError):
            Path(tmp).unlink()
        if isinstance(exc, OSError):
            raise _unwritable(path, exc) from None
        raise
    return path


def _unwritable(path: Path, exc: OSError) -> InstallError:
    return InstallError(
        f"cannot write {path}: {exc.strerror or exc}",
        hint="free some space in the store (gpuenv gc), or point GPUENV_HOME elsewhere",
    )


def ensure(
    wanted: Wanted,
    cache: Path,
    sources: ArtifactSources,
    credentials: Credentials,
    advance: Advance,
) -> Path:
    """The checked copy of ``wanted`` in the cache, downloading it when missing."""
    found = cached(cache, wanted)
    if found is not None:
        return found
    return download(wanted, cache, sources.url_for(wanted.urls[0]), credentials, advance)


def credentials_from(urls: list[str | None]) -> dict[str, tuple[str, str]]:
    """host[:port] -> (user, password) from the ``user:password@`` of configured index URLs
    (the spec's, ``GPUENV_INDEX_URL``): the lock strips them, downloads need them."""
    from urllib.parse import unquote as unquote_text

    found: dict[str, tuple[str, str]] = {}
    for url in urls:
        if not url or "@" not in url:
            continue
        parts = urlsplit(url)
        if parts.username is None:
            continue
        host = parts.netloc.rsplit("@", 1)[1]
        found[host] = (unquote_text(parts.username), unquote_text(parts.password or ""))
    return found
