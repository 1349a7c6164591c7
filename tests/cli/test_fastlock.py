"""The command lines ``cli._fastlock`` reads as a plain ``gpuenv lock`` (its head start
begun before argparse), and that it reads each as argparse does: the spec and the
targets the full path would lock."""

from __future__ import annotations

import pytest

from gpuenv.cli import _fastlock
from gpuenv.cli._parser import build_parser


@pytest.mark.parametrize(
    ("argv", "file", "targets"),
    [
        (["lock"], None, None),
        (["lock", "--json", "-q", "-v"], None, None),
        (["-q", "-v", "lock"], None, None),
        (["-f", "a/gpuenv.toml", "lock"], "a/gpuenv.toml", None),
        (["lock", "--file", "b.toml", "--json"], "b.toml", None),
        (["lock", "-t", "h100"], None, ("h100",)),
        (["-f", "x.toml", "lock", "-t", "cpu", "--target", "h100"], "x.toml", ("cpu", "h100")),
        (["lock", "-t", "h100", "-t", "h100"], None, ("h100", "h100")),
        (["-f", "lock", "lock"], "lock", None),  # a spec named "lock": a value, then the command
    ],
)
def test_a_plain_lock_is_read_as_argparse_reads_it(
    argv: list[str], file: str | None, targets: tuple[str, ...] | None
) -> None:
    plain = _fastlock.parse(argv)
    assert plain is not None
    assert (plain.file, plain.targets) == (file, targets)
    args = build_parser().parse_args(argv)
    assert args.command == "lock"
    assert getattr(args, "file", None) == file
    assert (tuple(args.target) if args.target else None) == targets


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["lock", "--upgrade"],
        ["lock", "-P", "torch"],
        ["lock", "--check"],
        ["lock", "--help"],
        ["--json", "lock"],  # --json belongs to the command
        ["-t", "h100", "lock"],  # so does -t
        ["lock", "-f"],  # no value
        ["lock", "-t"],
        ["lock", "-t", "--json"],  # a value argparse would not take
        ["-f", "a.toml", "lock", "-f", "b.toml"],  # a second -f: argparse decides
        ["-fa.toml", "lock"],
        ["--file=a.toml", "lock"],
        ["lock", "--jso"],  # an abbreviation
        ["lock", "--", "x"],
        ["lock", "lock"],
        ["install"],
        ["run", "--", "lock"],
        ["-vv", "lock"],
    ],
)
def test_anything_else_is_left_to_the_full_path(argv: list[str]) -> None:
    assert _fastlock.parse(argv) is None
