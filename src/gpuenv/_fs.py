"""File-system helpers shared by every module that writes: atomic replacement."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644, durable: bool = True) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never
    a half-written one: a temporary file in the same directory, renamed over it.

    ``durable`` also fsyncs the data before the rename, so the file itself survives a
    power loss, not only a killed process: for files users keep (the lock, the spec).
    Files inside a prefix skip it (see ``Store.mark_installed``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
        raise
