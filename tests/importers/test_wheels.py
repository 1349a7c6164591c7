"""`--check-resolves`: the Python is chosen so that every pin has a wheel on the index.

Unit tests read pages from a dictionary (the shapes the real index serves: PEP 691 JSON
with ``requires-python``, PEP 503 HTML with ``data-requires-python``); the import tests ask
the fixture index served on loopback (`tests/fixtures/pkgindex`: numpy 1.26.4 and
torchvision 0.19.1 have cp310/cp311 wheels only, fixture-pure is an sdist)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

from gpuenv.importers.wheels import (
    NotOnIndex,
    Unreachable,
    WheelIndex,
    nearest_with_wheel,
    parse_page,
    verdict,
)
from tests.conftest import CliResult
from tests.fixtures.pkgindex.plugin import PkgIndex, closed_port
from tests.importers.conftest import Imported

# torchvision 0.14.1's real wheel set stops at cp310; scipy 1.7.1's at cp39.
SCIPY = {
    "files": [
        {"filename": f"scipy-1.7.1-cp{py}-cp{py}-manylinux_2_5_x86_64.manylinux1_x86_64.whl",
         "requires-python": ">=3.7,<3.10"} for py in ("37", "38", "39")
    ] + [
        {"filename": "scipy-1.7.1.tar.gz", "requires-python": ">=3.7,<3.10"},
        {"filename": "scipy-1.9.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
         "requires-python": ">=3.8"},
        {"filename": "scipy-1.9.3-cp310-cp310-macosx_12_0_arm64.whl", "requires-python": ">=3.8"},
    ]
}  # fmt: skip
TORCHVISION_HTML = """<!DOCTYPE html><html><body>
<a href="/f/torchvision-0.14.1-cp310-cp310-manylinux1_x86_64.whl#sha256=ab"
   data-requires-python="&gt;=3.7">torchvision-0.14.1-cp310-cp310-manylinux1_x86_64.whl</a>
<a href="/f/torchvision-0.14.1-cp39-cp39-manylinux1_x86_64.whl#sha256=cd"
   data-requires-python="&gt;=3.7">torchvision-0.14.1-cp39-cp39-manylinux1_x86_64.whl</a>
<a href="/f/torchvision-0.14.1-cp311-cp311-win_amd64.whl" data-yanked="">x</a>
<a href="/f/other-1.0-py3-none-any.whl">other</a>
</body></html>"""


def _index(pages: dict[str, bytes], cache: Path | None = None) -> WheelIndex:
    asked: list[str] = []

    def fetch(url: str, timeout: float) -> bytes:
        asked.append(url)
        project = url.rstrip("/").rsplit("/", 1)[-1]
        if project == "down":
            raise Unreachable("connection refused")
        if project not in pages:
            raise NotOnIndex(url)
        return pages[project]

    index = WheelIndex("http://index.test/simple", cache, fetch=fetch)
    index.asked = asked  # type: ignore[attr-defined]
    return index


PAGES = {"scipy": json.dumps(SCIPY).encode(), "torchvision": TORCHVISION_HTML.encode()}


def test_pages_in_json_and_html_give_the_same_files() -> None:
    html = parse_page(TORCHVISION_HTML.encode(), "torchvision")
    assert [str(f.version) for f in html] == ["0.14.1"] * 3  # "other" is another project
    assert html[0].requires_python == ">=3.7" and html[2].yanked
    scipy = parse_page(json.dumps(SCIPY).encode(), "scipy")
    assert sum(f.tags is None for f in scipy) == 1


@pytest.mark.parametrize(
    ("project", "specifier", "python", "fits"),
    [
        ("scipy", "==1.7.1", "3.9", True),
        ("scipy", "==1.7.1", "3.10", False),  # Requires-Python and tags both stop at 3.9
        ("scipy", ">=1.7", "3.11", True),  # a later release has a wheel
        ("scipy", ">=1.7", "3.10", False),  # 1.9.3's cp310 wheel is for macOS only
        ("torchvision", "==0.14.1", "3.10", True),
        ("torchvision", "==0.14.1", "3.11", False),  # only a yanked Windows wheel
        ("torchvision", "==0.14.1.0", "3.10", True),  # PEP 440: 0.14.1.0 is 0.14.1
    ],
)
def test_a_verdict_follows_tags_requires_python_and_platform(
    project: str, specifier: str, python: str, fits: bool
) -> None:
    found = verdict(_index(PAGES), project, specifier, python, "linux-64")
    assert (found.fits, found.known) == (fits, True)


def test_nothing_is_said_of_what_the_index_does_not_hold_or_cannot_serve() -> None:
    index = _index(PAGES)
    assert verdict(index, "not-here", "==1.0", "3.11", "linux-64").known is False
    assert verdict(index, "scipy", "==0.1", "3.11", "linux-64").known is False
    assert verdict(index, "down", "==1.0", "3.11", "linux-64").fits is True
    assert index.failure == "connection refused"
    assert verdict(index, "torchvision", "==0.14.1", "3.11", "linux-64").known is False
    assert index.asked == [  # type: ignore[attr-defined]
        "http://index.test/simple/not-here/",
        "http://index.test/simple/scipy/",
        "http://index.test/simple/down/",
    ], "after a failure the index is not asked again"


def test_the_nearest_release_with_a_wheel() -> None:
    index = _index(PAGES)
    assert nearest_with_wheel(index, "scipy", Version("1.7.1"), "3.11", "linux-64") == Version(
        "1.9.3"
    )
    assert nearest_with_wheel(index, "scipy", Version("1.7.1"), "3.10", "linux-64") is None
    assert nearest_with_wheel(index, "scipy", Version("2.0"), "3.8", "linux-64") == Version("1.7.1")


def test_pages_are_cached_for_the_next_import(tmp_path: Path) -> None:
    first = _index(PAGES, tmp_path)
    assert verdict(first, "scipy", "==1.7.1", "3.10", "linux-64").fits is False
    second = _index({}, tmp_path)
    assert verdict(second, "scipy", "==1.7.1", "3.10", "linux-64").fits is False
    assert verdict(second, "scipy", "==1.7.1", "3.9", "linux-64").fits is True
    assert second.asked == []  # type: ignore[attr-defined]


def test_a_cached_page_keeps_the_wheels_of_a_hyphenated_or_dotted_project(tmp_path: Path) -> None:
    # A real import read pytorch-lightning 1.4.2's py3-none-any wheel from the index,
    # then, from the cache, only its sdist: the next import called it a source build.
    pages = {
        "pytorch-lightning": json.dumps(
            {"files": [
                {"filename": "pytorch_lightning-1.4.2-py3-none-any.whl", "requires-python": ">=3.6"},
                {"filename": "pytorch-lightning-1.4.2.tar.gz", "requires-python": ">=3.6"},
            ]}
        ).encode(),
        "zope-interface": json.dumps(
            {"files": [{"filename": "zope.interface-6.0-cp38-cp38-manylinux_2_17_x86_64.whl"}]}
        ).encode(),
    }  # fmt: skip
    first = _index(pages, tmp_path)
    live = {p: verdict(first, p, "", "3.8", "linux-64") for p in pages}
    second = _index({}, tmp_path)
    cached = {p: verdict(second, p, "", "3.8", "linux-64") for p in pages}
    assert second.asked == []  # type: ignore[attr-defined]
    assert live == cached
    assert all(v.fits and v.known for v in cached.values())


def test_hostile_pages_are_read_as_nothing() -> None:
    pages = {
        "a": b"{not json",
        "b": b'{"files": [{"filename": "b-1.0-cp3x-none-any.whl"}, 7, "x"]}',
        "c": b"<a href='c-1.0-py3-none-any.whl' data-requires-python='>=>=3'>",
        "d": b"\xff\xfe<a href=" * 1000,
        "e": b'{"files": ' + b"[" * 200_000,  # past the JSON reader's recursion
    }
    index = _index(pages)
    found = {name: verdict(index, name, "==1.0", "3.11", "linux-64") for name in pages}
    assert {name: (v.known, v.fits) for name, v in found.items()} == {
        "a": (False, True),
        "b": (True, False),  # a wheel for no real interpreter installs nowhere
        "c": (True, True),  # an unparsable Requires-Python is no obstacle
        "d": (False, True),
        "e": (False, True),
    }


def test_the_number_of_pages_and_the_time_are_bounded() -> None:
    index = _index({f"p{i}": b"{}" for i in range(100)})
    index.prefetch(f"p{i}" for i in range(100))
    assert len(index.skipped) == 100 - 64
    slow = _index(PAGES)
    slow.deadline = 0.0
    slow.prefetch(["scipy"])
    assert slow.skipped == ["scipy"] and slow.files("scipy") is None


# --- through `gpuenv import`, against the fixture index -----------------------------------


@pytest.fixture
def index_env(pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch) -> PkgIndex:
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", pkgindex.default_index)
    return pkgindex


def _requirements(tmp_path: Path, text: str, name: str = "requirements.txt") -> Path:
    path = tmp_path / "paper" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def _python(imported: Imported) -> dict[str, object]:
    entries = [e for e in imported.report["kept"] + imported.report["changed"]]
    entries += imported.report["assumptions"]
    return next(e for e in entries if e["package"] == "python")


def test_the_python_is_one_every_pin_has_wheels_for(
    run_import: Callable[..., Imported], index_env: PkgIndex, tmp_path: Path
) -> None:
    # torch 2.4.1 supports 3.8-3.12; the index's torchvision 0.19.1 and numpy 1.26.4 stop
    # at cp311: without the check the newest (3.12) is written and the lock builds them.
    req = _requirements(tmp_path, "torch==2.4.1\ntorchvision==0.19.1\nnumpy==1.26.4\n")
    checked = run_import(req, target="cpu")
    assert checked.result.code == 0, checked.result.err
    assert 'python = "3.11"' in checked.spec.read_text()
    why = str(_python(checked)["why"])
    assert "every pin has a wheel" in why and "no wheel for Python 3.12" in why
    assert "torchvision==0.19.1" in why
    assert any(
        "checked for wheels for Python 3.11" in a["why"] for a in checked.report["assumptions"]
    )
    unchecked = run_import(req, target="cpu", extra=("--no-check-resolves",))
    assert 'python = "3.12"' in unchecked.spec.read_text()


def test_a_pinned_python_moves_to_the_nearest_one_with_wheels(
    run_import: Callable[..., Imported], index_env: PkgIndex, tmp_path: Path
) -> None:
    req = _requirements(tmp_path, "torch==2.4.1\nnumpy==1.26.4  # cp310/cp311 only\n")
    (req.parent / ".python-version").write_text("3.9\n")
    env = _requirements(tmp_path, "name: p\ndependencies:\n  - python=3.9\n", "environment.yml")
    imported = run_import(req, env, target="h100")
    assert imported.result.code == 0, imported.result.err
    python = imported.entries("changed")["python"]
    assert (python["from"], python["to"]) == ("3.9", "3.10")
    assert "numpy==1.26.4: no wheel for Python 3.9" in python["why"]
    assert imported.entries("kept")["numpy"]["to"] == "==1.26.4"


def test_a_pin_without_any_wheel_is_reported_as_a_build(
    run_import: Callable[..., Imported], index_env: PkgIndex, tmp_path: Path
) -> None:
    req = _requirements(tmp_path, "torch==2.4.1\nnumpy==1.26.4\nfixture-pure==0.3.0\n")
    imported = run_import(req, target="cpu")
    assert imported.result.code == 0, imported.result.err
    built = imported.entries("needs_build")["fixture-pure"]
    # fixture-pure is source only, for every Python: said so, not "no wheel for 3.11"
    assert "has a wheel on the index (source only)" in built["why"], built["why"]
    assert "source archive" in built["why"]
    assert '"fixture-pure==0.3.0"' in imported.spec.read_text()
    assert 'python = "3.11"' in imported.spec.read_text()  # numpy still decides


def test_an_unreachable_index_is_reported_and_changes_nothing(
    run_import: Callable[..., Imported], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"http://u:secret@127.0.0.1:{closed_port()}/simple")
    req = _requirements(tmp_path, "torch==2.4.1\nnumpy==1.26.4\n")
    imported = run_import(req, target="cpu")
    assert imported.result.code == 0, imported.result.err
    assert 'python = "3.12"' in imported.spec.read_text()
    note = next(a["why"] for a in imported.report["assumptions"] if "could not be read" in a["why"])
    assert "not checked for wheels" in note and "secret" not in imported.result.out


def test_with_no_index_named_the_one_uv_states_is_asked_without_waiting(
    run_import: Callable[..., Imported],
    pkgindex: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """With neither GPUENV_IMPORT_INDEX nor GPUENV_INDEX_URL set (a user's machine; the
    suite sets the first to "off"), import waited for a resolution that never came: a
    hang. uv states its default index for an empty request (its environment names the
    fixture index here, as a company mirror would be named)."""
    import threading

    monkeypatch.delenv("GPUENV_IMPORT_INDEX")
    monkeypatch.delenv("GPUENV_INDEX_URL", raising=False)
    monkeypatch.setenv("UV_DEFAULT_INDEX", pkgindex.default_index)
    req = _requirements(tmp_path, "torch==2.4.1\ntorchvision==0.19.1\nnumpy==1.26.4\n")
    done: list[Imported] = []
    worker = threading.Thread(target=lambda: done.append(run_import(req, target="cpu")))
    worker.daemon = True
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "gpuenv import hung"
    (imported,) = done
    assert imported.result.code == 0, imported.result.err
    assert 'python = "3.11"' in imported.spec.read_text()  # the fixture index was read


def test_the_index_is_announced_once_before_its_first_ask_never_for_cached_pages(
    tmp_path: Path,
) -> None:
    # The asks may take the whole DEADLINE (30 s) on a slow link: import said nothing
    # meanwhile, as if hung.
    said: list[str] = []
    first = _index(PAGES, tmp_path)
    first.announce = said.append
    first.prefetch(["scipy", "torchvision", "absent"])
    assert said == ["asking http://index.test/simple which Pythons the pins have wheels for"]
    cached = _index({}, tmp_path)
    cached.announce = said.append
    cached.prefetch(["scipy", "torchvision"])
    assert cached.asked == [] and len(said) == 1  # type: ignore[attr-defined]


def test_import_says_which_index_it_asks_on_stderr_and_nothing_under_json(
    cli: Callable[..., CliResult],
    index_env: PkgIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUENV_NO_CACHE", "1")  # each import asks the index
    req = _requirements(tmp_path, "torch==2.4.1\nnumpy==1.26.4\n")
    out = tmp_path / "gpuenv.toml"
    text = cli("import", str(req), "--gpu", "none", "-o", str(out))
    assert text.code == 0, text.err
    line = f"gpuenv: asking {index_env.default_index} which Pythons the pins have wheels for"
    resolving = f"gpuenv: resolving the pip dependencies with uv on {index_env.default_index}"
    assert text.err.splitlines() == [line, resolving]  # then the resolution (test_resolve_check)
    again = cli("import", str(req), "--gpu", "none", "-o", str(out), "--force", "--json")
    assert again.code == 0 and again.err == "", again.err


def test_a_release_whose_every_wheel_is_yanked_is_said_to_be_yanked() -> None:
    """ControlNet's opencv-contrib-python==4.3.0.36 moved "because 4.3.0.36 has no wheel
    for Python 3.8": it has one, yanked ("Release deprecated")."""
    from types import SimpleNamespace

    from packaging.tags import Tag
    from packaging.version import Version

    from gpuenv.importers.decide import _only_yanked
    from gpuenv.importers.wheels import IndexFile

    cp38 = frozenset({Tag("cp38", "cp38", "manylinux2014_x86_64")})
    yanked = IndexFile(Version("4.3.0.36"), cp38, ">=3.6", yanked=True)
    later = IndexFile(Version("4.3.0.38"), cp38, ">=3.6")
    index = SimpleNamespace(files=lambda name: [yanked, later])
    args = ("opencv-contrib-python", Version("4.3.0.36"), "3.8", "linux-64")
    assert _only_yanked(index, *args)  # type: ignore[arg-type]
    assert not _only_yanked(index, "x", Version("4.3.0.38"), "3.8", "linux-64")  # type: ignore[arg-type]
    cp37 = IndexFile(
        Version("4.3.0.36"),
        frozenset({Tag("cp37", "cp37m", "manylinux1_x86_64")}),
        None,
        yanked=True,
    )
    assert not _only_yanked(SimpleNamespace(files=lambda n: [cp37]), *args)  # type: ignore[arg-type]


def test_an_old_sdist_gpuenv_can_build_is_kept_not_moved(
    run_import: Callable[..., Imported], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """taming-transformers (2020): albumentations==0.4.3 has no wheel on the index, only
    its sdist; the wheel check moved it to 0.5.0, where old_sdists.toml knows how to
    build 0.4.3 with the setuptools it needs (docs: "Old sources and today's
    setuptools", which names this very case)."""
    import importlib

    from tests.fixtures.pkgindex.index import Serve, serve

    monkeypatch.setattr(
        importlib.import_module("gpuenv.import_check"),
        "check_reproduction",
        lambda *args, **kwargs: None,  # the wheel check is the subject, not uv's resolution
    )
    root = tmp_path / "index"
    files = [
        {"filename": "albumentations-0.4.3.tar.gz", "url": "../../f/a-0.4.3.tar.gz", "hashes": {}},
        {"filename": "albumentations-0.5.0-py3-none-any.whl", "url": "../../f/a.whl", "hashes": {}},
    ]
    page = root / "simple" / "albumentations" / "index.json"
    page.parent.mkdir(parents=True)
    page.write_text(json.dumps({"meta": {"api-version": "1.1"}, "files": files}))
    with serve(root, options=Serve()) as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        req = _requirements(tmp_path, "torch==1.7.0\nalbumentations==0.4.3\n")
        imported = run_import(req, target="h100")
    assert imported.result.code == 0, imported.result.err
    built = imported.entries("needs_build")["albumentations"]
    assert (
        built["to"] == "0.4.3" and "an old source archive gpuenv knows how to build" in built["why"]
    )
    spec = imported.spec.read_text()
    assert '"albumentations==0.4.3"' in spec and "[pip.build.albumentations]" in spec
