"""``setup.py`` read statically: its syntax tree, never executed.

``install_requires``, ``extras_require``, ``python_requires`` and ``name`` are read
when they are literals, module-level names bound to literals, or sums of those; anything
computed (``open("requirements.txt").read().splitlines()``, a function call) is reported
as not read. ``CUDAExtension``/``CppExtension`` calls and imports of
``torch.utils.cpp_extension`` anywhere in the file mean the project compiles against
torch, which the reproduction must build for the target's GPU.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuenv._setuppy import NOT_A_LITERAL, SetupSyntax
from gpuenv.errors import ForeignFileError
from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._devfiles import is_dev_group
from gpuenv.importers._text import fail
from gpuenv.importers.model import (
    CUDA_EXTENSION,
    DROPPED,
    NAME,
    PYTHON,
    UNREADABLE,
    Authority,
    Origin,
    ReadingBuilder,
)
from gpuenv.importers.readme import guide_extras
from gpuenv.names import normalize_name

_KEYWORDS = ("install_requires", "extras_require", "python_requires", "name")


def _parse(text: str, display: str) -> ast.Module:
    try:
        return ast.parse(text, filename=display)
    except SyntaxError as exc:
        fail(display, exc.lineno, f"not valid Python: {exc.msg}")
    except (RecursionError, MemoryError):
        fail(display, None, "not valid Python: nested too deeply")
    except ValueError as exc:  # source with NUL bytes
        fail(display, None, f"not valid Python: {exc}")


class _Reader(ast.NodeVisitor):
    def __init__(self, ctx: Context, path: Path, tree: ast.Module) -> None:
        self.ctx = ctx
        self.display = ctx.display(path)
        self.tree = tree
        self.builder = ReadingBuilder(self.display, "setup.py", Authority.METADATA)
        self.feeder = requirements.PipLines(ctx, self.builder, path.parent)
        self.syntax = SetupSyntax(tree)
        self.setup_calls: list[ast.Call] = []
        self.path = path

    def origin(self, node: ast.AST, text: str) -> Origin:
        return Origin(self.display, getattr(node, "lineno", None), text)

    # --- the tree -----------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name == "setup":
            self.setup_calls.append(node)
        elif name in ("CUDAExtension", "CppExtension"):
            label = "CUDA" if name == "CUDAExtension" else "C++"
            first = node.args[0] if node.args else None
            ext = first.value if isinstance(first, ast.Constant) else "an extension"
            text = f"{name}({ext!r})" if isinstance(ext, str) else f"{name}(...)"
            self.builder.fact(
                CUDA_EXTENSION,
                "cuda" if label == "CUDA" else "cpp",
                self.origin(node, text),
                f"a {label} extension compiled against torch",
            )
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        """``raise NotImplementedError('Cuda is not availabel')`` where no CUDA is found
        (Deformable-DETR's ops): the extension does not build at all without CUDA."""
        call = node.exc
        first = call.args[0] if isinstance(call, ast.Call) and call.args else None
        text = first.value if isinstance(first, ast.Constant) else None
        if isinstance(text, str) and re.search(r"\bcuda\b", text, re.IGNORECASE):
            self.builder.fact(
                CUDA_EXTENSION,
                "cuda-required",
                self.origin(node, f"raise ...({text[:80]!r})"),
                "refuses to build without CUDA",
            )
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "torch.utils.cpp_extension":
            names = ", ".join(a.name for a in node.names)
            if any(a.name == "CUDAExtension" for a in node.names):
                self.builder.fact(
                    CUDA_EXTENSION,
                    "cuda",
                    self.origin(node, f"from torch.utils.cpp_extension import {names}"),
                    "builds CUDA code against torch",
                )

    # --- values ---------------------------------------------------------------------------

    def literal(self, node: ast.expr) -> Any:
        """A literal value (following names and ``+``, bounded), or one of NOT_A_LITERAL."""
        return self.syntax.literal(node)

    def requirement_values(self, node: ast.expr, keyword: str, group: str | None) -> None:
        try:
            value = self.literal(node)
        except NOT_A_LITERAL:
            if isinstance(node, (ast.List, ast.Tuple)):
                self.partly_computed(node, keyword, group)
                return
            text = _shown(ast.unparse(node))
            read = self.file_read(node) if group is None else None
            if read is not None:  # CLIP, TTS, Open-Sora: requirements.txt, imported as well
                self.builder.note(
                    DROPPED,
                    f"{keyword}={text} is computed when setup.py runs (never executed "
                    f"here): the file it reads, {read}, is imported",
                    self.origin(node, f"{keyword}=..."),
                )
                return
            self.builder.note(
                UNREADABLE,
                f"{keyword}={text} is computed when setup.py runs: not read "
                "(setup.py is never executed); import the file it reads instead",
                self.origin(node, f"{keyword}=..."),
            )
            return
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            fail(self.display, getattr(node, "lineno", None), f"{keyword}: not a list of strings")
        elements = node.elts if isinstance(node, (ast.List, ast.Tuple)) else []
        for index, item in enumerate(items):
            if not isinstance(item, str):
                fail(self.display, getattr(node, "lineno", None), f"{keyword}: not text: {item!r}")
            where = elements[index] if index < len(elements) else node
            before = len(self.builder.asks)
            for line in item.splitlines():
                if line.strip() and not line.strip().startswith("#"):
                    self.feeder.requirement(line.strip(), self.origin(where, line.strip()))
            if group is not None:
                for i in range(before, len(self.builder.asks)):
                    self.builder.asks[i] = replace(self.builder.asks[i], group=group)

    def partly_computed(self, node: ast.List | ast.Tuple, keyword: str, group: str | None) -> None:
        """A list of requirements some of whose entries are computed (fairseq2's
        ``"fairseq2n" + fairseq2n_version_spec`` among twenty literal ones): each literal
        entry is read, each computed one noted. The whole list was noted as not read, and
        the project's twenty requirements were missing from the spec."""
        for element in node.elts:
            try:
                self.literal(element)
            except NOT_A_LITERAL:
                self.builder.note(
                    UNREADABLE,
                    f"{keyword}: {_shown(ast.unparse(element))} is computed when setup.py "
                    "runs: not read (setup.py is never executed); the list's other entries "
                    "are read",
                    self.origin(element, ast.unparse(element)),
                )
                continue
            self.requirement_values(element, keyword, group)

    def file_read(self, node: ast.expr) -> str | None:
        """The one requirements file a computed value reads, imported (or already read)
        as ``-r`` includes are; None when there is no such file, or it cannot be read."""
        found = self.syntax.requirement_files(node)
        if not found:
            return None
        path = Path(os.path.normpath(self.path.parent / found[0]))
        try:
            self.ctx.include(path, "requirements", by=self.display, line=node.lineno)
        except ForeignFileError:
            return None  # outside, missing, or unreadable: the advice stands
        return self.ctx.display(path)

    def extras(self, node: ast.expr) -> None:
        guide = guide_extras(self.ctx, self.path.parent)
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(key.value, str)
                    and self.extra_read(key.value, guide, key)
                ):
                    self.requirement_values(value, f"extras_require[{key.value!r}]", key.value)
            return
        try:
            value = self.literal(node)
        except NOT_A_LITERAL:
            self.builder.note(
                UNREADABLE, "extras_require is computed: not read", self.origin(node, "extras")
            )
            return
        for group, items in value.items() if isinstance(value, dict) else []:
            if isinstance(group, str) and self.extra_read(group, guide, node):
                self.requirement_values(ast.Constant(items, lineno=node.lineno), group, group)

    def extra_read(
        self, group: str, guide: tuple[frozenset[str], Origin] | None, node: ast.AST
    ) -> bool:
        """Whether an extra's requirements are read. Without an install guide that names
        the project's extras: every extra not named like development tools. With one
        (facebookresearch/sam2's README.md:44 and INSTALL.md:12 ``pip install -e
        ".[notebooks]"``, while only the demo server's backend.Dockerfile installs
        ``.[interactive-demo]``): the extras the guide installs, whatever their name, and
        no other; each said."""
        if guide is None:
            return not is_dev_group(group)
        named, line = guide
        where = self.origin(node, f"extras_require[{group!r}]")
        if normalize_name(group) in named:
            if is_dev_group(group):
                self.builder.note(
                    DROPPED,
                    f"extras_require[{group!r}] read, though named like development tools: "
                    f"the install guide installs the project with it ({line.cite()})",
                    where,
                )
            return True
        if not is_dev_group(group):
            extras = ",".join(sorted(named))
            self.builder.note(
                DROPPED,
                f"extras_require[{group!r}] left out: the install guide installs the project "
                f"with [{extras}] ({line.cite()})",
                where,
            )
        return False

    def keyword(self, name: str, node: ast.expr) -> None:
        if name == "install_requires":
            self.requirement_values(node, name, None)
        elif name == "extras_require":
            self.extras(node)
        elif name in ("python_requires", "name"):
            try:
                value = self.literal(node)
            except NOT_A_LITERAL:
                return
            if isinstance(value, str):
                key = PYTHON if name == "python_requires" else NAME
                self.builder.fact(key, value, self.origin(node, f"{name}={value!r}"))

    def read(self) -> None:
        self.visit(self.tree)
        if not self.setup_calls:
            self.builder.note(
                UNREADABLE, "no setup() call found: nothing read", Origin(self.display, 1, "")
            )
        for call in self.setup_calls:
            for keyword in call.keywords:
                if keyword.arg in _KEYWORDS:
                    self.keyword(keyword.arg, keyword.value)
                elif keyword.arg is None:
                    self.builder.note(
                        UNREADABLE, "setup(**...) arguments are not read", self.origin(call, "**")
                    )
        self.ctx.readings.append(self.builder.build())


_SHOWN = 80  # characters of a computed expression quoted


def _shown(text: str) -> str:
    """An expression as quoted: whole when short, else its two ends cut between words,
    and its length (CLIP's was cut at 80 characters, mid-word, before the file it reads)."""
    if len(text) <= _SHOWN:
        return text
    head = text[: _SHOWN // 2]
    tail = text[-_SHOWN // 2 :]
    head = head[: max(head.rfind(c) for c in " ,") + 1] or head
    tail = tail[min((i for i in (tail.find(c) for c in " ,") if i >= 0), default=-1) + 1 :]
    return f"{head.rstrip()} ... {tail.lstrip()} ({len(text)} characters)"


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    try:
        _Reader(ctx, path, _parse(text, display)).read()
    except RecursionError:
        fail(display, None, "the syntax tree is nested too deeply to read")
