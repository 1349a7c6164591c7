"""The one fetcher and the store's artifacts (gpuenv._fetch): a server that breaks
connections, is busy, ignores ranges or sends other bytes; a stored copy damaged on
disk; many fetches of one artifact at once."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpuenv._fetch import Artifact, ArtifactStore, Digests, download, hash_file
from gpuenv.errors import DownloadError, HashMismatch

BLOB = os.urandom(3 << 20) + b"end"  # over three chunks
SHA = hashlib.sha256(BLOB).hexdigest()
MD5 = hashlib.md5(BLOB, usedforsecurity=False).hexdigest()


class Flaky:
    """How the server misbehaves: ``breaks`` full answers cut in half first, ``busy``
    503s first, ``ranges`` honoured or not; every request is recorded."""

    def __init__(self, *, breaks: int = 0, busy: int = 0, ranges: bool = True) -> None:
        self.breaks, self.busy, self.ranges = breaks, busy, ranges
        self.requests: list[str | None] = []  # the Range header of each request
        self.lock = threading.Lock()


@contextmanager
def flaky_server(behaviour: Flaky, body: bytes = BLOB) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_GET(self) -> None:
            wanted = self.headers.get("Range")
            with behaviour.lock:
                behaviour.requests.append(wanted)
                busy = behaviour.busy > 0
                behaviour.busy -= busy
                broken = not busy and behaviour.breaks > 0
                behaviour.breaks -= broken
            if busy:
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = 0
            if wanted and behaviour.ranges:
                start = int(wanted.removeprefix("bytes=").rstrip("-"))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            data = body[start:]
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2] if broken else data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pkg-1.0-py3-none-any.whl"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpuenv._fetch.BACKOFF", 0.01)
    monkeypatch.delenv("UV_HTTP_RETRIES", raising=False)


def artifact(url: str = "http://x/pkg-1.0-py3-none-any.whl", **fields: Any) -> Artifact:
    values: dict[str, Any] = {"sha256": SHA, "kind": "pip", **fields}
    return Artifact((url,), "pkg-1.0-py3-none-any.whl", **values)


def test_a_broken_transfer_resumes_where_it_stopped(tmp_path: Path) -> None:
    behaviour = Flaky(breaks=1)
    with flaky_server(behaviour) as url:
        path = ArtifactStore(tmp_path).fetch(artifact(url), url)
    assert path.read_bytes() == BLOB
    assert behaviour.requests[0] is None and behaviour.requests[1] == f"bytes={len(BLOB) // 2}-"


def test_a_server_that_ignores_ranges_is_read_again_from_the_start(tmp_path: Path) -> None:
    behaviour = Flaky(breaks=1, ranges=False)
    with flaky_server(behaviour) as url:
        path = ArtifactStore(tmp_path).fetch(artifact(url), url)
    assert path.read_bytes() == BLOB and len(behaviour.requests) == 2


def test_a_busy_server_is_retried_then_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    behaviour = Flaky(busy=2)
    with flaky_server(behaviour) as url:
        assert ArtifactStore(tmp_path).fetch(artifact(url), url).read_bytes() == BLOB
    assert len(behaviour.requests) == 3
    monkeypatch.setenv("UV_HTTP_RETRIES", "1")  # uv's setting applies to gpuenv's fetches
    behaviour = Flaky(busy=5)
    with flaky_server(behaviour) as url, pytest.raises(DownloadError, match="HTTP 503"):
        ArtifactStore(tmp_path / "other").fetch(artifact(url), url)
    assert len(behaviour.requests) == 2
    assert not list((tmp_path / "other").rglob("*.whl")), "nothing half-written is kept"


def test_other_bytes_are_one_error_type_and_nothing_is_stored(tmp_path: Path) -> None:
    mismatch = pytest.raises(HashMismatch, match=r"does not match the sha256 in gpuenv\.lock")
    with flaky_server(Flaky(), body=BLOB[:-1] + b"!") as url, mismatch:
        ArtifactStore(tmp_path).fetch(artifact(url), url)
    conda = artifact(md5="0" * 32, kind="conda", label="conda package pkg 1.0 (h0)")
    mismatch = pytest.raises(HashMismatch, match=r"conda package pkg 1\.0 \(h0\) .* the md5")
    with flaky_server(Flaky()) as url, mismatch:
        ArtifactStore(tmp_path).fetch(conda, url)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".lock"] == []


def test_md5_is_computed_only_for_artifacts_that_have_one(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(BLOB)
    assert hash_file(tmp_path / "f").md5 is None
    digests = hash_file(tmp_path / "f", md5=True)
    assert (digests.sha256, digests.md5, digests.size) == (SHA, MD5, len(BLOB))


def test_a_size_cap_refuses_a_larger_download_before_reading_it(tmp_path: Path) -> None:
    with flaky_server(Flaky()) as url:
        with pytest.raises(DownloadError, match="over the limit of 1024"):
            ArtifactStore(tmp_path).fetch(artifact(url), url, max_size=1024)
        out = tmp_path / "out"
        with out.open("wb") as handle, pytest.raises(DownloadError, match="limit"):
            download(url, handle, Digests(), max_size=10)


def test_a_stored_copy_damaged_on_disk_is_found_out_and_fetched_again(tmp_path: Path) -> None:
    behaviour = Flaky()
    store = ArtifactStore(tmp_path)
    with flaky_server(behaviour) as url:
        path = store.ensure(artifact(url))
        assert store.ensure(artifact(url)) == path and len(behaviour.requests) == 1
        path.chmod(0o644)
        path.write_bytes(BLOB[:-3] + b"END")  # same size, new mtime: hashed again
        assert store.find(artifact(url)) is None, "removed, not used"
        assert store.ensure(artifact(url)).read_bytes() == BLOB
    assert len(behaviour.requests) == 2


def test_one_artifact_wanted_by_many_at_once_is_downloaded_once(tmp_path: Path) -> None:
    behaviour = Flaky()
    with flaky_server(behaviour) as url, ThreadPoolExecutor(8) as pool:
        stores = [ArtifactStore(tmp_path / "a", tmp_path / "locks") for _ in range(8)]
        paths = list(pool.map(lambda s: s.ensure(artifact(url)), stores))
    assert len(set(paths)) == 1 and paths[0].read_bytes() == BLOB
    assert len(behaviour.requests) == 1


def test_netrc_credentials_are_sent_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    url = f"http://127.0.0.1:{server.server_address[1]}/pkg-1.0-py3-none-any.whl"
    try:
        with pytest.raises(DownloadError) as failed:
            ArtifactStore(tmp_path / "s").fetch(artifact(url), url)
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["Basic YWxpY2U6czNjcmV0"], "401 is not retried"
    assert "s3cret" not in failed.value.message and "credentials" in (failed.value.hint or "")


def test_a_mirror_takes_the_credentials_given_by_the_name_of_the_index_it_serves() -> None:
    """uv takes a mirror's credentials by either name (the index's or the mirror's):
    gpuenv's own fetches through the mirror (install's downloads, lock's METADATA
    reads) send the same, never to another host."""
    from gpuenv._fetch import authorization, fetch_credentials
    from gpuenv._network import Mirror, Mirrors, pip_indexes

    mirrors = Mirrors((Mirror("https://pypi.invalid/simple", "http://m.example/simple", "t"),))
    indexes = pip_indexes("https://pypi.invalid/simple", (), None)
    environ = {"UV_INDEX_GPUENV_DEFAULT_USERNAME": "u", "UV_INDEX_GPUENV_DEFAULT_PASSWORD": "p-7"}
    found = fetch_credentials(indexes, mirrors, environ)
    assert found["m.example"] == ("u", "p-7")
    assert authorization("http://m.example/simple/six/", found) == "Basic dTpwLTc="
    assert authorization("http://elsewhere.example/x.whl", found) is None
    by_mirror = {"UV_INDEX_GPUENV_MIRROR_1_USERNAME": "v", "UV_INDEX_GPUENV_MIRROR_1_PASSWORD": "q"}
    assert fetch_credentials(indexes, mirrors, by_mirror)["m.example"] == ("v", "q")


def test_sizes_from_a_host_that_never_answers_cost_one_timeout(
    silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mirror that accepts connections and never answers held install silent through
    two minutes of size look-ups (13 artifacts, 8 at a time, each waiting its timeout)
    before the downloads timed out too."""
    import time

    from gpuenv._fetch import budget

    monkeypatch.setenv("UV_HTTP_TIMEOUT", "1")
    artifacts = [
        Artifact((f"http://127.0.0.1:{silent_port}/f{i}.whl",), f"f{i}.whl", "0" * 64, "pip")
        for i in range(24)
    ]
    started = time.perf_counter()
    cost = budget(artifacts)
    took = time.perf_counter() - started
    assert cost.unknown == 24
    assert took < 2.5, f"{took:.1f} s: one timeout in all, not one per wave of look-ups"


def test_a_stored_artifact_keeps_its_pages_and_a_missing_call_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store drops no page of what it has just written: uv reads it next, from memory
    (POSIX_FADV_DONTNEED there made uv read 3.5 GB back from disk). The install starts
    its writeback once uv knows of it (tests/install/test_writeback_order.py) and lets
    it go once uv has read it; a system without posix_fadvise (macOS) stores it just
    the same."""
    from gpuenv import _fs

    data = b"wheel bytes" * 100
    artifact = Artifact(
        ("https://files.test/a.whl",), "a.whl", hashlib.sha256(data).hexdigest(), "pip"
    )
    advised: list[int] = []
    written_back: list[int] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: advised.append(advice))
    monkeypatch.setattr(_fs, "_SYNC_FILE_RANGE", [lambda fd, *_: written_back.append(fd) or 0])
    store = ArtifactStore(tmp_path / "artifacts")
    path = store.add(artifact, lambda out, digests: (out.write(data), digests.update(data)), "here")
    assert path.read_bytes() == data
    assert advised == [] and written_back == []
    _fs.release_cached(path)
    assert advised == [os.POSIX_FADV_DONTNEED]
    monkeypatch.delattr(os, "posix_fadvise")
    _fs.release_cached(path)  # nothing to call: nothing happens
    _fs.release_cached(tmp_path / "gone.whl")  # nor for a file that is not there
    other = Artifact(("https://files.test/b.whl",), "b.whl", artifact.sha256, "pip")
    assert store.add(other, lambda out, digests: (out.write(data), digests.update(data)), "here")
