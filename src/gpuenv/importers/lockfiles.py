"""The newer project formats: ``.python-version``, ``Pipfile``/``Pipfile.lock``,
``poetry.lock``, ``uv.lock`` and ``pixi.toml``.

A lock file (``Pipfile.lock``, ``poetry.lock``, ``uv.lock``) records what a resolver chose
for the whole environment: a record, like ``pip freeze`` (the project's own entry and
development-only groups left out where the file says which they are). ``Pipfile`` and
``pixi.toml`` are environment definitions: pixi's ``[dependencies]`` are conda packages
(read as an environment.yml's are), ``[pypi-dependencies]`` pip's, and its features are
read unless they are development or another platform's. ``.python-version`` names the
Python only.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuenv._tomlpos import Path as KeyPath
from gpuenv._tomlpos import key_lines, line_of
from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._devfiles import NOT_GPU_GROUPS, is_dev_group
from gpuenv.importers._text import fail, line_not_read, parse_toml
from gpuenv.importers.conda_env import CondaSink
from gpuenv.importers.model import (
    DROPPED,
    NAME,
    PYTHON,
    UNMANAGED,
    Authority,
    Origin,
    ReadingBuilder,
)
from gpuenv.importers.pyproject import poetry_to_pep440
from gpuenv.plan import KNOWN_PYTHONS

_LINUX = ("linux-64", "linux-aarch64", "linux")


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def read_python_version(ctx: Context, path: Path, text: str, fmt: str) -> None:
    """pyenv's and uv's ``.python-version``: the first line that is not a comment."""
    display = ctx.display(path)
    builder = ReadingBuilder(display, "python-version", Authority.DEFINITION)
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        version = re.sub(r"^(cpython-|python)", "", line.split("/")[-1])
        builder.fact(PYTHON, version, Origin(display, number, line))
        break
    ctx.readings.append(builder.build())


# --- Pipfile and Pipfile.lock -----------------------------------------------------------


def _with_extras(name: str, extras: Any) -> str:
    """``name[a,b]``; extras that are not a list of names are ignored."""
    if isinstance(extras, list) and extras and all(isinstance(e, str) for e in extras):
        return f"{name}[{','.join(extras)}]"
    return name


def _pipfile_entry(name: str, value: Any) -> str | None:
    """A Pipfile ``[packages]`` entry as a requirement line (None: not a requirement)."""
    if isinstance(value, str):
        return f"{name}{'' if value.strip() == '*' else value.strip()}"
    if not isinstance(value, dict):
        return None
    label = _with_extras(name, value.get("extras"))
    if isinstance(value.get("git"), str):
        ref = value.get("ref")
        return f"{label} @ git+{value['git']}" + (f"@{ref}" if isinstance(ref, str) else "")
    if "path" in value or "file" in value:
        return None
    version = value.get("version", "*")
    marker = value.get("markers")
    text = f"{label}{'' if version == '*' else version}"
    return text + (f"; {marker}" if isinstance(marker, str) else "")


def _feed_pipfile_entry(
    builder: ReadingBuilder, feeder: requirements.PipLines, name: str, value: Any, origin: Origin
) -> None:
    """One Pipfile or Pipfile.lock package: a requirement, or a note when it is a local
    path or file."""
    line = _pipfile_entry(name, value)
    if line is None:
        builder.note(UNMANAGED, f"{name}: a local path or file source", origin)
        return
    with line_not_read(builder, origin):
        feeder.requirement(line, origin)


def read_pipfile(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    data = parse_toml(text, display)
    lines = key_lines(text)
    builder = ReadingBuilder(display, "pipfile", Authority.DEFINITION)
    feeder = requirements.PipLines(ctx, builder, path.parent)
    python = _table(data.get("requires")).get("python_version") or _table(data.get("requires")).get(
        "python_full_version"
    )
    if isinstance(python, str):
        where = ("requires", "python_version")
        builder.fact(PYTHON, python, Origin(display, line_of(lines, where), f"python = {python}"))
    sources = data.get("source")
    for index, source in enumerate(sources if isinstance(sources, list) else []):
        if isinstance(source, dict) and isinstance(source.get("url"), str):
            origin = Origin(display, line_of(lines, ("source", index)), "[[source]]")
            requirements.index_facts(builder, source["url"], origin)
    for name, value in _table(data.get("packages")).items():
        origin = Origin(display, line_of(lines, ("packages", name)), f"{name} = {value!r}"[:200])
        _feed_pipfile_entry(builder, feeder, name, value, origin)
    if _table(data.get("dev-packages")):
        origin = Origin(display, line_of(lines, ("dev-packages",)), "[dev-packages]")
        builder.note(DROPPED, "[dev-packages] left out (development tools)", origin)
    ctx.readings.append(builder.build())


def _json_line(text: str, key: str) -> int | None:
    at = text.find(f'"{key}"')
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def read_pipfile_lock(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        fail(display, None, f"not valid JSON: {exc}")
    if not isinstance(data, dict):
        fail(display, 1, "a Pipfile.lock is a JSON object (_meta, default, develop)")
    builder = ReadingBuilder(display, "pipfile-lock", Authority.RECORD)
    feeder = requirements.PipLines(ctx, builder, path.parent)
    python = _table(_table(data.get("_meta")).get("requires")).get("python_version")
    if isinstance(python, str):
        builder.fact(PYTHON, python, Origin(display, _json_line(text, "python_version"), python))
    for name, value in _table(data.get("default")).items():
        origin = Origin(display, _json_line(text, name), f"{name} {value.get('version', '')}"
                        if isinstance(value, dict) else name)  # fmt: skip
        _feed_pipfile_entry(builder, feeder, name, value, origin)
    if _table(data.get("develop")):
        origin = Origin(display, _json_line(text, "develop"), "develop")
        builder.note(DROPPED, "the develop section left out (development tools)", origin)
    ctx.readings.append(builder.build())


# --- poetry.lock and uv.lock ------------------------------------------------------------


# uv.lock source keys of a package that comes from the checkout, not an index
_LOCAL = frozenset({"editable", "virtual", "directory", "path"})
_LOCAL_WHY = (
    "a folder or archive of the checkout the lock installs from its path: not an index "
    "requirement; `gpuenv run -- pip install --no-deps <path>` installs it"
)


def _marker_holds(marker: Any, extras: tuple[str, ...]) -> bool:
    """A uv.lock dependency's marker holds on Linux x86_64 for some Python gpuenv installs,
    with one of ``extras`` (the project's groups read) active or none; a marker that does
    not parse holds (the entry is kept, as before this walk)."""
    from packaging.markers import InvalidMarker, Marker, UndefinedComparison

    if not isinstance(marker, str) or not marker.strip():
        return True
    try:
        parsed = Marker(marker)
        return any(
            parsed.evaluate(
                {
                    "sys_platform": "linux",
                    "platform_system": "Linux",
                    "platform_machine": "x86_64",
                    "os_name": "posix",
                    "implementation_name": "cpython",
                    "platform_python_implementation": "CPython",
                    "python_version": python,
                    "python_full_version": f"{python}.0",
                    "extra": extra,
                }
            )
            for python in KNOWN_PYTHONS
            for extra in (*extras, "")[: max(len(extras), 1)]
        )
    except (InvalidMarker, UndefinedComparison, ValueError):
        return True


def _gpu_groups(package: dict[str, Any]) -> list[str]:
    """The project's optional groups an install on a GPU reads: not development or CPU."""
    return [
        g
        for g in _table(package.get("optional-dependencies"))
        if not is_dev_group(g) and g.lower() not in NOT_GPU_GROUPS
    ]


def _active_extras(root: dict[str, Any]) -> list[str]:
    """The marker values of the project's groups read: uv writes an extra as
    extra-<len>-<project>-<extra> where the project's extras conflict (nanochat's cpu and
    gpu), else by its own name; one spelling per lock, or 'extra != ...' holds for the
    other and the entry for no extra is reached too."""
    name = str(root.get("name", ""))
    encoded = f"extra-{len(name)}-{name}-"
    entries = [*(root.get("dependencies") or [])]
    entries += [e for g in _table(root.get("optional-dependencies")).values() for e in g or []]
    if any(isinstance(e, dict) and encoded in str(e.get("marker", "")) for e in entries):
        return [f"{encoded}{g}" for g in _gpu_groups(root)]
    return _gpu_groups(root)


def _uv_matches(
    packages: list[Any], by_name: dict[str, list[int]], entry: dict[str, Any]
) -> list[int]:
    """The package entries a dependency names: by name, then version, then source."""
    found = [
        i
        for i in by_name.get(str(entry.get("name")), [])
        if "version" not in entry or packages[i].get("version") == entry["version"]
    ]
    if len(found) > 1 and "source" in entry:
        found = [i for i in found if packages[i].get("source") == entry["source"]] or found
    return found


def _uv_reached(packages: list[Any]) -> set[int] | None:
    """The indexes of the uv.lock packages an install of the project on Linux x86_64
    reaches: from the project's entry (source virtual or editable), its dependencies and
    those of its optional groups but development and CPU ones, each dependency's marker
    evaluated there with those groups active (nanochat's lock holds torch 2.9.1+cpu for its
    `cpu` extra, 2.9.1+cu128 for `gpu`, its dev group's ipykernel and pytest, and appnope
    for macOS: all were read as the paper's environment, +cpu first). None where no entry
    is the project's."""
    by_name: dict[str, list[int]] = {}
    for index, package in enumerate(packages):
        if isinstance(package, dict) and isinstance(package.get("name"), str):
            by_name.setdefault(package["name"], []).append(index)
    roots = [
        i
        for i, p in enumerate(packages)
        if isinstance(p, dict) and {"virtual", "editable"} & set(_table(p.get("source")))
    ]
    if not roots:
        return None
    active = tuple(e for root in roots for e in _active_extras(packages[root]))
    todo = [(root, tuple(_gpu_groups(packages[root]))) for root in roots]
    reached: set[int] = set()
    while todo:
        index, groups = todo.pop()
        if index in reached:
            continue
        reached.add(index)
        package = packages[index]
        optional = _table(package.get("optional-dependencies"))
        entries = list(package.get("dependencies") or [])
        entries += [e for g in groups for e in optional.get(g) or []]
        for entry in entries:
            if not isinstance(entry, dict) or not _marker_holds(entry.get("marker"), active):
                continue
            asked = entry.get("extra")
            inner = tuple(asked) if isinstance(asked, list) else ()
            todo.extend((i, inner) for i in _uv_matches(packages, by_name, entry))
    return reached


def _locked(
    ctx: Context,
    path: Path,
    text: str,
    fmt: str,
    *,
    skip: frozenset[str] = frozenset(),
    walk: bool = False,
) -> tuple[ReadingBuilder, dict[str, Any], dict[KeyPath, int]]:
    display = ctx.display(path)
    data = parse_toml(text, display)
    lines = key_lines(text)
    builder = ReadingBuilder(display, fmt, Authority.RECORD)
    packages = data.get("package", [])
    if not isinstance(packages, list):
        fail(display, line_of(lines, ("package",)), "package: not an array of tables")
    newest: dict[str, tuple[int, str]] = {}
    feeder = requirements.PipLines(ctx, builder, path.parent)
    reached = _uv_reached(packages) if walk else None
    if reached is not None and len(reached) < len(packages):
        builder.note(
            DROPPED,
            f"{len(packages) - len(reached)} of its {len(packages)} entries left out: an "
            "install of the project on Linux x86_64 does not reach them (development and "
            "CPU groups, other platforms' packages)",
            Origin(display, None, ""),
        )
    for index, package in enumerate(packages):
        if not isinstance(package, dict):
            continue
        if reached is not None and index not in reached:
            continue
        name, version = package.get("name"), package.get("version")
        if not isinstance(name, str) or not isinstance(version, str) or name in skip:
            continue
        origin = Origin(display, line_of(lines, ("package", index)), f"{name}=={version}")
        category = package.get("category")
        if isinstance(category, str) and is_dev_group(category):
            continue
        source = _table(package.get("source"))
        if _LOCAL.intersection(source) or source.get("type") in ("directory", "file"):
            # the project itself, or a folder or archive of the checkout: uv writes
            # { directory = "sd-scripts" } or { path = ... }, poetry type = "directory"
            if "virtual" not in source and "editable" not in source:
                builder.note(DROPPED, f"{name}: {_LOCAL_WHY}", origin)
            continue
        if name in newest:  # one entry per Python or platform fork: the newest is kept
            builder.note(DROPPED, f"{name}=={newest[name][1]}: another fork's entry", origin)
            continue
        newest[name] = (index, version)
        git = source.get("git") if isinstance(source.get("git"), str) else None
        if git is None and source.get("type") == "git" and isinstance(source.get("url"), str):
            ref = source.get("resolved_reference") or source.get("reference") or ""
            git = f"{source['url']}@{ref}" if ref else source["url"]
        line = f"{name} @ git+{git.split('?')[0]}" if git else f"{name}=={version}"
        with line_not_read(builder, origin):
            feeder.requirement(line, origin)
    return builder, data, lines


def read_poetry_lock(ctx: Context, path: Path, text: str, fmt: str) -> None:
    builder, _data, _lines = _locked(ctx, path, text, "poetry-lock")
    ctx.readings.append(builder.build())


def read_uv_lock(ctx: Context, path: Path, text: str, fmt: str) -> None:
    builder, data, lines = _locked(ctx, path, text, "uv-lock", walk=True)
    python = data.get("requires-python")
    if isinstance(python, str):
        origin = Origin(builder.file, line_of(lines, ("requires-python",)), python)
        builder.fact(PYTHON, python, origin)
    ctx.readings.append(builder.build())


# --- pixi.toml --------------------------------------------------------------------------


def _conda_text(name: str, value: Any) -> str | None:
    if isinstance(value, str):
        return name if value.strip() in ("", "*") else f"{name} {value.strip()}"
    if isinstance(value, dict):
        version = value.get("version", "*")
        build = value.get("build")
        text = name if version in ("", "*") else f"{name} {version}"
        return f"{text} {build}" if isinstance(build, str) and version not in ("", "*") else text
    return None


def _pypi_text(name: str, value: Any) -> str | None:
    if isinstance(value, str):
        return f"{name}{poetry_to_pep440(value) if value.strip() not in ('', '*') else ''}"
    if isinstance(value, dict):
        if isinstance(value.get("git"), str):
            ref = value.get("rev") or value.get("tag") or value.get("branch")
            return f"{name} @ git+{value['git']}" + (f"@{ref}" if isinstance(ref, str) else "")
        if "path" in value or "url" in value:
            return None
        label = _with_extras(name, value.get("extras"))
        version = value.get("version", "*")
        return f"{label}{'' if version in ('', '*') else poetry_to_pep440(str(version))}"
    return None


class _Pixi:
    def __init__(self, ctx: Context, path: Path, text: str) -> None:
        self.ctx = ctx
        self.display = ctx.display(path)
        self.data = parse_toml(text, self.display)
        self.lines = key_lines(text)
        self.builder = ReadingBuilder(self.display, "pixi", Authority.DEFINITION)
        self.sink = CondaSink(ctx, self.builder)
        self.feeder = requirements.PipLines(ctx, self.builder, path.parent)

    def origin(self, key: KeyPath, text: str) -> Origin:
        return Origin(self.display, line_of(self.lines, key), text[:200])

    def tables(self, base: KeyPath, table: dict[str, Any]) -> None:
        for name, value in _table(table.get("dependencies")).items():
            origin = self.origin((*base, "dependencies", name), f"{name} = {value!r}")
            spec = _conda_text(name, value)
            with line_not_read(self.builder, origin):
                if spec is None:
                    fail(self.display, origin.line, f"{name}: not a conda version spec")
                self.sink.spec(spec, origin)
        for name, value in _table(table.get("pypi-dependencies")).items():
            origin = self.origin((*base, "pypi-dependencies", name), f"{name} = {value!r}")
            line = _pypi_text(name, value)
            if line is None:
                self.builder.note(UNMANAGED, f"{name}: a local path or URL source", origin)
                continue
            with line_not_read(self.builder, origin):
                self.feeder.requirement(line, origin)
        for platform, body in _table(table.get("target")).items():
            key: KeyPath = (*base, "target", platform)
            if platform in _LINUX or platform.startswith("unix"):
                self.tables(key, _table(body))
            else:
                self.builder.note(
                    DROPPED, f"target {platform!r}: another platform", self.origin(key, platform)
                )

    def read(self) -> None:
        project = _table(self.data.get("workspace")) or _table(self.data.get("project"))
        if isinstance(project.get("name"), str):
            self.builder.fact(
                NAME, project["name"], self.origin(("project", "name"), project["name"])
            )
        self.tables((), self.data)
        for name, body in _table(self.data.get("feature")).items():
            key: KeyPath = ("feature", name)
            if is_dev_group(name) or name.lower() in NOT_GPU_GROUPS:
                self.builder.note(DROPPED, f"feature {name!r} left out", self.origin(key, name))
                continue
            before = len(self.builder.asks)
            self.tables(key, _table(body))
            self.builder.asks[before:] = [
                replace(a, group=name) for a in self.builder.asks[before:]
            ]
        system = _table(self.data.get("system-requirements"))
        if "cuda" in system:
            origin = self.origin(("system-requirements", "cuda"), f"cuda = {system['cuda']!r}")
            self.builder.note(
                DROPPED, "system-requirements cuda: the target's driver decides", origin
            )
        self.sink.finish()
        self.ctx.readings.append(self.builder.build())


def read_pixi(ctx: Context, path: Path, text: str, fmt: str) -> None:
    _Pixi(ctx, path, text).read()
