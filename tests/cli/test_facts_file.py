"""A user's facts file: the data files' format, merged over the shipped knowledge base."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

SPEC = '[project]\nname = "f"\n[stack]\npython = "3.12"\ntorch = "{torch}"\n[targets.t]\n{target}\n'

FACTS = """schema = 1

[[series]]
minor = "2.16"
python = ">=3.11,<3.16"
source = "https://github.com/pytorch/pytorch/releases/tag/v2.16.0"
checked = 2027-01-05
releases = [{ torch = "2.16.0", torchvision = "0.29.2", pypi_default = "cu132" }]

[[series.builds]]
tag = "cpu"
source = "https://download.pytorch.org/whl/cpu/torch/"
checked = 2027-01-05

[[series.builds]]
tag = "cu132"
arch = ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
cudnn = "9.30.0.1"
source = "https://github.com/pytorch/pytorch/blob/release/2.16/.ci/manywheel/build_cuda.sh"
checked = 2027-01-05
"""


@pytest.fixture
def facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from gpuenv import _settings

    path = tmp_path / "facts.toml"
    monkeypatch.setenv("GPUENV_FACTS", str(path))
    # The CLI sets this process-wide; restored after the test so later tests in this
    # process do not read this test's (often invalid) facts file.
    monkeypatch.setattr(_settings, "facts_file", _settings.facts_file)
    return path


def test_a_release_from_the_facts_file_is_planned_and_says_where_it_came_from(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path], facts: Path
) -> None:
    spec = write_spec(SPEC.format(torch="2.16.*", target='gpu = "H100"\ndriver = "595.58.03"'))
    before = cli("-f", str(spec), "plan", "--json")
    assert before.code == 3
    assert "newer than this gpuenv's knowledge, which stops at 2.15" in before.out
    facts.write_text(FACTS)
    result = cli("-f", str(spec), "plan", "--json")
    assert result.code == 0, result.out + result.err
    target = result.json()["targets"]["t"]
    assert (target["torch"], target["cu_tag"], target["cudnn"]) == ("2.16.0", "cu132", "9.30.0.1")
    assert any(f"(from your facts file {facts})" in r for r in target["reasons"])


def test_the_default_path_is_under_xdg_config_home(
    cli: Callable[..., CliResult],
    write_spec: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "config"
    (config / "gpuenv").mkdir(parents=True)
    (config / "gpuenv" / "facts.toml").write_text(FACTS)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    spec = write_spec(SPEC.format(torch="*", target='gpu = "none"'))
    result = cli("-f", str(spec), "plan", "--json")
    assert result.code == 0, result.err
    assert result.json()["targets"]["t"]["torch"] == "2.16.0"


def test_an_entry_with_the_same_key_replaces_the_shipped_one(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path], facts: Path
) -> None:
    # The user's 2.15 series: Python 3.12 only and no CUDA build at all.
    replaced = FACTS.replace('"2.16"', '"2.15"').replace("2.16.0", "2.15.0")
    replaced = replaced.replace(">=3.11,<3.16", ">=3.12,<3.13")
    facts.write_text(replaced)
    spec = write_spec(SPEC.format(torch="2.15.*", target='gpu = "none"'))
    result = cli("-f", str(spec), "plan", "--json")
    assert result.code == 0, result.err
    reasons = result.json()["targets"]["t"]["reasons"]
    assert any("supports >=3.12,<3.13" in r for r in reasons)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("schema = 1\n[[series]]\nminor = 2.16\n", ":3: series.0.minor"),
        ("schema = 1\n[[gpu]]\nname = 'X'\ncc = 'nine'\n", "series"),
        ("not toml [", "not valid TOML"),
        ("schema = 7\n", "schema: must be 1"),
    ],
)
def test_an_invalid_facts_file_is_refused_naming_the_file_and_key(
    cli: Callable[..., CliResult],
    write_spec: Callable[[str], Path],
    facts: Path,
    text: str,
    expected: str,
) -> None:
    facts.write_text(text)
    spec = write_spec(SPEC.format(torch="*", target='gpu = "none"'))
    result = cli("-f", str(spec), "plan")
    assert result.code == 2, result.err
    assert str(facts) in result.err
    if expected != "series":
        assert expected in result.err
    else:
        assert "gpu.0.cc" in result.err


def test_the_facts_file_is_part_of_the_knowledge_digest(facts: Path) -> None:
    """Locks record the digest in each target's input hash: editing the facts file makes
    them stale, as editing the shipped data does."""
    from gpuenv.knowledge._data import data_digest

    assert data_digest(facts) == data_digest(None)  # no file yet: no facts
    facts.write_text(FACTS)
    first = data_digest(facts)
    assert first != data_digest(None)
    facts.write_text(FACTS.replace("9.30.0.1", "9.30.0.2"))
    assert data_digest(facts) != first


def test_plan_tells_of_a_newer_torch_the_last_lock_saw(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path], tmp_path: Path
) -> None:
    import os

    from gpuenv.lock.seen import record_newest_torch

    cache = Path(os.environ["XDG_CACHE_HOME"]) / "gpuenv"
    record_newest_torch(cache, "https://idx.example/simple", "2.16.0", now=0.0)
    spec = write_spec(SPEC.format(torch="*", target='gpu = "GB200"\ndriver = "590.44.01"'))
    result = cli("-f", str(spec), "plan")
    assert result.code == 0, result.err
    assert "note: torch 2.16.0 is on the index (seen by the last 'gpuenv lock')" in result.out
    assert "unverified facts this rests on:" in result.out
    assert "torch 2.15.0 cu130 build (linux-aarch64)" in result.out
    as_json = cli("-f", str(spec), "plan", "--json").json()
    assert as_json["notices"] and as_json["targets"]["t"]["unverified"]


@pytest.mark.parametrize(
    ("edit", "line", "expected"),
    [
        (
            ("cu132", "cu999"),
            16,
            "series.0.builds.1.tag: cu999 names CUDA 99.9, which neither the shipped data "
            "nor this file knows",
        ),
        (
            ('pypi_default = "cu132"', 'pypi_default = "cu126"'),
            8,
            "series.0.releases.0.pypi_default: cu126 is not a linux-64 build of torch 2.16.0 "
            "here (builds: cpu, cu132)",
        ),
        (
            ("", FACTS.removeprefix("schema = 1\n")),
            24,
            "series.1.minor: 2.16 is already an entry of this file (series.0)",
        ),
    ],
)
def test_entries_that_refer_to_nothing_are_refused_naming_the_line(
    cli: Callable[..., CliResult],
    write_spec: Callable[[str], Path],
    facts: Path,
    edit: tuple[str, str],
    line: int,
    expected: str,
) -> None:
    """A facts file is believed only once its entries fit together: a build whose CUDA the
    data does not know planned as "needs driver >= None"; a PyPI default naming no build
    was repeated in reasons as fact; a second entry with the same key was silently lost."""
    old, new = edit
    facts.write_text(FACTS.replace(old, new) if old else FACTS + "\n" + new)
    spec = write_spec(SPEC.format(torch="2.16.*", target='gpu = "H100"\ndriver = "595.58.03"'))
    result = cli("-f", str(spec), "plan")
    assert result.code == 2, result.err
    assert f"{facts}:{line}: {expected}" in result.err, result.err
    assert "None" not in result.err


def test_a_facts_file_that_is_no_file_or_nests_without_end_is_exit_2(
    cli: Callable[..., CliResult],
    write_spec: Callable[[str], Path],
    facts: Path,
) -> None:
    """Read on every plan: a FIFO hung it, /dev/zero grew without end, deep nesting was
    exit 70 (RecursionError in the TOML parser)."""
    import os

    spec = write_spec(SPEC.format(torch="*", target='gpu = "none"'))
    os.mkfifo(facts)
    result = cli("-f", str(spec), "plan")
    assert result.code == 2 and str(facts) in result.err and "FIFO" in result.err, result.err
    facts.unlink()
    facts.symlink_to("/dev/zero")
    result = cli("-f", str(spec), "plan")
    assert result.code == 2 and str(facts) in result.err, result.err
    facts.unlink()
    facts.write_text("a = " + "[" * 100_000)
    result = cli("-f", str(spec), "plan")
    assert result.code == 2, result.err
    assert f"{facts}: not valid TOML: nested too deeply" in result.err
