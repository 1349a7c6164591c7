"""Every reading of uv's prose, in one module: what kind of network failure an error
reports (``classify``; rattler's errors read the same way), which package's build
needed torch to give up its metadata (``build_needing_torch``), and an unsatisfiable
resolution in plain words (``explain_unsatisfiable``).

uv wraps its messages at ``$COLUMNS``; ``gpuenv._network.uv_environment`` runs it at a
fixed width (``UV_COLUMNS``), so these read one message per line whatever the user's
terminal. ``tests/lock/test_uv_output.py`` holds uv's output captured at several widths.
"""

from __future__ import annotations

import re

from gpuenv._network import Failure
from gpuenv._redact import redact, redact_url
from gpuenv.names import normalize_name

# The name of the throw-away project uv resolves (uv's messages say "<name> depends on").
PROJECT_NAME = "gpuenv-lock-request"

# -- network failures -----------------------------------------------------------------------

_RULES = (
    (
        "tls",
        r"invalid peer certificate|certificate verify failed|UnknownIssuer|"
        r"InvalidContentType|handshake failure|tls handshake|\bSSL\b|\bTLS\b",
    ),
    (
        "dns",
        r"dns error|failed to lookup address|Name or service not known|"
        r"No address associated|nodename nor servname|Temporary failure in name resolution|"
        r"Could not resolve host",  # git's (a git+https requirement, fetched by git)
    ),
    ("refused", r"Connection refused|os error 111"),
    ("timeout", r"timed out|operation timeout|deadline has elapsed"),
    (
        "auth",
        r"401 Unauthorized|403 Forbidden|lack of valid authentication|"
        r"Missing credentials|returned a 403|status client error \(40[13]",
    ),
    ("not-found", r"client error \(404|404 Not Found|not found in the package registry"),
    (
        "connection",
        r"error sending request|Connection reset|connection closed|"
        r"tcp connect error|client error \(Connect\)|Request failed after",
    ),
)
_URL_IN = (
    re.compile(r"(?:for url|An index URL|An index) \(([^()\s]+)\)"),
    re.compile(r"Failed to fetch: (\S+)"),
    re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s()'\"<>]+"),
)
_NOT_FOUND = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*) was not found in the package registry")


def classify(text: str) -> Failure | None:
    """The network failure ``text`` (uv's or rattler's error output) reports, or None
    when it reports something else (an unsatisfiable request, a crash). Messages are
    joined first: a word wrapped onto the next line still matches."""
    text = _unwrapped(text)
    for cause, pattern in _RULES:
        if re.search(pattern, text):
            return Failure(
                cause,
                _url_in(text),
                (_auth_status(text) if cause == "auth" else None) or _innermost(text),
                tuple(dict.fromkeys(_NOT_FOUND.findall(text))) if cause == "not-found" else (),
            )
    return None


_STATUS = re.compile(r"\b(40[13]) (?:Unauthorized|Forbidden)\b|returned an? (40[13])\b")
_REASONS = {"401": "Unauthorized", "403": "Forbidden"}


def _auth_status(text: str) -> str | None:
    """A refusal's HTTP status (``HTTP 401 Unauthorized``): uv reports a 401/403 from a
    page as its resolver's conclusion ("Because torch was not found in the package
    registry and <the request> depends on ..."), which is no reason and names
    gpuenv's throw-away project."""
    match = _STATUS.search(text)
    if match is None:
        return None
    code = match.group(1) or match.group(2)
    return f"HTTP {code} {_REASONS[code]}"


def _url_in(text: str) -> str | None:
    for pattern in _URL_IN:
        match = pattern.search(text)
        if match:
            return redact_url(match.group(match.lastindex or 0).rstrip(".,;:"))
    return None


def _innermost(text: str) -> str:
    """The tool's innermost cause, one line; never the resolver's derivation ("Because
    ... depends on ...": what a failed page led it to conclude, not why it failed)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    causes = [line for line in lines if line.lower().startswith(("cause:", "caused by:"))]
    causes = [line for line in causes if not _derived(line)]
    hints = [line for line in lines if line.startswith("hint:")]
    last = (causes or hints or lines or [""])[-1]
    last = re.sub(r"^(?i:caused by|cause|hint):\s*", "", last)
    return redact(last.replace(PROJECT_NAME, "the request"))[:300]


def _derived(line: str) -> bool:
    """Whether a cause line is the resolver's conclusion rather than a failure."""
    text = re.sub(r"^(?i:caused by|cause):\s*", "", line)
    return text.startswith("Because ") or PROJECT_NAME in text


# The marks uv (miette) draws before a message's causes.
_TREE = ("\u00d7", "\u2570", "\u251c", "\u2502")


def _unwrapped(text: str) -> str:
    """``text`` with uv's wrapped continuation lines joined to the line they continue
    (a wrapped line is indented deeper than the message it belongs to)."""
    out: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if (
            out
            and stripped
            and line.startswith("       ")
            and not stripped.startswith(("cause:", "Caused by:", "hint:", "error:", *_TREE))
        ):
            out[-1] = f"{out[-1]} {stripped}"
        else:
            out.append(line)
    return "\n".join(out)


# -- what is shown ----------------------------------------------------------------------------

TAIL_LINES = 20


def error_tail(text: str, lines: int = TAIL_LINES) -> str:
    """The part of uv's error output an error shows and the readers search: its
    headline (``error: Failed to build `flash-attn==2.6.3```), then its last lines (a
    build's traceback ends with the reason). A long traceback no longer pushes the
    headline out."""
    all_lines = text.strip().splitlines()
    if len(all_lines) <= lines:
        return "\n".join(all_lines)
    head = 1
    while head < lines // 4 and all_lines[head].startswith("       "):
        head += 1  # the headline, wrapped
    return "\n".join([*all_lines[:head], "  ...", *all_lines[-(lines - head - 1) :]])


# -- builds -------------------------------------------------------------------------------

_FAILED_BUILD = re.compile(r"Failed to build `([A-Za-z0-9][A-Za-z0-9._-]*)")


def build_needing_torch(text: str) -> str | None:
    """The package uv had to build to read its dependencies, when that build imports
    torch (its error says both), normalised; None otherwise."""
    text = _unwrapped(text)
    match = _FAILED_BUILD.search(text)
    if match is None or "No module named 'torch'" not in text:
        return None
    return normalize_name(match.group(1))


# -- unsatisfiable --------------------------------------------------------------------------


def explain_unsatisfiable(text: str) -> tuple[str, str | None]:
    """uv's explanation as one plain paragraph, and its hint if it gave one."""
    body: list[str] = []
    hints: list[str] = []
    target = body
    for raw in _unwrapped(text).splitlines():
        line = raw.strip()
        if not line or line.startswith("error: No solution found"):
            continue
        if line.startswith("hint:"):
            target = hints
            line = line[len("hint:") :].strip()
        line = re.sub("^(cause:|[\u00d7\u2570\u2500\u25b6\u2502]+)\\s*", "", line)
        target.append(line)
    message = " ".join(" ".join(body).split())
    message = message.replace(f"{PROJECT_NAME} depends on", "the request requires")
    message = message.replace("your project", "the request")
    message = message.replace("you require", "the request requires")
    message = message.replace("your requirements", "the requirements")
    message = redact(message) or "uv found no solution"
    hint = redact(" ".join(" ".join(hints).split())) or None
    return message, hint
