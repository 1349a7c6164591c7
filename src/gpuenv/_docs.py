"""The documentation pages gpuenv's messages cite: one helper, so that a page that moves is
one edit here and ``tests/test_docs.py`` checks every page and section cited in ``src``.

Messages name the page by its path in gpuenv's repository (``docs/...``), which is where
the docs live; a section is named by its heading's anchor, as a Markdown renderer makes it.
"""

from __future__ import annotations


def doc(page: str, section: str = "") -> str:
    """``gpuenv docs/<page>#<section>``: what a message writes where it sends the reader."""
    return f"gpuenv docs/{page}" + (f"#{section}" if section else "")
