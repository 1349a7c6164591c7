"""Downloads and the credentials files they read are bounded (issue 24, finding 7): a
mirror whose body never ends wrote 292 MiB for a 1 KB wheel, and ``~/.netrc`` as a FIFO
hung ``pack``; a non-UTF-8 one was exit 70."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gpuenv import _network
from gpuenv._network import MAX_DOWNLOAD_BYTES, download_cap, netrc_auth
from gpuenv.errors import DownloadError
from gpuenv.pack import PackRequest, prepare
from gpuenv.store import Store
from tests.pack.test_archive import make_lock


class _Endless(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()  # no Content-Length: the body ends when the server says so
        try:
            while True:
                self.wfile.write(b"\0" * 65536)
        except OSError:
            return

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def endless() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_download_stops_at_the_cap_and_leaves_nothing(
    endless: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_network, "MAX_DOWNLOAD_BYTES", 1 << 20)
    os.mkfifo(tmp_path / "netrc")  # and the credentials file is a FIFO: no hang either
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    lock = make_lock(tmp_path / "origin")
    target = lock.targets["cpu"]
    endless_wheel = replace(target.pip[0], url=f"{endless}/alpha-1.0-py3-none-any.whl")
    store = Store(tmp_path / "s")
    request = PackRequest(
        replace(lock, targets={"cpu": replace(target, pip=(endless_wheel,))}),
        ("cpu",),
        "attack",
        None,
        store,
    )
    with pytest.raises(DownloadError, match="more than 1048576 bytes"):
        prepare(request)
    assert not [p for p in (tmp_path / "s" / "cache").rglob("*") if p.is_file()]


def test_the_cap_is_the_declared_size_else_the_documented_maximum() -> None:
    assert download_cap(1024) == 1024
    assert download_cap(None) == MAX_DOWNLOAD_BYTES == 16 << 30


def test_netrc_is_read_bounded(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_text("machine h.invalid login me password s3cret\n")
    assert netrc_auth("h.invalid", {"NETRC": str(good)}) == ("me", "s3cret")
    assert netrc_auth("other.invalid", {"NETRC": str(good)}) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    latin = tmp_path / "latin"
    latin.write_bytes(b"machine h.invalid login me password caf\xe9\n")
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    huge = tmp_path / "huge"
    huge.write_bytes(b"#" * (2 << 20))
    for bad in (fifo, latin, zero, huge, tmp_path / "missing", tmp_path):
        assert netrc_auth("h.invalid", {"NETRC": str(bad)}) is None, bad.name
