"""The one way gpuenv opens an HTTP(S) URL itself (downloads, sizes, wheel metadata,
index probes): ``urllib``'s, with each host name looked up once per process.

urllib opens a connection per request and looks the host up for each. A lookup whose
UDP packet is lost waits out the resolver's 5 s timeout before it retries (glibc's
default; on container clusters a known conntrack race loses them often): sizing the 68
artifacts of a CUDA stack, eight at a time, took 2.2 s on a good run and 7 s when two of
the 68 lookups stalled, before any download began. Here the first connection to a host
looks it up and later ones reuse the addresses for ``TTL`` seconds; a failed lookup is
never kept. Certificates and SNI still go by the host name (only the socket's address
comes from the memo), and proxies are urllib's as before (the proxy is the host then).

A program that replaces ``socket.getaddrinfo`` (a test) gets a memo of its own.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import http.client
    import ssl

TTL = 300.0  # seconds an answer is reused: a CLI run, not a resolver's cache

_LOCK = threading.Lock()
# (getaddrinfo in use, host, port) -> (when looked up, addresses in the resolver's order)
_MEMO: dict[tuple[object, str, int], tuple[float, tuple[str, ...]]] = {}
_opener: urllib.request.OpenerDirector | None = None
_CONTEXTS: dict[tuple[object, str | None, str | None], ssl.SSLContext] = {}


def addresses(host: str, port: int) -> tuple[str, ...]:
    """The addresses of ``host`` for a TCP connection to ``port``, looked up once per
    ``TTL``; ``socket.gaierror`` as the resolver raises it."""
    lookup = socket.getaddrinfo
    key = (lookup, host, port)
    now = time.monotonic()
    with _LOCK:
        found = _MEMO.get(key)
    if found is not None and now - found[0] < TTL:
        return found[1]
    infos = lookup(host, port, type=socket.SOCK_STREAM)
    unique = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    with _LOCK:
        _MEMO[key] = (now, unique)
    return unique


def _connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
    """``socket.create_connection`` through the memo: each address in turn."""
    host, port = address
    error: OSError | None = None
    for ip in addresses(host, port):
        try:
            return socket.create_connection((ip, port), *args, **kwargs)
        except OSError as exc:
            error = exc
    raise error or OSError(f"no address for {host}")


def _remembering(connection_class: type[http.client.HTTPConnection]) -> Any:
    def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        connection = connection_class(*args, **kwargs)
        connection._create_connection = _connect  # type: ignore[attr-defined]  # http.client's hook
        return connection

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_remembering(http_class), req, **kwargs)


def tls_context() -> ssl.SSLContext:
    """The verifying TLS context of this process's certificate settings, made once.

    ``http.client`` makes a new default context for every HTTPS connection, and loading
    the system's CA bundle into one costs 40-57 ms of CPU here: sizing and fetching the
    68 artifacts of a CUDA stack made 136 of them (5-8 s of CPU, on a cold install that
    is CPU-bound). The settings it reads (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, and the
    ``ssl`` module's default-context factory, which a program may replace) are the key:
    a changed setting gets a context of its own."""
    import ssl

    factory = ssl._create_default_https_context  # what http.client calls
    key = (factory, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _LOCK:
        context = _CONTEXTS.get(key)
        if context is None:
            context = factory()
            context.set_alpn_protocols(["http/1.1"])  # as http.client sets its own
            if context.post_handshake_auth is not None:
                context.post_handshake_auth = True
            _CONTEXTS[key] = context
    return context


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        kwargs["context"] = kwargs.get("context") or tls_context()
        return super().do_open(_remembering(http_class), req, **kwargs)


def urlopen(request: urllib.request.Request, *, timeout: float) -> Any:
    """``urllib.request.urlopen(request, timeout=timeout)``, each host looked up once."""
    global _opener  # noqa: PLW0603 - one opener per process, made on first use
    if _opener is None:
        _opener = urllib.request.build_opener(_HTTPHandler(), _HTTPSHandler())
    return _opener.open(request, timeout=timeout)
