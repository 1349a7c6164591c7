"""A ``setup.py``'s values read from its syntax tree, never executed: what the project
beside ``gpuenv.toml`` (``spec/_local``) and ``gpuenv import`` (``importers/setup_py``)
both need of one.

- ``literal``: a value written as a literal, a module-level name bound to one, or a sum
  of those (``base + ["einops"]``); bounded, since a few KB of nested sums
  (``a = b + b; b = c + c; ...``) would otherwise build gigabytes.
- ``requirement_files``: the one requirements file a computed value reads
  (``open("requirements.txt").read().splitlines()``, a ``with open(...)`` block, a
  ``parse_requirements("requirements/runtime.txt")`` helper of the file's own, a
  pathlib or ``os.path.join`` path), found in the syntax alone.

Standard library only.
"""

from __future__ import annotations

import ast
from typing import Any

MAX_LITERAL = 1024 * 1024  # characters or items of one value read from setup.py
MAX_STEPS = 10_000  # nodes followed to read one value
MAX_DEPTH = 20  # names and sums followed inside one another
FILE_DEPTH = 4  # names and calls followed to find a requirements file

# What a value that cannot be read as a literal raises (literal_eval's own errors too).
NOT_A_LITERAL = (ValueError, TypeError, SyntaxError, RecursionError, MemoryError)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple, dict, set)) else 1


class SetupSyntax:
    """One ``setup.py``'s tree, indexed by the names it binds and the functions it
    defines."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        # module level, one plain target: what ``literal`` follows
        self.names: dict[str, ast.expr] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name):
                    self.names[target.id] = statement.value
        # every binding outside functions, with the ``with`` items around it: what
        # ``requirement_files`` follows (``with open(p) as f: reqs = f.read()``)
        self.bindings: dict[str, list[ast.AST]] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self._index(tree, ())

    def _index(self, node: ast.AST, withs: tuple[ast.AST, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef):
                self.functions.setdefault(child.name, child)
                continue  # its locals are not the module's names
            inner = withs
            if isinstance(child, ast.With):
                inner = (*withs, *(item.context_expr for item in child.items))
            targets: list[ast.expr] = []
            value: ast.AST | None = None
            if isinstance(child, ast.Assign):
                targets, value = list(child.targets), child.value
            elif isinstance(child, (ast.AnnAssign, ast.AugAssign)) and child.value is not None:
                targets, value = [child.target], child.value
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    self.bindings.setdefault(target.id, []).extend([value, *inner])
            self._index(child, inner)

    # --- literals ---------------------------------------------------------------------------

    def literal(self, node: ast.expr) -> Any:
        """The value (following names and ``+``); one of ``NOT_A_LITERAL`` when it is
        computed, too indirect or too large."""
        return self._literal(node, 0, [0])

    def _literal(self, node: ast.expr, depth: int, steps: list[int]) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError("too indirect")
        steps[0] += 1
        if steps[0] > MAX_STEPS:
            raise ValueError("too many steps")
        if isinstance(node, ast.Name) and node.id in self.names:
            return self._literal(self.names[node.id], depth + 1, steps)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._literal(node.left, depth + 1, steps)
            right = self._literal(node.right, depth + 1, steps)
            if _size(left) + _size(right) > MAX_LITERAL:
                raise ValueError("too large")
            return left + right
        value = ast.literal_eval(node)
        if _size(value) > MAX_LITERAL:
            raise ValueError("too large")
        return value

    # --- requirements files -----------------------------------------------------------------

    def requirement_files(self, node: ast.AST) -> tuple[str, ...]:
        """The requirements file ``node`` reads (a path relative to setup.py, ``/``
        separated): the ``.txt`` paths written in it, in the bindings of the names it
        uses, or in the call of a function this file defines (the call's own paths
        first, else the function's). Empty when none or more than one is found:
        nothing is guessed."""
        found = self._paths(node, FILE_DEPTH, set())
        return tuple(found) if len(found) == 1 else ()

    def _paths(self, node: ast.AST, depth: int, seen: set[str]) -> list[str]:
        if depth == 0:
            return []
        found = _txt_paths(node)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id not in seen:
                seen.add(sub.id)
                for value in self.bindings.get(sub.id, []):
                    found += self._paths(value, depth - 1, seen)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                function = self.functions.get(sub.func.id)
                if function is not None and not _txt_paths(sub) and sub.func.id not in seen:
                    seen.add(sub.func.id)
                    found += self._paths(function, depth - 1, seen)
        return list(dict.fromkeys(found))


def _txt_paths(node: ast.AST) -> list[str]:
    """The ``.txt`` paths written in ``node`` (literal parts of a join taken along)."""
    found: list[str] = []
    for sub in ast.walk(node):
        parts: list[object] = []
        if isinstance(sub, ast.Call) and _is_join(sub.func):
            parts = [a.value for a in sub.args if isinstance(a, ast.Constant)]
        elif isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Div):
            parts = _divided(sub)
        elif isinstance(sub, ast.Constant):
            parts = [sub.value]
        strings = [p for p in parts if isinstance(p, str)]
        if strings and len(strings) == len(parts) and strings[-1].endswith(".txt"):
            found.append("/".join(strings))
    # a joined path also shows its last part alone: keep the longest spelling of each
    return [p for p in found if not any(o != p and o.endswith("/" + p) for o in found)]


def _is_join(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "join") or (
        isinstance(func, ast.Name) and func.id == "join"
    )


def _divided(node: ast.expr) -> list[object]:
    """The literal parts of ``a / "b" / "c.txt"`` (pathlib's join)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _divided(node.left) + _divided(node.right)
    return [node.value] if isinstance(node, ast.Constant) else []
