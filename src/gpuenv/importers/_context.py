"""What readers share while one import runs: display paths, the foreign knowledge, and
the files already read (so ``-r`` includes are read once, cycles end, depth is bounded)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuenv.importers._text import OUTSIDE, fail, read_text, under
from gpuenv.importers.model import Reading
from gpuenv.knowledge.foreign import ForeignKnowledge

MAX_INCLUDE_DEPTH = 8
MAX_FILES = 64  # files read in one import, includes counted


@dataclass
class Context:
    """One import's reading state: where display paths start, the foreign knowledge, the
    readings so far, the files already read, how deep the includes go, and the folders a
    file must be inside to be read."""

    root: Path  # what display paths are relative to
    knowledge: ForeignKnowledge
    readings: list[Reading] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)
    depth: int = 0
    reader: Callable[[Context, Path, str | None], None] | None = None
    # Resolved folders every file read must be inside (the folders imported, and the
    # folder of each file named): a link or include pointing elsewhere is not read.
    roots: tuple[Path, ...] = ()

    def inside(self, path: Path) -> bool:
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            return False
        return under(real, self.roots)

    def display(self, path: Path) -> str:
        try:  # as named (a link keeps its own name), then as resolved
            return str(path.absolute().relative_to(self.root.absolute()))
        except ValueError:
            pass
        try:
            return str(path.resolve().relative_to(self.root.resolve()))
        except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
            return str(path)

    def claim(self, path: Path) -> bool:
        """True the first time ``path`` is read in this import (False: already read)."""
        try:
            key = path.resolve(strict=False)
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop on older Pythons
            key = path.absolute()
        if key in self.seen:
            return False
        if len(self.seen) >= MAX_FILES:
            fail(self.display(path), None, f"more than {MAX_FILES} files in one import")
        self.seen.add(key)
        return True

    def text(self, path: Path) -> str:
        return read_text(path, self.display(path), self.roots)

    def include(self, path: Path, fmt: str | None, *, by: str, line: int | None) -> bool:
        """Read another file that one being read pulls in (``-r``, ``python_requirements``).
        Returns False when it was already read, or is a development group's file, left
        out as discovery leaves it out (coqui-ai/TTS: a recipe's Dockerfile -r'd
        requirements.dev.txt, and black, pylint and nose2 became the paper's)."""
        from gpuenv.importers._devfiles import dev_only

        if dev_only(path.name):
            return False
        if self.depth >= MAX_INCLUDE_DEPTH:
            fail(by, line, f"includes nested more than {MAX_INCLUDE_DEPTH} deep")
        try:
            path.resolve()
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop
            fail(by, line, f"includes {self.display(path)}, a symbolic link loop")
        if not self.inside(path):
            fail(by, line, f"{OUTSIDE}: {self.display(path)}")
        if not path.is_file():
            fail(by, line, f"includes {self.display(path)}, which is not there")
        if not self.claim(path):
            return False
        assert self.reader is not None
        self.depth += 1
        try:
            self.reader(self, path, fmt)
        finally:
            self.depth -= 1
        return True
