"""What the torch index serves, learned at lock time and used by plan (issue #26): the
builds and Python tags ``<torch-index>/torch/`` lists, kept in the cache (never in the
lock), and a build the data lacks planned as "seen on the index"."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.errors import NoCompatiblePlan
from gpuenv.knowledge import knowledge_base
from gpuenv.lock import project
from gpuenv.lock.index_builds import (
    builds_on_index,
    builds_on_page,
    record_builds,
    remember_index_builds,
    seen_builds,
)
from gpuenv.lock.options import LockOptions
from gpuenv.plan import TargetPlan, make_plan
from gpuenv.plan._seen import unknown_builds
from gpuenv.spec import parse_spec_text
from tests.conftest import CliResult
from tests.fixtures.pkgindex.index import serve, write_index
from tests.fixtures.pkgindex.wheels import WheelSpec

# Shaped like the PyTorch index's root torch page: every build's wheels, the local label
# percent-encoded, macOS wheels unlabelled, free-threaded and pre-release wheels beside.
PAGE = b"""<!DOCTYPE html><html><body><h1>Links for torch</h1>
<a href="/whl/cu129/torch-2.12.1%2Bcu129-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=aa">x</a>
<a href="/whl/cu129/torch-2.12.1%2Bcu129-cp313-cp313-manylinux_2_28_x86_64.whl#sha256=ab">x</a>
<a href="/whl/cu129/torch-2.12.1%2Bcu129-cp313-cp313t-manylinux_2_28_x86_64.whl#sha256=ac">x</a>
<a href="/whl/cu130/torch-2.12.1%2Bcu130-cp315-cp315-manylinux_2_28_aarch64.whl#sha256=ad">x</a>
<a href="/whl/cu126/torch-2.12.1%2Bcu126-cp312-cp312-win_amd64.whl#sha256=ae">x</a>
<a href="/whl/cpu/torch-2.12.1-cp312-none-macosx_11_0_arm64.whl#sha256=af">x</a>
<a href="/whl/cpu/torch-2.12.1-cp312-cp312-manylinux_2_28_aarch64.whl#sha256=b0">x</a>
<a href="/whl/cu132/torch-2.16.0rc1%2Bcu132-cp312-cp312-manylinux_2_28_x86_64.whl">x</a>
<a href="/whl/cu132/torch-2.12.1%2Brocm6.4-cp312-cp312-manylinux_2_28_x86_64.whl">x</a>
</body></html>"""


def test_builds_and_python_tags_are_read_from_an_html_page() -> None:
    builds = builds_on_page(PAGE)
    assert builds == {
        "2.12.1": {
            "cu129": {"linux-64": ["3.12", "3.13"]},  # cp313t is free-threaded: left out
            "cu130": {"linux-aarch64": ["3.15"]},
            "cu126": {"win-64": ["3.12"]},
            # macOS wheels carry no label; an unlabelled Linux aarch64 wheel is not a build
            # gpuenv can name (the cpu index's CPU wheels are, under their own page)
            "cpu": {"osx-arm64": ["3.12"]},
        }
    }


def test_builds_are_read_from_a_json_page() -> None:
    page = {
        "files": [
            {"filename": "torch-2.13.0+cu129-cp311-cp311-manylinux_2_28_x86_64.whl"},
            {"filename": "torch-2.13.0+cu129-cp310-cp310-manylinux_2_28_x86_64.whl"},
            {"filename": "not-a-wheel.tar.gz"},
            "garbage",
        ]
    }
    assert builds_on_page(json.dumps(page).encode()) == {
        "2.13.0": {"cu129": {"linux-64": ["3.10", "3.11"]}}
    }
    assert builds_on_page(b"{not json") == {}
    assert builds_on_page(b'{"files": 5}') == {}, "a files value that is not a list"


def test_recorded_per_index_without_credentials_and_fresh_for_an_hour(tmp_path: Path) -> None:
    builds = builds_on_page(PAGE)
    record_builds(tmp_path, "https://user:secret@mirror.example/whl/", builds, now=1000.0)
    text = (tmp_path / "index" / "builds.json").read_text()
    assert "secret" not in text
    assert seen_builds(tmp_path, "https://mirror.example/whl") == builds
    assert seen_builds(tmp_path, "https://other.example/whl") == {}
    assert oct((tmp_path / "index" / "builds.json").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    "content",
    [
        "[not, json",
        '{"https://m.example/whl": {"at": 1, "builds": {"2.12.1": {"cu129": {"linux-64": [3]}}}}}',
        '{"https://m.example/whl": {"at": 1, "builds": {"2.12.1": {"rocm6": {"linux-64": []}}}}}',
        '{"https://m.example/whl": "nonsense"}',
        "[" * 5000 + "]" * 5000,
    ],
)
def test_a_planted_or_corrupt_cache_is_no_cache(tmp_path: Path, content: str) -> None:
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "builds.json").write_text(content)
    assert seen_builds(tmp_path, "https://m.example/whl") == {}


def test_a_fifo_in_the_cache_does_not_hang_plan(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    os.mkfifo(tmp_path / "index" / "builds.json")
    started = time.monotonic()
    assert seen_builds(tmp_path, "https://m.example/whl") == {}
    assert time.monotonic() - started < 5


def _torch_tree(root: Path) -> str:
    wheels = [
        WheelSpec("torch", "2.12.1+cu129", ("cp312-cp312-manylinux_2_28_x86_64",)),
        WheelSpec("torch", "2.12.1+cu130", ("cp315-cp315-manylinux_2_28_x86_64",)),
    ]
    write_index(root, "whl", wheels)
    return "whl"


def test_lock_reads_the_torch_index_page_once_an_hour(tmp_path: Path) -> None:
    served = tmp_path / "served"
    path = _torch_tree(served)
    cache = tmp_path / "cache"
    with serve(served) as url:
        base = f"{url}/{path}"
        assert builds_on_index(base) == {
            "2.12.1": {"cu129": {"linux-64": ["3.12"]}, "cu130": {"linux-64": ["3.15"]}}
        }
        remember_index_builds(base, cache, now=5000.0)
        first = (cache / "index" / "builds.json").read_bytes()
        # within the hour nothing is read again (even if the index changed meanwhile)
        remember_index_builds(base, cache, now=5000.0 + 60)
        assert (cache / "index" / "builds.json").read_bytes() == first
    assert seen_builds(cache, base)["2.12.1"]["cu129"] == {"linux-64": ["3.12"]}
    # an index that cannot be read keeps what was seen of it, and is not asked again
    # within the hour (nor is any other index's entry touched)
    dead = "http://127.0.0.1:9/whl"
    remember_index_builds(dead, cache, now=9999.0)
    recorded = json.loads((cache / "index" / "builds.json").read_bytes())
    assert recorded[base] == json.loads(first)[base]
    assert recorded[dead] == {"at": 9999.0, "builds": {}}


def test_a_torch_index_without_the_page_is_asked_once_an_hour(tmp_path: Path) -> None:
    """A mirror serving only ``<base>/<tag>/`` pages (no flat ``torch/`` page) answers
    404: recorded like a read, so each lock within the hour sends no request (and loads
    no HTTP client); the builds seen before are kept."""
    served = tmp_path / "served"
    _torch_tree(served)
    cache = tmp_path / "cache"
    with serve(served) as url:
        base = f"{url}/nowhere"
        record_builds(cache, base, SEEN_2_14_CU129, now=1000.0)
        remember_index_builds(base, cache, now=5000.0)
        assert seen_builds(cache, base) == SEEN_2_14_CU129
        assert json.loads((cache / "index" / "builds.json").read_bytes())[base]["at"] == 5000.0
    # within the hour nothing is asked: the server is gone, and a failed request would
    # be recorded with its time
    remember_index_builds(base, cache, now=5000.0 + 3599)
    assert json.loads((cache / "index" / "builds.json").read_bytes())[base]["at"] == 5000.0
    remember_index_builds(base, cache, now=5000.0 + 3601)  # an hour on: asked again
    assert json.loads((cache / "index" / "builds.json").read_bytes())[base]["at"] == 8601.0


def test_a_fake_resolver_never_sends_lock_to_the_network(tmp_path: Path) -> None:
    spec = parse_spec_text(
        '[project]\nname = "t"\n[stack]\npython = "3.12"\n[targets.cpu]\ngpu = "none"\n',
        file="gpuenv.toml",
        kb=knowledge_base(),
    ).spec
    options = LockOptions(cache_dir=tmp_path)
    project._remember_index_builds(object(), spec, options, knowledge_base())  # type: ignore[arg-type]
    assert not (tmp_path / "index").exists()


# --- plan ---------------------------------------------------------------------------------------


def _plan(stack: str, target: str, seen: dict[str, dict[str, dict[str, list[str]]]]) -> TargetPlan:
    text = f'[project]\nname = "t"\n[stack]\n{stack}\n[targets.t0]\n{target}\n'
    spec = parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec
    return make_plan(spec, knowledge_base(), seen_builds=seen).target("t0")


SEEN_2_14_CU129 = {"2.14.1": {"cu129": {"linux-64": ["3.11", "3.12", "3.13"]}}}


def test_plan_takes_a_build_only_the_index_shows_and_says_so() -> None:
    plan = _plan('python = "3.12"', 'gpu = "RTX 5090"\ndriver = "575.51.03"', SEEN_2_14_CU129)
    assert (plan.torch, plan.cu_tag) == ("2.14.1", "cu129")  # not the data's 2.13.0 cu129
    chosen = next(r for r in plan.reasons if r.startswith("cu129 chosen"))
    assert chosen.endswith("(seen on the index, not in the knowledge base)")
    # the arch list is the nearest release's cu129 (the lock reads the wheel's own)
    assert plan.arch_list == ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0+PTX")
    (fact,) = plan.unverified
    assert fact.fact == "torch 2.14.1 cu129 build (linux-64)"
    assert "download.pytorch.org/whl/torch/" in fact.where and "series 2.13" in fact.where


def test_without_the_cache_plan_keeps_to_the_data() -> None:
    plan = _plan('python = "3.12"', 'gpu = "RTX 5090"\ndriver = "575.51.03"', {})
    assert (plan.torch, plan.cu_tag) == ("2.13.0", "cu129")


def test_a_seen_build_keeps_its_own_pythons() -> None:
    with pytest.raises(NoCompatiblePlan):
        _plan(
            'python = "3.14"\ntorch = "2.14.*"',
            'gpu = "RTX 5090"\ndriver = "575.51.03"',
            SEEN_2_14_CU129,
        )


def test_plan_takes_a_python_only_the_index_shows() -> None:
    seen = {"2.12.1": {"cu130": {"linux-64": ["3.12", "3.15"]}}}
    plan = _plan('python = "3.15"\ntorch = "2.12.*"', 'gpu = "H100"\ndriver = "580.65.06"', seen)
    assert (plan.torch, plan.cu_tag, plan.python, plan.pypi_default) == (
        "2.12.1",
        "cu130",
        "3.15",
        False,
    )
    assert any("(seen on the index, not in the knowledge base)" in r for r in plan.reasons)
    # the other builds of 2.12.1 were not seen with cp315: they keep the data's Pythons
    assert any(r.startswith("cu126: its wheels are for Python >=3.10,<3.15") for r in plan.reasons)


def test_a_release_the_data_lacks_is_not_invented() -> None:
    seen = {"2.16.0": {"cu132": {"linux-64": ["3.12"]}}, "bogus": {"cu130": {"linux-64": []}}}
    plan = _plan('python = "3.12"', 'gpu = "H100"\ndriver = "595.45.04"', seen)
    assert plan.torch == "2.15.0"


def test_gpuenv_plan_reads_what_the_last_lock_saw(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    spec = write_spec(
        '[project]\nname = "t"\n[stack]\npython = "3.12"\n'
        '[targets.rtx]\ngpu = "RTX 5090"\ndriver = "575.51.03"\n'
    )
    before = cli("-f", str(spec), "plan", "--json")
    assert before.json()["targets"]["rtx"]["torch"] == "2.13.0"
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "gpuenv"
    record_builds(cache, "https://download.pytorch.org/whl", SEEN_2_14_CU129, now=time.time())
    after = cli("-f", str(spec), "plan", "--json").json()["targets"]["rtx"]
    assert (after["torch"], after["cu_tag"]) == ("2.14.1", "cu129")
    assert after["unverified"][0]["why"].startswith("seen on the index")
    # a mirror named in the spec is another index: what PyTorch's showed does not apply
    mirrored = write_spec(
        '[project]\nname = "t"\n[stack]\npython = "3.12"\n'
        '[pip]\ntorch-index = "https://mirror.example/whl"\n'
        '[targets.rtx]\ngpu = "RTX 5090"\ndriver = "575.51.03"\n',
        "mirror.toml",
    )
    assert cli("-f", str(mirrored), "plan", "--json").json()["targets"]["rtx"]["torch"] == "2.13.0"


def test_lock_keeps_only_what_the_data_lacks(tmp_path: Path) -> None:
    kb = knowledge_base()
    listed = {
        # everything the data has of 2.14.1 on linux-64, and two things it lacks
        "2.14.1": {
            "cu126": {"linux-64": ["3.10", "3.11", "3.12", "3.13", "3.14"]},
            "cu130": {"linux-64": ["3.10", "3.12", "3.15"]},  # cp315 is in the data
            "cu129": {"linux-64": ["3.12"]},  # not in the data
        },
        "2.12.1": {"cu130": {"linux-64": ["3.12", "3.15"]}},  # cp315 is not
        "2.99.0": {"cu132": {"linux-64": ["3.12"]}},  # a release the data does not know
    }
    assert unknown_builds(kb, listed) == {
        "2.14.1": {"cu129": {"linux-64": ["3.12"]}},
        "2.12.1": {"cu130": {"linux-64": ["3.15"]}},
    }
    served = tmp_path / "served"
    write_index(
        served,
        "whl",
        [
            WheelSpec("torch", "2.12.1+cu130", ("cp312-cp312-manylinux_2_28_x86_64",)),
            WheelSpec("torch", "2.12.1+cu129", ("cp312-cp312-manylinux_2_28_x86_64",)),
        ],
    )
    with serve(served) as url:
        remember_index_builds(
            f"{url}/whl", tmp_path, 10.0, keep=lambda found: unknown_builds(kb, found)
        )
    # 2.12.1 cu129 is in the data (off the matrix), its cu130 cp312 wheel too: nothing
    # to keep, but the look is recorded (no second read within the hour)
    assert seen_builds(tmp_path, f"{url}/whl") == {}
    assert "builds" in (tmp_path / "index" / "builds.json").read_text()
