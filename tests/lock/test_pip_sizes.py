"""A pip artifact's size in gpuenv.lock: taken from uv's pylock.toml where the index gave
one, written and read back, covered by the content hash, and what an install uses to
check the disk instead of asking the server (HEAD) for each artifact."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import pytest

from gpuenv.lock.format import parse_lock_text, render_lock
from gpuenv.lock.uv import parse_pylock
from tests.lock.test_format import sample

TAGS = ()  # no tag ranks: every wheel ranks the same, the first is taken

PYLOCK = """
lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "numpy"
version = "2.1.0"
wheels = [{ url = "https://idx.invalid/numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl", size = 16013467, hashes = { sha256 = "A" } }]

[[packages]]
name = "antlr4-python3-runtime"
version = "4.9.3"
sdist = { url = "https://idx.invalid/antlr4-python3-runtime-4.9.3.tar.gz", size = 117034, hashes = { sha256 = "B" } }

[[packages]]
name = "torch"
version = "2.4.1+cu124"
wheels = [{ url = "https://torch.invalid/cu124/torch-2.4.1%2Bcu124-cp311-cp311-linux_x86_64.whl", hashes = { sha256 = "C" } }]
"""
PYLOCK = PYLOCK.replace('"A"', f'"{"a" * 64}"').replace('"B"', f'"{"b" * 64}"')
PYLOCK = PYLOCK.replace('"C"', f'"{"c" * 64}"')


def test_the_size_uv_read_from_the_index_is_kept_and_an_html_page_gives_none() -> None:
    """PyPI's JSON pages give each file's size (uv writes it into pylock.toml); the
    PyTorch index's HTML pages give none."""
    found = parse_pylock(PYLOCK, TAGS)
    assert found["numpy"][3] == 16013467
    assert found["antlr4-python3-runtime"][3] == 117034  # an sdist's too
    assert found["torch"][3] is None


@pytest.mark.parametrize("bad", ['"16013467"', "-1", "true", "1.5"])
def test_a_size_that_is_not_a_byte_count_is_no_size(bad: str) -> None:
    text = PYLOCK.replace("size = 16013467", f"size = {bad}")
    assert parse_pylock(text, TAGS)["numpy"][3] is None


def test_a_size_is_written_read_back_and_covered_by_the_content_hash() -> None:
    lock = sample()
    h100 = lock.targets["h100"]
    sized = replace(h100, pip=(replace(h100.pip[0], size=2_500_000_000), *h100.pip[1:]))
    text = render_lock(replace(lock, targets={**lock.targets, "h100": sized}))
    assert "size = 2500000000" in text
    reading = parse_lock_text(text)
    assert not reading.damaged
    assert set(reading.lock.targets["h100"].pip) == set(sized.pip)
    assert sized.content_hash != h100.content_hash
    edited = parse_lock_text(text.replace("size = 2500000000", "size = 2500000001"))
    assert "h100" in edited.damaged, "an edited size no longer matches the content hash"


def test_a_lock_written_before_sizes_reads_unchanged() -> None:
    """No size is written where none is known, so a lock of an earlier gpuenv (or of an
    HTML index) keeps its bytes and content hashes."""
    lock = sample()
    text = render_lock(lock)
    assert "size =" not in text.split("[[targets.h100.pip]]", 1)[1].split("[[", 1)[0]
    again = parse_lock_text(text).lock
    assert all(p.size is None for t in again.targets.values() for p in t.pip)
    assert render_lock(again) == text


def test_a_negative_size_in_the_lock_is_refused_with_its_place() -> None:
    lock = sample()
    h100 = lock.targets["h100"]
    sized = replace(h100, pip=(replace(h100.pip[0], size=10), *h100.pip[1:]))
    text = render_lock(replace(lock, targets={**lock.targets, "h100": sized}))
    reading = parse_lock_text(text.replace("size = 10", "size = -10"))
    assert "h100" in reading.damaged
    assert any("size" in problem for problem in reading.damaged["h100"])


def test_the_install_budget_asks_no_server_for_a_locked_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk check and the "N to download" line before a cold install: from the lock
    where it holds the sizes (one HEAD request per artifact before: 0.35-0.47 s for the
    65 artifacts of a CUDA stack on PyPI); the server is asked only for the others."""
    from gpuenv import _fetch
    from gpuenv.lock.artifacts import target_artifacts

    asked: list[str] = []
    monkeypatch.setattr(_fetch, "remote_size", lambda url, *a, **k: asked.append(url) or 7)
    h100 = sample().targets["h100"]
    sized = replace(h100, pip=tuple(replace(p, size=1000 + i) for i, p in enumerate(h100.pip)))
    pip = [a for a in target_artifacts(sized) if a.kind == "pip"]
    cost = _fetch.budget(pip)
    assert asked == [] and cost.download == sum(1000 + i for i in range(len(pip)))
    unsized = replace(sized, pip=(replace(sized.pip[0], size=None), *sized.pip[1:]))
    cost = _fetch.budget([a for a in target_artifacts(unsized) if a.kind == "pip"])
    assert asked == [unsized.pip[0].url] and cost.unknown == 0


def test_a_stored_copy_of_another_size_is_damaged_before_it_is_hashed(tmp_path: Path) -> None:
    from gpuenv._fetch import Artifact, ArtifactStore

    data = b"the locked bytes"
    sha = hashlib.sha256(data).hexdigest()
    store = ArtifactStore(tmp_path / "artifacts")
    artifact = Artifact(("https://idx.invalid/x.whl",), "x.whl", sha, "pip", size=len(data) + 1)
    path = store.path(artifact)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    assert store.find(artifact) is None
    assert not path.exists()


def test_the_exported_pylock_carries_the_size() -> None:
    from packaging import pylock

    from gpuenv.export.pylock import _package

    p = replace(sample().targets["h100"].pip[0], size=123)
    assert _package(p, pylock).wheels[0].size == 123
    assert _package(replace(p, size=None), pylock).wheels[0].size is None


def test_the_right_bytes_with_a_wrong_locked_size_are_refused_with_the_fix(tmp_path: Path) -> None:
    """An index that reported a wrong size put it in the lock: the download's sha256
    matches, but kept, the copy would be found "damaged" by its size at every later use
    and fetched again without a word. Refused instead, naming both sizes and the fix;
    nothing is left in the store."""
    from gpuenv._fetch import Artifact, ArtifactStore
    from gpuenv.errors import InstallError

    data = b"the locked bytes"
    sha = hashlib.sha256(data).hexdigest()
    store = ArtifactStore(tmp_path / "artifacts")
    artifact = Artifact(("https://idx.invalid/x.whl",), "x.whl", sha, "pip", size=len(data) + 5)
    with pytest.raises(InstallError, match=r"x.whl: the lock gives its size as 21 bytes, but") as e:
        store.add(artifact, lambda out, digests: (out.write(data), digests.update(data)), "here")
    assert "gpuenv lock" in (e.value.hint or "")
    assert list((tmp_path / "artifacts").rglob("*x.whl*")) == []
    right = replace(artifact, size=len(data))
    assert store.add(right, lambda out, d: (out.write(data), d.update(data)), "here").is_file()


def test_letting_go_of_a_fifo_in_the_store_does_not_hang(tmp_path: Path) -> None:
    from gpuenv._fs import release_cached

    fifo = tmp_path / "x.whl"
    os.mkfifo(fifo)
    release_cached(fifo)  # returns at once
    link = tmp_path / "link.whl"
    link.symlink_to(fifo)
    release_cached(link)  # not followed


def test_an_artifact_named_twice_keeps_its_size_and_two_sizes_are_refused() -> None:
    """The install's list of artifacts merges one file named by several entries (a pip
    package and a build's source): found by the fuzz above, the merge dropped the size,
    so the install asked the server again and bounded nothing. Conda sizes, in every
    lock all along, were never passed on at all."""
    from gpuenv._fetch import Artifact
    from gpuenv.errors import InstallError
    from gpuenv.lock.artifacts import merged, target_artifacts

    one = Artifact(("https://a.invalid/x.whl",), "x.whl", "a" * 64, "pip", size=10)
    other = replace(one, urls=("https://b.invalid/x.whl",), size=None)
    assert [a.size for a in merged([one, other])] == [10]
    assert [a.size for a in merged([other, one])] == [10]
    with pytest.raises(InstallError, match="twice with other sizes"):
        merged([one, replace(one, size=11)])
    conda = [a for a in target_artifacts(sample().targets["h100"]) if a.kind == "conda"]
    assert {a.filename: a.size for a in conda}["python-3.11.9-h_0.conda"] == 123
