"""The one place gpuenv itself sends HTTP requests: after uv reported that an index had
no page for a package, a request for that page tells a 404 from a 401/403 (uv reports
both as "not found" for an explicit index), and for a torch index two more tell a
mirror in the wrong layout from a build that is simply not mirrored.

PyTorch's index has one index per build, ``<base>/<cu tag>/<package>/``; a mirror that
flattened it (``<base>/<package>/``) or lacks a build answers 404 to uv, which alone
cannot say which. Requests honour the same proxies (``HTTP(S)_PROXY``, ``NO_PROXY``)
and certificates (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) as uv; they carry the index's
credentials. Any failure here means "no finding", never an error.
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

from gpuenv._network import Index
from gpuenv._redact import redact_url

TIMEOUT = 5.0


def _page(index: Index, path: str) -> str:
    """``index.url`` with its last path segment replaced by ``path`` (query kept)."""
    parts = urlsplit(index.url)
    return urlunsplit(parts._replace(path=path))


def page_status(url: str, index: Index) -> int | None:
    """The HTTP status of ``url`` (a page of ``index``, fetched with its credentials;
    ``url`` may be shown redacted: the index's own query is put back), or None."""
    parts = urlsplit(url)
    query = urlsplit(index.url).query
    return _status(urlunsplit(parts._replace(query=parts.query or query)), index)


def _status(url: str, index: Index) -> int | None:
    from gpuenv._http import urlopen

    request = urllib.request.Request(url, method="GET")  # noqa: S310 - an index's http(s) URL
    if index.username is not None:
        pair = f"{index.username}:{index.password or ''}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(pair).decode())
    try:
        with urlopen(request, timeout=TIMEOUT) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def layout_problem(index: Index, package: str) -> str | None:
    """What is wrong with the per-build torch index ``index`` (``<base>/<tag>``) that
    answered 404 for ``package``, when two requests can tell; else None."""
    parts = urlsplit(index.url)
    if parts.scheme not in ("http", "https"):
        return None
    build = parts.path.rstrip("/")
    base, _, tag = build.rpartition("/")
    if not tag:
        return None
    flat = _page(index, f"{base}/{package}/")
    if _status(flat, index) == 200:
        return (
            f"the mirror has a flat layout: {redact_url(flat)} exists, but gpuenv expects one "
            "index per build, <base>/<cu tag>/<package>/ "
            f"(here {redact_url(_page(index, f'{build}/{package}/'))})"
        )
    if _status(_page(index, f"{build}/"), index) == 404:
        return f"there is no {tag} index at {redact_url(_page(index, build + '/'))}"
    return None
