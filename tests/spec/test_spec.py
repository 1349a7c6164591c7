from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuenv.errors import SpecError, UsageError
from gpuenv.knowledge import knowledge_base
from gpuenv.spec import json_schema, load_spec, parse_spec_text, parse_version_spec

REPO = Path(__file__).resolve().parents[2]

BASE = """[project]
name = "demo"

[stack]
python = "3.11"
torch = "2.4.*"

[targets.h100]
gpu = "H100"
driver = "550.54.15"
"""


def test_a_valid_spec_loads_with_defaults() -> None:
    loaded = parse_spec_text(BASE, file="gpuenv.toml", kb=knowledge_base())
    spec = loaded.spec
    assert spec.stack.cuda == "auto"
    assert spec.stack.driver_compat == "strict"
    assert spec.targets["h100"].platform is None  # the GPU's platform, else linux-64
    assert spec.stack.same_torch is True and spec.targets["h100"].torch is None
    assert spec.pip.dependencies == ()
    assert loaded.line("targets", "h100", "driver") == 10


def test_content_hash_ignores_comments_formatting_and_order() -> None:
    reordered = """# a comment
[targets.h100]
driver = "550.54.15"   # the cluster
gpu = "H100"

[stack]
torch = "2.4.*"
python = "3.11"

[project]
name = "demo"
"""
    a = parse_spec_text(BASE, file="a").content_hash
    b = parse_spec_text(reordered, file="b").content_hash
    assert a == b
    changed = parse_spec_text(BASE.replace("550.54.15", "550.54.14"), file="c").content_hash
    assert changed != a


def test_every_problem_is_reported_at_once() -> None:
    text = BASE.replace('python = "3.11"', 'pyhton = "3.11"').replace("550.54.15", "bad")
    with pytest.raises(SpecError) as caught:
        parse_spec_text(text, file="gpuenv.toml")
    paths = [p.path for p in caught.value.problems]
    assert "stack.pyhton" in paths
    assert "stack.python" in paths
    assert "targets.h100.driver" in paths
    assert all(p.line for p in caught.value.problems if p.path != "stack.python")


def test_misspelt_key_suggests_the_right_one() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec_text(BASE.replace("gpu =", "gup ="), file="gpuenv.toml")
    problem = next(p for p in caught.value.problems if p.path == "targets.h100.gup")
    assert problem.hint == "did you mean 'gpu'?"
    assert problem.render().startswith("gpuenv.toml:9: targets.h100.gup: unknown key")


def test_a_misspelt_dotted_table_header_is_located_on_its_line() -> None:
    """[target.h100] creates the table `target` implicitly: it had no line to report."""
    text = BASE.replace("[targets.h100]", "[target.h100]")
    with pytest.raises(SpecError) as caught:
        parse_spec_text(text, file="gpuenv.toml")
    problem = next(p for p in caught.value.problems if p.path == "target")
    line = text.splitlines().index("[target.h100]") + 1
    assert problem.render().startswith(f"gpuenv.toml:{line}: target: unknown key")


def test_knowledge_checks_run_only_with_a_knowledge_base() -> None:
    text = BASE.replace('gpu = "H100"', 'gpu = "H1000"')
    parse_spec_text(text, file="x")  # structurally fine
    with pytest.raises(SpecError, match="did you mean 'H100'"):
        parse_spec_text(text, file="x", kb=knowledge_base())


@pytest.mark.parametrize(
    ("text", "expected"),
    [("*", ""), ("2.4.1", "==2.4.1"), ("2.4.*", "==2.4.*"), (">=2.4,<2.6", "<2.6,>=2.4")],
)
def test_version_spec_forms(text: str, expected: str) -> None:
    assert str(parse_version_spec(text)) == expected


def test_unreadable_paths_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        load_spec(tmp_path / "missing.toml")
    with pytest.raises(UsageError, match="is a directory"):
        load_spec(tmp_path)


def test_schema_file_is_current() -> None:
    path = REPO / "schemas" / "gpuenv.schema.json"
    current = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    assert path.read_text(encoding="utf-8") == current, (
        "schemas/gpuenv.schema.json is stale: run `python tools/update_schemas.py`"
    )


def test_schema_forbids_unknown_keys_and_names_the_contract_keys() -> None:
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert {"project", "stack", "targets", "pip", "conda"} <= set(schema["properties"])
    stack = schema["$defs"]["Stack"]["properties"]
    assert {"python", "torch", "torchvision", "torchaudio", "cuda", "driver-compat"} <= set(stack)


@pytest.mark.parametrize(
    "example", sorted((REPO / "examples").glob("*/gpuenv.toml")), ids=lambda p: p.parent.name
)
def test_examples_validate_against_the_schema_models(example: Path) -> None:
    load_spec(example, kb=knowledge_base())
