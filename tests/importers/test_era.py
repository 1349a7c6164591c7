"""The era of a torch range or an unpinned torch, from dates (issue 21, build item 7).

A nightly's ``.devYYYYMMDD`` dates it; with an index to ask (``--check-resolves``), the
upload day of the files' newest exact pin (PEP 700 ``upload-time`` on the PEP 691 JSON
page) bounds the torch: the newest release published by then. The index here is a small
JSON one served on loopback (``tests/fixtures/pkgindex``: a project folder holding an
``index.json``), its pages carrying the upload days the real releases had. The cases are
modelled on real repositories: a 2023 LLM fine-tuning repository (bare ``torch``,
``transformers==4.28.1``), a 2020 NLP one (``torch>=1.7``), a 2022 vision one run on an
H100, an April-2023 nightly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from gpuenv.importers import era
from gpuenv.importers.wheels import WheelIndex, parse_page, published, upload_day
from gpuenv.knowledge.foreign import ForeignKnowledge, load_foreign_knowledge
from gpuenv.spec import parse_spec_text
from tests.fixtures.pkgindex.index import Seen, Serve, serve
from tests.fixtures.pkgindex.plugin import PkgIndex, closed_port
from tests.importers.conftest import Imported

# (project, version, upload time, wheel tag): the days these releases were published
RELEASES = [
    ("transformers", "4.28.1", "2023-04-14T16:55:50.932Z", "py3-none-any"),
    ("transformers", "4.30.2", "2023-06-13T14:40:31.000Z", "py3-none-any"),
    ("transformers", "3.4.0", "2020-10-20T13:06:02.000Z", "py3-none-any"),
    ("transformers", "4.0.0", "2020-11-30T16:47:50.000Z", "py3-none-any"),
    ("transformers", "4.50.0", "2025-03-21T14:55:02.000Z", "py3-none-any"),
    ("numpy", "1.24.2", "2023-02-05T17:21:57.000Z", "cp310-cp310-manylinux_2_17_x86_64"),
    ("numpy", "1.19.2", "2020-09-10T12:53:11.000Z", "cp38-cp38-manylinux2010_x86_64"),
    ("numpy", "1.23.4", "2022-10-12T04:22:38.000Z", "cp310-cp310-manylinux_2_17_x86_64"),
    ("sentencepiece", "0.1.91", "2020-05-21T23:03:02.000Z", "cp38-cp38-manylinux1_x86_64"),
    ("timm", "0.6.11", "2022-10-03T21:40:46.393Z", "py3-none-any"),
    ("pyyaml", "5.1", "2019-03-13T20:00:00.000Z", "cp37-cp37m-manylinux1_x86_64"),
    ("setuptools", "0.9", "2013-07-03T10:00:00.000Z", "py2.py3-none-any"),
    ("bitsandbytes", "0.38.1", "2023-04-11T10:00:00.000Z", "py3-none-any"),
    ("litellm", "0.1.1", "2023-08-01T10:00:00.000Z", "py3-none-any"),
    ("litellm", "1.0.0", "2023-11-20T10:00:00.000Z", "py3-none-any"),
    ("bitsandbytes", "0.45.0", "2024-12-05T10:00:00.000Z", "py3-none-manylinux_2_24_x86_64"),
    ("setuptools", "81.0.0", "2026-02-01T10:00:00.000Z", "py3-none-any"),
]


def _pages(releases: list[tuple[str, str, str, str]]) -> dict[str, bytes]:
    files: dict[str, list[dict[str, object]]] = {}
    for project, version, uploaded, tag in releases:
        name = f"{project}-{version}-{tag}.whl"
        files.setdefault(project, []).append(
            {"filename": name, "url": f"../../files/{name}", "hashes": {}, "upload-time": uploaded}
        )
    return {
        project: json.dumps(
            {"meta": {"api-version": "1.1"}, "name": project, "files": found}
        ).encode()
        for project, found in files.items()
    }


def write_json_index(root: Path, pages: dict[str, bytes]) -> None:
    for project, body in pages.items():
        folder = root / "simple" / project
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "index.json").write_bytes(body)


@pytest.fixture
def dated_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Seen]:
    root = tmp_path / "dated-index"
    write_json_index(root, _pages(RELEASES))
    seen = Seen()
    with serve(root, options=Serve(), seen=seen) as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        yield seen


@pytest.fixture(autouse=True)
def _no_uv_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the era, decided before ``--check-resolves`` hands the written
    pins to uv (its own tests cover that): the small dated index serves pages, no wheels."""
    import importlib

    try:
        check = importlib.import_module("gpuenv.import_check")
    except ImportError:
        return
    monkeypatch.setattr(check, "check_reproduction", lambda *args, **kwargs: None)


@pytest.fixture(scope="module")
def fk() -> ForeignKnowledge:
    return load_foreign_knowledge(None)


def _paper(tmp_path: Path, text: str, name: str = "requirements.txt") -> Path:
    path = tmp_path / "paper" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def _torch(imported: Imported) -> dict[str, object]:
    assert imported.result.code == 0, imported.result.out + imported.result.err
    entries = imported.entries("changed") | imported.entries("kept")
    return entries["torch"]


# --- through `gpuenv import` ------------------------------------------------------------


def test_a_2023_repository_with_a_bare_torch_takes_the_torch_of_its_newest_pin(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # a 2023 fine-tuning repository: bare torch, exact pins of the day
    req = _paper(tmp_path, "numpy==1.24.2\ntorch\ntransformers==4.28.1\naccelerate\n")
    torch = _torch(run_import(req, target="rtx4090"))
    assert torch["to"] == "2.0.0+cu117"  # PyPI's default build of 2.0.0, what pip took
    assert torch["why"] == (
        "the newest torch released by 2023-04-14, when transformers 4.28.1 was published "
        "(requirements.txt:3), is 2.0.0; runs on this target as built"
    )
    assert torch["from"] == "any"
    # the era reads the pages the wheel check reads anyway, each once
    pages = sorted(path for path, _ in dated_index.requests)
    assert pages == ["/simple/accelerate/", "/simple/numpy/", "/simple/transformers/"]


def test_files_without_torch_are_dated_as_a_bare_torch_is(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """A requirements.txt that names no torch at all (the README installs it, in words
    gpuenv does not read) took the newest torch: 2.7 for 2023 pins."""
    req = _paper(tmp_path, "numpy==1.24.2\ntransformers==4.28.1\naccelerate\n")
    torch = _torch(run_import(req, target="rtx4090"))
    assert torch["to"] == "2.0.0+cu117"
    assert str(torch["why"]).startswith(
        "the newest torch released by 2023-04-14, when transformers 4.28.1 was published "
        "(requirements.txt:2), is 2.0.0"
    )


def test_a_2020_range_takes_the_torch_of_its_pins(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    req = _paper(
        tmp_path, "torch>=1.7\ntransformers==4.0.0\nnumpy==1.19.2\nsentencepiece==0.1.91\n"
    )
    torch = _torch(run_import(req, target="rtx4090"))
    # 1.7.0 was the newest torch on 2020-11-30 (1.7.1: 2020-12-10); without the dates the
    # range took 1.13.1 (the newest below 2.0's API change)
    assert torch["to"] == "1.7.0+cu110"
    assert torch["why"] == (
        "the newest torch released by 2020-11-30, when transformers 4.0.0 was published "
        "(requirements.txt:2), is 1.7.0, in '>=1.7'; the cu102 build cannot run here (its "
        "arch list (3.7, 5.0, 6.0, 7.0, 7.5) has no sm_89 kernels); cu110 can"
    )
    assert torch["from"] == ">=1.7"


def test_a_date_held_back_by_a_companion_pin_says_which(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """generative-models (2023, numpy bumped in 2024): its triton==2.0.0 held torch at
    2.0.x, and the report said "the newest torch released by 2024-08-18 ... is 2.0.1",
    false of that day."""
    req = _paper(tmp_path, "torch>=2.0.1\ntransformers==4.50.0\ntriton==2.0.0\n")
    torch = _torch(run_import(req, target="rtx4090"))
    assert str(torch["to"]).startswith("2.0.1+")
    assert str(torch["why"]).startswith(
        "the newest torch released by 2025-03-21, when transformers 4.50.0 was published "
        "(requirements.txt:2), is 2.0.1 among the releases triton==2.0.0 "
    ), torch["why"]


def test_an_old_floor_dated_late_names_every_api_change_it_crosses(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # torch>=1.7 in a repository whose pins were updated in 2025: the era (2.6.0) wins over
    # stopping below 2.0, and the report names both changes crossed from the floor
    req = _paper(tmp_path, "torch>=1.7\ntransformers==4.50.0\n")
    torch = _torch(run_import(req, target="rtx4090"))
    assert str(torch["to"]).startswith("2.6.0+")
    assert str(torch["why"]).startswith(
        "the newest torch released by 2025-03-21, when transformers 4.50.0 was published "
        "(requirements.txt:2), is 2.6.0, in '>=1.7'; "
    )
    assert torch["risk"] == "medium"
    assert torch["risk_detail"] == (
        "API change in 2.0.0: torch._six was removed: 'from torch._six import ...' fails; "
        "API change in 2.4.0: torch.cuda.amp.autocast and GradScaler are deprecated for "
        "torch.amp (warnings); API change in 2.6.0: torch.load defaults to weights_only=True: "
        "full pickled checkpoints need weights_only=False"
    )


def test_pins_older_than_the_range_date_the_files_to_its_oldest_release(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # transformers 3.4.0 (2020-10-20) predates torch 1.7.0 (2020-10-27): the files, which
    # ask for torch>=1.7, were written after it
    req = _paper(tmp_path, "torch>=1.7\ntransformers==3.4.0\n")
    torch = _torch(run_import(req, target="rtx4090"))
    assert str(torch["why"]).startswith(
        "only exact pins date the files, and the newest, transformers 3.4.0 "
        "(requirements.txt:2), was published 2020-10-20, before any torch in '>=1.7': that "
        "range's oldest release, 1.7.0 (published 2020-10-27), is taken; "
    )


def test_on_an_h100_the_gpu_wins_over_the_era_and_the_report_says_so(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # a 2022 vision repository: the era's torch (1.12.1) has no sm_90 kernels
    req = _paper(tmp_path, "torch\ntorchvision\ntimm==0.6.11\nnumpy==1.23.4\n")
    torch = _torch(run_import(req, target="h100"))
    assert torch["to"] == "2.0.1+cu118"  # the first series with sm_90, its newest patch
    why = str(torch["why"])
    assert why.startswith(
        "the newest torch released by 2022-10-12, when numpy 1.23.4 was published "
        "(requirements.txt:4), is 1.12.1; "
    )
    assert "sm_90" in why and why.endswith(
        "2.0.1 (cu118) is the newest release of the first later series whose builds do"
    )


def test_on_a_blackwell_gpu_the_era_moves_to_the_first_release_with_its_kernels(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    req = _paper(tmp_path, "numpy==1.24.2\ntorch\ntransformers==4.28.1\n")
    torch = _torch(run_import(req, target="rtx5090"))
    assert str(torch["to"]).startswith("2.7.1+cu128")
    why = str(torch["why"])
    assert why.startswith(
        "the newest torch released by 2023-04-14, when transformers 4.28.1 was published "
        "(requirements.txt:3), is 2.0.0; no torch 2.0.0 build for linux-64 has kernels for "
        "sm_120 (Blackwell)"
    )
    assert why.endswith(
        "2.7.1 (cu128) is the newest release of the first later series whose builds do"
    )


def test_a_bare_torch_from_the_nightly_index_is_the_release_that_nightly_led_to(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # April 2023: pip install --pre torch from the nightly index, beside dated pins
    req = _paper(
        tmp_path,
        "--pre\n--extra-index-url https://download.pytorch.org/whl/nightly/cu118\n"
        "torch\ntransformers==4.28.1\n",
    )
    imported = run_import(req, target="rtx4090")
    torch = _torch(imported)
    assert torch["to"] == "2.1.0+cu118"
    assert torch["why"] == (
        "requirements.txt:2 --extra-index-url https://download.pytorch.org/whl/nightly/cu118 "
        "installs torch's nightly; on 2023-04-14, when transformers 4.28.1 was published "
        "(requirements.txt:4), the nightly led to 2.1.0 (published 2023-10-04); runs on this "
        "target as built"
    )
    lost = imported.entries("unreproducible")["torch"]
    assert lost["from"] == "a nightly"


def test_the_newest_pin_dates_the_files_not_the_oldest(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # an old stable pin (pyyaml 5.1, 2019) does not drag a 2023 repository back
    req = _paper(tmp_path, "pyyaml==5.1\ntorch\ntransformers==4.30.2\n")
    torch = _torch(run_import(req, target="rtx4090"))
    assert torch["to"] == "2.0.1+cu117"
    assert "by 2023-06-13, when transformers 4.30.2 was published" in str(torch["why"])


def test_without_an_index_nothing_changes(
    run_import: Callable[..., Imported], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    req = _paper(tmp_path, "numpy==1.24.2\ntorch\ntransformers==4.28.1\n")
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", "off")
    off = _torch(run_import(req, target="rtx4090"))
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"http://127.0.0.1:{closed_port()}/simple")
    down = run_import(req, target="rtx4090")
    assert _torch(down)["to"] == off["to"]
    assert "released by" not in str(off["why"]) + str(_torch(down)["why"])
    assert any("could not be read" in a["why"] for a in down.report["assumptions"])


def test_an_index_of_html_pages_gives_no_dates_and_changes_nothing(
    run_import: Callable[..., Imported],
    pkgindex: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # the fixture index serves PEP 503 HTML only: no upload times, no era from them
    req = _paper(tmp_path, "torch\nnumpy==1.26.4\n")
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", pkgindex.default_index)
    html = _torch(run_import(req, target="cpu"))
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", "off")
    off = _torch(run_import(req, target="cpu"))
    assert (
        html["why"]
        == off["why"]
        == ("the files pin no torch version; 2.15.0 is what the planner chose here")
    )


def test_a_pinned_nightly_is_the_release_it_led_to_with_its_date(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = _paper(tmp_path, "--pre\ntorch==2.1.0.dev20230415+cu118\ntorchvision\n")
    imported = run_import(req, target="rtx4090")
    torch = imported.entries("changed")["torch"]
    assert torch["to"] == "2.1.0+cu118"
    assert torch["why"] == (
        "2.1.0.dev20230415 is a nightly of 2023-04-15; 2.1.0 (published 2023-10-04) is the "
        "release it led to that fits: it has every change the nightly had, which torch "
        "2.0.0, the release current that day (2023-03-15), lacks"
    )
    assert "torch" in imported.entries("unreproducible")


def test_a_nightly_whose_release_cannot_run_here_moves_on_and_says_why(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # a summer-2022 nightly on an H100: 1.13.0, the release it led to, has no sm_90 kernels
    req = _paper(tmp_path, "--pre\ntorch==1.13.0.dev20220801\n")
    torch = _run_ok(run_import(req, target="h100"))
    assert str(torch["to"]).startswith("2.0.1+")
    why = str(torch["why"])
    assert why.startswith(
        "1.13.0.dev20220801 is a nightly of 2022-08-01; 1.13.0 (published 2022-10-28) is the "
        "release it led to: it has every change the nightly had, which torch 1.12.0, the "
        "release current that day (2022-06-28), lacks; "
    )
    assert "sm_90" in why and why.endswith(": 2.0.1 is the nearest release that fits")


def test_a_torchvision_nightly_beside_a_bare_torch_dates_it(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = _paper(tmp_path, "--pre\ntorch\ntorchvision==0.16.0.dev20230415\n")
    torch = _torch(run_import(req, target="rtx4090"))
    assert str(torch["to"]).startswith("2.1.0+")
    assert str(torch["why"]).startswith(
        "torchvision==0.16.0.dev20230415 pins the era: 0.16.0.dev20230415 is a nightly of "
        "2023-04-15; 0.16.0 is the release it led to, paired with torch 2.1.0 (published "
        "2023-10-04): it has every change the nightly had, which torch 2.0.0, the release "
        "current that day (2023-03-15), lacks"
    )


@pytest.mark.parametrize("label", ["dev20231399", "dev20991231", "dev1", "dev20230230"])
def test_a_nightly_with_no_real_date_is_a_plain_pre_release(
    run_import: Callable[..., Imported], tmp_path: Path, label: str
) -> None:
    req = _paper(tmp_path, f"torch==2.1.0.{label}\n")
    torch = _run_ok(run_import(req, target="cpu"))
    assert torch["to"] == "2.1.0+cpu"
    assert str(torch["why"]).startswith(f"2.1.0.{label} is a pre-release")
    assert "nightly of" not in str(torch["why"])


def _run_ok(imported: Imported) -> dict[str, object]:
    assert imported.result.code == 0, imported.result.out
    return imported.entries("changed")["torch"]


# --- the pieces -------------------------------------------------------------------------


def test_release_dates_are_data_and_answer_the_era_questions(fk: ForeignKnowledge) -> None:
    assert fk.torch_published(Version("2.0.0")) == date(2023, 3, 15)
    assert fk.torch_published(Version("1.7.1")) == date(2020, 12, 10)
    current = fk.torch_current_on(date(2023, 4, 13))
    assert current is not None and current.version == Version("2.0.0")
    assert "releases/tag/v2.0.0" in current.fact.source
    assert fk.torch_current_on(date(2018, 1, 1)) is None
    # a patch of an older series published later (1.13.1, 2022-12-15) is not "newer"
    late = fk.torch_current_on(date(2022, 12, 20))
    assert late is not None and late.version == Version("1.13.1")
    # every release gpuenv plans has a date
    from gpuenv.knowledge import knowledge_base

    undated = [
        r.version for r in knowledge_base().torch_releases if not fk.torch_published(r.version)
    ]
    assert not undated


@pytest.mark.parametrize(
    ("label", "day"),
    [
        ("2.1.0.dev20230415", date(2023, 4, 15)),
        ("2.1.0.dev20231399", None),  # month 13, day 99
        ("2.1.0.dev20230230", None),  # 30 February
        ("2.1.0.dev20991231", None),  # the future
        ("0.4.0.dev20000101", None),  # before torch
        ("2.1.0.dev1", None),
        ("2.1.0", None),
        ("2.1.0rc1", None),
    ],
)
def test_a_nightly_day_is_a_real_past_day_or_none(label: str, day: date | None) -> None:
    assert era.nightly_day(Version(label)) == day


def test_the_era_release_is_within_the_range_and_the_companion_bound(fk: ForeignKnowledge) -> None:
    from gpuenv.importers.model import Origin

    dated = era.Dated(date(2023, 9, 1), "x", Version("1"), Origin("r.txt", 1, "x==1"))
    assert era.dated_release(fk, dated, "") == (Version("2.0.1"), False)
    assert era.dated_release(fk, dated, "<2") == (Version("1.13.1"), False)
    assert era.dated_release(fk, dated, ">=2.1") == (Version("2.1.0"), True)  # none by then
    assert era.dated_release(fk, dated, ">=9") is None
    assert era.dated_release(fk, dated, "<2.1,!=2.0.1") == (Version("2.0.0"), False)
    ancient = era.Dated(date(2011, 1, 1), "x", Version("1"), Origin("r.txt", 1, "x==1"))
    assert era.dated_release(fk, ancient, "") is None  # an old stable pin dates nothing
    assert era.dated_release(fk, ancient, "<2") is None
    assert era.dated_release(fk, ancient, "~=1.8") == (Version("1.8.0"), True)
    assert era.dated_release(fk, dated, "", "<2.0") == (Version("1.13.1"), False)
    assert era.dated_release(fk, dated, "", ">=9") == (Version("2.0.1"), False)  # no overlap
    assert era.dated_release(fk, dated, "not a specifier") is None


def test_a_nightly_of_a_day_led_to_the_next_series(fk: ForeignKnowledge) -> None:
    from gpuenv.importers.model import Origin

    def on(day: date) -> era.Dated:
        return era.Dated(day, "x", Version("1"), Origin("r.txt", 1, "x==1"))

    assert era.nightly_led_to(fk, on(date(2023, 4, 14)), "") == Version("2.1.0")
    # after 1.13.1 (2022-12-15), a patch of the 1.13 branch, main led to 2.0.0
    assert era.nightly_led_to(fk, on(date(2022, 12, 20)), "") == Version("2.0.0")
    assert era.nightly_led_to(fk, on(date(2023, 4, 14)), "<2.1") is None
    assert era.nightly_led_to(fk, on(date(2026, 11, 1)), "") is None  # not released yet
    assert era.nightly_led_to(fk, on(date(2017, 1, 1)), "") is None  # before torch 1.0


def test_upload_times_are_read_from_json_pages_and_bad_ones_are_no_date() -> None:
    page = {
        "files": [
            {"filename": "a-1.0-py3-none-any.whl", "upload-time": "2021-05-06T07:08:09.123456Z"},
            {"filename": "a-1.0.tar.gz", "upload-time": "2021-05-05T23:59:59Z"},
            {"filename": "a-2.0-py3-none-any.whl", "upload-time": "2021-13-45T00:00:00Z"},
            {"filename": "a-3.0-py3-none-any.whl", "upload-time": "3021-01-01T00:00:00Z"},
            {"filename": "a-4.0-py3-none-any.whl", "upload-time": 20210101},
            {"filename": "a-5.0-py3-none-any.whl", "upload-time": "x" * 10_000},
            {"filename": "a-6.0-py3-none-any.whl", "upload-time": None},
            {"filename": "a-7.0-py3-none-any.whl", "upload-time": ["2021-01-01"]},
        ]
    }
    files = parse_page(json.dumps(page).encode(), "a")
    days = {str(f.version): f.uploaded for f in files if f.tags is not None}
    assert days == {
        "1.0": date(2021, 5, 6), "2.0": None, "3.0": None, "4.0": None,
        "5.0": None, "6.0": None, "7.0": None,
    }  # fmt: skip
    index = WheelIndex(
        "https://index.invalid/simple", fetch=lambda url, t: json.dumps(page).encode()
    )
    assert published(index, "a", Version("1.0")) == date(2021, 5, 5)  # its first file
    assert published(index, "a", Version("3.0")) is None
    assert upload_day("2021-05-06") == date(2021, 5, 6)


def test_dated_pages_are_cached_with_their_days(tmp_path: Path) -> None:
    body = _pages(RELEASES)["transformers"]
    asked: list[str] = []

    def fetch(url: str, timeout: float) -> bytes:
        asked.append(url)
        return body

    first = WheelIndex("https://index.invalid/simple", tmp_path, fetch=fetch)
    assert published(first, "transformers", Version("4.28.1")) == date(2023, 4, 14)
    again = WheelIndex("https://index.invalid/simple", tmp_path, fetch=fetch)
    assert published(again, "transformers", Version("4.28.1")) == date(2023, 4, 14)
    assert len(asked) == 1


# --- NGC containers gpuenv has no data for ------------------------------------------------


def test_an_unlisted_ngc_container_is_dated_by_its_neighbours(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # a 2023 repository built FROM NGC 23.04 (images.toml lists 23.02 and 23.05)
    _paper(tmp_path, "torch\ntransformers==4.28.1\n")
    docker = _paper(
        tmp_path,
        "FROM nvcr.io/nvidia/pytorch:23.04-py3\nCOPY requirements.txt .\n"
        "RUN pip install -r requirements.txt\n",
        "Dockerfile",
    )
    imported = run_import(docker.parent, target="rtx4090")
    assert _torch(imported)["to"] == "2.0.0+cu117"
    assert any(
        a["why"]
        == "NGC PyTorch release 23.04 is not in gpuenv's data (it knows 23 releases, 21.02 to "
        "25.12): its CUDA and Python are unknown; its torch is taken as 2.0.0: NGC 23.02 and "
        "23.05, either side of it, both hold builds that led to torch 2.0.0"
        for a in imported.report["assumptions"]
    ), imported.report["assumptions"]


@pytest.mark.parametrize(
    ("tag", "torch", "text"),
    [
        ("23.06", "2.0.1", "its tag dates it to 2023-06: torch 2.0.1 is the newest torch "
         "published by 2023-06-30, the end of its month (NGC 23.05's build led to 2.0.0, "
         "NGC 23.08's build led to 2.1.0)"),
        ("22.04", "1.12.0", "its tag dates it to 2022-04: torch 1.12.0 is the oldest torch its "
         "neighbours allow (NGC 22.03's build led to 1.12.0, NGC 22.06's build led to 1.13.0)"),
        ("26.03", "2.11.0", "its tag dates it to 2026-03: torch 2.11.0 is the newest torch "
         "published by 2026-03-31, the end of its month (NGC 25.12's build led to 2.10.0)"),
        ("99.01", None, None),  # the future
        ("23.13", None, None),  # no month
        ("23.00", None, None),
    ],
)  # fmt: skip
def test_an_unlisted_ngc_tag_between_different_neighbours_is_dated_by_its_month(
    fk: ForeignKnowledge, tag: str, torch: str | None, text: str | None
) -> None:
    found = era.ngc_era(tag, fk)
    assert (str(found[0]), found[1]) == (torch, text) if found else torch is None


# --- hostile indexes ------------------------------------------------------------------------


def test_hostile_pages_give_no_date_and_never_fail_the_import(
    run_import: Callable[..., Imported],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuenv.importers import wheels

    whl = "-1.0-py3-none-any.whl"
    pages = {
        "aaa": b'{"files": "not a list"}',
        "bbb": json.dumps(
            {
                "files": [
                    {"filename": f"bbb{whl}", "upload-time": {"a": 1}},
                    {"filename": f"bbb{whl}", "upload-time": "2023-02-30T00:00:00Z"},
                    {"filename": f"bbb{whl}", "upload-time": "3021-01-01T00:00:00Z"},
                    {"filename": f"bbb{whl}", "upload-time": "9" * 5000},
                ]
            }
        ).encode(),
        "ccc": b"{" * 100_000,  # nested past any parser's depth
        "ddd": b'{"files": [' + b'{"filename": "ddd-1.0-py3-none-any.whl"},' * 2000 + b"{}]}",
        "eee": b"\xff\xfe not utf-8 \x00",
    }
    root = tmp_path / "hostile"
    write_json_index(root, pages)
    monkeypatch.setattr(wheels, "MAX_PAGE", 50_000)  # ddd is over it
    req = _paper(tmp_path, "torch\naaa==1.0\nbbb==1.0\nccc==1.0\nddd==1.0\neee==1.0\n")
    with serve(root) as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        imported = run_import(req, target="cpu")
    assert imported.result.code == 0, imported.result.out
    torch = _torch(imported)
    assert "released by" not in str(torch["why"])
    assert torch["why"] == "the files pin no torch version; 2.15.0 is what the planner chose here"


@pytest.mark.parametrize(
    ("run", "kept"),
    [
        # pip keeps the image's torch: "Requirement already satisfied"
        ("pip install torch transformers==4.28.1", True),
        ("pip install --no-cache-dir 'torch>=1.13' transformers==4.28.1", True),
        ("pip install --no-deps torch", True),
        # these install over it: the image's torch says nothing
        ("pip install -U torch transformers==4.28.1", False),
        ("pip install --force-reinstall torch", False),
        ("pip install 'torch>=2.1'", False),  # 2.0.0 is outside the range: pip replaces it
        ("pip install torch==2.1.2", False),
    ],
)
def test_a_versionless_pip_install_keeps_the_base_images_torch(
    run_import: Callable[..., Imported], tmp_path: Path, run: str, kept: bool
) -> None:
    # a 2023 repository's Dockerfile: NGC 23.05 (torch 2.0.0), then its own pip install
    docker = _paper(tmp_path, f"FROM nvcr.io/nvidia/pytorch:23.05-py3\nRUN {run}\n", "Dockerfile")
    imported = run_import(docker, target="rtx4090")
    assert str(_torch(imported)["to"]).startswith("2.0.0+") is kept


# --- against the real default index (skipped offline) ---------------------------------------


@pytest.mark.network
def test_the_release_dates_are_the_default_indexs_upload_days(fk: ForeignKnowledge) -> None:
    """torch_dates.toml is the first upload day of each release on the index uv uses by
    default (PEP 700 upload-time on its PEP 691 page), and a pin's day is read the same way."""
    from gpuenv.errors import ExternalToolError
    from gpuenv.lock.uv import UvResolver

    try:
        default = UvResolver().stated_default_index()
    except ExternalToolError as exc:
        pytest.skip(f"uv cannot say its default index: {exc}")
    assert default is not None
    index = WheelIndex(default)
    index.prefetch(["torch", "transformers"])
    if index.failure is not None or not index.files("torch"):
        pytest.skip(f"the default index is not reachable: {index.failure}")
    differ = [
        (str(d.version), d.published, published(index, "torch", d.version))
        for d in fk.torch_dates
        if published(index, "torch", d.version) != d.published
    ]
    assert not differ
    assert published(index, "transformers", Version("4.28.1")) == date(2023, 4, 14)


# uv's words when the pins dated rl-baselines3-zoo's requirements.txt to torch 2.0.1 (the
# field test, trimmed where the report cut it)
SB3_CONFLICT = (
    "Because stable-baselines3==2.9.0a2 depends on torch>=2.3,<3.0 and stable-baselines3"
    ">=2.9.0a2 depends on torch==2.0.1, we can conclude that stable-baselines3==2.9.0a2 "
    "cannot be used. And because only the following versions of stable-baselines3 are "
    "available: stable-baselines3<=2.9.0a2 stable-baselines3>=2.9.0a3 we can conclude that "
    "stable-baselines3>=2.9.0a2,<2.9.0a3 cannot be used. (1) Because stable-baselines3>="
    "2.9.0a3 depends on torch>=2.8,<3.0 and torch==2.0.1, we can conclude that "
    "stable-baselines3>=2.9.0a3 cannot be used."
)


def test_a_torch_dated_by_an_old_pin_that_a_requirement_rules_out_is_chosen_again(
    run_import: Callable[..., Imported], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DLR-RM/rl-baselines3-zoo: gym==0.26.2 (2022-10-04) dated the files to torch 1.12.1
    (2.0.1 on an H100), and stable-baselines3>=2.9.0a2 needs torch>=2.3: the spec could
    not resolve. The import runs once more within the range uv names."""
    from gpuenv import import_check
    from gpuenv.import_check import ResolveCheck

    root = tmp_path / "dated-index"
    write_json_index(
        root,
        _pages(
            [
                ("gym", "0.26.2", "2022-10-04T16:23:56.000Z", "py3-none-any"),
                ("stable-baselines3", "2.9.0a2", "2026-01-12T10:00:00.000Z", "py3-none-any"),
            ]
        ),
    )
    asked: list[str] = []

    def uv(reproduction: Any, *args: Any) -> ResolveCheck:
        torch = reproduction.decision.plan.torch
        asked.append(torch)
        if torch == "2.0.1":
            return ResolveCheck(False, SB3_CONFLICT, "index", "3.11", "x86_64-manylinux_2_28")
        return ResolveCheck(True, "", "index", "3.11", "x86_64-manylinux_2_28")

    monkeypatch.setattr(import_check, "check_reproduction", uv)
    req = _paper(tmp_path, "gym==0.26.2\nstable-baselines3>=2.9.0a2,<3.0\n")
    with serve(root, options=Serve()) as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        imported = run_import(req, target="h100")
    assert imported.result.code == 0, imported.result.out + imported.result.err
    assert asked == ["2.0.1", "2.7.1"]  # once dated, once within the range: the newest fitting
    torch = _torch(imported)
    assert torch["to"] == "2.7.1+cu118"
    assert torch["why"] == (
        "nothing in the files asks for torch; 2.7.1 is the newest release that fits and "
        "that stable-baselines3==2.9.0a2 (torch>=2.3,<3.0) accepts"
    )
    said = [a["why"] for a in imported.report["assumptions"] if a["package"] == "torch"]
    assert said == [
        "torch 2.0.1, chosen first, does not resolve: stable-baselines3==2.9.0a2 depends on "
        "torch>=2.3,<3.0 (the resolve check); chosen again among the releases it accepts"
    ]


def test_the_torch_range_a_requirement_needs_is_read_from_uv_s_words() -> None:
    from gpuenv.import_check import torch_bound
    from gpuenv.knowledge import knowledge_base

    bound = torch_bound(SB3_CONFLICT, "2.0.1", knowledge_base())
    assert bound is not None
    # of the two ranges (2.9.0a2's and 2.9.0a3's), the one more releases fit
    assert (bound.specifier, bound.who, bound.first) == (
        ">=2.3,<3.0",
        "stable-baselines3==2.9.0a2",
        "2.0.1",
    )
    # the constraint itself ("depends on torch==2.0.1") is no range to move into
    assert torch_bound("Because a==1 depends on torch==2.0.1.", "2.0.1", knowledge_base()) is None


# --- [pip] exclude-newer: what the files leave unpinned resolves as of their day ----------

AS_OF_2023 = (
    "pip packages resolve as of 2023-04-14, when transformers 4.28.1 was published: what the "
    "files leave unpinned, and what their packages depend on, comes as it was then, not as "
    "today ([pip] exclude-newer; remove it for today's releases)"
)


def _as_of(imported: Imported) -> list[str]:
    return [e["why"] for e in imported.report["assumptions"] if "resolve as of" in e["why"]]


def test_the_files_day_is_written_so_that_unpinned_packages_resolve_as_then(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # LAVIS (2023) wrote diffusers<=0.16 and no huggingface-hub: today's hub broke it
    req = _paper(tmp_path, "numpy==1.24.2\ntorch\ntransformers==4.28.1\naccelerate\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert _as_of(imported) == [AS_OF_2023]
    text = imported.spec.read_text()
    assert (
        'exclude-newer = "2023-04-14" # resolve as of 2023-04-14, when transformers 4.28.1 '
        "was published\n" in text
    )
    spec = parse_spec_text(text, file="gpuenv.toml").spec  # what lock reads
    assert spec.pip.exclude_newer == "2023-04-14"
    assert imported.report["exclude_newer"] == "2023-04-14"  # for scripts, as written


def test_a_torch_newer_than_the_pins_moves_the_day_to_its_own(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    # 2020 pins on an H100: torch moves to a release with sm_90 kernels, whose own
    # dependencies must resolve, so the day is torch's
    req = _paper(tmp_path, "torch==1.7.1\ntransformers==4.0.0\nnumpy==1.19.2\n")
    imported = run_import(req, target="h100")
    assert imported.result.code == 0, imported.result.err
    torch = imported.torch().split("+")[0]
    day = load_foreign_knowledge(None).torch_published(Version(torch))
    assert day is not None and day > date(2020, 12, 10)
    months = (day - date(2020, 12, 10)).days * 12 // 365
    assert [why.split(":")[0] for why in _as_of(imported)] == [
        f"pip packages resolve as of {day.isoformat()}, when torch {torch}, the target's, was "
        f"published, {months} months after the files' 2020-12-10 (torch 1.7.1)"
    ]
    entry = next(e for e in imported.report["assumptions"] if "resolve as of" in e["why"])
    assert (entry["risk"], entry["risk_detail"]) == (
        "medium",
        "releases of the months between may be newer than the code expects: pin those it "
        "needs older",
    )
    assert f'exclude-newer = "{day.isoformat()}"' in imported.spec.read_text()


def test_without_dates_from_the_index_nothing_is_dated(
    run_import: Callable[..., Imported], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", "off")
    req = _paper(tmp_path, "torch==2.0.0\ntransformers==4.28.1\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert _as_of(imported) == []
    assert "exclude-newer" not in imported.spec.read_text()
    assert imported.report["exclude_newer"] is None


def test_files_that_do_not_resolve_as_of_their_day_resolve_as_today(
    run_import: Callable[..., Imported],
    dated_index: Seen,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dependency released after the files' newest pin (or a wheel uploaded later
    than its release's first file) leaves them unresolvable as of that day: the import
    runs again without it, and says why."""
    from gpuenv import import_check
    from gpuenv.import_check import ResolveCheck

    checked: list[str | None] = []

    def check(reproduction, index, failure, cache_dir):  # the lock's resolution, stubbed
        as_of = reproduction.decision.as_of
        checked.append(as_of and as_of.day.isoformat())
        reason = "" if as_of is None else "because only tokenizers<0.13 is available"
        return ResolveCheck(as_of is None, reason, index, "3.10", "x86_64-manylinux_2_28")

    monkeypatch.setattr(import_check, "check_reproduction", check)
    req = _paper(tmp_path, "torch==2.0.0\ntransformers==4.28.1\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert checked == ["2023-04-14", None]
    assert _as_of(imported) == [
        "pip packages resolve as of today: as of 2023-04-14, when transformers 4.28.1 was "
        "published, the written dependencies do not resolve (because only tokenizers<0.13 is "
        "available), so what the files leave unpinned may be newer than they expect"
    ]
    assert "exclude-newer" not in imported.spec.read_text()


def test_files_nothing_dates_say_that_they_resolve_as_of_today(
    run_import: Callable[..., Imported],
    dated_index: Seen,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DepthAnything/Depth-Anything-V2 pins nothing: no day is written, and the report
    said nothing of it."""
    req = _paper(tmp_path, "torch\naccelerate\nsentencepiece\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert _as_of(imported) == [
        "pip packages resolve as of today: no pin or version range in the files has an upload "
        "day on the index, so nothing dates the files (no [pip] exclude-newer; add one for "
        "the day they were written)"
    ]
    assert "exclude-newer" not in imported.spec.read_text()
    # a torch gpuenv has no publication day for: its dependencies cannot be dated either
    monkeypatch.setattr(ForeignKnowledge, "torch_published", lambda self, version: None)
    imported = run_import(
        _paper(tmp_path, "torch==2.0.0\ntransformers==4.28.1\n"), target="rtx4090"
    )
    assert _as_of(imported) == [
        "pip packages resolve as of today: torch 2.0.0's publication day is not known, so "
        "nothing dates the files (no [pip] exclude-newer; add one for the day they were written)"
    ]


def test_files_older_than_numpy_2_keep_numpy_1_beside_a_later_torch(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """tloen/alpaca-lora (2023) on an H100: torch 2.6's day (2025) brought NumPy 2.2, and
    its pandas 2.0.0 failed at import ("numpy.dtype size changed"). Files older than
    NumPy 2 (2024-06-16) get numpy<2 once the day is a later torch's."""
    req = _paper(tmp_path, "torch>=2.4\ntransformers==4.28.1\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    numpy = imported.entries("changed")["numpy"]
    assert (numpy["from"], numpy["to"]) == ("not asked", "<2"), numpy
    assert numpy["why"].startswith("the files predate NumPy 2.0 (2024-06-16)"), numpy
    assert '"numpy<2", #' in imported.spec.read_text()
    # on Python 3.13, which no NumPy 1 has a wheel for, the bound would be a source build
    env = "name: p\ndependencies:\n  - python=3.13\n  - pip:\n    - torch>=2.6\n    - transformers==4.28.1\n"
    imported = run_import(_paper(tmp_path, env, "environment.yml"), target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert 'python = "3.13"' in imported.spec.read_text()
    assert "numpy" not in imported.entries("changed")
    # files of NumPy 2's time get nothing; a torch of their own day, its own bound only
    imported = run_import(_paper(tmp_path, "torch>=2.4\ntransformers==4.50.0\n"), target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert "numpy" not in imported.entries("changed")
    imported = run_import(
        _paper(tmp_path, "torch==2.0.0\ntransformers==4.28.1\n"), target="rtx4090"
    )
    assert imported.result.code == 0, imported.result.err
    assert imported.entries("changed")["numpy"]["why"].startswith("torch before 2.3")
    assert imported.spec.read_text().count('"numpy<2"') == 1


def test_an_unpinned_companion_lacking_the_gpus_kernels_as_of_the_day_takes_its_landing(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """tloen/alpaca-lora (April 2023) on an H100 loads its model with load_in_8bit: its
    unpinned bitsandbytes resolved, as of the day, to 0.38.1, whose LLM.int8() does not
    run on Hopper (0.45.0 is the first). It takes 0.45.0, as of that release's day."""
    req = _paper(tmp_path, "torch==2.0.0\ntransformers==4.28.1\nbitsandbytes\n")
    imported = run_import(req, target="h100")
    assert imported.result.code == 0, imported.result.err
    entry = imported.entries("changed")["bitsandbytes"]
    assert (entry["from"], entry["to"]) == ("any", ">=0.45.0"), entry
    assert entry["why"].endswith(
        "it would resolve to a release with no LLM.int8() (8-bit matmul: load_in_8bit) for "
        "sm_90; 0.45.0 is the first that has, as of its own day, 2024-12-05"
    ), entry
    spec = parse_spec_text(imported.spec.read_text(), file="gpuenv.toml").spec
    assert spec.pip.exclude_newer_packages["bitsandbytes"] == "2024-12-05"
    assert "bitsandbytes>=0.45.0" in spec.pip.dependencies
    # on a GPU whose int8 the old release runs, the day decides
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert "bitsandbytes" not in imported.entries("changed")


def test_a_package_named_without_a_version_dates_the_files_to_its_first_release(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """IDEA-Research/Grounded-Segment-Anything: its pins date from June 2023, but it
    names litellm, whose first release came later. As of the pins' day litellm had no
    release, nothing resolved, and every package was taken as of today. The files
    cannot predate a package they name."""
    req = _paper(tmp_path, "torch==2.0.0\ntransformers==4.28.1\nlitellm\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert [why.split(":")[0] for why in _as_of(imported)] == [
        "pip packages resolve as of 2023-08-01, when litellm 0.1.1 was published"
    ]
    assert 'exclude-newer = "2023-08-01"' in imported.spec.read_text()


def test_a_git_requirement_with_no_commit_is_said_to_be_outside_the_day(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """tloen/alpaca-lora (April 2023) installs peft from git: today's default branch
    requires accelerate>=0.21, which the day hides, and the lock failed with a hint to
    move the whole day to 2026. The report says the day does not reach git."""
    text = (
        "torch==2.0.0\ntransformers==4.28.1\npeft @ git+https://github.com/huggingface/peft.git\n"
        "clip @ git+https://github.com/openai/CLIP.git@a1d0717\n"
        "taming @ git+https://github.com/CompVis/taming-transformers.git@v0.1.0\n"
    )
    imported = run_import(_paper(tmp_path, text), target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    said = [e for e in imported.report["assumptions"] if "does not reach a git" in e["why"]]
    assert [(e["why"], e["risk"]) for e in said] == [
        (
            "peft comes from git with no commit: [pip] exclude-newer (2023-04-14) does not "
            "reach a git checkout, so the lock takes its branch as it is then, and what that "
            "requires may be newer than the day allows",
            "medium",
        )
    ], said


def test_packages_named_bare_date_nothing_alone(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """karpathy/nanoGPT installs torch numpy transformers ... with no version: their
    first releases are a floor, not the day the files were written (dated so, the lock
    would take releases years older than the code may need)."""
    imported = run_import(_paper(tmp_path, "torch\ntransformers\nlitellm\n"), target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert [why.split(":")[0] for why in _as_of(imported)] == ["pip packages resolve as of today"]
    assert "exclude-newer" not in imported.spec.read_text()


def test_a_bound_gpuenv_asks_from_the_code_dates_nothing(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """facebookresearch/maskrcnn-benchmark (2019): setup.py imports
    torch.utils.cpp_extension, so gpuenv asks setuptools<82, whose first release (0.6b1,
    2006) then dated the files "211 months" before torch."""
    req = _paper(tmp_path, "torch\naccelerate\n")
    (req.parent / "setup.py").write_text("from torch.utils.cpp_extension import CUDA_HOME\n")
    imported = run_import(req.parent, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert '"setuptools<82"' in imported.spec.read_text()
    assert [why.split(":")[0] for why in _as_of(imported)] == ["pip packages resolve as of today"]


def test_a_release_a_range_names_dates_the_files(
    run_import: Callable[..., Imported], dated_index: Seen, tmp_path: Path
) -> None:
    """state-spaces/mamba's apache-tvm-ffi<=0.1.12 names a release of June 2026: the
    files were written after it, though older releases satisfy the range."""
    req = _paper(tmp_path, "torch==2.0.0\ntransformers==4.28.1\nnumpy<=1.24.2,>=1.19\n")
    imported = run_import(req, target="rtx4090")
    assert imported.result.code == 0, imported.result.err
    assert [why.split(":")[0] for why in _as_of(imported)] == [
        "pip packages resolve as of 2023-04-14, when transformers 4.28.1 was published"
    ]
    req = _paper(tmp_path, "torch==2.0.0\ntransformers<=4.30.2\n")
    imported = run_import(req, target="rtx4090")
    assert [why.split(":")[0] for why in _as_of(imported)] == [
        "pip packages resolve as of 2023-06-13, when transformers 4.30.2 was published"
    ]


def test_what_a_newer_torch_requires_takes_its_day_and_the_rest_the_files(
    run_import: Callable[..., Imported],
    dated_index: Seen,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ControlNet (early 2023) on an H100 was dated by torch 2.1.2 (December 2023), and its
    lock brought pydantic 2, which its gradio 3.16 cannot take. What that torch requires
    (uv's resolution of the family alone, stubbed here) takes torch's day; the rest keeps
    the files' own."""
    from gpuenv import import_check
    from gpuenv.import_check import ResolveCheck

    def check(reproduction, index, failure, cache_dir):  # the lock's resolution, stubbed
        return ResolveCheck(True, "", index, "3.10", "x86_64-manylinux_2_28")

    monkeypatch.setattr(import_check, "check_reproduction", check)
    monkeypatch.setattr(
        import_check, "torch_requires", lambda *args: ("numpy", "sympy", "typing-extensions")
    )
    req = _paper(tmp_path, "torch==1.7.1\ntransformers==4.0.0\nnumpy==1.19.2\n")
    imported = run_import(req, target="h100")
    assert imported.result.code == 0, imported.result.err
    torch = imported.torch().split("+")[0]
    day = load_foreign_knowledge(None).torch_published(Version(torch))
    assert day is not None
    assert _as_of(imported) == [
        "pip packages resolve as of 2020-12-10, when torch 1.7.1 was published; what torch "
        f"{torch}, the target's, requires (sympy, typing-extensions) and numpy, which torch's "
        f"wheels were built against, as of torch's day, {day.isoformat()}: what the files "
        "leave unpinned, and what their packages depend on, comes as it was then, not as "
        "today ([pip] exclude-newer and exclude-newer-package; remove them for today's "
        "releases)"
    ]
    text = imported.spec.read_text()
    assert 'exclude-newer = "2020-12-10"' in text
    spec = parse_spec_text(text, file="gpuenv.toml").spec
    assert spec.pip.exclude_newer_packages == {
        "numpy": day.isoformat(),
        "sympy": day.isoformat(),
        "typing-extensions": day.isoformat(),
    }
    assert imported.report["exclude_newer_package"] == spec.pip.exclude_newer_packages


def test_a_package_the_files_day_would_build_from_source_takes_torchs_day_too(
    run_import: Callable[..., Imported],
    dated_index: Seen,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ControlNet on an H100: as of its January 2023, python-multipart and validators
    had source archives only, which the torch day's resolution took as wheels. They take
    torch's day too, rather than a build more at install."""
    from gpuenv import import_check
    from gpuenv.import_check import ResolveCheck

    seen: list[tuple[str, ...]] = []

    def check(reproduction, index, failure, cache_dir):  # the lock's resolution, stubbed
        own = tuple(sorted(reproduction.decision.as_of_packages))
        seen.append(own)
        files_day = bool(own) and "python-multipart" not in own
        built = ("python-multipart",) if files_day else ()
        return ResolveCheck(True, "", index, "3.10", "x86_64-manylinux_2_28", built=built)

    monkeypatch.setattr(import_check, "check_reproduction", check)
    monkeypatch.setattr(import_check, "torch_requires", lambda *args: ("sympy",))
    req = _paper(tmp_path, "torch==1.7.1\ntransformers==4.0.0\n")
    imported = run_import(req, target="h100")
    assert imported.result.code == 0, imported.result.err
    assert seen == [(), ("sympy",), ("python-multipart", "sympy")]
    spec = parse_spec_text(imported.spec.read_text(), file="gpuenv.toml").spec
    assert sorted(spec.pip.exclude_newer_packages) == ["python-multipart", "sympy"]
    assert spec.pip.exclude_newer == "2020-12-10"
    # alpaca-lora's ffmpy was said to be what torch requires: it is said apart
    assert "requires (sympy) and python-multipart, of which the files' day has only a " in (
        " ".join(_as_of(imported))
    )
