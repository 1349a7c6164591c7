"""The lock-value fuzz (issue 24, item 9): every string field of a real lock replaced by
hostile values, its content hash recomputed (what someone who knows the format does),
then ``lock --check``, ``install --frozen`` and every export. Each try must hold:
no exit 70 or traceback; a refused target refused by every reader (exit 2); an accepted
value written by each export so that the export still parses (bash -n, TOML, YAML, the
Dockerfile parser, pip's requirement syntax) and nothing named PWNED is ever created.

The default run takes a sample; ``-m slow`` (or ``GPUENV_TEST_SLOW=1``) the whole
product and prints the counts (tries / held).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from gpuenv.errors import FileFormatError
from gpuenv.lock import _integrity
from gpuenv.lock.format import parse_lock_text
from tests.conftest import CliResult
from tests.e2e.conftest import lock_with_conda
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import PkgIndex

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HOSTILE = (
    "3.11;touch PWNED",
    'x" or "1"=="1',
    "${HOME}",
    "--upload-pack=touch PWNED",
    "git+--upload-pack=touch${IFS}PWNED",
    "-rf",
    "../../x",
    "1" * 5000,
    "1.0/../../x",
    "$(touch PWNED)",
    "`touch PWNED`",
    "a'b\"c\\d",
    "# comment",
    "a b --index-url http://evil.invalid/",
    "/etc/passwd",
    "http://[::1",
    "",
    "GPUENV_PIP",  # the Dockerfile heredoc's terminator
)
SAMPLE_FIELDS = ("platform", "stack.python", "pip[0].url", "pip[0].version", "hardware.source")
SAMPLE_VALUES = (*HOSTILE[:4], "GPUENV_PIP")
FORMATS = ("pylock", "requirements", "environment-yml", "dockerfile", "notes", "slurm")

Path_ = tuple[str | int, ...]


@pytest.fixture(scope="module")
def locked(
    tmp_path_factory: pytest.TempPathFactory, pkgindex: PkgIndex, local_channel: LocalChannel
) -> tuple[str, str]:
    directory = tmp_path_factory.mktemp("fuzz")
    return lock_with_conda(directory, pkgindex, local_channel)


def _fields(value: Any, at: Path_ = ()) -> Iterator[Path_]:
    """Every string leaf (the first entry of each list stands for the rest)."""
    if isinstance(value, str):
        yield at
    elif isinstance(value, dict):
        for key, child in value.items():
            if key != _integrity.HASH_KEY:
                yield from _fields(child, (*at, key))
    elif isinstance(value, list) and value:
        yield from _fields(value[0], (*at, 0))


def _name(path: Path_) -> str:
    return ".".join(str(p) for p in path).replace(".0", "[0]")


def _set(raw: dict[str, Any], path: Path_, value: str) -> None:
    node: Any = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def _rehashed(raw: dict[str, Any]) -> str:
    """The edited lock as text, each target's content hash recomputed (what someone who
    knows the format does)."""
    for name, table in raw["targets"].items():
        table[_integrity.HASH_KEY] = _integrity.content_hash(name, table)
    return tomlkit.dumps(raw)


def _parses(fmt: str, text: str, tmp: Path) -> str | None:
    """Why an export does not parse back (None: it does)."""
    try:
        if fmt == "pylock":
            from packaging.pylock import Pylock

            Pylock.from_dict(tomllib.loads(text)).validate()
        elif fmt == "environment-yml":
            import yaml

            yaml.safe_load(text)
        elif fmt == "requirements":
            from packaging.requirements import Requirement

            for line in text.splitlines():
                if line and not line.startswith(("#", "--")):
                    Requirement(line.split(" --hash=")[0])
        elif fmt == "dockerfile":
            import dockerfile

            commands = dockerfile.parse_string(text)
            runs = " ".join(" ".join(c.value) for c in commands if c.cmd == "RUN")
            if "PWNED" in runs:
                return "a RUN holds a value of the lock"
        elif fmt == "slurm":
            script = tmp / "job.sh"
            script.write_text(text)
            check = subprocess.run(["bash", "-n", script], capture_output=True, check=False)
            if check.returncode:
                return check.stderr.decode()[-200:]
    except Exception as exc:  # noqa: BLE001 - any failure to parse is the finding
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def _fuzz(
    locked: tuple[str, str],
    tmp_path: Path,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
    fields: tuple[str, ...] | None,
    values: tuple[str, ...],
) -> dict[str, int]:
    spec_text_, lock_text = locked
    project = tmp_path / "p"
    project.mkdir()
    (project / "gpuenv.toml").write_text(spec_text_)
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    spec = str(project / "gpuenv.toml")
    pristine = tomllib.loads(lock_text)
    counts = {"tries": 0, "held": 0, "refused": 0, "accepted": 0}
    failures: list[str] = []

    def hold(ok: bool, what: str) -> None:
        counts["tries"] += 1
        counts["held" if ok else "failed"] = counts.get("held" if ok else "failed", 0) + 1
        if not ok:
            failures.append(what)

    for target in sorted(pristine["targets"]):
        table = pristine["targets"][target]
        for path in _fields(table):
            name = _name(path)
            if fields is not None and name not in fields:
                continue
            for value in values:
                raw = copy.deepcopy(pristine)
                _set(raw["targets"][target], path, value)
                text = _rehashed(raw)
                (project / "gpuenv.lock").write_text(text)
                where = f"{target}.{name} = {json.dumps(value[:40])}"
                try:
                    damaged = target in parse_lock_text(text).damaged
                except FileFormatError:
                    damaged = True
                check = cli("-f", spec, "lock", "--check", "--target", target)
                hold(check.code != 70 and "Traceback" not in check.err, f"check {where}")
                if damaged:
                    counts["refused"] += 1
                    install = cli("-f", spec, "install", "--target", target, "--frozen")
                    hold(install.code == 2, f"install --frozen {where}: {install.code}")
                    hold(not (tmp_path / "store" / "prefixes").exists(), f"built {where}")
                    continue
                counts["accepted"] += 1
                for fmt in FORMATS:
                    out = cli("-f", spec, "export", fmt, "--target", target)
                    ok = out.code in (0, 2) and "Traceback" not in out.err
                    problem = _parses(fmt, out.out, tmp_path) if out.code == 0 else None
                    hold(ok and problem is None, f"export {fmt} {where}: {out.code} {problem}")
    hold(not list(tmp_path.rglob("PWNED")), "a PWNED file exists")
    print(json.dumps(counts))  # shown with -s: the closing note's counts
    assert not failures, failures[:20]
    return counts


def test_hostile_lock_values_are_refused_or_written_safely(
    locked: tuple[str, str],
    tmp_path: Path,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _fuzz(locked, tmp_path, cli, monkeypatch, SAMPLE_FIELDS, SAMPLE_VALUES)
    assert counts["refused"] > 10 and counts["accepted"] > 1


@pytest.mark.slow
def test_every_string_field_of_a_lock_with_every_hostile_value(
    locked: tuple[str, str],
    tmp_path: Path,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _fuzz(locked, tmp_path, cli, monkeypatch, None, HOSTILE)
    assert counts["tries"] > 1000


PIP_SIZES = (-1, "12", True, 1.5, 0, 1, 10**18, 2**64)


def test_hostile_pip_sizes_are_refused_or_fail_the_install_with_a_clear_word(
    locked: tuple[str, str],
    tmp_path: Path,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pip entry's ``size`` (a number, unlike the fields above), edited and its content
    hash recomputed: not a byte count is refused by every reader (exit 2); a wrong one
    fails the install before or at the download, naming the artifact, never exit 70,
    and nothing is built or left in the store."""
    spec_text_, lock_text = locked
    project = tmp_path / "p"
    project.mkdir()
    (project / "gpuenv.toml").write_text(spec_text_)
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    spec = str(project / "gpuenv.toml")
    pristine = tomllib.loads(lock_text)
    target = "cpu" if "cpu" in pristine["targets"] else sorted(pristine["targets"])[0]
    said = []
    for value in PIP_SIZES:
        raw = copy.deepcopy(pristine)
        first = raw["targets"][target]["pip"][0]
        first["size"] = value
        (project / "gpuenv.lock").write_text(_rehashed(raw))
        check = cli("-f", spec, "lock", "--check", "--target", target)
        assert check.code != 70 and "Traceback" not in check.err, (value, check.err)
        install = cli("-f", spec, "install", "--target", target, "--frozen")
        assert install.code not in (0, 70) and "Traceback" not in install.err, (value, install)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            assert install.code == 2 and "size" in install.err, (value, install.err)
        elif value < 10**9:  # less than the file: refused as it arrives, and why
            assert "does not match the sha256 in gpuenv.lock (it is longer than" in install.err
            assert first["url"].rsplit("/", 1)[-1] in install.err, (value, install.err)
        else:  # more than any disk: refused before anything is fetched
            assert "free under" in install.err, (value, install.err)
        assert not (tmp_path / "store" / "prefixes").exists() or not any(
            p for p in (tmp_path / "store" / "prefixes").iterdir() if not p.name.startswith(".")
        ), value
        said.append((value, install.code, install.err.strip().splitlines()[-2][:160]))
    print(json.dumps(said))
