"""lock.metadata_ahead: the torch family's wheels guessed from the index's project pages
while uv resolves, and their METADATA read once, by whichever asks first.

The pages are those the default index serves for torch 2.9.1 (PEP 691 JSON: the real
file names and sha256 of that release, the file host replaced) and the PyTorch index's
per-build pages (PEP 503 HTML, relative links with a ``#sha256=`` fragment, a ``%2B``
for the local label's ``+``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from gpuenv._network import Mirror, Mirrors
from gpuenv.lock._share import SharedPipWithMetadata
from gpuenv.lock.metadata_ahead import expected_wheels, guess, page_files, pinned, read_ahead
from gpuenv.lock.model import PipPackage, PipRequest
from gpuenv.lock.wheelcheck import read_wheel_metadata

FILES = "https://files.example/packages/ab/cd"
TORCH_291 = {  # the default index's torch 2.9.1 wheels for CPython 3.11 and 3.12
    "torch-2.9.1-cp311-cp311-manylinux_2_28_aarch64.whl": (
        "62b3fd888277946918cba4478cf849303da5359f0fb4e3bfb86b0533ba2eaf8d"
    ),
    "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl": (
        "d033ff0ac3f5400df862a51bdde9bad83561f3739ea0046e68f5401ebfa67c1b"
    ),
    "torch-2.9.1-cp311-cp311-win_amd64.whl": (
        "0d06b30a9207b7c3516a9e0102114024755a07045f0c1d2f2a56b1819ac06bcb"
    ),
    "torch-2.9.1-cp311-none-macosx_11_0_arm64.whl": (
        "52347912d868653e1528b47cafaf79b285b98be3f4f35d5955389b1b95224475"
    ),
    "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl": (
        "27331cd902fb4322252657f3902adf1c4f6acad9dcad81d8df3ae14c7c4f07c4"
    ),
}


def _json_page(files: dict[str, str], *, older: bool = True) -> bytes:
    entries = [
        {"filename": name, "url": f"{FILES}/{name}", "hashes": {"sha256": sha}}
        for name, sha in files.items()
    ]
    if older:  # an older release and a pre-release around it, as the real page lists
        entries.insert(
            0,
            {
                "filename": "torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                "url": f"{FILES}/torch-2.9.0.whl",
                "hashes": {"sha256": "0" * 64},
            },
        )
        entries.append(
            {
                "filename": "torch-2.9.10-cp311-cp311-manylinux_2_28_x86_64.whl",
                "url": f"{FILES}/torch-2.9.10.whl",
                "hashes": {"sha256": "1" * 64},
            }
        )
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": entries}).encode()


def _html_page(tag: str, version: str, files: dict[str, str]) -> bytes:
    links = "".join(
        f'<a href="/whl/{tag}/{name.replace("+", "%2B")}#sha256={sha}" '
        f'data-dist-info-metadata="sha256={"2" * 64}">{name}</a><br/>\n'
        for name, sha in files.items()
    )
    return f"<!DOCTYPE html><html><body><h1>Links for torch</h1>\n{links}</body></html>".encode()


H100 = PipRequest(
    requirements=("torch==2.9.1", "torchvision==0.24.1", "transformers", "accelerate"),
    python="3.11",
)


def test_pins_are_the_family_members_asked_for_one_version() -> None:
    request = PipRequest(("torch==2.9.1", "torchvision>=0.24", "torchaudio==2.9.1", "x==1"), "3.11")
    assert pinned(request) == {"torch": "2.9.1", "torchaudio": "2.9.1"}


def test_the_json_page_names_the_wheel_uv_picks_for_the_target() -> None:
    page = "https://index.example/simple/torch/"
    files = page_files(_json_page(TORCH_291), page, "torch-2.9.1")
    found = guess("torch", "2.9.1", _tags(H100), files)
    name = "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert found == PipPackage("torch", "2.9.1", f"{FILES}/{name}", TORCH_291[name])
    aarch64 = PipRequest(H100.requirements, "3.12", platform="linux-aarch64")
    arm = guess("torch", "2.9.1", _tags(aarch64), page_files(_json_page(TORCH_291), page, "torch-"))
    assert arm is None  # no cp312 aarch64 wheel on this page: no guess, not a wrong one


def test_the_html_page_of_a_build_index_with_its_local_label() -> None:
    page = "https://user:secret@torch.example/whl/cu128/torch/"
    files = {
        "torch-2.9.1+cu128-cp311-cp311-manylinux_2_28_x86_64.whl": "a" * 64,
        "torch-2.9.1+cu128-cp311-cp311-manylinux_2_28_aarch64.whl": "b" * 64,
        "torch-2.9.1+cu128-cp310-cp310-manylinux_2_28_x86_64.whl": "c" * 64,
        "torch-2.8.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl": "d" * 64,
    }
    listed = list(page_files(_html_page("cu128", "2.9.1", files), page, "torch-2.9.1"))
    assert len(listed) == 3  # 2.8.0 is not even joined
    found = guess("torch", "2.9.1", _tags(H100), iter(listed))
    assert found is not None and found.version == "2.9.1+cu128" and found.sha256 == "a" * 64
    # the page's credentials never reach the guess's URL (the read adds them back)
    assert found.url == (
        "https://torch.example/whl/cu128/torch-2.9.1%2Bcu128-cp311-cp311-manylinux_2_28_x86_64.whl"
    )


def test_the_oldest_glibc_the_target_has_rules_out_newer_manylinux() -> None:
    old = PipRequest(H100.requirements, "3.11", glibc="2.17")
    assert guess("torch", "2.9.1", _tags(old), page_files(_json_page(TORCH_291), "x", "t")) is None


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"[]",
        b'{"files": {}}',
        b'{"files": [1, {"url": 2}, {"url": "a.whl"}]}',
        b"<a href='x.whl#sha256=short'>",
        "é".encode("latin-1"),
        b'{"files": ' + b"[" * 200_000,  # deeper than the JSON reader's recursion
    ],
)
def test_a_broken_page_lists_nothing(body: bytes) -> None:
    assert list(page_files(body, "https://i.example/simple/torch/", "")) == []


def test_a_kept_pin_needs_no_page_and_a_mirrored_request_is_left_alone() -> None:
    kept = PipPackage("torch", "2.9.1", f"{FILES}/kept.whl", "e" * 64)
    request = PipRequest(("torch==2.9.1",), "3.11", preferences=(kept,))
    asked: list[str] = []

    def fetch(url: str) -> bytes:
        asked.append(url)
        return _json_page(TORCH_291)

    assert list(expected_wheels(request, fetch, lambda: None)) == [kept] and asked == []
    mirrored = PipRequest(
        ("torch==2.9.1",),
        "3.11",
        mirrors=Mirrors((Mirror("https://a.example", "https://b.example", "test"),)),
    )
    assert list(expected_wheels(mirrored, fetch, lambda: "https://i.example/simple")) == []
    mac = PipRequest(("torch==2.9.1",), "3.11", platform="osx-arm64", macos="14.0")
    assert list(expected_wheels(mac, fetch, lambda: "https://i.example/simple")) == []
    assert asked == []


def test_the_default_index_is_asked_only_when_the_request_names_none() -> None:
    pages: list[str] = []
    stated: list[int] = []

    def fetch(url: str) -> bytes:
        pages.append(url)
        return _json_page(TORCH_291)

    def default() -> str:
        stated.append(1)
        return "https://default.example/simple"

    found = list(expected_wheels(H100, fetch, default))
    assert [w.name for w in found] == ["torch"]  # torchvision's page lists no torchvision
    assert pages == [
        "https://default.example/simple/torch/",
        "https://default.example/simple/torchvision/",
    ]
    assert stated == [1]
    named = PipRequest(H100.requirements, "3.11", torch_index="https://torch.example/whl/cu128")
    pages.clear()
    list(expected_wheels(named, fetch, default))
    assert pages[0] == "https://torch.example/whl/cu128/torch/" and stated == [1]


class _Index:
    """A resolver whose METADATA reads are counted and can be held back."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.release = threading.Event()

    def resolve(self, request: PipRequest) -> tuple[PipPackage, ...]:
        return ()

    def describe(self) -> str:
        return "index"

    def stated_default_index(self) -> str:
        return "https://default.example/simple"

    def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
        self.reads.append(package.sha256)
        assert self.release.wait(10)
        return f"Metadata-Version: 2.1\nName: {package.name}\nVersion: {package.version}\n\n"


def test_the_read_after_the_resolution_waits_for_the_one_ahead(tmp_path: Path) -> None:
    index = _Index()
    shared = SharedPipWithMetadata(index)
    shared.pages.fetch = lambda url, timeout: _json_page(TORCH_291)  # type: ignore[method-assign]
    request = PipRequest(("torch==2.9.1",), "3.11", cache_dir=tmp_path)
    shared.read_ahead([request, request])
    name = "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    resolved = PipPackage("torch", "2.9.1", f"{FILES}/{name}", TORCH_291[name])
    result: list[str] = []
    asker = threading.Thread(
        target=lambda: result.append(read_wheel_metadata(shared, resolved, request))
    )
    asker.start()
    index.release.set()
    asker.join(10)
    assert result and "Name: torch" in result[0]
    assert index.reads == [TORCH_291[name]]  # one read, started ahead, for both askers
    assert (tmp_path / "wheel-metadata" / f"{TORCH_291[name]}.METADATA").is_file()


def test_a_stalled_read_ahead_is_waited_for_a_while_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stalling(_Index):
        def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
            self.reads.append(package.sha256)
            if len(self.reads) == 1:
                assert self.release.wait(10)  # the read ahead: a server that stalls
            return f"Metadata-Version: 2.1\nName: {package.name}\nVersion: {package.version}\n\n"

    monkeypatch.setattr(SharedPipWithMetadata, "WAIT_FOR_AHEAD", 0.3)
    index = Stalling()
    shared = SharedPipWithMetadata(index)
    package = PipPackage("torch", "2.9.1", f"{FILES}/t.whl", "f" * 64)
    request = PipRequest(("torch==2.9.1",), "3.11", preferences=(package,), cache_dir=tmp_path)
    shared.read_ahead([request])
    while not index.reads:
        threading.Event().wait(0.01)
    started = time.monotonic()
    assert "Version: 2.9.1" in shared.wheel_metadata(package, request)
    assert 0.25 < time.monotonic() - started < 5 and len(index.reads) == 2
    index.release.set()


def test_a_failed_read_ahead_is_tried_again_by_the_asker(tmp_path: Path) -> None:
    class Flaky(_Index):
        def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
            self.reads.append(package.sha256)
            if len(self.reads) == 1:
                raise OSError("reset by peer")
            return f"Metadata-Version: 2.1\nName: {package.name}\nVersion: {package.version}\n\n"

    index = Flaky()
    shared = SharedPipWithMetadata(index)
    package = PipPackage("torch", "2.9.1", f"{FILES}/t.whl", "f" * 64)
    request = PipRequest(("torch==2.9.1",), "3.11", preferences=(package,), cache_dir=tmp_path)
    with pytest.raises(OSError):
        shared.wheel_metadata(package, request)
    assert "Version: 2.9.1" in read_wheel_metadata(shared, package, request)
    assert index.reads == ["f" * 64] * 2


def test_nothing_is_read_ahead_beside_a_stand_in_resolver() -> None:
    class StandIn(_Index):
        stated_default_index = None  # type: ignore[assignment]

    index = StandIn()
    index.release.set()
    shared = SharedPipWithMetadata(index)
    kept = PipPackage("torch", "2.9.1", f"{FILES}/t.whl", "f" * 64)
    shared.read_ahead([PipRequest(("torch==2.9.1",), "3.11", preferences=(kept,))])
    threading.Event().wait(0.2)
    assert index.reads == []


def _tags(request: PipRequest) -> list[str]:
    from gpuenv.lock.metadata_ahead import _tags as tags

    found = tags(request)
    assert found is not None
    return found


def test_read_ahead_returns_at_once_and_a_failure_stays_in_its_thread(tmp_path: Path) -> None:
    """The lock's thread never waits for a page, and a page or read that fails ends
    the read ahead only (no guess kept, nothing raised where the lock runs)."""
    slow = threading.Event()
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        assert slow.wait(10)
        raise RuntimeError("the index broke")

    request = PipRequest(H100.requirements, "3.11", cache_dir=tmp_path)
    started = time.monotonic()
    read_ahead(request, fetch, lambda: "https://i.example/simple", fetch)
    assert time.monotonic() - started < 1
    while not fetched:
        threading.Event().wait(0.01)
    slow.set()
    threading.Event().wait(0.2)
    assert fetched == ["https://i.example/simple/torch/"]  # the failure ended it
    assert not (tmp_path / "wheel-metadata" / "guesses.json").exists()


def test_a_page_cannot_name_a_local_file() -> None:
    name = "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    page = json.dumps(
        {
            "files": [
                {
                    "filename": name,
                    "url": "file:///tmp/fifo/" + name,
                    "hashes": {"sha256": "a" * 64},
                }
            ]
        }
    ).encode()
    html_page = f'<a href="file:///tmp/fifo/{name}#sha256={"a" * 64}">{name}</a>'.encode()
    relative = f'<a href="{name}#sha256={"a" * 64}">{name}</a>'.encode()
    assert len(list(page_files(relative, "https://i.example/simple/torch/", "torch-"))) == 1
    assert list(page_files(relative, "file:///srv/simple/torch/", "torch-")) == []
    for body in (page, html_page):
        assert list(page_files(body, "https://i.example/simple/torch/", "torch-")) == []


def test_a_guess_is_remembered_and_a_later_lock_reads_no_page(tmp_path: Path) -> None:
    from gpuenv.lock.metadata_ahead import Guesses

    index = "https://user:secret@mirror.example/simple?token=hunter2"
    request = PipRequest(("torch==2.9.1",), "3.11", default_index=index, cache_dir=tmp_path)
    pages: list[str] = []

    def fetch(url: str) -> bytes:
        pages.append(url)
        return _json_page(TORCH_291)

    first = Guesses(tmp_path)
    (found,) = expected_wheels(request, fetch, lambda: None, first)
    first.save()
    assert len(pages) == 1
    saved = (tmp_path / "wheel-metadata" / "guesses.json").read_text()
    assert "secret" not in saved and "hunter2" not in saved and found.sha256 in saved
    again = list(expected_wheels(request, fetch, lambda: None, Guesses(tmp_path)))
    assert again == [found] and len(pages) == 1  # from the file: no page read
    other = PipRequest(("torch==2.9.1",), "3.12", default_index=index, cache_dir=tmp_path)
    list(expected_wheels(other, fetch, lambda: None, Guesses(tmp_path)))
    assert len(pages) == 2  # another Python: another guess


def test_uv_default_index_from_the_environment_is_kept_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuenv.lock.metadata_ahead import Guesses

    monkeypatch.setenv("UV_INDEX_URL", "https://user:secret@mirror.example/simple")
    request = PipRequest(("torch==2.9.1",), "3.11", cache_dir=tmp_path)
    guesses = Guesses(tmp_path)
    found = list(
        expected_wheels(
            request, lambda _url: _json_page(TORCH_291), lambda: "https://m.example/simple", guesses
        )
    )
    guesses.save()
    saved = (tmp_path / "wheel-metadata" / "guesses.json").read_text()
    assert found and "secret" not in saved and "mirror.example" in saved
    monkeypatch.setenv("UV_INDEX_URL", "https://other.example/simple")  # another default
    assert Guesses(tmp_path).get(Guesses.key(request, None, "torch", "2.9.1")) is None


@pytest.mark.parametrize(
    "content",
    [
        "{",
        "[]",
        '{"k": ["torch", "2.9.1", "file:///etc/passwd", "' + "a" * 64 + '"]}',
        '{"k": ["numpy", "1", "https://x/n.whl", "' + "a" * 64 + '"]}',
        '{"k": ["torch", "2.9.1", "https://x/t.whl", "short"]}',
        '{"k": 7}',
    ],
)
def test_a_guesses_file_gpuenv_did_not_write_is_no_guesses(tmp_path: Path, content: str) -> None:
    from gpuenv.lock.metadata_ahead import Guesses

    (tmp_path / "wheel-metadata").mkdir()
    (tmp_path / "wheel-metadata" / "guesses.json").write_text(content)
    assert Guesses(tmp_path).get("k") is None


def test_the_guesses_file_keeps_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuenv.lock.metadata_ahead import Guesses

    monkeypatch.setattr(Guesses, "KEEP", 3)
    wheel = PipPackage("torch", "2.9.1", f"{FILES}/t.whl", "a" * 64)
    for keys in (["a", "b", "c"], ["a"], ["d"]):  # "a" made again is newer than "b", "c"
        guesses = Guesses(tmp_path)
        for key in keys:
            guesses.put(key, wheel)
        guesses.save()
    kept = Guesses(tmp_path)
    assert [k for k in "abcd" if kept.get(k)] == ["a", "c", "d"]
