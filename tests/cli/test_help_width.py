"""The help's width: the terminal's, read as shutil reads it, without importing shutil."""

from __future__ import annotations

import shutil

import pytest

from gpuenv.cli import _parser


@pytest.mark.parametrize("columns", ["77", "200", "0", "-5", "wide", ""])
def test_the_width_is_the_one_shutil_reads(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert _parser._columns() == shutil.get_terminal_size().columns


def test_help_wraps_at_the_width_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    text = _parser.build_parser(only="lock").format_help()
    assert max(len(line) for line in text.splitlines()) <= 50
    monkeypatch.setenv("COLUMNS", "200")
    wide = _parser.build_parser(only="lock").format_help()
    assert max(len(line) for line in wide.splitlines()) > 50
