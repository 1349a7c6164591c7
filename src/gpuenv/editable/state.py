"""What a prefix records of the project it holds, read on ``gpuenv run``'s path: the
standard library's cheapest modules and gpuenv's base only (no pathlib, no spec, no
lock; ``tests/test_startup.py`` guards it)."""

from __future__ import annotations

import json
import os

from gpuenv import _fsread
from gpuenv._srctree import tree_key
from gpuenv.errors import InputFileError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuenv.spec import LocalProject

RECORD = "etc/gpuenv/project.json"
RECORD_FORMAT = 1


def prefix_key(content_hash: str, local: LocalProject | None, groups: tuple[str, ...]) -> str:
    """What names a prefix: the target's locked content, and (only when there are) the
    project's checkout and the groups installed: one checkout's editable install never
    lands in a prefix another checkout (or another group selection) uses."""
    root = str(local.root) if local is not None and local.package else None
    if root is None and not groups:
        return content_hash
    from gpuenv import _sha256

    text = json.dumps([content_hash, root, sorted(groups)], separators=(",", ":"))
    return "sha256:" + _sha256.hexdigest(text.encode())


def read_record(prefix: str | os.PathLike[str]) -> dict[str, object] | None:
    """The project a prefix holds (None: none, or an unreadable record)."""
    try:
        data = _fsread.load_json(os.path.join(prefix, RECORD), what="project record")  # noqa: PTH118
    except (OSError, InputFileError):
        return None
    return data if isinstance(data, dict) and data.get("format") == RECORD_FORMAT else None


def stale_note(prefix: str, project: str | None = None) -> str | None:
    """What ``gpuenv run`` says when the prefix's editable project is not the checkout
    it runs from (``project``, the folder holding the pointer: a checkout moved or
    copied keeps the pointer, whose prefix maps the old path), or when its compiled
    project was built from another tree than the one now there (None when it is
    current, or has nothing compiled). The record says where the tree is, the checkout
    it was installed for, and what the tree's key was."""
    record = read_record(prefix)
    if record is None:
        return None
    root, checkout = record.get("root"), record.get("checkout")
    if project is not None and isinstance(checkout, str) and not _same_dir(checkout, project):
        name = record.get("name")
        name = name if isinstance(name, str) else "the project"
        return (
            f"this environment's editable install of {name} "
            f"maps {root}, the checkout at {checkout}, not this one ({project}): "
            f"run 'gpuenv install' to install this checkout"
        )
    if not record.get("compiled"):
        return None
    if not isinstance(root, str) or not os.path.isdir(root):  # noqa: PTH112
        return None
    backend = record.get("backend_path")
    dirs = [b for b in backend if isinstance(b, str)] if isinstance(backend, list) else []
    if tree_key(root, dirs) == record.get("key"):
        return None
    return (
        f"the project's compiled parts changed since they were built for this prefix "
        f"({root}): its extension modules are stale; run 'gpuenv install' to rebuild them"
    )


def _same_dir(recorded: str, here: str) -> bool:
    """Whether two paths name one folder (the same path, or one reached by a link)."""
    if os.path.abspath(recorded) == os.path.abspath(here):  # noqa: PTH100
        return True
    try:
        return os.path.samefile(recorded, here)  # noqa: PTH121 - no pathlib on the run path
    except OSError:  # the recorded one is gone: moved
        return False
