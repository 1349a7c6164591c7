"""gpuenv.lock on disk: deterministic bytes, round trips, versioning."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from gpuenv.errors import FileFormatError
from gpuenv.lock.format import LATEST, parse_lock_text, read_lock, render_lock, write_lock
from gpuenv.lock.model import (
    CondaPackage,
    Lock,
    LockedHardware,
    LockedTarget,
    PipPackage,
    StackSummary,
)


def _target(
    name: str, pip: tuple[PipPackage, ...], conda: tuple[CondaPackage, ...] = ()
) -> LockedTarget:
    return LockedTarget(
        name=name,
        input_hash="sha256:" + "0" * 64,
        platform="linux-64",
        hardware=LockedHardware(False, "H100", ("9.0",), "550.54.15", "12.4", "declared"),
        stack=StackSummary(
            "3.11",
            "12.4",
            "cu124",
            "2.4.1",
            "0.19.1",
            None,
            "9.1.0.70",
            "2.20.5",
            ("8.0", "9.0"),
            "https://download.pytorch.org/whl/cu124",
        ),
        virtual_packages={"__cuda": "12.4", "__cuda_arch": "9.0", "__glibc": "2.28"},
        pip=pip,
        conda=conda,
    )


PIP = tuple(
    PipPackage(n, v, f"https://idx.invalid/{n}-{v}.whl", c * 64, "https://idx.invalid", req)
    for n, v, c, req in [
        ("torch", "2.4.1+cu124", "a", ("filelock", "typing-extensions")),
        ("filelock", "3.15.4", "b", ()),
        ("typing-extensions", "4.12.2", "c", ()),
        ("torchvision", "0.19.1+cu124", "d", ("torch",)),
    ]
)
CONDA = (
    CondaPackage(
        "python",
        "3.11.9",
        "h_0",
        0,
        "conda-forge",
        "linux-64",
        "https://c.invalid/python.conda",
        "e" * 64,
        "f" * 32,
        ("libzlib >=1.2",),
        ("pip >=20",),
        123,
    ),
    CondaPackage(
        "cuda-nvcc",
        "12.4.131",
        "h_1",
        1,
        "conda-forge",
        "linux-64",
        "https://c.invalid/nvcc.conda",
        "1" * 64,
        "2" * 32,
    ),
)


def sample() -> Lock:
    return Lock(
        "sha256:" + "9" * 64, {"h100": _target("h100", PIP, CONDA), "cpu": _target("cpu", PIP[:2])}
    )


def test_shuffled_input_gives_identical_bytes() -> None:
    expected = render_lock(sample())
    rng = random.Random(7)
    for _ in range(5):
        pip = list(PIP)
        rng.shuffle(pip)
        conda = list(CONDA)
        rng.shuffle(conda)
        targets = {
            "cpu": _target("cpu", tuple(reversed(PIP[:2]))),
            "h100": _target("h100", tuple(pip), tuple(conda)),
        }
        assert render_lock(Lock(sample().spec_hash, targets)) == expected


def test_read_then_write_returns_the_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "gpuenv.lock"
    write_lock(path, sample())
    first = path.read_bytes()
    lock = read_lock(path)
    assert lock is not None
    assert set(lock.targets) == {"h100", "cpu"}
    assert {p.name for p in lock.targets["h100"].pip} == {p.name for p in PIP}
    python = next(c for c in lock.targets["h100"].conda if c.name == "python")
    assert python.depends == ("libzlib >=1.2",)
    assert python.constrains == ("pip >=20",)
    assert write_lock(path, lock) is False, "same bytes: nothing rewritten"
    assert path.read_bytes() == first


def test_text_holds_the_contract_keys() -> None:
    text = render_lock(sample())
    assert text.startswith("# gpuenv.lock")
    assert f"lock-version = {LATEST}" in text
    assert (
        "[targets.h100]" in text
        and "[[targets.h100.pip]]" in text
        and "[[targets.h100.conda]]" in text
    )
    for key in (
        'name = "torch"',
        'version = "2.4.1+cu124"',
        "sha256 =",
        "md5 =",
        'build = "h_0"',
        "url =",
    ):
        assert key in text


def test_a_newer_lock_version_is_refused_clearly() -> None:
    text = render_lock(sample()).replace(f"lock-version = {LATEST}", "lock-version = 99")
    with pytest.raises(
        FileFormatError, match=rf"written by a newer gpuenv \(version 99, supports up to {LATEST}\)"
    ):
        parse_lock_text(text)


def test_damaged_locks_name_the_problem() -> None:
    with pytest.raises(FileFormatError, match="not valid TOML"):
        parse_lock_text("lock-version = ")
    with pytest.raises(FileFormatError, match="no lock-version"):
        parse_lock_text('spec-hash = "x"\n')
    bad = render_lock(sample()).replace("a" * 64, "not-a-hash", 1)
    with pytest.raises(FileFormatError, match="sha256"):
        parse_lock_text(bad)


def test_missing_lock_reads_as_none(tmp_path: Path) -> None:
    assert read_lock(tmp_path / "gpuenv.lock") is None


def test_lock_schema_file_is_current() -> None:
    import json

    from gpuenv.lock.format import json_schema

    path = Path(__file__).resolve().parents[2] / "schemas" / "gpuenv.lock.schema.json"
    assert path.read_text() == json.dumps(json_schema(), indent=2, sort_keys=True) + "\n", (
        "schemas/gpuenv.lock.schema.json is stale: run `python tools/update_schemas.py`"
    )


def test_changing_one_target_leaves_the_other_bytes_alone() -> None:
    lock = sample()
    changed = Lock(
        lock.spec_hash, {**lock.targets, "cpu": replace(lock.targets["cpu"], pip=PIP[:1])}
    )
    before = render_lock(lock).split("[targets.h100]")[1]
    after = render_lock(changed).split("[targets.h100]")[1]
    assert before == after


def test_awkward_strings_survive_the_emitter() -> None:
    import tomllib

    odd = 'quote " backslash \\ newline \n tab \t unicode é 日本 control \x01'
    conda = (replace(CONDA[0], depends=(odd,), channel='https://c.invalid/odd"channel'),)
    lock = Lock("sha256:" + "9" * 64, {"a.b": _target("a.b", PIP, conda)})
    text = render_lock(lock)
    parsed = tomllib.loads(text)
    assert parsed["targets"]["a.b"]["conda"][0]["depends"] == [odd]
    assert parse_lock_text(text).targets["a.b"].conda[0].depends == (odd,)
