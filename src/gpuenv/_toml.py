"""Parsing TOML: the standard library's ``tomllib`` (``tomli`` on Python 3.10), in one
place. It is imported when a text is parsed, not with this module: a digest of the data
files or the ``gpuenv run`` path reads bytes only.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing stays off the paths that only read bytes
if TYPE_CHECKING:
    from typing import Any


class TomlError(ValueError):
    """Text that is not TOML; ``str()`` is the parser's message, which ends with where
    (``(at line 3, column 7)``, or ``(at end of document)``)."""

    @property
    def line(self) -> int | None:
        """The line the parser names; None at the end of the document."""
        import re

        match = re.search(r"\(at line (\d+)", str(self))
        return int(match.group(1)) if match else None


def loads(text: str) -> dict[str, Any]:
    """The document as a dict. Raises ``TomlError`` for text that is not TOML and
    ``RecursionError`` for values nested deeper than the parser recurses."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 only
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlError(str(exc)) from exc
    return data


# One parsed document kept for the next reader of the same text: install.headstart
# reads the lock before lock.format does, and a lock parses in 0.6 ms (13 entries) to
# 4 ms (98 entries). The reader gets it once; nothing else holds it then.
_handed: list[tuple[str, dict[str, Any]]] = []


def hand_over(text: str, document: dict[str, Any]) -> None:
    """Keep ``document``, which ``loads(text)`` returned, for ``taken(text)``; the one
    handing it over is done with it before that reader runs (it may change it)."""
    _handed[:] = [(text, document)]


def taken(text: str) -> dict[str, Any] | None:
    """The document handed over for ``text`` (once), else None."""
    if _handed and _handed[0][0] == text:
        return _handed.pop()[1]
    return None
