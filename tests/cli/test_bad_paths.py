"""What a user types that no file system or exec can take ends in a message and an exit
code, never exit 70 or a traceback: a 10,000-character path given to ``-o``,
``--python`` or ``--prefix`` (``File name too long``), an empty or unrunnable command
after ``run --``, a ``verify --timeout`` the timer cannot wait for."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv import runtime
from gpuenv.cli import _fastrun, _unexpected, main
from tests.conftest import CliResult


@pytest.mark.parametrize(
    ("number", "said"),
    [
        (errno.ENAMETOOLONG, "a name longer than the file system allows"),
        (errno.ELOOP, "a loop of symbolic links"),
    ],
)
def test_a_path_no_file_system_can_hold_is_exit_2_naming_it_shortened(
    number: int, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "/tmp/" + "x" * 10_000
    code = _unexpected(OSError(number, os.strerror(number), long), as_json=False, verbose=0)
    err = capsys.readouterr().err
    assert code == 2, err
    assert said in err and "(10005 characters)" in err and len(err) < 400
    assert "internal error" not in err


@pytest.mark.parametrize(
    ("command", "code", "said"),
    [
        ([""], 127, "'': command not found"),
        (["x" * 10_000], 126, "cannot run it: File name too long"),
        (["./not-a-program"], 126, "cannot run it: Exec format error"),
        (["/"], 126, "/: is a directory"),
    ],
)
def test_a_command_run_cannot_start_is_the_shells_code_and_one_line(
    command: list[str],
    code: int,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    program = tmp_path / "not-a-program"
    program.write_bytes(b"\x00\x01garbage")
    program.chmod(0o755)
    selected = runtime.Selected("cpu", str(tmp_path), None, str(tmp_path))  # type: ignore[arg-type]
    monkeypatch.setattr(runtime, "select", lambda *a, **k: selected)
    monkeypatch.setattr(runtime, "child_environment", lambda s, e: (dict(e), []))
    import gpuenv.editable.state
    import gpuenv.verify.gate

    monkeypatch.setattr(gpuenv.verify.gate, "admit", lambda s, unverified: [])
    monkeypatch.setattr(gpuenv.editable.state, "stale_note", lambda p, project=None: None)
    assert _fastrun.execute(_fastrun.FastRun(None, None, True, command)) == code
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err) < 400


@pytest.mark.parametrize("value", ["inf", "nan", "1e309", "99999999999", "0", "-1"])
def test_a_verify_timeout_the_timer_cannot_take_is_exit_2(
    value: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["verify", f"--timeout={value}"]) == 2
    assert "--timeout" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("data.txt", "not executable"),
        ("folder", "a directory, not an interpreter"),
        ("./garbage", "cannot run it: Exec format error"),
    ],
)
def test_doctor_python_that_cannot_run_is_exit_2_saying_why(
    given: str,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """doctor --python /etc/passwd said "cannot write a file (/etc/passwd): permission
    denied" (exit 5): the EACCES of exec, read as a failed write."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("root:x:0:0\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "garbage").write_bytes(b"\x00\x01")
    (tmp_path / "garbage").chmod(0o755)
    assert main(["doctor", "--python", given]) == 2
    err = capsys.readouterr().err
    assert said in err and "cannot write" not in err


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_init_into_a_folder_says_it_is_a_folder(
    force: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``-f DIR init`` said "DIR already exists, pass --force", and --force then failed
    with exit 5."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dd").mkdir()
    assert main(["-f", "dd", "init", *force]) == 2
    assert "dd is a directory, not a spec file" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["", ".", "folder"])
def test_an_output_path_that_is_a_folder_is_a_usage_error(given: str, tmp_path: Path) -> None:
    """``pack -o ''`` said "cannot write .: Device or resource busy" (exit 5) with a hint
    to free space; ``export -o DIR`` exit 5 too."""
    from gpuenv._fs import output_path
    from gpuenv.errors import UsageError

    (tmp_path / "folder").mkdir()
    with pytest.raises(UsageError, match="is a directory: name a file"):
        output_path(tmp_path / given if given else Path(given), hint="name a file")


def test_what_init_says_next_names_the_file_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["-f", "new.toml", "init", "--cpu"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "next: gpuenv -f new.toml plan"


def test_a_value_with_a_line_break_is_quoted_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stack.torch: "a` was all that was said of torch = "a\\nb"."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "--torch", "a\nb"]) == 2
    assert '--torch: "a\\nb" is not a version' in capsys.readouterr().err


def test_a_facts_file_given_to_plan_is_read_even_when_no_target_detects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuenv.toml").write_text(
        '[project]\nname = "p"\n[stack]\npython = "3.11"\n[targets.cpu]\ngpu = "none"\n'
    )
    assert main(["plan", "--facts", "missing.json"]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_json_before_the_command_is_told_where_it_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--json", "plan"]) == 2
    assert "--json goes after the command: gpuenv plan --json" in capsys.readouterr().out


def test_a_missing_group_is_named_as_typed() -> None:
    from gpuenv.errors import UsageError
    from gpuenv.install.project import choose_groups
    from gpuenv.spec import parse_spec_text

    text = '[project]\nname = "p"\n[stack]\npython = "3.11"\n[targets.cpu]\ngpu = "none"\n'
    spec = parse_spec_text(text, file="gpuenv.toml").spec
    with pytest.raises(UsageError, match=r"no dependency group '\.\./x'"):
        choose_groups(spec, iter(["../x"]), every=False, dev=True)


@pytest.mark.parametrize(
    "line",
    [
        ["-f", "loop1/x", "add", "--no-install", "foo"],
        ["-f", "loop1/x", "remove", "foo"],
        ["-f", "loop1/x", "init", "--cpu"],
    ],
)
def test_a_path_through_a_loop_of_links_is_exit_2(
    line: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pathlib's resolve() raised RuntimeError("Symlink loop from ..."): exit 70."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    assert main(line) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and "loop" in err


@pytest.mark.parametrize(
    "command", [["plan"], ["lock"], ["shell"], ["doctor"], ["run", "--", "true"]]
)
def test_an_empty_spec_path_is_refused_everywhere(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`-f ''` meant ./gpuenv.toml for most commands and was refused by run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpuenv.toml").write_text(
        '[project]\nname = "p"\n[stack]\npython = "3.11"\n[targets.cpu]\ngpu = "none"\n'
    )
    assert main(["-f", "", *command]) == 2
    assert "-f" in capsys.readouterr().err


def test_every_long_word_of_an_error_is_shortened() -> None:
    from gpuenv.cli._output import _shortened

    long = "/x" + "y" * 9_999
    said = _shortened(f"refused {long}: not an archive ({long})")
    assert said.count("(10001 characters)") == 2 and len(said) < 300, said
    assert said.startswith("refused /xyyy") and "yyy (10001 characters): not an archive (" in said
    assert _shortened("a short message stays") == "a short message stays"


def test_verbose_shows_the_tools_own_words_of_a_network_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """commands.md says -v adds an error's causes; a 401's stderr was byte for byte the
    same with and without it, uv's words only in --json."""
    from gpuenv.cli._output import render_error
    from gpuenv.errors import NetworkError

    error = NetworkError(
        "target cpu: the default index cannot be used: the server refused the credentials",
        cause="auth",
        url="http://mirror.invalid/simple",
        stderr_tail="error: Failed to fetch\n  Caused by: HTTP status client error (401)",
    )
    render_error(error, as_json=False, verbose=0)
    assert "the tool said" not in capsys.readouterr().err
    render_error(error, as_json=False, verbose=1)
    said = capsys.readouterr().err
    assert "  the tool said:\n    error: Failed to fetch\n" in said and "(401)" in said


@pytest.mark.parametrize(
    "argv",
    [
        ["install", "--target", ""],
        ["verify", "--target", ""],
        ["lock", "--target", ""],
        ["kernel", "install", "--prefix", ""],
    ],
)
def test_an_empty_target_or_prefix_is_refused(
    argv: list[str], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """`--target ''` meant every target; `kernel install --prefix ''` wrote kernels into the
    current folder (a script's unset variable)."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        '[project]\nname = "p"\n[stack]\npython = "3.11"\n[targets.cpu]\ngpu = "none"\n'
    )
    result = cli("-f", str(spec), *argv)
    assert result.code == 2, result.err
    assert "needs a" in result.err and not (tmp_path / "share").exists()
