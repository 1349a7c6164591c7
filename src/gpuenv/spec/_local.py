"""The Python project beside ``gpuenv.toml`` (``[project] path``), read from its files.

What the lock and the install need of it, without running any of its code:

- its name and dependencies: ``pyproject.toml``'s ``[project]`` when they are static
  (as uv reads a project), else the literal ``name=`` / ``install_requires=`` of its
  ``setup.py``'s ``setup(...)`` call, read through ``ast`` (never executed); a project
  whose dependencies are computed is refused at lock time, naming the fix;
- its dependency groups (PEP 735 ``[dependency-groups]``, ``{include-group = ...}``
  included);
- how it builds: ``[build-system] requires``; whether its ``setup.py`` uses
  ``torch.utils.cpp_extension`` (``CUDAExtension``, ``CppExtension``,
  ``BuildExtension``: a build against the prefix's torch, without build isolation) and
  whether it carries CUDA (``.cu``/``.cuh``) or other native sources.

Nothing here starts a process; standard library only (plus the spec's own types).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv import _toml
from gpuenv._srctree import CUDA_SUFFIXES, NATIVE_SUFFIXES, walk
from gpuenv.errors import SpecError, SpecProblem
from gpuenv.names import normalize_name
from gpuenv.spec import LoadedSpec, LocalProject, Spec

if TYPE_CHECKING:
    import ast

    from gpuenv._setuppy import SetupSyntax

FILE_LIMIT = 4 << 20
TORCH_EXTENSION_NAMES = frozenset({"CUDAExtension", "CppExtension", "BuildExtension"})


def _read(path: Path, file: str, what: str) -> str:
    from gpuenv import _fs
    from gpuenv.errors import InputFileError

    try:
        return _fs.read_text(path, limit=FILE_LIMIT, what=what)
    except InputFileError as exc:
        raise SpecError([SpecProblem(file, None, "project.path", exc.message, exc.hint)]) from None
    except OSError as exc:
        problem = f"{path}: cannot read: {exc.strerror}"
        raise SpecError([SpecProblem(file, None, "project.path", problem)]) from None


def _pyproject(path: Path, file: str) -> dict[str, Any]:
    text = _read(path, file, "pyproject.toml")
    try:
        data = _toml.loads(text)
    except (_toml.TomlError, RecursionError) as exc:
        raise SpecError(
            [SpecProblem(str(path), None, "", f"not valid TOML: {exc}", "fix the project's file")]
        ) from None
    return data


def _strings(value: object, path: Path, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError([SpecProblem(str(path), None, key, "expected an array of strings")])
    return tuple(value)


def _requirements(lines: tuple[str, ...], path: Path, key: str) -> tuple[str, ...]:
    """``lines``, each checked as a PEP 508 requirement (what the resolver will read)."""
    from packaging.requirements import InvalidRequirement, Requirement

    problems = []
    for index, line in enumerate(lines):
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            problems.append(
                SpecProblem(
                    str(path), None, f"{key}[{index}]", f"{line!r} is not a requirement: {exc}"
                )
            )
    if problems:
        raise SpecError(problems)
    return lines


def _groups(data: Mapping[str, Any], path: Path) -> dict[str, tuple[str, ...]]:
    """PEP 735 ``[dependency-groups]``, includes expanded (a cycle is an error)."""
    raw = data.get("dependency-groups", {})
    if not isinstance(raw, dict):
        raise SpecError([SpecProblem(str(path), None, "dependency-groups", "expected a table")])
    names = {normalize_name(k): k for k in raw}

    def expand(name: str, seen: tuple[str, ...]) -> list[str]:
        if name in seen:
            cycle = " -> ".join((*seen, name))
            raise SpecError(
                [
                    SpecProblem(
                        str(path), None, "dependency-groups", f"groups include in a cycle: {cycle}"
                    )
                ]
            )
        out: list[str] = []
        entries = raw[names[name]]
        if not isinstance(entries, list):
            raise SpecError(
                [SpecProblem(str(path), None, f"dependency-groups.{name}", "expected an array")]
            )
        for entry in entries:
            if isinstance(entry, str):
                out.append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
                included = normalize_name(entry["include-group"])
                if included not in names:
                    raise SpecError(
                        [
                            SpecProblem(
                                str(path),
                                None,
                                f"dependency-groups.{name}",
                                f"includes {included!r}, which is not a group",
                            )
                        ]
                    )
                out += expand(included, (*seen, name))
            else:
                raise SpecError(
                    [
                        SpecProblem(
                            str(path),
                            None,
                            f"dependency-groups.{name}",
                            f"{entry!r} is neither a requirement nor {{include-group = ...}}",
                        )
                    ]
                )
        return out

    return {
        name: _requirements(
            tuple(dict.fromkeys(expand(name, ()))), path, f"dependency-groups.{name}"
        )
        for name in sorted(names)
    }


# --- setup.py, read through ast ---------------------------------------------------------


class SetupFacts:
    """What a ``setup.py`` says without running it."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.install_requires: tuple[str, ...] | None = None  # None: not a literal
        # Not a literal, but read from these files (relative to setup.py): the common
        # ``install_requires=open("requirements.txt").read().splitlines()`` and its kin
        self.requirement_files: tuple[str, ...] = ()
        self.torch_extension = False  # torch.utils.cpp_extension is used
        self.cuda_extension = False  # CUDAExtension is used
        self.ext_modules = False  # setup(ext_modules=...) or an Extension


def _literal(node: ast.AST | None) -> object:
    import ast

    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def read_setup_py(text: str) -> SetupFacts:
    """The facts of a ``setup.py`` (``SyntaxError`` when it is not Python)."""
    # ast (and _setuppy with it), 1 ms of imports, only for a project with a setup.py
    import ast

    from gpuenv._setuppy import NOT_A_LITERAL, SetupSyntax

    facts = SetupFacts()
    tree = ast.parse(text)
    syntax: SetupSyntax | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "torch.utils.cpp_extension"
        ):
            facts.torch_extension = True
            if any(a.name == "CUDAExtension" for a in node.names):
                facts.cuda_extension = True
        elif isinstance(node, ast.Import) and any(
            a.name.startswith("torch.utils.cpp_extension") for a in node.names
        ):
            facts.torch_extension = True
        elif isinstance(node, ast.Attribute) and node.attr in TORCH_EXTENSION_NAMES:
            facts.torch_extension = True
            facts.cuda_extension |= node.attr == "CUDAExtension"
        elif isinstance(node, ast.Name) and node.id in TORCH_EXTENSION_NAMES:
            facts.cuda_extension |= node.id == "CUDAExtension"
        elif isinstance(node, ast.Call) and _called(node) in ("setup", "setuptools.setup"):
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            name = _literal(keywords.get("name"))
            facts.name = name if isinstance(name, str) else facts.name
            facts.ext_modules |= "ext_modules" in keywords
            if "install_requires" not in keywords:
                facts.install_requires = ()
                continue
            syntax = syntax or SetupSyntax(tree)
            try:
                requires = syntax.literal(keywords["install_requires"])
            except NOT_A_LITERAL:
                requires = None
            if isinstance(requires, str):
                requires = requires.splitlines()
            if isinstance(requires, (list, tuple)) and all(isinstance(r, str) for r in requires):
                facts.install_requires = tuple(
                    r.strip() for r in requires if r.strip() and not r.strip().startswith("#")
                )
            else:
                facts.requirement_files = syntax.requirement_files(keywords["install_requires"])
    return facts


def _called(node: ast.Call) -> str:
    import ast

    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


# --- the project -----------------------------------------------------------------------


def _setup_requirements(
    root: Path, setup: SetupFacts, file: str
) -> tuple[tuple[str, ...] | None, tuple[Path, ...]]:
    """A setup.py's dependencies (None: computed, unknown) and the files they came from."""
    if setup.install_requires is not None:
        lines = setup.install_requires
        return _requirements(lines, root / "setup.py", "setup(install_requires)"), ()
    if setup.requirement_files:
        read = _requirement_file(root, setup.requirement_files[0], file)
        if read is not None:
            return read
    return None, ()


def read_project(root: Path, file: str) -> LocalProject | None:
    """The project at ``root``; None when nothing there is a Python project (no
    ``[project]`` table and no ``setup.py``)."""
    pyproject_path, setup_path = root / "pyproject.toml", root / "setup.py"
    data = _pyproject(pyproject_path, file) if pyproject_path.is_file() else {}
    setup = None
    if setup_path.is_file():
        try:
            setup = read_setup_py(_read(setup_path, file, "setup.py"))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            problem = f"{setup_path}: not Python that gpuenv can read ({type(exc).__name__})"
            raise SpecError([SpecProblem(file, None, "project.path", problem)]) from None
    table = data.get("project")
    if not isinstance(table, dict):
        table = None
    if table is None and setup is None:
        return None
    dynamic = table.get("dynamic", []) if table else []
    name: str | None = table.get("name") if table else None
    if not isinstance(name, str):
        name = setup.name if setup else None
    requirements: tuple[str, ...] | None = None
    requirement_files: tuple[Path, ...] = ()
    if table is not None and "dependencies" not in dynamic:
        requirements = _strings(
            table.get("dependencies", []), pyproject_path, "project.dependencies"
        )
        requirements = _requirements(requirements, pyproject_path, "project.dependencies")
    elif setup is not None:
        requirements, requirement_files = _setup_requirements(root, setup, file)
    system = data.get("build-system")
    backend_path: tuple[str, ...] = ()
    if isinstance(system, dict) and "backend-path" in system:
        backend_path = _strings(system["backend-path"], pyproject_path, "build-system.backend-path")
    if isinstance(system, dict) and "requires" in system:
        build_requires = _strings(system["requires"], pyproject_path, "build-system.requires")
    else:  # PEP 517's default backend
        build_requires = ("setuptools>=40.8.0",)
    suffixes = {Path(p).suffix.lower() for p in walk(root)} if root.is_dir() else set()
    cuda = bool(suffixes & CUDA_SUFFIXES) or bool(setup and setup.cuda_extension)
    compiled = cuda or bool(suffixes & NATIVE_SUFFIXES) or bool(setup and setup.ext_modules)
    return LocalProject(
        root=root,
        name=normalize_name(name) if name else "",
        requirements=requirements,
        groups=_groups(data, pyproject_path),
        build_requires=build_requires,
        uses_torch=bool(setup and setup.torch_extension),
        cuda=cuda,
        compiled=compiled,
        package=bool(setup is not None or "build-system" in data),
        backend_path=backend_path,
        requirement_files=requirement_files,
        extras=_extras(table, pyproject_path),
    )


def _extras(table: Mapping[str, Any] | None, path: Path) -> dict[str, tuple[str, ...]]:
    """``[project] optional-dependencies`` by normalised extra name; none when dynamic."""
    if table is None or "optional-dependencies" in table.get("dynamic", []):
        return {}
    raw = table.get("optional-dependencies", {})
    key = "project.optional-dependencies"
    if not isinstance(raw, dict):
        raise SpecError([SpecProblem(str(path), None, key, "expected a table")])
    return {
        normalize_name(extra): _requirements(
            _strings(lines, path, f"{key}.{extra}"), path, f"{key}.{extra}"
        )
        for extra, lines in raw.items()
    }


_INCLUDE = re.compile(r"(?:-r|--requirement)(?:\s+|=|(?=[^\s-]))(?P<file>\S+)\Z")
MAX_INCLUDES = 8


def _requirement_file(
    root: Path, name: str, file: str
) -> tuple[tuple[str, ...], tuple[Path, ...]] | None:
    """The requirements a ``setup.py`` reads from ``name`` (pip's file format: comments
    and options dropped, ``-r`` followed in place), or None (the lock then refuses the
    computed dependencies, naming the fix) when a file is not there or not inside the
    project. A line that is not a requirement is an error naming its file."""
    found: dict[str, None] = {}
    seen: set[Path] = set()
    base = root.resolve()

    def read(relative: str) -> bool:
        path = (root / relative).resolve()
        if path in seen or len(seen) >= MAX_INCLUDES:
            return True  # a cycle, or includes without end: what was read stands
        seen.add(path)
        if not path.is_relative_to(base) or not path.is_file():
            return False
        lines: list[str] = []
        for raw in _read(path, file, relative).splitlines():
            line = re.sub(r"(^|\s)#.*", "", raw).strip()
            include = _INCLUDE.match(line)
            if include is not None:
                if not read(str(Path(relative).parent / include["file"])):
                    return False
            elif line and not line.startswith("-"):  # -e ., --index-url: pip's options
                lines.append(line)
                found.setdefault(line)  # in pip's order: an include's lines where it stands
        _requirements(tuple(lines), path, "install_requires")
        return True

    return (tuple(found), tuple(sorted(seen))) if read(name) else None


def _root(loaded: LoadedSpec) -> Path | None:
    """Where ``[project] path`` points, beside the spec ("." by default); None: false."""
    path = loaded.spec.project.path
    if path is False:
        return None
    return (loaded.path.parent.resolve() / (path if isinstance(path, str) else ".")).resolve()


def project_files(loaded: LoadedSpec) -> tuple[Path, ...]:
    """The files beside the spec that its project is read from, present or not (one
    appearing makes a project appear): what a lock depends on besides the spec."""
    root = _root(loaded)
    if root is None:
        return ()
    local = loaded.spec.local
    extra = local.requirement_files if local is not None else ()
    return (root / "pyproject.toml", root / "setup.py", *extra)


def attach(loaded: LoadedSpec) -> LoadedSpec:
    """``loaded`` with its local project read (``[project] path``; see the module doc)."""
    path, root = loaded.spec.project.path, _root(loaded)
    if root is None:
        return loaded
    file = str(loaded.path)
    if isinstance(path, str) and not root.is_dir():
        line = loaded.line("project", "path")
        raise SpecError([SpecProblem(file, line, "project.path", f"{root}: no such directory")])
    local = read_project(root, file)
    if local is None:
        if isinstance(path, str):
            line = loaded.line("project", "path")
            problem = f"{root} has neither a pyproject.toml with [project] nor a setup.py"
            raise SpecError(
                [SpecProblem(file, line, "project.path", problem, "or set path = false")]
            )
        return loaded
    spec = _own_references(replace(loaded.spec, local=local), loaded, local)
    return replace(loaded, spec=spec)


def _own_references(spec: Spec, loaded: LoadedSpec, local: LocalProject) -> Spec:
    """``spec`` with every requirement that names the project itself resolved as uv
    resolves one: ``name[extra,...]`` is the listed extras' requirements, the bare name
    is nothing more (the project is installed editable in every prefix). Left as it was,
    such a line locked the index's release of the project over the editable checkout,
    and every export named a version the prefix did not hold."""
    if not local.package or not local.name:
        return spec  # a virtual project: its name is free for the index's package
    pyproject = str(local.root / "pyproject.toml")

    def resolve(lines: tuple[str, ...], where: tuple[str, ...]) -> tuple[str, ...]:
        in_spec = where[0] in ("pip", "targets")  # else the project's own pyproject.toml
        file = str(loaded.path) if in_spec else pyproject
        out: list[str] = []
        for index, line in enumerate(lines):
            at = loaded.line(*where, index) if in_spec else None
            own = _own_extras(line, local, file, at, ".".join(where))
            out.extend(line for line in ([line] if own is None else own) if line not in out)
        return tuple(out)

    pip = spec.pip
    targets = {
        name: replace(
            t, dependencies=resolve(t.dependencies, ("targets", name, "pip", "dependencies"))
        )
        for name, t in spec.targets.items()
    }
    groups = {name: resolve(lines, ("pip", "groups", name)) for name, lines in pip.groups.items()}
    own_groups = {
        name: resolve(lines, ("dependency-groups", name)) for name, lines in local.groups.items()
    }
    local = replace(
        local,
        groups=own_groups,
        requirements=None
        if local.requirements is None
        else resolve(local.requirements, ("project", "dependencies")),
    )
    return replace(
        spec,
        pip=replace(
            pip, dependencies=resolve(pip.dependencies, ("pip", "dependencies")), groups=groups
        ),
        targets=targets,
        local=local,
    )


_NAME_AND_EXTRAS = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[(?P<extras>[^\]]*)\])?\s*$"
)


def _own_extras(
    line: str, local: LocalProject, file: str, at: int | None, key: str
) -> list[str] | None:
    """The requirements ``line`` stands for when it names the project itself (None: it
    does not). A version, URL or marker on it is refused, in the spec or inside one of
    the project's extras alike: the project is the checkout."""
    extras = _self_extras(line, local, file, at, key)
    if extras is None:
        return None
    pyproject = str(local.root / "pyproject.toml")
    wanted, lines, seen = list(extras), [], set()
    while wanted:
        extra = wanted.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        if extra not in local.extras:
            known = ", ".join(sorted(local.extras)) or "none that gpuenv can read"
            problem = (
                f"{line!r}: this project ({local.name}) has no extra {extra!r} in its "
                f"pyproject.toml [project] optional-dependencies (extras: {known})"
            )
            hint = (  # setup.py's extras_require, or dynamic ones: not read without a build
                "gpuenv reads the extras of pyproject.toml's [project] table when they are "
                "static; list that extra's requirements in the spec instead"
            )
            raise SpecError([SpecProblem(file, at, key, problem, hint)])
        where = f"project.optional-dependencies.{extra}"
        for requirement in local.extras[extra]:
            nested = _self_extras(requirement, local, pyproject, None, where)
            if nested is None:
                lines.append(requirement)
            else:  # all = ["me[a,b]"]
                wanted += nested
    return lines


def _self_extras(
    line: str, local: LocalProject, file: str, at: int | None, key: str
) -> list[str] | None:
    """The extras ``line`` asks of the project itself (None: it names another package);
    a version, URL or marker on it is refused (the index's release would be locked)."""
    head = re.split(r"[\s;\[<>=!~@(]", line.strip(), maxsplit=1)[0]
    if normalize_name(head) != local.name:
        return None
    match = _NAME_AND_EXTRAS.match(line)
    if match is None:
        problem = (
            f"{line!r} names this project ({local.name}, installed editable from "
            f"{local.root}) with a version, URL or marker: the prefix holds the checkout"
        )
        raise SpecError(
            [SpecProblem(file, at, key, problem, f"write {head}[extra] for its extras, or drop it")]
        )
    return [normalize_name(e.strip()) for e in (match["extras"] or "").split(",") if e.strip()]


def requirement_names(lines: tuple[str, ...]) -> list[str]:
    """The normalised names of requirement lines (for messages)."""
    return [
        normalize_name(re.split(r"[\s;\[<>=!~@(]", line.strip(), maxsplit=1)[0]) for line in lines
    ]
