"""A seeded fuzz test over spec and lock text: mutations of real files (byte flips,
truncations, deletions, duplicated and swapped lines, deep nesting, odd Unicode and
invalid UTF-8) through ``plan``, ``lock --check`` and ``install --frozen``, in-process.
Never exit 70, never a traceback, never a hang (each case has a time limit).

The default run spends a few seconds per corpus; ``pytest -m fuzz`` runs the long
version (``GPUENV_FUZZ_SECONDS`` per corpus, default 60, ``GPUENV_FUZZ_SEED``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import spec_text
from tests.faults.conftest import Cli, Locked
from tests.fixtures.pkgindex.plugin import PkgIndex

REPO = Path(__file__).resolve().parents[2]
QUICK_SECONDS = 3.0
CASE_LIMIT = 10.0  # seconds: a case that takes longer is a hang
ODD = [
    "\ufeff",
    "\u202e",
    "\u0000",
    "\u00a0",
    "\u200b",
    "\uff15",
    "é",
    "\u0301",
    "\r",
    "\t",
    "\x1b[2J",
    "\U0001f600",
    "\\u0000",
    '"""',
    "'''",
    "[[",
    "{",
    "=",
    "#",
]


class Hang(Exception):
    pass


@contextmanager
def limit(seconds: float) -> Iterator[None]:
    def expire(_signum: int, _frame: object) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One to three mutations of ``data``."""
    for _ in range(rng.randint(1, 3)):
        data = rng.choice(MUTATORS)(rng, data)
    return data


def _flip(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    at = rng.randrange(len(data))
    return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def _delete(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + data[at + rng.randint(1, 40) :]


def _lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    if rng.random() < 0.5:
        lines.insert(i, lines[j])  # a duplicated line
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def _nest(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice([50, 500, 5000])
    kind = rng.choice(["[", "{a="])
    close = "]" if kind == "[" else "}"
    value = (kind * depth + ("1" if kind != "[" else "") + close * depth).encode()
    lines = data.split(b"\n")
    lines.insert(rng.randrange(len(lines) + 1), b"x = " + value)
    return b"\n".join(lines)


def _odd(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(ODD).encode() + data[at:]


def _bad_utf8(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    if rng.random() < 0.1:
        return data.decode("utf-8", "replace").encode("utf-16")
    return data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88"]) + data[at:]


def _digits(rng: random.Random, data: bytes) -> bytes:
    spots = [i for i, b in enumerate(data) if 48 <= b <= 57]
    if not spots:
        return data
    at = rng.choice(spots)
    return data[:at] + rng.choice([b"9999999999", b"-1", b"", b"0", b"1e400"]) + data[at + 1 :]


MUTATORS = [_flip, _truncate, _delete, _lines, _nest, _odd, _bad_utf8, _digits]


def _check(result: Cli, what: str, *, as_json: bool) -> None:
    assert result.code != 70, f"{what}: exit 70\n{result.err}{result.out}"
    assert "Traceback" not in result.err + result.out, what
    assert "internal error" not in result.err + result.out, what
    if as_json and result.out.strip():
        json.loads(result.out)


def _budget(quick: bool) -> float:
    return QUICK_SECONDS if quick else float(os.environ.get("GPUENV_FUZZ_SECONDS", "60"))


def _seed() -> int:
    return int(os.environ.get("GPUENV_FUZZ_SEED", "20240611"))


def _spec_corpus() -> list[bytes]:
    files = sorted((REPO / "examples").glob("*/gpuenv.toml"))
    files += sorted((REPO / "tests" / "fixtures" / "specs" / "invalid").glob("*.toml"))
    return [p.read_bytes() for p in files if p.stat().st_size < 50_000]


def fuzz_specs(
    run_cli: Callable[..., Cli], tmp_path: Path, pkgindex: PkgIndex, *, quick: bool
) -> int:
    rng = random.Random(_seed())
    corpus = [*_spec_corpus(), spec_text(pkgindex).encode()]
    path = tmp_path / "gpuenv.toml"
    cases, deadline = 0, time.monotonic() + _budget(quick)
    while time.monotonic() < deadline:
        data = mutate(rng, rng.choice(corpus))
        path.write_bytes(data)
        try:
            with limit(CASE_LIMIT):
                result = run_cli("-f", str(path), "plan", "--json")
        except Hang:
            raise AssertionError(f"plan hung on:\n{data!r}") from None
        _check(result, f"plan of {data[:2000]!r}", as_json=True)
        cases += 1
    return cases


def fuzz_locks(run_cli: Callable[..., Cli], project: Locked, *, quick: bool) -> dict[int, int]:
    rng = random.Random(_seed() + 1)
    original = project.lock.read_bytes()
    codes: dict[int, int] = {}
    deadline = time.monotonic() + _budget(quick)
    while time.monotonic() < deadline:
        data = mutate(rng, original)
        project.lock.write_bytes(data)
        for args in (
            ("lock", "--check", "--json"),
            ("install", "--frozen", "--target", "cpu", "--json"),
        ):
            try:
                with limit(CASE_LIMIT):
                    result = run_cli(*args)
            except Hang:
                raise AssertionError(f"{args[0]} hung on:\n{data!r}") from None
            codes[result.code] = codes.get(result.code, 0) + 1
            _check(result, f"{' '.join(args)} of {data[:3000]!r}", as_json=True)
    return codes


def test_fuzz_spec_text_quick(
    run_cli: Callable[..., Cli], tmp_path: Path, pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUENV_NO_CACHE", "1")
    assert fuzz_specs(run_cli, tmp_path, pkgindex, quick=True) >= 10


def test_fuzz_lock_text_quick(run_cli: Callable[..., Cli], project: Locked, fake_uv: Path) -> None:
    codes = fuzz_locks(run_cli, project, quick=True)
    assert sum(codes.values()) >= 10


@pytest.mark.fuzz
def test_fuzz_spec_text_long(
    run_cli: Callable[..., Cli], tmp_path: Path, pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUENV_NO_CACHE", "1")
    cases = fuzz_specs(run_cli, tmp_path, pkgindex, quick=False)
    print(f"spec fuzz: {cases} cases")


@pytest.mark.fuzz
def test_fuzz_lock_text_long(run_cli: Callable[..., Cli], project: Locked, fake_uv: Path) -> None:
    codes = fuzz_locks(run_cli, project, quick=False)
    print(f"lock fuzz: {sum(codes.values())} runs, exit codes {dict(sorted(codes.items()))}")
