"""Rendering shared by every command: JSON on stdout, messages on stderr.

Everything written here passes through ``gpuenv._redact`` first: no URL credential,
token query parameter or remembered secret reaches the terminal, whatever produced
the text (a plan, a lock summary, uv's stderr, a validation error echoing a value).

Only CLI modules import this. rich is imported lazily, the first time a table or a
progress bar is drawn, so commands that print plain lines never pay for it.

Every line gpuenv prints goes through ``printable``: control characters that came
from the outside (a spec value, an ``LD_LIBRARY_PATH`` entry, a file name) are shown
as escapes (``\x1b``) instead of reaching the terminal, where they could move the
cursor, retitle the window or hide text. JSON output is escaped by ``json`` itself;
``gpuenv activate`` prints its script as it is (``raw``), for ``eval``.
"""

from __future__ import annotations

import contextlib
import json
import sys

from gpuenv._redact import redact, redact_data
from gpuenv.cli._printable import printable
from gpuenv.errors import GpuenvError

TYPE_CHECKING = False  # no typing at run time: `lock --check` imports nothing else of it
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from rich.console import Console

BUG_HINT = "this is a bug in gpuenv: please report it with the output of 'gpuenv -v ...'"

__all__ = ["printable"]


class _Stdout:
    """``sys.stdout`` during a command: a write or flush that fails (``> /dev/full``, a
    full disk under a redirect) is a ``StorageError`` naming standard output, where it
    was 'cannot write a file ((unknown path))' and, under ``--json``, a traceback."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            raise _stdout_failed(exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _stdout_failed(exc) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _stdout_failed(exc: OSError) -> GpuenvError:
    if isinstance(exc, BrokenPipeError):  # `| head`: the reader has what it wanted
        from gpuenv.errors import OutputClosed

        return OutputClosed("standard output was closed by its reader")
    from gpuenv._fs import storage_error

    hint = "redirect standard output where it can be written (or to a terminal)"
    return storage_error(exc, "standard output", "gpuenv's output", hint=hint)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """Run a command with ``_Stdout`` in place (a closed stdout, ``>&-``: a null one),
    flushed before the command is done, so that output that cannot be written is an
    error (exit 5) rather than lost after gpuenv said 0."""
    import os

    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:  # closed by the caller: Python starts with None
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    original = sys.stdout
    sys.stdout = _Stdout(original)
    try:
        yield
    finally:
        sys.stdout = original


def fit_streams() -> None:
    """stdout shows what its encoding cannot as escapes (``\\u2192``), as stderr always
    does: with a non-UTF-8 locale (``LC_ALL=C`` and ``PYTHONUTF8=0``, an ISO-8859-1
    server) or ``PYTHONIOENCODING=ascii``, a report's arrow was an exit 70 after the
    work was done. Files gpuenv writes are UTF-8 whatever the locale."""
    stream = sys.stdout
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
    reconfigure = getattr(stream, "reconfigure", None)
    if encoding in ("utf-8", "utf8") or reconfigure is None:
        return
    with contextlib.suppress(ValueError, OSError):  # a closed or detached stream
        reconfigure(errors="backslashreplace")


def emit_json(payload: Any) -> None:
    """Every ``--json`` output is exactly one JSON object on stdout."""
    sys.stdout.write(json.dumps(redact_data(payload), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def clean(text: str) -> str:
    """``text`` as gpuenv prints it: credentials redacted, control characters escaped."""
    return printable(redact(text))


def out(text: str = "", *, raw: bool = False) -> None:
    sys.stdout.write((text if raw else clean(text)) + "\n")


def raw(text: str) -> None:
    """Machine input printed as is (an activation script for ``eval``): never redacted
    or escaped, since a rewritten path would change what the shell runs. It holds no
    credentials, and every value in it is quoted for its shell. On a stdout that is not
    UTF-8 (a non-UTF-8 locale) it goes out as bytes: a path's own bytes (surrogates, as
    such a locale decodes them) and UTF-8 for the rest, where escapes made the shell
    activate a path that does not exist."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
    if buffer is None or encoding in ("utf-8", "utf8"):
        stream.write(text + "\n")
        return
    stream.flush()
    buffer.write((text + "\n").encode("utf-8", "surrogateescape"))
    buffer.flush()


def err(text: str) -> None:
    """A line on stderr (a warning, an error); lost, not raised, when stderr cannot take
    it: the exit code still says how the command ended."""
    stream = sys.stderr
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):
        stream.write(clean(text) + "\n")


def _traceback(exc: BaseException) -> None:
    import traceback  # only for a bug in gpuenv (or -v on one)

    sys.stderr.write(redact("".join(traceback.format_exception(exc))))


def console(*, stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def render_error(error: GpuenvError, *, as_json: bool, verbose: int) -> None:
    if as_json:
        try:
            emit_json(error.to_json())
            return
        except (GpuenvError, OSError, ValueError):  # stdout itself failed: say it on stderr
            as_json = False
    if not as_json:
        lines = _shortened(error.message).splitlines() or [error.kind]
        err(f"gpuenv: error: {lines[0]}")
        for line in lines[1:]:
            err(f"  {line}")
        if error.hint:
            err(f"  hint: {_shortened(error.hint)}")
        alternatives = getattr(error, "alternatives", ())
        if alternatives:
            err("  what would work instead:")
            for alternative in alternatives:
                changes = "; ".join(
                    # a command-line flag (gpuenv import's) as typed, a spec key as TOML
                    f"{k} {v}" if k.startswith("--") else _as_toml(k, v)
                    for k, v in alternative.changes.items()
                )
                err(f"  - {alternative.description}" + (f"  ({changes})" if changes else ""))
    if verbose and not as_json:
        for cause in _causes(error):  # an expected error: its causes, never a traceback
            err(f"  caused by: {type(cause).__name__}: {cause}")
        tail = getattr(error, "stderr_tail", "")  # the tool's own words (uv's, rattler's)
        if tail and tail.strip() not in error.message:
            err("  the tool said:")
            for line in tail.strip().splitlines()[-20:]:
                err(f"    {_shortened(line)}")


_LONG_WORD = 200


def _shortened(text: str) -> str:
    """Each run of over 200 characters without a space (a 10,000-character path given
    to -f, --python, --from) shown by its ends and length: a message printed it whole,
    10 KB of stderr, twice for `install --from`. JSON keeps the message as it is."""
    if len(text) <= _LONG_WORD:
        return text
    import re

    def shorten(match: re.Match[str]) -> str:
        word = match.group(0)
        return f"{word[:60]}...{word[-20:]} ({len(word)} characters)"

    # a word of over 200 characters, its trailing punctuation and quotes left outside
    return re.sub(rf"[^\s'\"()]{{{_LONG_WORD},}}[^\s'\"():,;.]", shorten, text)


def _causes(error: BaseException) -> list[BaseException]:
    """The exceptions behind ``error`` (``raise ... from`` first, else the one being
    handled, unless suppressed with ``from None``), outermost first, without repeats."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(found) < 16:
        following = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
        if following is None or following is error or following in found:
            break
        found.append(following)
        current = following
    return found


def render_interrupt(interrupt: BaseException, *, as_json: bool) -> None:
    """One line: Ctrl-C is "interrupted", a signal such as SIGTERM is named."""
    name = getattr(interrupt, "name", None)
    message = f"terminated by {name}" if name else "interrupted"
    with contextlib.suppress(OSError):  # the terminal or pipe is gone (SIGHUP)
        if as_json:
            emit_json({"error": {"kind": "interrupted", "message": message}})
        else:
            err(f"gpuenv: {message}")


def render_internal(exc: BaseException, *, as_json: bool, verbose: int) -> None:
    message = f"internal error: {type(exc).__name__}: {exc}"
    if as_json:
        emit_json({"error": {"kind": "internal", "message": message, "hint": BUG_HINT}})
    else:
        err(f"gpuenv: {message}")
        err(f"  hint: {BUG_HINT}")
    if verbose:
        _traceback(exc)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table (cheaper than rich for a few rows)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.extend(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
    return "\n".join(lines)


def _as_toml(key: str, value: str) -> str:
    """An alternative's change as the spec would hold it: ``[stack] torch = "==2.3.1"``
    (it read ``[stack.torch = ==2.3.1]``, which no spec line looks like)."""
    table, _, name = key.rpartition(".")
    shown = value if value in ("true", "false") or value.isdigit() else f'"{value}"'
    return f"[{table}] {name} = {shown}" if table else f"{name} = {shown}"
