"""The one redaction rule: what of a URL (or of any text holding URLs) is a secret.

Every output (plan, lock and install messages, ``--json``), every error (uv's and
rattler's stderr tails included), every cache file and the lock writer pass their text
through ``redact``. Standard library only, and cheap to import: error rendering on the
``gpuenv run`` path uses it (``urllib.parse`` loads only when a URL is seen).

What is removed:

- the userinfo of a URL: ``https://user:token@host/`` -> ``https://host/``, up to the
  last ``@`` before the host as uv and pip parse it (``u:pa@ss@host`` -> ``host``);
- query parameters whose name says secret (case-insensitive): ``token``, ``access_token``,
  ``auth``, ``key``, ``password``, ``secret``, ``sig``, ``signature``, ``policy``,
  ``credential``, ``jwt``, ``session``, ``code`` and their ``_token``/``_key``-style variants
  (any name containing ``token``, ``secret``, ``passw``, ``signature``, ``credential``,
  ``apikey``/``api_key``/``api-key``), and every ``X-Amz-*``, ``X-Goog-*`` and ``X-Ms-*``
  parameter (pre-signed cloud storage URLs);
- a conda token path segment, ``/t/<token>/`` as the path's first segment (anaconda.org
  style; a ``/t/`` folder deeper in a path is left alone: rewriting it broke URLs);
- the value of an ``Authorization:`` header in text, and of upper-case ``*_PASSWORD=``,
  ``*_TOKEN=``, ``*_SECRET=`` assignments (environment variables);
- any value registered with ``remember_secret`` (credentials gpuenv itself split off
  a URL), wherever it appears, also percent-encoded.

Other query parameters and the fragment stay. The lock's URLs are ``redact_url`` of what
the resolver returned, so a committed lock never holds a secret; install passes
credentials to uv separately (``gpuenv._network``).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MASK = "***"

_SECRET_NAMES = frozenset(
    {
        "token",
        "auth",
        "key",
        "password",
        "passwd",
        "pwd",
        "pass",
        "secret",
        "sig",
        "signature",
        "policy",
        "credential",
        "credentials",
        "jwt",
        "session",
        "code",
        "authorization",
    }
)
_SECRET_PARTS = (
    "token",
    "secret",
    "passw",
    "signature",
    "credential",
    "apikey",
    "api_key",
    "api-key",
)
_SECRET_PREFIXES = ("x-amz-", "x-goog-", "x-ms-")
_MIN_SECRET = 6  # shorter remembered values would mangle ordinary words

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
# The userinfo ends at the LAST "@" before the host, as uv, pip and urllib split it: a
# password may hold a raw "@" (``u:pa@ss@host``), and all of it is the secret.
# (In text, a quote ends a URL before this rule sees it: ``_URL``.)
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")
# anaconda.org's token form: the first segment of the path (``host/t/<token>/channel``);
# a ``/t/<name>/`` deeper in a path is an ordinary folder of some index.
_CONDA_TOKEN = re.compile(r"(?<=://)([^/?#\s'\"<>`]*)/t/[^/\s?#'\"<>`]+(?=/)")
_HEADER = re.compile(r"(?i)(authorization\s*[:=]\s*)(?:(basic|bearer|token)\s+)?\S+")
# An environment-style assignment (upper case, as in ``UV_INDEX_X_PASSWORD=...``): not
# ``tokenizers==0.20`` or ``max_tokens=5``, and not a segment of a path or URL
# (``.../A_TOKEN=q/``: a folder name, and a secret query parameter is redact_url's).
_ASSIGN = re.compile(r"(?<![/%])\b([A-Z][A-Z0-9_]*(?:PASSWORD|TOKEN|SECRET)[A-Z0-9_]*=)(?!=)\S+")

_remembered: set[str] = set()


def is_secret_param(name: str) -> bool:
    """Whether a query parameter of this name carries a secret (see the module doc)."""
    lowered = name.strip().lower()
    return (
        lowered in _SECRET_NAMES
        or any(part in lowered for part in _SECRET_PARTS)
        or lowered.startswith(_SECRET_PREFIXES)
    )


def remember_secret(value: str | None) -> None:
    """Mask ``value`` (a password or token gpuenv split off a URL) in all later output."""
    if value and len(value) >= _MIN_SECRET:
        from urllib.parse import quote

        _remembered.add(value)
        _remembered.add(quote(value, safe=""))


def redact_url(url: str) -> str:
    """``url`` without userinfo, secret query parameters or a conda token segment."""
    if "://" not in url:
        return url
    if "@" not in url and "?" not in url and "/t/" not in url:
        return url  # none of the three forms can be in it (a lock holds ~300 such URLs)
    from urllib.parse import unquote_plus, urlsplit, urlunsplit

    url = _CONDA_TOKEN.sub(r"\1", _USERINFO.sub("", url, count=1), count=1)
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an invalid IPv6 literal: keep what is already removed
        return url
    if not parts.query:
        return url
    fields = re.split(r"[&;]", parts.query)
    kept = [f for f in fields if not is_secret_param(unquote_plus(f.partition("=")[0]))]
    if len(kept) == len(fields):
        return url
    return urlunsplit(parts._replace(query="&".join(kept)))


def redact_urls(text: str) -> str:
    """``text`` with every URL in it through ``redact_url`` and nothing else changed: for
    a file that is kept (a spec packed into an archive), whose other text the
    assignment and header rules could cut through."""
    return _URL.sub(_redacted_url_in_text, text) if "://" in text else text


def redact(text: str) -> str:
    """``text`` with every secret form above removed (URLs rewritten by ``redact_url``)."""
    if not text:
        return text
    if "://" in text:
        text = _URL.sub(_redacted_url_in_text, text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _HEADER.sub(_masked_header, text)
    if "=" in text:
        text = _ASSIGN.sub(lambda m: m.group(1) + MASK, text)
    for secret in sorted(_remembered, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _redacted_url_in_text(match: re.Match[str]) -> str:
    url = match.group(0)
    body = url.rstrip(".,;:)]}!")  # sentence punctuation after a URL is not part of it
    return redact_url(body) + url[len(body) :]


def _masked_header(match: re.Match[str]) -> str:
    scheme = f"{match.group(2)} " if match.group(2) else ""
    return f"{match.group(1)}{scheme}{MASK}"


def redact_data(value: Any) -> Any:
    """A JSON-like value with ``redact`` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    return value
