"""The one escaping function for what gpuenv prints (``printable``): no import at all,
so ``gpuenv run``'s fast path uses it too."""

from __future__ import annotations

# C0 and C1 controls and DEL (not newline or tab), the bidirectional overrides (text
# that reads differently than it is), and the lone surrogates that undecodable bytes
# become (os.fsdecode): each shown as a Python-style escape.
_UNPRINTABLE = [*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F)]
_UNPRINTABLE += [*range(0x2066, 0x206A), *range(0xDC80, 0xDD00)]
_ESCAPES = {
    code: (f"\\x{code - 0xDC00:02x}" if code >= 0xDC80 else repr(chr(code))[1:-1])
    for code in _UNPRINTABLE
    if chr(code) not in "\n\t"
}


def printable(text: str) -> str:
    """``text`` with every control character escaped (newlines and tabs kept)."""
    return text.translate(_ESCAPES)
