"""Every fact gpuenv ships lives in knowledge/data: no other package keeps a data folder,
every file there has a reader, and moving the build defaults there kept the digests a
lock's input hash is made of (existing locks stay fresh)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from gpuenv.builds import knowledge as build_knowledge
from gpuenv.knowledge._data import BUILD_FILES, DATA_FILES, data_digest, data_toml

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuenv"
DATA = SRC / "knowledge" / "data"


def test_no_package_but_the_knowledge_base_ships_data_files() -> None:
    shipped = sorted(p.relative_to(SRC).as_posix() for p in SRC.rglob("*.toml"))
    assert shipped and all(p.startswith("knowledge/data/") for p in shipped), shipped


def test_every_data_file_has_a_reader() -> None:
    code = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    for path in DATA.glob("*.toml"):
        assert re.search(rf"[\"']{re.escape(path.name)}[\"']", code), path.name


def _digest(names: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode() + b"\0" + (DATA / name).read_bytes())
    return h.hexdigest()


def test_the_digests_are_what_locks_were_hashed_with() -> None:
    """sha256 over name, NUL, bytes per file: the planning files' digest (without a facts
    file) and the build defaults' are computed as they were before the files moved."""
    assert data_digest(None) == _digest(DATA_FILES)
    assert build_knowledge.digest() == _digest(BUILD_FILES)


def test_export_and_import_read_one_images_file() -> None:
    from gpuenv.export.dockerfile import images
    from gpuenv.knowledge.foreign import load_foreign_knowledge

    raw = data_toml("images.toml")
    assert images() == raw
    assert {"cuda-images", "cpu-image", "micromamba", "uv", "pytorch_image"} <= set(raw)
    assert load_foreign_knowledge() is not None  # the merged file passes import's schema
