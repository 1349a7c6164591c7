"""``cli._patterncode``: the console script keeps the engine's instructions of every
regular expression it compiles and hands them to ``_sre.compile`` the next time; the
patterns match as before, a damaged entry is compiled again, and a program that
imports gpuenv keeps the stock ``re``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuenv.cli import _patterncode

SPEC = '[project]\nname = "p"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n[targets.cpu]\ngpu = "none"\n'

PATTERNS = [
    (r"^(?P<name>[A-Za-z0-9._-]+)(?:\[(?P<extras>[^\]]*)\])?\s*(?P<spec>[<>=!~].*)?$", 0),
    (r"cu(\d+)(\d)$", re.IGNORECASE),
    (
        r"""
        (?P<major>\d+) \. (?P<minor>\d+)   # a version
        (?: \. (?P<micro>\d+) )?
     """,
        re.VERBOSE,
    ),
    (r"(?s)^.*?(?=\n\n|\Z)", 0),
    (rb"^\x7fELF", 0),
]
SAMPLES = ["torch[cuda]>=2.4", "CU124", "12.4.1", "a\nb\n\nc", "flash_attn", "2.4"]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The module's tables emptied and ``re`` put back as it was after the test."""
    import re._compiler as compiler  # type: ignore[import-not-found]

    monkeypatch.setattr(compiler, "compile", compiler.compile)
    monkeypatch.setattr(compiler, "_sre", compiler._sre)
    for name, value in (("_table", {}), ("_used", set()), ("_state", {})):
        monkeypatch.setattr(_patterncode, name, value)
    re.purge()
    yield
    re.purge()


def _compiled() -> list[re.Pattern[str] | re.Pattern[bytes]]:
    re.purge()  # through re._compiler again, not re's own in-memory cache
    return [re.compile(p, f) for p, f in PATTERNS]  # type: ignore[call-overload]


def _behaviour(patterns: list[re.Pattern[str] | re.Pattern[bytes]]) -> list[object]:
    out: list[object] = []
    for p in patterns:
        out.append((p.pattern, p.flags, p.groups, dict(p.groupindex)))
        for sample in SAMPLES:
            subject = sample.encode() if isinstance(p.pattern, bytes) else sample
            m = p.search(subject)  # type: ignore[arg-type]
            out.append(None if m is None else (m.span(), m.groups()))
    return out


def test_patterns_from_the_table_match_as_stock_ones(fresh: None, tmp_path: Path) -> None:
    stock = _behaviour(_compiled())
    _patterncode.install(tmp_path, "lock")
    first = _behaviour(_compiled())
    assert len(_patterncode._table) == len(PATTERNS)
    _patterncode.save()
    _patterncode._table.clear()
    _patterncode._state.pop("loaded")
    import re._parser as parser  # type: ignore[import-not-found]

    parsed: list[str] = []
    real_parse = parser.parse

    def counting(pattern: str, flags: int = 0) -> object:
        parsed.append(pattern)
        return real_parse(pattern, flags)

    parser.parse = counting
    try:
        second = _behaviour(_compiled())  # from the table read back
    finally:
        parser.parse = real_parse
    assert parsed == []  # nothing parsed: every pattern came from the table
    assert stock == first == second


def test_a_damaged_entry_is_compiled_again(fresh: None, tmp_path: Path) -> None:
    _patterncode.install(tmp_path, "lock")
    _compiled()
    key = (PATTERNS[1][0], int(PATTERNS[1][1]))
    flags, code, *rest = _patterncode._table[key]  # type: ignore[misc]
    _patterncode._table[key] = (flags, [999999, *code[1:]], *rest)  # not instructions
    re.purge()
    again = re.compile(PATTERNS[1][0], PATTERNS[1][1])  # refused by _sre: compiled anew
    match = again.fullmatch("cu124")
    assert match is not None and match.groups() == ("12", "4")
    assert _patterncode._table[key][1] == code  # written again, right


def _plan(root: Path) -> int:
    """How many patterns one `gpuenv plan` in ``root`` parsed after the table went in."""
    probe = (
        "import os, sys, re._parser as parser\n"
        "from gpuenv.cli import _patterncode, entry\n"
        "count = [0]\n"
        "real_parse = parser.parse\n"
        "install = _patterncode.install\n"
        "def counting(*args, **kwargs):\n"
        "    count[0] += 1\n"
        "    return real_parse(*args, **kwargs)\n"
        "def installing(*args):\n"
        "    parser.parse = counting\n"
        "    install(*args)\n"
        "_patterncode.install = installing\n"
        "real_exit = os._exit\n"
        "def done(code):\n"
        "    os.write(2, f'parsed {count[0]} exit {code}\\n'.encode())\n"
        "    real_exit(code)\n"
        "os._exit = done\n"
        "sys.argv = ['gpuenv', 'plan']\n"
        "entry()\n"
    )
    env = {**os.environ, "GPUENV_CACHE_DIR": str(root / "cache"), "GPUENV_HOME": str(root / "s")}
    env.pop("GPUENV_NO_CACHE", None)
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    line = [x for x in out.stderr.splitlines() if x.startswith("parsed ")]
    assert line and line[-1].endswith("exit 0"), out.stderr
    return int(line[-1].split()[1])


def test_the_second_run_parses_no_pattern_the_first_parsed(tmp_path: Path) -> None:
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    first = _plan(tmp_path)
    _plan(tmp_path)  # the spec and knowledge caches warm: the same path as the next
    assert first > 10
    assert _plan(tmp_path) == 0
    (path,) = (tmp_path / "cache" / "classcode").glob("re-code-*-plan.marshal")
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_program_importing_gpuenv_keeps_the_stock_re(tmp_path: Path) -> None:
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    probe = (
        "import re._compiler as compiler\n"
        "stock = compiler.compile\n"
        "from gpuenv.cli import main\n"
        "code = main(['plan'])\n"
        "print(code, compiler.compile is stock)\n"
    )
    env = {**os.environ, "GPUENV_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.stdout.split()[-2:] == ["0", "True"], out.stderr
