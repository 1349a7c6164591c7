"""Bad and hostile inputs: each exits 2 naming the file (and the line where there is one),
writes nothing, and never hangs, executes the input or follows a link loop."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.importers.conftest import IMPORTS, TARGETS, Imported

BAD = IMPORTS / "bad"


def _import(cli: Callable[..., CliResult], tmp_path: Path, *paths: Path) -> CliResult:
    out = tmp_path / "out" / "gpuenv.toml"
    out.parent.mkdir(exist_ok=True)
    result = cli("import", *map(str, paths), *TARGETS["h100"], "-o", str(out), "--json")
    assert not out.exists(), "nothing is written on error"
    assert list(out.parent.iterdir()) == [], "not even a temporary file"
    return result


def _problems(result: CliResult) -> list[dict[str, object]]:
    assert result.code == 2, (result.code, result.out, result.err)
    error = json.loads(result.out)["error"]
    assert error["kind"] == "import"
    problems: list[dict[str, object]] = error["problems"]
    return problems


@pytest.mark.parametrize(
    ("name", "line", "text"),
    [
        ("truncated.yml", 7, "not valid YAML"),
        ("requirements.txt", 1, "binary file"),
        ("Dockerfile", 1, "no FROM instruction"),
        ("Makefile", None, "not an environment file gpuenv recognises"),
        ("latin1.yml", 3, "not UTF-8"),
    ],
)
def test_a_bad_file_exits_2_with_its_file_and_line(
    cli: Callable[..., CliResult], tmp_path: Path, name: str, line: int | None, text: str
) -> None:
    (problem,) = _problems(_import(cli, tmp_path, BAD / name))
    assert problem["file"] == name
    assert problem["line"] == line
    assert text in str(problem["message"])


def test_text_output_of_an_error_names_file_and_line(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    out = tmp_path / "gpuenv.toml"
    result = cli("import", str(BAD / "truncated.yml"), "--gpu", "none", "-o", str(out))
    assert result.code == 2
    assert "gpuenv: error: truncated.yml:7: not valid YAML" in result.err
    assert "Traceback" not in result.err


def test_an_existing_spec_is_not_overwritten_without_force(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    out = tmp_path / "gpuenv.toml"
    out.write_text("keep me")
    env = IMPORTS / "sd2022" / "environment.yaml"
    refused = cli("import", str(env), "--gpu", "none", "-o", str(out))
    assert refused.code == 2 and "already exists" in refused.err
    assert out.read_text() == "keep me"
    assert cli("import", str(env), "--gpu", "none", "-o", str(out), "--force").code == 0
    assert "[targets.cpu]" in out.read_text()


def test_an_unwritable_output_is_exit_2_not_a_crash(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = str(IMPORTS / "sd2022" / "environment.yaml")
    result = cli("import", env, "--gpu", "none", "-o", str(blocker / "gpuenv.toml"))
    assert result.code == 2, result.err
    assert "cannot write" in result.err and "Traceback" not in result.err


def test_flags_are_checked(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    env = str(IMPORTS / "sd2022" / "environment.yaml")
    out = ["-o", str(tmp_path / "x.toml")]
    assert cli("import", env, *out).code == 2  # no machine named
    assert "--driver" in cli("import", env, "--gpu", "H100", *out).err
    assert cli("import", env, "--gpu", "none", "--driver", "550.54.15", *out).code == 2
    assert cli("import", env, "--detect", "--gpu", "H100", *out).code == 2
    unknown = cli("import", env, "--gpu", "H1000", "--driver", "550.54.15", *out)
    assert unknown.code == 2 and "H100" in unknown.err
    # An empty --gpu was exit 3 ("unknown GPU ''"); a bad --target blamed the unwritten
    # x.toml:15 instead of the flag.
    empty = cli("import", env, "--gpu", " ", "--driver", "550.54.15", *out)
    assert empty.code == 2 and "--gpu names no GPU" in empty.err
    for name in ("a b", "cpu.previous", "x\x1b"):
        bad = cli("import", env, "--gpu", "none", "--target", name, *out)
        assert bad.code == 2 and "--target" in bad.err and "x.toml" not in bad.err, bad.err
    assert not (tmp_path / "x.toml").exists()


def test_an_impossible_target_exits_3_and_writes_nothing(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    out = tmp_path / "gpuenv.toml"
    env = IMPORTS / "sd2022" / "environment.yaml"
    result = cli(
        "import", str(env), "--gpu", "H100", "--driver", "450.80.02", "-o", str(out), "--json"
    )
    assert result.code == 3, result.out
    assert json.loads(result.out)["error"]["alternatives"]
    assert not out.exists()


# --- hostile inputs -------------------------------------------------------------------


def _hostile(tmp_path: Path, name: str, content: bytes | str) -> Path:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


HOSTILE = {
    "huge": ("requirements.txt", b"numpy==1.0\n" * 900_000, None, "too large"),
    "deep-flow-yaml": ("environment.yml", "dependencies: " + "[" * 50_000 + "]" * 50_000, 1, "YAML"),
    "deep-block-yaml": (
        "environment.yml",
        "dependencies:\n" + "".join("  " * i + "- a:\n" for i in range(1, 300)),
        33,
        "nested more than 64 deep",
    ),
    "alias-bomb": (
        "environment.yml",
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n"
            for i in range(8)
        )
        + "dependencies: [*i]\n",
        6,
        "alias bomb",
    ),
    "python-tag": (
        "environment.yml",
        "dependencies:\n  - !!python/object/apply:os.system ['touch PWNED']\n",
        2,
        "YAML tag",
    ),
    "deep-toml": ("pyproject.toml", "a = " + "[" * 100_000 + "]" * 100_000 + "\n", None, "TOML"),
    "deep-python": ("setup.py", "x = " + "(" * 200_000 + ")" * 200_000 + "\n", 1, "Python"),
    "nul-in-setup": ("setup.py", b"setup(name='x')\n\0\n", 2, "binary"),
    "not-utf8-requirements": ("requirements.txt", b"numpy==1.0\ncaf\xe9==1\n", 2, "not UTF-8"),
    "two-documents": ("environment.yml", "dependencies: [a]\n---\nb: 1\n", 2, "more than one"),
}  # fmt: skip


# One entry gpuenv cannot understand: listed under "not read" with its file and line, the
# rest of the file used (each was exit 2 for the whole repository).
NOT_READ = {
    "bad-requirement": ("requirements.txt", "numpy==1.0\nnumpy[==1\n", 2, "not a requirement"),
    "unknown-pip-option": ("requirements.txt", "--evil-option x\nnumpy==1.0\n", 1, "unknown pip option: --evil-option"),
    "bad-matchspec": ("environment.yml", "dependencies:\n  - '@@@'\n  - numpy=1.0\n", 2, "not a conda package"),
    "json-run": ("Dockerfile", "FROM python:3.10\nRUN [\"pip\", \"install\", 3]\nRUN pip install numpy==1.0\n", 2, "array of strings"),
    "unbalanced-quote": ("Dockerfile", "FROM python:3.10\nRUN echo 'oops\nRUN pip install numpy==1.0\n", 2, "cannot split the shell line"),
    "not-an-instruction": ("Dockerfile", "FROM python:3.10\n%%% what\nRUN pip install numpy==1.0\n", 2, "not a Dockerfile instruction"),
    "poetry-extras": ("pyproject.toml", "[tool.poetry.dependencies]\ntorch = { version = '2.4.1', extras = 7 }\nnumpy = '1.0'\n", 2, "extras must be a list"),
    "poetry-tilde": ("pyproject.toml", "[tool.poetry.dependencies]\ntorch = '~'\nnumpy = '1.0'\n", 2, "not a requirement: 'torch~'"),
    "ipv6-url": ("requirements.txt", "bar @ git+http://[::1\nnumpy==1.0\n", 1, "not a URL"),
    "pep621-not-text": ("pyproject.toml", "[project]\nname = 'p'\ndependencies = [7, 'numpy==1.0']\n", 3, "a requirement must be text"),
    # nested past the JSON reader's recursion: was an internal error (exit 70)
    "deep-json-run": ("Dockerfile", "FROM python:3.10\nRUN " + "[" * 100_000 + "]" * 100_000 + "\nRUN pip install numpy==1.0\n", 2, "not a JSON array"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(NOT_READ))
def test_an_entry_that_cannot_be_read_is_listed_and_the_rest_used(
    cli: Callable[..., CliResult], tmp_path: Path, case: str
) -> None:
    name, content, line, text = NOT_READ[case]
    path = _hostile(tmp_path, name, content)
    out = tmp_path / "g.toml"
    result = cli("import", str(path), "--gpu", "none", "-o", str(out), "--json")
    assert result.code == 0, result.out
    report = json.loads(result.out)
    (note,) = [a for a in report["assumptions"] if "not read" in a["why"]]
    assert note["file"] == f"{name}:{line}" and text in note["why"], note
    assert "numpy" in {e["package"] for e in report["kept"] + report["changed"]}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_are_refused_with_exit_2(
    cli: Callable[..., CliResult], tmp_path: Path, case: str
) -> None:
    name, content, line, text = HOSTILE[case]
    path = _hostile(tmp_path, name, content)
    started = time.monotonic()
    (problem,) = _problems(_import(cli, tmp_path, path))
    assert time.monotonic() - started < 20, "bounded work"
    assert problem["file"] == name and problem["line"] == line, problem
    assert text in str(problem["message"]), problem
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_shell_in_a_requirement_is_noted_not_run(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    path = _hostile(tmp_path, "requirements.txt", f"numpy==1.26.4\n$(touch {marker})\n")
    result = cli("import", str(path), "--gpu", "none", "-o", str(tmp_path / "g.toml"), "--json")
    assert result.code == 0, result.out
    assert not marker.exists()
    notes = [e["why"] for e in json.loads(result.out)["assumptions"]]
    assert any("environment variables are not expanded" in n for n in notes)


def test_setup_py_is_never_executed(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    code = (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from setuptools import setup\n"
        "setup(name='x', install_requires=['numpy==1.26.4', 'torch==2.4.1'])\n"
    )
    path = _hostile(tmp_path, "setup.py", code)
    result = cli("import", str(path), "--gpu", "none", "-o", str(tmp_path / "g.toml"), "--json")
    assert result.code == 0, result.out
    assert not marker.exists()
    assert "numpy" in {e["package"] for e in json.loads(result.out)["kept"]}


def test_a_fifo_is_refused_without_blocking(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    os.mkfifo(folder / "requirements.txt")
    (problem,) = _problems(_import(cli, tmp_path, folder / "requirements.txt"))
    assert "not a regular file" in str(problem["message"])


def test_symlink_loops_in_a_folder_end(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(IMPORTS / "sd2022", repo)
    (repo / "docker").symlink_to(repo)  # a folder linking to its parent
    (repo / "env").symlink_to(repo / "env")  # a link to itself
    (repo / "requirements-loop.txt").symlink_to(repo / "requirements-loop2.txt")
    (repo / "requirements-loop2.txt").symlink_to(repo / "requirements-loop.txt")
    (repo / "Dockerfile").symlink_to(repo / "missing")
    started = time.monotonic()
    result = cli("import", str(repo), "--gpu", "none", "-o", str(tmp_path / "g.toml"), "--json")
    assert time.monotonic() - started < 20
    assert result.code == 0, result.out
    skipped = " ".join(e["why"] for e in json.loads(result.out)["assumptions"])
    assert "requirements-loop.txt not imported" in skipped
    assert "Dockerfile not imported" in skipped


def test_a_symlink_loop_named_directly_is_refused(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    loop = tmp_path / "in" / "requirements.txt"
    loop.parent.mkdir()
    loop.symlink_to(loop)
    (problem,) = _problems(_import(cli, tmp_path, loop))
    assert "symbolic link loop" in str(problem["message"])


def test_include_cycles_and_depth_are_bounded(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("-r b.txt\nnumpy==1.26.4\n")
    (folder / "b.txt").write_text("-r a.txt\ntorch==2.4.1\n")
    out = tmp_path / "g.toml"
    cycle = cli("import", str(folder / "a.txt"), "--gpu", "none", "-o", str(out), "--json")
    assert cycle.code == 0, cycle.out
    for i in range(12):
        (folder / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (folder / "r12.txt").write_text("torch==2.4.1\n")
    deep = cli("import", str(folder / "r0.txt"), "--gpu", "none", "-o", str(out), "--force")
    assert deep.code == 0, deep.err
    assert "not read: includes nested more than 8 deep (r8.txt:1 -r r9.txt)" in deep.out


def test_windows_line_endings_and_a_byte_order_mark_are_read(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = _hostile(tmp_path, "requirements.txt", b"\xef\xbb\xbftorch==2.4.1\r\nnumpy==1.26.4\r\n")
    result = cli("import", str(path), "--gpu", "none", "-o", str(tmp_path / "g.toml"), "--json")
    assert result.code == 0, result.out
    report = json.loads(result.out)
    assert {"torch", "numpy"} <= {e["package"] for e in report["kept"] + report["changed"]}


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be"])
def test_a_utf16_file_with_its_byte_order_mark_is_read(
    cli: Callable[..., CliResult], tmp_path: Path, codec: str
) -> None:
    # Windows PowerShell 5's '>' ('conda env export > environment.yml') writes UTF-16
    # with a byte-order mark: it was refused as "a binary file, not text (NUL byte)".
    text = "name: paper\r\ndependencies:\r\n  - python=3.9\r\n  - pytorch=1.13.1\r\n"
    data = text.encode(codec) if codec == "utf-16" else b"\xfe\xff" + text.encode(codec)
    path = _hostile(tmp_path, "environment.yml", data)
    result = cli("import", str(path), "--gpu", "none", "-o", str(tmp_path / "g.toml"), "--json")
    assert result.code == 0, result.out
    report = json.loads(result.out)
    assert "torch" in {e["package"] for e in report["kept"] + report["changed"]}
    no_bom = _hostile(tmp_path, "requirements.txt", "torch==2.4.1\n".encode("utf-16-le"))
    refused = cli("import", str(no_bom), "--gpu", "none", "-o", str(tmp_path / "h.toml"))
    assert refused.code == 2 and "NUL byte" in refused.err  # no mark: no guess


# --- regressions found by mutating the fixtures (bench-free fuzzing; see the report) ----


def test_an_unparsable_python_requires_is_noted(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = _hostile(
        tmp_path, "setup.py", "from setuptools import setup\nsetup(python_requires='>=3[.8')\n"
    )
    result = cli("import", str(path), "--gpu", "none", "-o", str(tmp_path / "g.toml"), "--json")
    assert result.code == 0, result.out
    assert any("is not a Python version" in e["why"] for e in json.loads(result.out)["assumptions"])


def test_a_conda_lock_entry_without_a_manager_is_exit_2(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    text = (IMPORTS / "conda-lock" / "conda-lock.yml").read_text()
    path = _hostile(tmp_path, "conda-lock.yml", text.replace("  manager: conda\n", "", 1))
    (problem,) = _problems(_import(cli, tmp_path, path))
    assert "not a valid conda-lock file" in str(problem["message"])


def test_mutated_fixtures_never_crash(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """A small, seeded version of the mutation run in the report: every outcome is a
    decision (0), a located refusal (2) or an impossible target (3), never a bug (70)."""
    import random

    rng = random.Random(20261202)
    sources = sorted(
        p for p in IMPORTS.rglob("*") if p.is_file() and "bad" not in p.parts and p.suffix != ".py"
    )
    inserts = [b"[", b"{", b"&a ", b"*a", b"!!python/x ", b"\\\n", b"==", b"\xff", b"-r ", b"'"]
    outcomes: dict[int, int] = {}
    for i in range(40):
        source = rng.choice(sources)
        data = bytearray(source.read_bytes())
        if rng.random() < 0.5:
            data = data[: rng.randrange(len(data) or 1)]
        else:
            at = rng.randrange(len(data) + 1)
            data[at:at] = rng.choice(inserts)
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / source.name).write_bytes(bytes(data))
        out = folder / "g.toml"
        result = cli("import", str(folder / source.name), "--gpu", "none", "-o", str(out))
        outcomes[result.code] = outcomes.get(result.code, 0) + 1
        assert result.code in (0, 2, 3), (source.name, result.err)
        assert result.code == 0 or not out.exists()
    assert outcomes.get(2, 0) > 0


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ('tool = "x"\n[project]\nname = "p"\ndependencies = ["numpy==1.26.4"]\n', None),
        ('build-system = 7\n[project]\nname = "p"\ndependencies = ["numpy==1.26.4"]\n', None),
        ('[tool]\nuv = "x"\n[project]\nname = "p"\ndependencies = ["numpy==1.26.4"]\n', None),
        ("[tool.poetry]\nsource = 7\n[tool.poetry.dependencies]\nnumpy = '1.26.4'\n", None),
        ("[tool.poetry.group.gpu]\ndependencies = 'flash-attn'\n", 2),
    ],
)
def test_pyproject_tables_of_the_wrong_type_are_never_a_crash(
    cli: Callable[..., CliResult], tmp_path: Path, body: str, line: int | None
) -> None:
    """A key gpuenv reads but of another type is exit 2 at its line; one it only looks in
    (tool, build-system, tool.uv, tool.poetry.source) is skipped. Each was exit 70."""
    path = _hostile(tmp_path, "pyproject.toml", body)
    if line is None:
        out = tmp_path / "g.toml"
        result = cli("import", str(path), "--gpu", "none", "-o", str(out), "--json")
        assert result.code == 0, result.out
        assert "numpy" in {e["package"] for e in json.loads(result.out)["kept"]}
        return
    (problem,) = _problems(_import(cli, tmp_path, path))
    assert problem["file"] == "pyproject.toml" and problem["line"] == line, problem


def test_a_long_freeze_is_imported_in_linear_time(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """15,000 pins (a 260 kB file, far under the size limit) took over a minute while the
    writer built the array with tomlkit's add_line, which re-indexes on every call."""
    path = _hostile(tmp_path, "requirements.txt", "".join(f"p{i}==1.0\n" for i in range(15_000)))
    out = tmp_path / "g.toml"
    started = time.monotonic()
    result = cli("import", str(path), "--gpu", "none", "-o", str(out), "-q")
    assert result.code == 0, result.err
    assert time.monotonic() - started < 25  # 4-12 s here on shared cores; 40 s before
    text = out.read_text()
    assert '    "p14999==1.0", # requirements.txt:15000 p14999==1.0\n]' in text


@pytest.mark.parametrize(
    ("name", "content", "shown"),
    [
        ("environment.yml", 'name: "ldm\\e"\ndependencies:\n  - numpy=1.26.4\n', "ldm\\x1b"),
        ("pyproject.toml", '[project]\nname = "p\\u001b"\ndependencies = ["numpy==1.26.4"]\n', "p\\x1b"),
        ("Dockerfile", "FROM python:3.10\x7f\nRUN pip install numpy==1.26.4\n", "3.10\\x7f"),
    ],
)  # fmt: skip
def test_a_control_character_in_the_input_is_escaped_in_the_written_comments(
    cli: Callable[..., CliResult], tmp_path: Path, name: str, content: str, shown: str
) -> None:
    """TOML comments may not hold control characters: tomlkit refused the comment that
    quoted the input, and the import was exit 70."""
    path = _hostile(tmp_path, name, content)
    out = tmp_path / "g.toml"
    result = cli("import", str(path), "--gpu", "none", "-o", str(out))
    assert result.code == 0, result.err
    assert shown in out.read_text()


def test_an_index_token_in_the_files_reaches_neither_report_nor_written_spec(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    # The spec's comments quote each line they came from, and the spec is committed: a
    # company index token on a requirements line was written into gpuenv.toml.
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text(
        "--extra-index-url https://user:s3cr3tTOKEN@pkgs.example.com/simple\n"
        "torch==2.1.0\n"
        "numpy==1.26.4 --index-url https://tok123@mirror.example.com/simple\n"
    )
    out = tmp_path / "gpuenv.toml"
    result = cli("import", str(repo), "--gpu", "none", "-o", str(out))
    assert result.code == 0, result.out + result.err
    for text in (result.out, result.err, out.read_text()):
        assert "s3cr3tTOKEN" not in text and "tok123" not in text
    assert "numpy==1.26.4 --index-url https://mirror.example.com/simple" in out.read_text()


def test_a_url_requirement_is_written_without_its_credentials(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    # A private dependency fetched with a token in its URL: the spec is committed, so the
    # token is left out and the report says where the lock takes credentials from.
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements.txt").write_text(
        "torch==2.1.0\n"
        f"mylib @ git+https://user:ghp_SECRET123@github.com/org/mylib.git@{sha}\n"
        f"shared @ git+ssh://git@github.com/org/shared.git@{sha}\n"
    )
    out = tmp_path / "gpuenv.toml"
    result = cli("import", str(repo), "--gpu", "none", "-o", str(out))
    assert result.code == 0, result.out + result.err
    written = out.read_text()
    assert "SECRET" not in written + result.out + result.err
    assert f'"mylib @ git+https://github.com/org/mylib.git@{sha}"' in written
    assert f'"shared @ git+ssh://git@github.com/org/shared.git@{sha}"' in written  # no secret
    assert "written without the credentials its URL held" in result.out
    assert result.out.count("written without the credentials") == 1


def test_a_readme_too_large_to_read_is_named_as_such(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An 18.9 MB README (its install block at the end) gave "no install commands in
    # README.md": it had not been looked at. The limit is lowered here to keep the test
    # small; a README under it is read whole (one of 1.8 MB, install block past its
    # first MiB, was not seen either).
    from gpuenv.importers import readme

    block = "\n```bash\npip install torch==2.1.2 einops==0.7.0\n```\n"
    big = tmp_path / "big"
    big.mkdir()
    (big / "README.md").write_text("# paper\n" + "prose. " * 1000 + block)
    monkeypatch.setattr(readme, "MAX_BYTES", 4096)
    size = (big / "README.md").stat().st_size
    (problem,) = _problems(_import(cli, tmp_path, big))
    assert problem["file"] == str(big)
    assert f"README.md: too large to read ({size} bytes)" in str(problem["message"])
    assert "no install commands in INSTALL.md" in str(problem["message"])
    assert "commands in README.md" not in str(problem["message"])
    monkeypatch.undo()
    long = tmp_path / "long"
    long.mkdir()
    (long / "README.md").write_text("# paper\n" + "prose. " * 180_000 + block)
    out = tmp_path / "long.toml"
    result = cli("import", str(long), *TARGETS["h100"], "-o", str(out))
    assert result.code == 0, result.out + result.err
    assert '"einops==0.7.0"' in out.read_text()


def test_a_folder_whose_files_cannot_be_read_is_named_as_given(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    # `gpuenv import scratch/odd/bin` (a binary requirements.txt) said ".: no environment
    # file found here could be read", naming no folder.
    folder = tmp_path / "odd" / "bin"
    folder.mkdir(parents=True)
    shutil.copy(BAD / "requirements.txt", folder / "requirements.txt")
    (problem,) = _problems(_import(cli, tmp_path, folder))
    assert problem["file"] == str(folder)
    assert str(problem["message"]).startswith("no environment file found here could be read")
    # with code beside it, searched for what it imports, still nothing is invented
    (folder / "train.py").write_text(
        "import torch\nimport torchvision\nfrom torch._six import inf\n"
    )
    (problem,) = _problems(_import(cli, tmp_path, folder))
    assert str(problem["message"]).startswith("no environment file found here could be read")


def test_a_dockerfile_of_only_an_arg_asks_for_no_torch(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # the field test's scratch/odd/argonly: 'torch any ... the files pin no torch version'
    path = tmp_path / "Dockerfile"
    path.write_text("ARG BASE\nFROM $BASE\n")
    imported = run_import(path, target="h100")
    torch = imported.entries("changed")["torch"]
    assert torch["from"] == "not asked"
    assert str(torch["why"]).startswith("nothing in the files asks for torch; ")
    assert imported.report["summary"].startswith("torch not asked → ")
