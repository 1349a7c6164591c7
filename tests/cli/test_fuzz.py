"""No command line crashes gpuenv: every command, with the global flags before and
after it, with each of its options missing its value, repeated, or given odd values,
and with arguments it does not take, ends with a message and an exit code of the
documented table, never exit 70 and never a traceback (``-v`` too: it adds an
expected error's causes as plain lines; only an internal error, exit 70, shows its
traceback). And ``gpuenv run``'s fast path and the full parser read every spelling of
a run line alike.

Each line runs for real, in-process, in a fresh empty directory (no gpuenv.toml), an
empty store, and indexes on a closed loopback port, so nothing reaches the network
and nothing is ever executed (``os.execvpe`` is stubbed to fail loudly).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuenv.cli import _fastrun, _parser, main, run_cmd
from gpuenv.errors import UsageError

# Exit codes gpuenv documents (errors.py), plus the shell's 126/127 from `run`.
DOCUMENTED = {0, 1, 2, 3, 4, 5, 126, 127, 130, 141}

ODD_VALUES = (
    "",
    "-",
    "--",
    "\x1b[2J\x07",
    "ünï\u202ecode",
    "../../../../etc/passwd",
    "/dev/null",
    "x" * 600,
    "x" * 10_000,  # ENAMETOOLONG for any path
    "a=b=c",
    "-9",
    ".",
)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory outside any project, an empty store and unreachable indexes."""
    port = _closed_port()
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.setenv("GPUENV_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("GPUENV_TORCH_INDEX", f"http://127.0.0.1:{port}/whl")
    monkeypatch.setenv("UV_OFFLINE", "1")
    for name in ("VIRTUAL_ENV", "CONDA_PREFIX", "GPUENV_ACTIVE_PREFIX"):
        monkeypatch.delenv(name, raising=False)

    def no_exec(*args: object) -> None:
        raise AssertionError(f"gpuenv executed a command during the fuzz: {args!r}")

    monkeypatch.setattr(os, "execvpe", no_exec)
    yield tmp_path


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen: argparse.ArgumentParser = sub.choices[name]
    return chosen


def _actions(command: str) -> list[str]:
    """The actions of a command that has them (``kernel install``), else none."""
    parser = _subparser(_parser.build_parser(only=command), command)
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [name for sub in subs for name in sub.choices]


def _options(command: str) -> list[tuple[str, bool]]:
    """(option string, takes a value) for each of ``command``'s own options; ``command``
    may be "kernel install" (an action's options)."""
    first, *action = command.split()
    parser = _subparser(_parser.build_parser(only=first), first)
    if action:
        parser = _subparser(parser, action[0])
    found = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        takes_value = action.nargs != 0
        found.extend((option, takes_value) for option in action.option_strings)
    return found


def _lines(command: str) -> list[list[str]]:
    """The command lines tried for ``command`` (and for each of its actions)."""
    c = command.split()  # "kernel install": the command and its action
    lines: list[list[str]] = [
        [*c],
        ["-v", *c],
        [*c, "-q"],
        ["-q", *c, "-v"],
        ["-f", "missing.toml", *c],
        [*c, "-f"],
        [*c, "-f", ""],
        [*c, "--file="],
        ["-f"],
        [*c, "--bogus"],
        [*c, "extra", "arguments"],
        [*c, "--"],
        [*c, "--", "--"],
        [*c, "\x00"],
        [*c, "-"],
        [*c, "--=x"],
        [*c, "--json", "--json"],
        [*c, "-h"],
    ]
    odd = itertools.cycle(ODD_VALUES)
    for option, takes_value in _options(command):
        if not takes_value:
            lines.append([*c, option, option])
            continue
        lines.append([*c, option])  # the value is missing
        lines.append([*c, option, "a", option, "b"])  # repeated
        lines.append([*c, option, next(odd)])
        lines.append([*c, option, next(odd)])
        if option.startswith("--"):
            lines.append([*c, f"{option}={next(odd)}"])
    if len(c) == 1:
        for action in _actions(command):
            lines.extend(_lines(f"{command} {action}"))
    return lines


@pytest.mark.parametrize("command", list(_parser.COMMANDS))
def test_no_command_line_crashes(
    command: str,
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(sandbox / "jupyter"))  # kernel's writes
    failures = []
    for number, tried in enumerate(_lines(command)):
        line = [*tried, "--", "true"] if command == "run" and "--" not in tried else tried
        work = sandbox / f"case{number}"
        work.mkdir()
        os.chdir(work)
        code = main(line)
        captured = capsys.readouterr()
        problem = None
        if code not in DOCUMENTED:
            problem = f"exit {code}"
        elif "Traceback" in captured.err:  # -v too: tracebacks are for internal errors
            problem = "a traceback"
        elif "internal error" in captured.err + captured.out:
            problem = "an internal error"
        elif "--json" in line and "-h" not in line and code != 0:
            try:
                json.loads(captured.out)
            except ValueError:
                problem = "not one JSON object under --json"
        if problem:
            failures.append(f"{line!r}: {problem}\n{captured.err[-600:]}")
    assert not failures, "\n".join(failures)


def test_the_reported_run_lines_are_usage_errors_or_refusals(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The four lines that crashed (exit 70, unhashable list): a refusal outside a
    project is exit 4 with -q too, a line without a command exit 2."""
    os.chdir(sandbox)
    assert main(["-q", "run", "--unverified", "--", "true"]) == 4
    assert main(["run", "--unverified", "-v", "--", "true"]) == 4
    err = capsys.readouterr().err
    assert "no gpuenv.toml here" in err and "Traceback" not in err
    for line in (["run"], ["run", "--"], ["-q", "run", "-v"], ["run", "--unverified", "--"]):
        assert main(line) == 2, line
        err = capsys.readouterr().err
        assert "no command given" in err and "gpuenv run -- python train.py" in err


# -- the fast path and the full parser agree ----------------------------------------------

BEFORE = (
    [],
    ["-v"],
    ["-q"],
    ["-f", "s.toml"],
    ["--file=s.toml"],
    ["-q", "-v", "-v"],
    ["-vv"],
    ["-f", "a.toml", "--file=b.toml"],
)
AFTER = (
    [],
    ["--unverified"],
    ["-t", "cpu"],
    ["--target=cpu"],
    ["-tcpu"],
    ["--target", "cpu", "--target", "h100"],
    ["-v"],
    ["-vv"],
    ["-q"],
    ["-f", "x.toml"],
    ["-fx.toml"],
    ["--unverified", "-v", "-t", "cpu", "-q"],
    ["-t"],
    ["--target="],
    ["--help"],
    ["--bogus"],
    ["-t", "--unverified"],
    ["-t", "a", "-t", "b"],
    ["-t", "a", "--target=a"],
    ["-f", "a.toml", "-fb.toml"],
)
COMMANDS = (
    ["true"],
    ["python", "-c", "print(1)"],
    ["--", "-x"],
    ["-x"],
    ["run", "-v"],
    [],
    ["--"],
)


def _full(line: list[str]) -> tuple[object, ...] | str:
    """What the full parser makes of ``line``: the run, or why it refuses it."""
    try:
        _unused, args = _parser.parse(line)
        return run_cmd.fast_run(args).fields()
    except UsageError as error:
        return f"usage: {error.message}"
    except SystemExit as exit_:
        return f"exit {exit_.code}"


def _cases() -> Iterator[list[str]]:
    for before, after, command in itertools.product(BEFORE, AFTER, COMMANDS):
        yield [*before, "run", *after, "--", *command]
        if command and not command[0].startswith("-"):
            yield [*before, "run", *after, *command]


def test_the_fast_path_and_the_full_parser_agree(capsys: pytest.CaptureFixture[str]) -> None:
    disagreements, fast_count = [], 0
    for line in _cases():
        parsed = _fastrun.parse(line)
        fast = parsed.fields() if parsed is not None else None
        full = _full(line)
        capsys.readouterr()  # --help's text
        if fast is not None:
            fast_count += 1
            if fast != full:
                disagreements.append(f"{line!r}: fast {fast!r}, full {full!r}")
        elif isinstance(full, tuple) and _fastrun.split(line) is None:
            disagreements.append(f"{line!r}: not a run line for the fast path, full {full!r}")
    assert not disagreements, "\n".join(disagreements[:20])
    assert fast_count > 300, "the usual spellings take the fast path"


@pytest.mark.parametrize(
    ("line", "command", "target", "verbose"),
    [
        (["-q", "run", "--unverified", "--", "true"], ["true"], None, 0),
        (["run", "--unverified", "-v", "--", "true"], ["true"], None, 1),
        (["-v", "run", "-v", "python", "-v"], ["python", "-v"], None, 2),
        (["run", "-t", "cpu", "--", "--", "x"], ["--", "x"], "cpu", 0),
        (["run", "python", "--", "-t"], ["python", "--", "-t"], None, 0),
        (["run", "-tcpu", "run", "x"], ["run", "x"], "cpu", 0),
    ],
)
def test_the_command_begins_after_the_first_double_dash_or_the_first_word(
    line: list[str], command: list[str], target: str | None, verbose: int
) -> None:
    fast = _fastrun.parse(line)
    assert fast is not None
    assert (fast.command, fast.target, fast.verbose) == (command, target, verbose)
    assert fast.fields() == _full(line)


def test_verbose_shows_an_expected_errors_causes_as_lines_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``-v`` on "no gpuenv.toml here" printed a Python traceback: -v shows tracebacks
    for internal errors (exit 70) only, and an expected error's cause chain as lines."""
    from gpuenv.cli import _output
    from gpuenv.errors import FileFormatError

    try:
        try:
            raise OSError(13, "Permission denied")
        except OSError as exc:
            raise FileFormatError("gpuenv.toml: cannot read it", hint="fix it") from exc
    except FileFormatError as error:
        _output.render_error(error, as_json=False, verbose=1)
        quiet = FileFormatError("plain")
        _output.render_error(quiet, as_json=False, verbose=1)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "gpuenv: error: gpuenv.toml: cannot read it" in err
    assert "  caused by: PermissionError: [Errno 13] Permission denied" in err
    assert err.count("caused by") == 1  # the error without a cause has none


def test_the_fuzz_reaches_every_kernel_action_and_its_options() -> None:
    tried = {" ".join(line[:3]) for line in _lines("kernel")}
    assert {"kernel install --name", "kernel remove -h", "kernel list --prefix"} <= tried


def test_an_unexpected_argument_is_named_with_the_command_it_was_given_to(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse said "gpuenv: error: gpuenv: unrecognized arguments: extra" and
    pointed at 'gpuenv --help' for an argument a command's action does not take."""
    os.chdir(sandbox)
    assert main(["kernel", "install", "extra"]) == 2
    err = capsys.readouterr().err
    assert "gpuenv: error: gpuenv kernel install: unexpected argument: extra" in err
    assert "see 'gpuenv kernel install --help'" in err
    assert main(["list", "-t", "cpu"]) == 2
    assert "gpuenv list: unexpected arguments: -t cpu" in capsys.readouterr().err


@pytest.mark.parametrize(
    "line",
    [
        ["add", "-g", "a", "-g", "b", "pytest"],
        ["add", "--group=a", "--target", "cpu", "pytest"],  # where: one of the two
        ["remove", "-t", "cpu", "-t", "h100", "pytest"],
        ["import", "--target", "a", "--target", "b", "."],
        ["-f", "a.toml", "-f", "b.toml", "plan"],
    ],
)
def test_a_single_value_option_given_twice_differently_is_refused(
    line: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``gpuenv add -g a -g b pytest`` added to ``b`` alone without a word."""
    from gpuenv.cli import main

    assert main([*line, "--json"] if line[0] != "-f" else line) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert (
        "given twice" in captured.out + captured.err or "not allowed" in captured.out + captured.err
    )


def test_the_same_value_twice_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    _unused, args = _parser.parse(["add", "-g", "dev", "--group", "dev", "pytest"])
    assert args.group == "dev"
