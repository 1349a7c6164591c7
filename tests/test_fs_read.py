"""Bounded reads: only regular files of a sane size, strict UTF-8, bounded nesting."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuenv import _fs
from gpuenv.errors import InputFileError


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_without_blocking(fifo: Path) -> None:
    with pytest.raises(InputFileError, match=r"a FIFO \(named pipe\), not a regular file") as err:
        _fs.read_bytes(fifo, limit=1024, what="gpuenv.lock")
    assert err.value.path == str(fifo) and err.value.exit_code == 2


def test_a_link_to_dev_zero_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputFileError, match="a character device"):
        _fs.read_text(link, limit=1 << 20)


def test_a_directory_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="is a directory"):
        _fs.read_bytes(tmp_path, limit=10)
    with pytest.raises(FileNotFoundError):
        _fs.read_bytes(tmp_path / "missing", limit=10)


def test_a_path_with_a_nul_byte_is_refused_as_input(tmp_path: Path) -> None:
    # `lock --file` with a NUL in it was exit 70 (os.open's ValueError).
    with pytest.raises(InputFileError, match="a path with a NUL byte names no file") as err:
        _fs.read_bytes(f"{tmp_path}/a\x00b", limit=10)
    assert err.value.exit_code == 2 and "\x00" not in str(err.value.path)


def test_a_file_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 2048)
    assert _fs.read_bytes(path, limit=2048) == b"x" * 2048
    with pytest.raises(InputFileError, match="2048 bytes, more than any file"):
        _fs.read_bytes(path, limit=2047)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("[project]\n".encode("utf-16"), "UTF-16 text"),
        (b"\x00[\x00p\x00r", "a NUL byte at offset 0"),
        (b'name = "ok"\nx = "\xff"\n', r"byte 0xff at offset 17"),
        (b"abc\xc3", "at offset 3"),
    ],
    ids=["utf16-bom", "utf16-no-bom", "latin1-byte", "truncated-sequence"],
)
def test_text_that_is_not_utf8_names_the_byte_offset(
    tmp_path: Path, data: bytes, expected: str
) -> None:
    path = tmp_path / "f"
    path.write_bytes(data)
    with pytest.raises(InputFileError, match=expected) as err:
        _fs.read_text(path, limit=1024)
    assert str(path) in err.value.message and err.value.hint == "save it as UTF-8"


def test_a_utf8_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert _fs.read_text(path, limit=100) == "a = 1\n"


@pytest.mark.parametrize("depth", [65, 1_000, 10_000, 200_000])
def test_deeply_nested_json_is_refused_quickly(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    with pytest.raises(InputFileError, match="nested more than 64 levels"):
        _fs.load_json(path)


def test_json_within_the_bounds_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    value = {"a": [[{"b": 1}]] * 3}
    path.write_text(json.dumps(value))
    assert _fs.load_json(path) == value
    path.write_text("{not json")
    with pytest.raises(InputFileError, match="not valid JSON"):
        _fs.load_json(path)


def test_nesting_check_is_iterative() -> None:
    value: object = []
    for _ in range(100_000):
        value = [value]
    assert _fs.nested_deeper_than(value, 64)
    assert not _fs.nested_deeper_than({"a": {"b": [1, 2]}}, 3)
    assert _fs.nested_deeper_than({"a": {"b": [1, 2]}}, 2)
    mixed = {"a": 1, "b": [0, "x", {"c": [[]]}], "d": {}}  # the deepest under a later sibling
    assert _fs.nested_deeper_than(mixed, 4)
    assert not _fs.nested_deeper_than(mixed, 5)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_every_other_reader_refuses_a_fifo_and_dev_zero(tmp_path: Path, kind: str) -> None:
    """The spec, the facts file and gpuenv's caches (the lock, markers, records and
    deltas have their own tests beside their commands)."""
    from gpuenv.errors import FileFormatError, SpecError
    from gpuenv.hardware.facts_file import facts_from_json
    from gpuenv.spec import _cache, load_spec

    def plant(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
        return path

    with pytest.raises(SpecError, match="not a regular file"):
        load_spec(plant(tmp_path / "gpuenv.toml"))
    with pytest.raises(FileFormatError, match="not a regular file"):
        facts_from_json(plant(tmp_path / "node.json"))
    entry = _cache.key("x", with_knowledge=False)
    plant(tmp_path / "cache" / "spec" / f"{entry}.json")
    assert _cache.read(tmp_path / "cache", entry) is None, "a planted cache entry is a miss"
