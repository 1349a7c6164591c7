"""No cycle between gpuenv's modules, counting every import the code can run: at module
level and inside functions (the lazy imports that keep start-up cheap are still
dependencies). Imports under ``if TYPE_CHECKING:`` never run and are not counted.

import-linter checks the layers between packages; this checks every module against every
other, which is where cycles hid (lock model and format, the hardware fingerprint and
NVML, doctor checks importing each other, cli and its fast path).
"""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

SRC = Path(__file__).resolve().parents[1] / "src"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

# A package whose __init__ imports its private modules lazily while they import its
# types: an idiom, not a tangle (docs/dev/architecture.md). Nothing else may cycle.
ALLOWED = [
    {
        "gpuenv.spec",
        "gpuenv.spec._checks",
        "gpuenv.spec._fast",
        "gpuenv.spec._local",
        "gpuenv.spec._models",
        "gpuenv.spec._values",
    }
]


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The gpuenv modules ``module`` imports anywhere it can run an import."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in known and m != module}


def graph(root: Path = SRC / "gpuenv") -> dict[str, set[str]]:
    files = {_name(p): p for p in root.rglob("*.py")}
    return {m: imports(m, p, set(files)) for m, p in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_module_imports_itself_back_even_lazily() -> None:
    edges = graph()
    assert len(edges) > 150
    tangled = [c for c in cycles(edges) if c not in ALLOWED]
    shown = [
        {m: sorted(edges[m] & c) for m in sorted(c)} for c in tangled
    ]  # who imports whom inside each cycle
    assert not tangled, shown


def test_a_lazy_import_cycle_is_found(tmp_path: Path) -> None:
    """The detector itself: a cycle closed only by an import inside a function counts,
    one closed only under TYPE_CHECKING does not."""
    pkg = tmp_path / "gpuenv"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from gpuenv import b\n")
    (pkg / "b.py").write_text("def f():\n    from gpuenv.a import x\n")
    (pkg / "c.py").write_text("from gpuenv.d import y\n")
    (pkg / "d.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from . import c\n")
    files = {".".join(p.relative_to(tmp_path).with_suffix("").parts): p for p in pkg.glob("*.py")}
    files["gpuenv"] = files.pop("gpuenv.__init__")
    edges = {m: imports(m, p, set(files)) for m, p in files.items()}
    assert cycles(edges) == [{"gpuenv.a", "gpuenv.b"}]


def _contract(name: str) -> set[str]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    return set(next(c for c in contracts if c["name"] == name)["modules"])


def test_every_command_module_is_in_the_independence_contract() -> None:
    commands = {f"gpuenv.cli.{p.stem}" for p in (SRC / "gpuenv" / "cli").glob("*_cmd.py")}
    assert _contract("Command modules are independent") == commands


def test_every_doctor_check_is_in_the_independence_contract() -> None:
    from gpuenv.doctor import CHECKS

    checks = {check.__module__ for check in CHECKS}
    assert _contract("Doctor checks are independent") == checks


def test_every_top_level_module_has_its_layer() -> None:
    """The layers contract says what each top-level module and package is: a new one
    must be placed in it (an unlisted module escapes the layering)."""
    layers = next(
        c["layers"]
        for c in tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
        if c["name"] == "Layers point downward"
    )
    listed = {name.strip() for layer in layers for name in layer.split("|")}
    root = SRC / "gpuenv"
    tops = {f"gpuenv.{p.stem}" for p in root.glob("*.py") if not p.stem.startswith("__")}
    tops |= {f"gpuenv.{p.name}" for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert tops == listed, (sorted(tops - listed), sorted(listed - tops))
