"""errors.py reads as its contract: the docstring's table names every error class with
its exit code and kind, and the classes come in exit-code order."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from gpuenv import errors

CLASSES = [
    c
    for _, c in inspect.getmembers(errors, inspect.isclass)
    if issubclass(c, errors.GpuenvError) and c is not errors.GpuenvError
]


def _table() -> dict[str, tuple[int, str]]:
    """class -> (code, kind) from the module docstring's rows."""
    found: dict[str, tuple[int, str]] = {}
    code = None
    for line in (errors.__doc__ or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or (set(cells[0]) <= {"-"} and cells[0]):
            continue
        if cells[0].isdigit():
            code = int(cells[0])
        for name, kind in re.findall(r"(\w+) \(([\w-]+)\)", cells[2]):
            assert code is not None
            found[name] = (code, kind)
    return found


def test_the_docstring_table_names_every_class_with_its_code_and_kind() -> None:
    table = _table()
    assert len(CLASSES) > 15
    for cls in CLASSES:
        assert table.get(cls.__name__) == (cls.exit_code, cls.kind), cls.__name__


def test_the_classes_come_in_exit_code_order() -> None:
    tree = ast.parse(Path(errors.__file__).read_text(encoding="utf-8"))
    by_name = {c.__name__: c for c in CLASSES}
    codes = [
        by_name[n.name].exit_code
        for n in tree.body
        if isinstance(n, ast.ClassDef) and n.name in by_name
    ]
    assert codes == sorted(codes)
