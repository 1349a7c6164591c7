"""gpuenv._http: each host is looked up once per process (a lookup that stalls 5 s
stalls one request, not one in thirty), never a failed answer kept, and certificates
still checked against the host name."""

from __future__ import annotations

import contextlib
import http.server
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from gpuenv import _http


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@contextlib.contextmanager
def _serving(tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """A loopback server answering "ok" (over TLS with ``tls``); its port."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server() -> Iterator[int]:
    with _serving() as port:
        yield port


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``index.test`` resolves to loopback; ``gone.test`` does not; each lookup is named."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        if host == "index.test":
            return real("127.0.0.1", port, *args, **kwargs)
        if host == "gone.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return asked


def _get(url: str) -> bytes:
    with _http.urlopen(urllib.request.Request(url), timeout=10) as response:
        return response.read()  # type: ignore[no-any-return]


def test_a_host_is_looked_up_once_for_many_requests(server: int, lookups: list[str]) -> None:
    for _ in range(5):
        assert _get(f"http://index.test:{server}/simple/x/") == b"ok"
    assert lookups.count("index.test") == 1


def test_a_failed_lookup_is_not_kept(lookups: list[str]) -> None:
    for _ in range(2):
        with pytest.raises(urllib.error.URLError) as caught:
            _get("http://gone.test/simple/")
        assert isinstance(caught.value.reason, socket.gaierror)  # as urllib raised it before
    assert lookups.count("gone.test") == 2


def test_a_replaced_resolver_gets_a_memo_of_its_own(
    server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _get(f"http://127.0.0.1:{server}/")  # remembered with the real resolver
    asked: list[str] = []

    def refusing(host: str, *_args: Any, **_kwargs: Any) -> Any:
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", refusing)
    with pytest.raises(urllib.error.URLError):
        _get(f"http://127.0.0.1:{server}/")
    assert asked == ["127.0.0.1"]


def test_a_certificate_is_still_checked_against_the_host_name(
    lookups: list[str], test_ca: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket's address comes from the memo; TLS still names the host (SNI and the
    check): the loopback server's certificate, for 127.0.0.1, is good for 127.0.0.1 and
    refused for ``index.test``, which the memo resolves to the same address."""
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*test_ca.tls)
    with _serving(context) as port:
        assert _get(f"https://127.0.0.1:{port}/") == b"ok"
        with pytest.raises(urllib.error.URLError) as caught:
            _get(f"https://index.test:{port}/")
        assert isinstance(caught.value.reason, ssl.SSLCertVerificationError)
        assert "index.test" in str(caught.value.reason)
        assert lookups.count("index.test") == 1


def test_one_tls_context_serves_every_https_request(
    test_ca: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A context loads the CA bundle (40-57 ms of CPU): made once for many requests, and
    made again when the certificate settings change (a second SSL_CERT_FILE is read)."""
    made: list[ssl.SSLContext] = []
    real = ssl._create_default_https_context

    def counting() -> ssl.SSLContext:
        context = real()
        made.append(context)
        return context

    monkeypatch.setattr(ssl, "_create_default_https_context", counting)
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*test_ca.tls)
    with _serving(server) as port:
        for _ in range(4):
            assert _get(f"https://127.0.0.1:{port}/") == b"ok"
        assert len(made) == 1
        assert _http.tls_context() is made[0]
        monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca.parent / "none.pem"))
        with pytest.raises(urllib.error.URLError):  # a new setting: read, and it trusts nothing
            _get(f"https://127.0.0.1:{port}/")
        assert len(made) == 2
        monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca))
        assert _get(f"https://127.0.0.1:{port}/") == b"ok"
        assert len(made) == 2
