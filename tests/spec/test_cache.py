"""The validated-spec cache: hits skip validation entirely (pydantic and spec._fast's
plain reading alike); anything odd is a miss."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuenv.errors import SpecError
from gpuenv.knowledge import knowledge_base
from gpuenv.spec import load_spec

SPEC = """[project]
name = "cached"
[stack]
python = "3.11"
torch = "2.4.*"
[targets.h100]
gpu = "H100"
driver = "550.54.15"
"""


def _load_in_subprocess(spec: Path, cache: Path) -> set[str]:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from gpuenv.knowledge import knowledge_base\n"
        "from gpuenv.spec import load_spec\n"
        f"loaded = load_spec({str(spec)!r}, kb=knowledge_base(), cache_dir=Path({str(cache)!r}))\n"
        "assert loaded.spec.targets['h100'].driver == '550.54.15'\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_a_cache_hit_never_validates(tmp_path: Path) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    cache = tmp_path / "cache"
    first = _load_in_subprocess(spec, cache)
    assert "gpuenv.spec._fast" in first, "first load validates (a valid spec: no pydantic)"
    assert "pydantic" not in first
    assert list((cache / "spec").glob("*.json")), "and remembers the result"
    second = _load_in_subprocess(spec, cache)
    assert not {"gpuenv.spec._fast", "pydantic"} & second, "second load reads the cache"
    spec.write_text(SPEC.replace("driver =", "driverr =").replace("[targets", "[target"))
    with pytest.raises(subprocess.CalledProcessError) as refused:
        _load_in_subprocess(spec, cache)
    assert "SpecError" in refused.value.stderr, "a mistake is the models' to explain"


def test_hit_and_miss_give_the_same_spec_and_hash(tmp_path: Path) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    cache = tmp_path / "cache"
    first = load_spec(spec, kb=knowledge_base(), cache_dir=cache)
    second = load_spec(spec, kb=knowledge_base(), cache_dir=cache)
    uncached = load_spec(spec, kb=knowledge_base())
    assert first.spec == second.spec == uncached.spec
    assert first.content_hash == second.content_hash == uncached.content_hash
    assert second.line("targets", "h100", "driver") == 8


def test_a_corrupt_entry_is_a_miss(tmp_path: Path) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    cache = tmp_path / "cache"
    load_spec(spec, kb=knowledge_base(), cache_dir=cache)
    for entry in (cache / "spec").glob("*.json"):
        entry.write_text("{not json")
    assert load_spec(spec, kb=knowledge_base(), cache_dir=cache).spec.project.name == "cached"
    entry = next((cache / "spec").glob("*.json"))
    assert json.loads(entry.read_text())["spec"]["project"]["name"] == "cached", "rewritten"


def test_invalid_specs_are_never_cached(tmp_path: Path) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC.replace("H100", "H1000"))
    cache = tmp_path / "cache"
    with pytest.raises(SpecError):
        load_spec(spec, kb=knowledge_base(), cache_dir=cache)
    assert not list(cache.rglob("*.json"))


def test_any_edit_is_a_miss(tmp_path: Path) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    cache = tmp_path / "cache"
    load_spec(spec, kb=knowledge_base(), cache_dir=cache)
    spec.write_text(SPEC.replace("H100", "H1000"))
    with pytest.raises(SpecError, match="H1000"):
        load_spec(spec, kb=knowledge_base(), cache_dir=cache)
