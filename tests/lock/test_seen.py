"""The newest torch on the index, as `gpuenv lock` sees it and `gpuenv plan` is told."""

from __future__ import annotations

import json
from pathlib import Path

from gpuenv.knowledge import knowledge_base
from gpuenv.lock import project
from gpuenv.lock.seen import (
    newest_torch_on,
    read_newest_torch,
    recently_seen,
    record_newest_torch,
    versions_on_page,
)
from tests.fixtures.pkgindex.plugin import PkgIndex


def test_versions_from_json_and_html_pages() -> None:
    page = {"versions": ["2.15.0", "2.16.0rc1", "2.14.1"], "files": []}
    assert versions_on_page(json.dumps(page).encode()) == ["2.15.0", "2.16.0rc1", "2.14.1"]
    html = b'<a href="../torch-2.16.0%2Bcu132-cp312-cp312-linux_x86_64.whl#sha256=00">x</a>'
    html += b'<a href="torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl">y</a>'
    assert sorted(versions_on_page(html)) == ["2.15.0", "2.16.0+cu132"]


def test_a_page_of_the_wrong_shape_lists_no_version() -> None:
    """A mirror's page is not trusted: a "files" that is not a list (seen's own reader
    once failed on it with a TypeError), entries that are not objects, broken JSON; a
    file name with a path is read by its last part."""
    assert versions_on_page(b'{"files": 5}') == []
    assert versions_on_page(b'{"files": "torch-2.4.0-cp312-cp312-linux_x86_64.whl"}') == []
    assert versions_on_page(b'{"files": [') == []
    # nesting deeper than the JSON reader's recursion (it raised RecursionError, and
    # the lock that read the page ended with an internal error, exit 70)
    assert versions_on_page(b'{"files":' + b"[" * 200_000 + b"]" * 200_000 + b"}") == []
    page = {"files": [{"filename": "sub/torch-2.4.0-cp312-cp312-linux_x86_64.whl"}, 7]}
    assert versions_on_page(json.dumps(page).encode()) == ["2.4.0"]


def test_the_fixture_index_is_read(pkgindex: PkgIndex) -> None:
    assert newest_torch_on(pkgindex.default_index) == "2.5.0"
    assert newest_torch_on("http://127.0.0.1:9/simple", timeout=2) is None


def test_recorded_then_read_by_plan_and_fresh_for_an_hour(tmp_path: Path) -> None:
    record_newest_torch(tmp_path, "https://user:pw@idx.example/simple", "2.16.0", now=1000.0)
    text = (tmp_path / "index" / "torch.json").read_text()
    assert "pw" not in text
    assert read_newest_torch(tmp_path) == "2.16.0"
    assert recently_seen(tmp_path, "https://idx.example/simple", now=1000.0 + 60) == "2.16.0"
    assert recently_seen(tmp_path, "https://idx.example/simple", now=1000.0 + 7200) is None


def test_a_corrupt_record_is_no_record(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "torch.json").write_text("[not, json")
    assert read_newest_torch(tmp_path) is None
    (tmp_path / "index" / "torch.json").write_text('{"x": 3, "y": {"version": "nonsense"}}')
    assert read_newest_torch(tmp_path) is None


def test_lock_says_plainly_when_the_index_is_ahead_of_the_data() -> None:
    kb = knowledge_base()
    notice = project._newer_torch_notice(("https://idx.example/simple", "2.16.0"), kb)
    assert notice is not None
    assert notice.startswith(
        "torch 2.16.0 is on the index but this gpuenv's knowledge stops at 2.15: "
        "upgrade gpuenv or add the facts in your facts file"
    )
    assert project._newer_torch_notice(("https://idx.example/simple", "2.15.0"), kb) is None


def test_a_cache_file_that_is_not_one_gpuenv_wrote_is_no_version(tmp_path: Path) -> None:
    """``gpuenv plan`` reads this file on every run: deep JSON was exit 70
    (RecursionError), a FIFO hung plan, /dev/zero grew without end."""
    import os

    path = tmp_path / "index" / "torch.json"
    path.parent.mkdir()
    path.write_text("[" * 200_000)
    assert read_newest_torch(tmp_path) is None
    path.unlink()
    os.mkfifo(path)
    assert read_newest_torch(tmp_path) is None  # returns at once: nothing opens the FIFO
    path.unlink()
    path.symlink_to("/dev/zero")
    assert read_newest_torch(tmp_path) is None
    record_newest_torch(tmp_path, "https://idx.example/simple", "2.16.0", now=1000.0)
    assert read_newest_torch(tmp_path) == "2.16.0", "the next lock replaces it"
