"""``setup.cfg``: ``[options] install_requires`` and ``python_requires``,
``[options.extras_require]`` and ``[metadata] name``, parsed by ``configparser`` (no
interpolation); each requirement's line is found in the section it came from."""

from __future__ import annotations

import configparser
from dataclasses import replace
from pathlib import Path

from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._devfiles import is_dev_group
from gpuenv.importers._text import fail
from gpuenv.importers.model import NAME, PYTHON, Authority, Origin, ReadingBuilder


def _section_lines(text: str) -> dict[str, tuple[int, int]]:
    """section -> (first line, last line), 1-based."""
    bounds: dict[str, tuple[int, int]] = {}
    current: str | None = None
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = stripped[1:-1].strip()
            bounds[current] = (number, len(lines))
            continue
        if current is not None:
            bounds[current] = (bounds[current][0], number)
    return bounds


class _Lines:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.bounds = _section_lines(text)

    def find(self, section: str, value: str) -> int | None:
        start, end = self.bounds.get(section, (1, len(self.lines)))
        for number in range(start, end + 1):
            if value in self.lines[number - 1]:
                return number
        return None


def _parse(text: str, display: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text, source=display)
    except configparser.ParsingError as exc:
        line = exc.errors[0][0] if getattr(exc, "errors", None) else None
        fail(display, line, "not a valid setup.cfg (INI syntax)")
    except configparser.Error as exc:
        fail(display, getattr(exc, "lineno", None), f"not a valid setup.cfg: {exc.message}")
    return parser


class _Reader:
    def __init__(self, ctx: Context, path: Path, text: str) -> None:
        self.display = ctx.display(path)
        self.parser = _parse(text, self.display)
        self.lines = _Lines(text)
        self.builder = ReadingBuilder(self.display, "setup.cfg", Authority.METADATA)
        self.feeder = requirements.PipLines(ctx, self.builder, path.parent)

    def values(self, section: str, key: str, group: str | None) -> None:
        raw = self.parser.get(section, key, fallback="") or ""
        for value in (v.strip() for v in raw.splitlines()):
            if not value or value.startswith("#"):
                continue
            before = len(self.builder.asks)
            origin = Origin(self.display, self.lines.find(section, value), value)
            self.feeder.requirement(value, origin)
            if group is not None:
                for i in range(before, len(self.builder.asks)):
                    self.builder.asks[i] = replace(self.builder.asks[i], group=group)

    def facts(self) -> None:
        name = self.parser.get("metadata", "name", fallback=None)
        if name:
            origin = Origin(self.display, self.lines.find("metadata", name), f"name = {name}")
            self.builder.fact(NAME, name, origin)
        python = self.parser.get("options", "python_requires", fallback=None)
        if python:
            origin = Origin(self.display, self.lines.find("options", "python_requires"), python)
            self.builder.fact(PYTHON, python.strip(), origin)


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    reader = _Reader(ctx, path, text)
    reader.facts()
    if reader.parser.has_option("options", "install_requires"):
        reader.values("options", "install_requires", None)
    if reader.parser.has_section("options.extras_require"):
        for group in reader.parser.options("options.extras_require"):
            if not is_dev_group(group):
                reader.values("options.extras_require", group, group)
    ctx.readings.append(reader.builder.build())
