from __future__ import annotations

import tomllib

from gpuenv._tomlpos import key_lines, line_of

DOC = '''# comment
[project]
name = "x"  # trailing

[stack]
python = "3.11"
notes = """a
multi-line \\""" string"""
torch = '2.4.*'

[targets.h100]
gpu = "H100"
"quoted.key" = 1

[pip]
dependencies = [
  "a",   # why
  "b>=2",
]

[conda]
dependencies = { "cuda-nvcc" = "12.4.*", more = [1, 2] }

[[extra]]
k = 1
[[extra]]
k = 2
'''


def test_every_key_has_its_line() -> None:
    tomllib.loads(DOC)  # the scanner assumes valid TOML
    lines = key_lines(DOC)
    assert lines[("project", "name")] == 3
    assert lines[("stack", "python")] == 6
    assert lines[("stack", "torch")] == 9, "multi-line strings are skipped correctly"
    assert lines[("targets", "h100", "gpu")] == 12
    assert lines[("targets", "h100", "quoted.key")] == 13
    assert lines[("pip", "dependencies", 0)] == 17
    assert lines[("pip", "dependencies", 1)] == 18
    assert lines[("conda", "dependencies", "cuda-nvcc")] == 22
    assert lines[("extra", 1, "k")] == 27


def test_line_of_falls_back_to_the_nearest_ancestor() -> None:
    lines = key_lines(DOC)
    assert line_of(lines, ("targets", "h100", "driver")) == 11
    assert line_of(lines, ("nothing",)) is None


def test_malformed_text_gives_no_positions_rather_than_failing() -> None:
    assert key_lines('a = "unterminated') == {}
    assert key_lines("x = {a = 1, = 2}\n") == {}, "an inline table with no key"
    assert key_lines("a = {b = 1\nc = 2\n") == {}, "an inline table never closed"
    assert key_lines("a = 1\n= 2\nb = 3\n") == {("a",): 1}, "stops at a line with no key"


def test_nested_array_tables_belong_to_their_parents_latest_element() -> None:
    # Facts-file errors (series.1.builds.0.arch.0) pointed at the first [[series]] line.
    text = (
        '[[series]]\nminor = "2.15"\n[[series.builds]]\ntag = "cpu"\n'
        '[[series]]\nminor = "2.16"\n[[series.builds]]\ntag = "cpu"\n'
        '[[series.builds]]\ntag = "cu132"\narch = ["x"]\n'
    )
    lines = key_lines(text)
    assert lines[("series", 1, "builds", 0, "tag")] == 8
    assert lines[("series", 1, "builds", 1, "arch", 0)] == 11
    assert lines[("series", 0, "builds", 0)] == 3
    assert ("series", "builds", 2) not in lines
