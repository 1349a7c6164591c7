"""A walk over an archive's raw tar headers before ``tarfile`` parses any of them.

``tarfile`` acts on extended headers while it reads them: a pax header of a few
hundred kilobytes keeps the 3.11.7 interpreter's header parser busy for minutes
(CVE-2024-6232), and a pax-sparse member made it write 200 MiB before the member
check refused it. ``gpuenv pack`` writes pax headers only for a long ``path`` (and a
``size`` over 8 GiB), so anything else is refused here, from the raw bytes: a pax
header over ``PAX_LIMIT`` bytes, a key other than those, any GNU sparse or long-name
header, a global header. The walk reads 512 bytes per member and seeks over the data.
"""

from __future__ import annotations

import os
from pathlib import Path

BLOCK = 512
PAX_LIMIT = 4096  # a path of 255-byte components is far shorter
PAX_KEYS = frozenset({"path", "size", "mtime"})
# Header types tarfile interprets beyond "a file follows": pax (x, g), GNU sparse (S),
# GNU long names (L, K), and the Solaris extended header (X).
_EXTENDED = {b"x": "a pax header", b"g": "a global pax header"}
_REFUSED = {
    b"S": "a GNU sparse member",
    b"L": "a GNU long name",
    b"K": "a GNU long link name",
    b"X": "a Solaris extended header",
}


def _size(field: bytes) -> int | None:
    """The octal (or base-256) size field, or None when it is not one."""
    if field[:1] in (b"\x80", b"\xff"):
        return None if field[:1] == b"\xff" else int.from_bytes(field[1:], "big")
    text = field.rstrip(b"\0 ").lstrip(b" ")
    if not text:
        return 0
    if not all(48 <= c <= 55 for c in text):  # 0-7
        return None
    return int(text, 8)


def _pax_problem(data: bytes) -> str | None:
    """Why the pax records are not the ones gpuenv writes (None: they are)."""
    at = 0
    while at < len(data):
        space = data.find(b" ", at, at + 12)
        if space < 0 or not data[at:space].isdigit():
            return "a malformed pax record"
        length = int(data[at:space])
        record = data[space + 1 : at + length]
        if length <= 0 or at + length > len(data) or not record.endswith(b"\n"):
            return "a malformed pax record"
        key = record.partition(b"=")[0].decode("ascii", "replace")
        if key not in PAX_KEYS:
            return f"a pax key {key[:40]!r} (sparse files and other extensions are refused)"
        at += length
    return None


def prescan(archive: Path) -> str | None:
    """Why ``archive``'s headers are refused before ``tarfile`` reads them (None: they
    may be read). Truncation and checksums are left to ``tarfile``."""
    with archive.open("rb") as handle:
        end = os.fstat(handle.fileno()).st_size
        at = 0
        while at + BLOCK <= end:
            handle.seek(at)
            header = handle.read(BLOCK)
            if header == b"\0" * BLOCK:
                return None
            kind, size = header[156:157], _size(header[124:136])
            if size is None:
                return f"a member header at offset {at} with an invalid size"
            if kind in _REFUSED:
                return f"{_REFUSED[kind]} at offset {at}"
            if kind in _EXTENDED:
                if kind == b"g" or size > PAX_LIMIT:
                    what = "over 4 KiB" if kind == b"x" else "refused"
                    return f"{_EXTENDED[kind]} at offset {at} ({size} bytes, {what})"
                problem = _pax_problem(handle.read(size))
                if problem:
                    return f"{problem} at offset {at}"
            at += BLOCK + -(-size // BLOCK) * BLOCK
    return None
