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
