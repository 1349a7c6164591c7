"""A wheel's core metadata (its ``METADATA`` file) read over HTTP without the wheel.

Two ways, cheapest first:

1. PEP 658: the index serves the metadata beside the wheel as ``<wheel URL>.metadata``
   (the PyTorch index and the test fixtures do; a few kilobytes).
2. HTTP range requests on the wheel itself: the zip's end records and central
   directory from the tail of the file, then the one ``*.dist-info/METADATA`` entry.
   For a 600 MB torch wheel this reads about 1-2 MB in three or four requests. A server
   that ignores ``Range`` is not downloaded in full: the read fails instead.

Credentials in the URL (``user:password@``), or an ``Authorization`` header the caller
worked out (a mirror's credentials, ``lock.wheelcheck``), are sent as a header that
never follows a redirect, and are never part of an error message. Proxies and
certificates follow the standard library's conventions (``HTTPS_PROXY``, ``NO_PROXY``,
``SSL_CERT_FILE``).
"""

from __future__ import annotations

import base64
import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from gpuenv.errors import ExternalToolError
from gpuenv.knowledge.wheelfacts import parse_metadata

if TYPE_CHECKING:  # urllib.request (http.client, ssl, email) loads only for a fetch:
    from urllib.request import Request  # a lock whose metadata is cached makes none

__all__ = [
    "MetadataUnavailable",
    "TooLarge",
    "fetch",
    "parse_metadata",
    "read_member",
    "read_metadata",
    "read_names",
]

DEFAULT_TIMEOUT = 30.0
# The tail read first: the end-of-central-directory records and, for a wheel of up to
# ~20,000 files, its whole central directory.
_TAIL = 2 * 1024 * 1024
_BLOCK = 256 * 1024
# What a server may make us read: a METADATA file is kilobytes; a hostile or broken index
# must not make gpuenv download or inflate gigabytes to learn it.
MAX_METADATA = 8 * 1024 * 1024
MAX_FETCHED = 64 * 1024 * 1024  # per wheel, over all range requests
MAX_MEMBER = 512 * 1024 * 1024  # an inflated member read_member returns


class MetadataUnavailable(ExternalToolError):
    """The metadata of a wheel could not be read (network, server, malformed wheel)."""


class TooLarge(MetadataUnavailable):
    """A server answered with more than gpuenv will read for this."""


@dataclass(frozen=True)
class _Target:
    """A URL to read, with any credentials moved out of it into the headers sent with each
    request (never into a message)."""

    url: str  # without credentials
    headers: dict[str, str]

    @classmethod
    def parse(cls, url: str, authorization: str | None = None) -> _Target:
        parts = urlsplit(url)
        headers = {"User-Agent": "gpuenv"}
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, netloc = netloc.rsplit("@", 1)
            user, _, password = userinfo.partition(":")
            token = f"{unquote(user)}:{unquote(password)}".encode()
            authorization = authorization or "Basic " + base64.b64encode(token).decode()
        if authorization is not None:
            headers["Authorization"] = authorization
        clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        return cls(clean, headers)


Opener = Callable[["Request", float], "io.BufferedIOBase"]


def _open(request: Request, timeout: float) -> io.BufferedIOBase:
    from gpuenv._http import urlopen

    return urlopen(request, timeout=timeout)  # type: ignore[no-any-return]


def _get(
    target: _Target,
    timeout: float,
    byte_range: str | None = None,
    opener: Opener = _open,
    limit: int = MAX_FETCHED,
) -> tuple[int, dict[str, str], bytes]:
    from urllib.error import HTTPError
    from urllib.request import Request

    headers = dict(target.headers)
    if byte_range is not None:
        headers["Range"] = f"bytes={byte_range}"
    if not target.url.startswith(("http://", "https://")):
        raise MetadataUnavailable(f"{target.url}: not an http(s) URL")
    secret = headers.pop("Authorization", None)
    request = Request(target.url, headers=headers)  # noqa: S310 - scheme checked above
    if secret is not None:  # for this server only: a redirect elsewhere goes without it
        request.add_unredirected_header("Authorization", secret)
    try:
        with opener(request, timeout) as response:
            status = getattr(response, "status", 200)
            info = {k.lower(): v for k, v in getattr(response, "headers", {}).items()}
            if byte_range is not None and status != 206:
                raise MetadataUnavailable(
                    f"{target.url}: the server ignored a range request (HTTP {status}); "
                    "reading the metadata would download the whole wheel"
                )
            body = response.read(limit + 1)
            if len(body) > limit:
                raise TooLarge(f"{target.url}: the answer is larger than {limit} bytes")
            return status, info, body
    except HTTPError as exc:
        raise MetadataUnavailable(f"{target.url}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:  # URLError is an OSError
        reason = getattr(exc, "reason", exc)
        raise MetadataUnavailable(f"{target.url}: {reason}") from None


class _RangedFile(io.RawIOBase):
    """A read-only, seekable view of a remote file, fetched block by block."""

    def __init__(self, target: _Target, timeout: float, opener: Opener) -> None:
        super().__init__()
        self._target, self._timeout, self._opener = target, timeout, opener
        _status, headers, tail = _get(target, timeout, f"-{_TAIL}", opener)
        total = headers.get("content-range", "").rpartition("/")[2]
        if not total.isdigit():
            raise MetadataUnavailable(f"{target.url}: no Content-Range in the answer")
        self.size = int(total)
        self._chunks: dict[int, bytes] = {self.size - len(tail): tail}
        self._pos = 0
        self.requests = 1
        self.fetched = len(tail)
        self.budget = MAX_FETCHED

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _cached(self, start: int, end: int) -> bytes | None:
        for begin, data in self._chunks.items():
            if begin <= start and end <= begin + len(data):
                return data[start - begin : end - begin]
        return None

    def read(self, size: int = -1) -> bytes:
        end = self.size if size < 0 else min(self.size, self._pos + size)
        if self._pos >= end:
            return b""
        data = self._cached(self._pos, end)
        if data is None:
            fetch_end = min(self.size, max(end, self._pos + _BLOCK))
            _s, _h, chunk = _get(
                self._target, self._timeout, f"{self._pos}-{fetch_end - 1}", self._opener
            )
            self.requests += 1
            self.fetched += len(chunk)
            if self.fetched > self.budget:
                raise MetadataUnavailable(
                    f"{self._target.url}: reading it took more than {self.budget} bytes"
                )
            self._chunks[self._pos] = chunk
            data = chunk[: end - self._pos]
        self._pos += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _metadata_of(wheel: zipfile.ZipFile, where: str) -> str:
    names = [n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(names) != 1:
        raise MetadataUnavailable(f"{where}: no single *.dist-info/METADATA")
    info = wheel.getinfo(names[0])
    if info.file_size > MAX_METADATA:
        raise MetadataUnavailable(f"{where}: its METADATA claims {info.file_size} bytes")
    return wheel.read(info).decode("utf-8")


def fetch(url: str, *, accept: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> bytes:
    """The body at ``url`` (credentials in it sent as basic auth, never shown);
    ``MetadataUnavailable`` for any failure, naming the URL without credentials."""
    target = _Target.parse(url)
    if accept is not None:
        target = _Target(target.url, {**target.headers, "Accept": accept})
    return _get(target, timeout)[2]


def _from_local(path: str) -> str:
    try:
        with zipfile.ZipFile(path) as wheel:
            return _metadata_of(wheel, path)
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, KeyError, EOFError) as exc:
        raise MetadataUnavailable(f"{path}: not a readable wheel ({exc})") from None


_CD_HEADER = struct.Struct("<4s6H3L5H2L")  # a central-directory file header (46 bytes)
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # a local file header (30 bytes)


def _direct_metadata(remote: _RangedFile) -> str | None:
    """METADATA found straight in the central directory the first (tail) read brought,
    without parsing all of it (a torch wheel lists ~15,000 files): one more request.
    None when the wheel is laid out otherwise (zip64, a directory beyond the tail, a
    compression other than deflate): the zipfile module reads it then."""
    start, tail = next(iter(remote._chunks.items()))
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) - end < 22:
        return None
    cd_size, cd_offset = struct.unpack_from("<2L", tail, end + 12)
    if cd_offset == 0xFFFFFFFF or cd_offset < start:
        return None
    directory = tail[cd_offset - start : cd_offset - start + cd_size]
    at = directory.find(b".dist-info/METADATA")
    while at >= 0:
        head = directory.rfind(b"PK\x01\x02", 0, at)
        if head >= 0 and head + _CD_HEADER.size <= len(directory):
            fields = _CD_HEADER.unpack_from(directory, head)
            method, csize, usize, nlen, offset = (
                fields[4],
                fields[8],
                fields[9],
                fields[10],
                fields[16],
            )
            name = directory[head + 46 : head + 46 + nlen]
            if name.count(b"/") == 1 and name.endswith(b".dist-info/METADATA"):
                return _inflate(remote, method, csize, usize, offset)
        at = directory.find(b".dist-info/METADATA", at + 1)
    return None


def _inflate(remote: _RangedFile, method: int, csize: int, usize: int, offset: int) -> str | None:
    if usize > MAX_METADATA:
        raise MetadataUnavailable(f"{remote._target.url}: its METADATA claims {usize} bytes")
    if method not in (0, 8) or offset == 0xFFFFFFFF:
        return None
    remote.seek(offset)
    local = remote.read(_LOCAL_HEADER.size)
    if len(local) < _LOCAL_HEADER.size or local[:4] != b"PK\x03\x04":
        return None
    nlen, xlen = _LOCAL_HEADER.unpack(local)[9:11]
    remote.seek(offset + _LOCAL_HEADER.size + nlen + xlen)
    data = remote.read(csize)
    try:
        # Never more than the entry says it holds: a lying size cannot inflate a bomb.
        raw = zlib.decompressobj(-15).decompress(data, usize + 1) if method == 8 else data
    except zlib.error:
        return None
    return raw[:usize].decode("utf-8") if len(raw) == usize else None


def _from_wheel(
    target: _Target, timeout: float, opener: Opener, remote: _RangedFile | None = None
) -> str:
    remote = remote or _RangedFile(target, timeout, opener)
    try:
        direct = _direct_metadata(remote)
        if direct is not None:
            return direct
        with zipfile.ZipFile(remote) as wheel:
            return _metadata_of(wheel, target.url)
    except (zipfile.BadZipFile, UnicodeDecodeError, KeyError, EOFError) as exc:
        raise MetadataUnavailable(f"{target.url}: not a readable wheel ({exc})") from None


def read_metadata(
    url: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    pep658: bool = True,
    opener: Opener = _open,
    authorization: str | None = None,
) -> str:
    """The ``METADATA`` text of the wheel at ``url``: its PEP 658 file when the index
    serves one (``pep658``: try it), else read from the wheel with range requests.
    ``authorization``: the header to send (else the URL's own userinfo, if any)."""
    if url.startswith("file://"):
        return _from_local(unquote(urlsplit(url).path))
    target = _Target.parse(url, authorization)
    if not pep658:
        return _from_wheel(target, timeout, opener)
    from gpuenv.lock._background import Background

    # The wheel's tail is fetched meanwhile: an index without PEP 658 files then costs
    # no extra round trip (one with them wastes a tail read, not time).
    tail = Background(lambda: _RangedFile(target, timeout, opener), name="wheel-tail")
    meta = _Target(target.url + ".metadata", target.headers)
    try:
        return _get(meta, timeout, opener=opener, limit=MAX_METADATA)[2].decode("utf-8")
    except TooLarge:
        raise
    except MetadataUnavailable:
        pass  # no PEP 658 file here: read the wheel itself
    except UnicodeDecodeError:
        raise MetadataUnavailable(f"{meta.url}: not UTF-8 text") from None
    return _from_wheel(target, timeout, opener, tail.result())


def read_names(url: str, *, timeout: float = DEFAULT_TIMEOUT, opener: Opener = _open) -> list[str]:
    """The file names inside the wheel at ``url`` (its central directory only)."""
    target = _Target.parse(url)
    remote = _RangedFile(target, timeout, opener)
    try:
        with zipfile.ZipFile(remote) as wheel:
            return wheel.namelist()
    except (zipfile.BadZipFile, EOFError) as exc:
        raise MetadataUnavailable(f"{target.url}: not a readable wheel ({exc})") from None


def read_member(
    url: str, name: str, *, timeout: float = DEFAULT_TIMEOUT, opener: Opener = _open
) -> bytes:
    """One file of the wheel at ``url`` (``torch/lib/libtorch_python.so``), read with
    range requests: the central directory and that member only."""
    target = _Target.parse(url)
    remote = _RangedFile(target, timeout, opener)
    try:
        with zipfile.ZipFile(remote) as wheel:
            info = wheel.getinfo(name)
            if info.file_size > MAX_MEMBER:
                raise MetadataUnavailable(f"{target.url}: {name} claims {info.file_size} bytes")
            return wheel.read(info)
    except KeyError:
        raise MetadataUnavailable(f"{target.url}: the wheel has no {name}") from None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise MetadataUnavailable(f"{target.url}: not a readable wheel ({exc})") from None
