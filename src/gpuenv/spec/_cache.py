"""Remember specs that validated, so the next load skips pydantic entirely.

An entry is keyed by the spec's exact text, gpuenv's version and (when the
knowledge-base checks ran) the knowledge base's data, so any change to any of them
is a miss. The cache is a courtesy: unreadable or corrupt entries are misses, and
failing to write one is ignored. Only specs that passed every check are stored.

Entries are private files (mode 0600), and a spec that holds a credential (a URL's
``user:token@``, a ``?token=`` query: anything ``gpuenv._redact`` would remove) is
never stored: it is validated on every load instead, so no cache file holds a secret.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuenv import __version__, _sha256
from gpuenv._fs import atomic_write_text
from gpuenv._redact import redact
from gpuenv._tomlpos import Path as KeyPath

# 2: same-torch, per-target torch, platform optional; 3: [pip] exclude-newer; 4: its -package;
# 5: a name written twice ("Foo", "foo") in a table by name, a torch-family day
FORMAT = 5


def key(text: str, *, with_knowledge: bool) -> str:
    digest = _sha256.new()
    digest.update(f"gpuenv {__version__} cache {FORMAT}\n".encode())
    if with_knowledge:
        from gpuenv.knowledge._data import data_digest

        digest.update(data_digest().encode())
    digest.update(b"\0" + text.encode())
    return digest.hexdigest()


def _path(cache_dir: Path, entry: str) -> Path:
    return cache_dir / "spec" / f"{entry}.json"


def read(cache_dir: Path, entry: str) -> tuple[dict[str, Any], dict[KeyPath, int]] | None:
    from gpuenv import _fs
    from gpuenv.errors import InputFileError

    try:  # bounded: a FIFO or /dev/zero planted in the cache is a miss, not a hang
        data: Any = _fs.load_json(_path(cache_dir, entry), limit=_fs.SPEC_LIMIT * 4)
        lines = {tuple(path): int(line) for path, line in data["lines"]}
        normalised: dict[str, Any] = data["spec"]
    except (OSError, InputFileError, ValueError, KeyError, TypeError):
        return None
    return normalised, lines


def write(
    cache_dir: Path, entry: str, normalised: Mapping[str, Any], lines: Mapping[KeyPath, int]
) -> None:
    payload = {"spec": normalised, "lines": [[list(path), line] for path, line in lines.items()]}
    text = json.dumps(payload, separators=(",", ":"))
    if redact(text) != text:
        return  # it holds a credential: not cached (see the module doc)
    with contextlib.suppress(OSError):
        atomic_write_text(_path(cache_dir, entry), text, mode=0o600)
