"""``pyproject.toml``: PEP 621's ``[project]`` (dependencies, optional-dependencies,
requires-python), Poetry's ``[tool.poetry]`` (dependencies, groups, constraints such as
``^1.13``), uv's ``[[tool.uv.index]]``/``[[tool.poetry.source]]`` (a PyTorch index names
the torch build) and ``[build-system] requires`` (torch there means the project compiles
against it). Parsed by the standard library; lines come from ``gpuenv._tomlpos``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpuenv._tomlpos import Path as KeyPath
from gpuenv._tomlpos import key_lines, line_of
from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._devfiles import NOT_GPU_GROUPS, is_dev_group, only_packaging_tools
from gpuenv.importers._text import fail, line_not_read, parse_toml
from gpuenv.importers.model import (
    CUDA_EXTENSION,
    DROPPED,
    NAME,
    OPTIONAL_READ,
    PYTHON,
    UNMANAGED,
    UNREADABLE,
    Authority,
    Origin,
    ReadingBuilder,
)
from gpuenv.names import normalize_name


def _caret(version: str) -> str:
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]] or [0]
    for index, part in enumerate(parts):
        if part != 0 or index == len(parts) - 1:
            upper = [*parts[:index], part + 1]
            break
    return f">={version},<{'.'.join(str(p) for p in upper)}"


def _tilde(version: str) -> str:
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]]
    if not parts:
        return f"~{version}"  # not a version: the requirement parser says so, with the line
    upper = [parts[0] + 1] if len(parts) == 1 else [parts[0], parts[1] + 1]
    return f">={version},<{'.'.join(str(p) for p in upper)}"


def _table(value: Any) -> dict[str, Any]:
    """A TOML table, or an empty one where the file holds something else there (the
    readers look for what they know and leave the rest, so a stray type is not an error)."""
    return value if isinstance(value, dict) else {}


def poetry_to_pep440(constraint: str) -> str:
    """Poetry's constraint syntax as a PEP 440 specifier ("" for any)."""
    parts = []
    for piece in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", constraint.strip()):
        if piece in ("", "*"):
            continue
        if piece.startswith("^"):
            parts.append(_caret(piece[1:].strip()))
        elif piece.startswith("~") and not piece.startswith("~="):
            parts.append(_tilde(piece[1:].strip()))
        elif piece[0].isdigit():
            parts.append(f"=={piece}")
        else:
            parts.append(piece)
    return ",".join(parts)


def _names(items: Any) -> dict[str, str]:
    """The projects a group lists, by normalized name (what cannot be read is skipped:
    the requirement reader says so when it reads the group)."""
    from packaging.requirements import InvalidRequirement, Requirement

    found: dict[str, str] = {}
    for item in items if isinstance(items, list) else []:
        try:
            requirement = Requirement(item) if isinstance(item, str) else None
        except InvalidRequirement:
            continue
        if requirement is not None:
            found.setdefault(normalize_name(requirement.name), requirement.name)
    return found


def _own_extras(project: str, items: Any) -> set[str]:
    """The extras of ``project`` a group names (``project[a,b]`` entries)."""
    from packaging.requirements import InvalidRequirement, Requirement

    extras: set[str] = set()
    for item in items if isinstance(items, list) else []:
        try:
            requirement = Requirement(item) if isinstance(item, str) else None
        except InvalidRequirement:
            continue
        if requirement is not None and normalize_name(requirement.name) == project:
            extras |= {normalize_name(e) for e in requirement.extras}
    return extras


class _Reader:
    def __init__(self, ctx: Context, path: Path, text: str) -> None:
        self.ctx = ctx
        self.path = path
        self.display = ctx.display(path)
        self.data = parse_toml(text, self.display)
        self.lines = key_lines(text)
        self.builder = ReadingBuilder(self.display, "pyproject", Authority.METADATA)
        self.feeder = requirements.PipLines(ctx, self.builder, path.parent)

    def origin(self, path: KeyPath, text: str) -> Origin:
        return Origin(self.display, line_of(self.lines, path), text)

    def requirement_list(self, key: KeyPath, items: Any, group: str | None) -> None:
        if not isinstance(items, list):
            fail(self.display, line_of(self.lines, key), f"{'.'.join(map(str, key))}: not a list")
        for index, item in enumerate(items):
            origin = self.origin((*key, index), str(item)[:200])
            if not isinstance(item, str):
                self.builder.note(UNREADABLE, "not read: a requirement must be text", origin)
                continue
            before = len(self.builder.asks)
            with line_not_read(self.builder, origin):
                self.feeder.requirement(item, origin)
            if group is not None:
                for i in range(before, len(self.builder.asks)):
                    self.builder.asks[i] = replace(self.builder.asks[i], group=group)

    def project(self, table: dict[str, Any]) -> None:
        if isinstance(table.get("name"), str):
            self.builder.fact(NAME, table["name"], self.origin(("project", "name"), table["name"]))
        python = table.get("requires-python")
        if isinstance(python, str):
            origin = self.origin(("project", "requires-python"), f"requires-python = {python!r}")
            self.builder.fact(PYTHON, python, origin)
        self.requirement_list(("project", "dependencies"), table.get("dependencies", []), None)
        groups = table.get("optional-dependencies", {})
        name = table.get("name")
        if isinstance(groups, dict) and isinstance(name, str):
            groups = self._within_aggregate(name, groups)
        self.groups(("project", "optional-dependencies"), groups)

    def _within_aggregate(self, project: str, groups: dict[str, Any]) -> dict[str, Any]:
        """Where the group ``all`` names the project's own extras (flux's ``all =
        ["flux[gradio]", "flux[streamlit]", "flux[torch]"]``, what its README installs),
        those (and the extras they name in turn) are the groups used; another (flux's
        ``tensorrt``, which needs NVIDIA's container and index) is left out and listed.
        Without such a group every group is read."""
        own = normalize_name(project)
        by_name = {normalize_name(g): items for g, items in groups.items()}
        if not _own_extras(own, by_name.get("all")):
            return groups
        named, todo = {"all"}, ["all"]
        while todo:
            for extra in _own_extras(own, by_name.get(todo.pop())) - named:
                named.add(extra)
                todo.append(extra)
        kept = {}
        for group, items in groups.items():
            if normalize_name(group) in named or is_dev_group(group):
                kept[group] = items
                continue
            origin = self.origin(("project", "optional-dependencies", group), f"[{group}]")
            self.builder.note(
                DROPPED,
                f"optional group {group!r} left out: the group 'all', which lists the "
                "project's own extras, does not name it",
                origin,
            )
        return kept

    def groups(self, key: KeyPath, groups: Any) -> None:
        if not isinstance(groups, dict):
            return
        dev = {g: _names(items) for g, items in groups.items() if is_dev_group(g)}
        read: list[str] = []
        for name, items in groups.items():
            if is_dev_group(name):
                origin = self.origin((*key, name), f"[{name}]")
                self.builder.note(
                    DROPPED, f"optional group {name!r} left out (development tools)", origin
                )
                continue
            if only_packaging_tools(_names(items)):
                origin = self.origin((*key, name), f"[{name}]")
                tools = ", ".join(_names(items).values())
                self.builder.note(
                    DROPPED,
                    f"optional group {name!r} left out (tools that build and publish the "
                    f"project: {tools})",
                    origin,
                )
                continue
            self.requirement_list((*key, name), self._without_dev(key, name, items, dev), name)
            read.append(name)
        if read and key[-1] == "optional-dependencies":
            # ultralytics/yolov5: export, logging and extra were written as if required
            # (tensorflowjs, openvino, coremltools) and only 'dev' was said to be left out
            shown = ", ".join(repr(g) for g in read)
            self.builder.note(
                OPTIONAL_READ,
                f"optional group{'s' if len(read) > 1 else ''} {shown} read as the project's "
                "requirements (every group but development tools): leave out those the code "
                "does not need",
                self.origin(key, ""),
            )

    def _without_dev(
        self, key: KeyPath, name: str, items: Any, dev: dict[str, dict[str, str]]
    ) -> Any:
        """A group that holds every requirement of a development group is their union
        (neuraloperator's ``all`` = its ``dev`` and ``doc`` groups and scipy): what it
        has from development groups is left out with them, the rest is read. Taken
        whole, ``all`` brought pytest, black and sphinx back, and doc's pin
        torch_harmonics==0.7.4 dated torch to 2.5.1."""
        if not isinstance(items, list):
            return items
        listed = _names(items)
        holds = sorted(g for g, names in dev.items() if names and names.keys() <= listed.keys())
        if not holds:
            return items
        tools = {n for g in holds for n in dev[g]}
        required = _names(_table(self.data.get("project")).get("dependencies"))
        left = [listed[n] for n in listed if n in tools and n not in required]
        shown = ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        groups = ", ".join(repr(g) for g in holds)
        self.builder.note(
            DROPPED,
            f"optional group {name!r} holds the development groups {groups}: their "
            f"requirements in it are left out with them ({shown})",
            self.origin((*key, name), f"[{name}]"),
        )
        kept: list[Any] = []
        for item in items:
            found = _names([item])
            if not found or not found.keys() <= tools:
                kept.append(item)
        return kept

    def poetry_dependency(
        self, key: KeyPath, name: str, value: Any, group: str | None, *, nested: bool = False
    ) -> None:
        origin = self.origin(key, f"{name} = {value!r}")
        if name.lower() == "python":
            if isinstance(value, str):
                self.builder.fact(PYTHON, poetry_to_pep440(value), origin)
            return
        if isinstance(value, list) and not nested:
            # Poetry's multiple-constraints form: one entry per platform or Python range;
            # the merge keeps the entries whose markers hold on the target.
            for index, entry in enumerate(value):
                self.poetry_dependency((*key, index), name, entry, group, nested=True)
            return
        marker = ""
        if isinstance(value, dict):
            marker = self.poetry_marker(origin, name, value)
            if "git" in value:
                ref = value.get("rev") or value.get("tag") or value.get("branch") or ""
                url = f"git+{value['git']}" + (f"@{ref}" if ref else "")
                self.feeder.requirement(f"{name} @ {url}", origin)
                return
            if "path" in value or "url" in value:
                self.builder.note(UNMANAGED, f"{name}: a local path or URL source", origin)
                return
            extras_value = value.get("extras", [])
            if not isinstance(extras_value, list) or not all(
                isinstance(e, str) for e in extras_value
            ):
                fail(self.display, origin.line, f"{name}: extras must be a list of names")
            extras = ",".join(extras_value)
            value = value.get("version", "*")
            name = f"{name}[{extras}]" if extras else name
        if not isinstance(value, str):
            fail(self.display, origin.line, f"{name}: not a Poetry version constraint")
        before = len(self.builder.asks)
        self.feeder.requirement(f"{name}{poetry_to_pep440(value)}{marker}", origin)
        if group and len(self.builder.asks) > before:
            self.builder.asks[-1] = replace(self.builder.asks[-1], group=group)

    def poetry_marker(self, origin: Origin, name: str, value: dict[str, Any]) -> str:
        """A dependency table's ``markers`` and ``python`` keys as a PEP 508 marker."""
        conditions = []
        python = value.get("python")
        if python is not None:
            try:
                if not isinstance(python, str):
                    raise InvalidSpecifier(repr(python))
                specifiers = SpecifierSet(poetry_to_pep440(python))
            except InvalidSpecifier:
                fail(self.display, origin.line, f"{name}: python = {python!r} is not a constraint")
            conditions += [f'python_full_version {s.operator} "{s.version}"' for s in specifiers]
        markers = value.get("markers")
        if markers is not None:
            if not isinstance(markers, str):
                fail(self.display, origin.line, f"{name}: markers must be text")
            conditions.append(f"({markers})")
        return f"; {' and '.join(conditions)}" if conditions else ""

    def poetry(self, table: dict[str, Any]) -> None:
        base: KeyPath = ("tool", "poetry")
        deps = table.get("dependencies", {})
        for name, value in deps.items() if isinstance(deps, dict) else []:
            where: KeyPath = (*base, "dependencies", name)
            with line_not_read(self.builder, self.origin(where, f"{name} = {value!r}"[:200])):
                self.poetry_dependency(where, name, value, None)
        groups = table.get("group", {})
        for group, body in groups.items() if isinstance(groups, dict) else []:
            where = (*base, "group", group, "dependencies")
            if is_dev_group(group):
                self.builder.note(
                    DROPPED, f"Poetry group {group!r} left out", self.origin(where, group)
                )
                continue
            members = _table(body).get("dependencies") or {}
            if not isinstance(members, dict):
                fail(
                    self.display,
                    line_of(self.lines, where),
                    f"{'.'.join(map(str, where))}: not a table",
                )
            for name, value in members.items():
                origin = self.origin((*where, name), f"{name} = {value!r}"[:200])
                with line_not_read(self.builder, origin):
                    self.poetry_dependency((*where, name), name, value, group)
        sources = table.get("source", [])
        for index, source in enumerate(sources if isinstance(sources, list) else []):
            if isinstance(source, dict) and isinstance(source.get("url"), str):
                where = (*base, "source", index)
                requirements.index_facts(self.builder, source["url"], self.origin(where, "source"))

    def tools(self) -> None:
        self.local_sources()
        indexes = _table(_table(self.data.get("tool")).get("uv")).get("index", [])
        cpu_only = self.cpu_only_indexes()
        for index, entry in enumerate(indexes if isinstance(indexes, list) else []):
            if isinstance(entry, dict) and isinstance(entry.get("url"), str):
                where: KeyPath = ("tool", "uv", "index", index)
                if entry.get("name") in cpu_only:
                    self.builder.note(
                        DROPPED,
                        f"index {entry['name']!r}: [tool.uv.sources] takes from it only for "
                        f"the {cpu_only[entry['name']]!r} extra, not the GPU build",
                        self.origin(where, "index"),
                    )
                    continue
                requirements.index_facts(self.builder, entry["url"], self.origin(where, "index"))
        build = _table(self.data.get("build-system")).get("requires", [])
        for index, item in enumerate(build if isinstance(build, list) else []):
            if isinstance(item, str) and re.match(r"^\s*torch\b", item):
                where = ("build-system", "requires", index)
                self.builder.fact(
                    CUDA_EXTENSION,
                    "build-system",
                    self.origin(where, item),
                    "the build needs torch: the project compiles against it",
                )

    def cpu_only_indexes(self) -> dict[str, str]:
        """The uv indexes ``[tool.uv.sources]`` names only for a CPU (or another
        platform's) extra, with that extra: karpathy/nanochat takes torch from its
        pytorch-cpu index for ``extra = "cpu"`` and from pytorch-cu128 for ``gpu``, and
        the first was read as the paper's torch build (2.9.1+cpu)."""
        sources = _table(_table(_table(self.data.get("tool")).get("uv")).get("sources"))
        aside: dict[str, str] = {}
        used: set[str] = set()
        for value in sources.values():
            for source in value if isinstance(value, list) else [value]:
                if not isinstance(source, dict) or not isinstance(source.get("index"), str):
                    continue
                extra = source.get("extra")
                if isinstance(extra, str) and extra.lower() in NOT_GPU_GROUPS:
                    aside.setdefault(source["index"], extra)
                else:
                    used.add(source["index"])
        return {name: extra for name, extra in aside.items() if name not in used}

    def local_sources(self) -> None:
        """A dependency ``[tool.uv.sources]`` takes from a folder of the checkout
        (kohya_ss: ``library = { path = "sd-scripts" }``) or the workspace is not an index
        requirement: the name alone would ask the index for another project."""
        sources = _table(_table(_table(self.data.get("tool")).get("uv")).get("sources"))
        for name, value in sources.items():
            if not isinstance(value, dict) or not ("path" in value or value.get("workspace")):
                continue
            key = normalize_name(name)
            asks = [a for a in self.builder.asks if a.name == key]
            if not asks:
                continue
            self.builder.asks = [a for a in self.builder.asks if a.name != key]
            where = value.get("path") if isinstance(value.get("path"), str) else "the workspace"
            origin = self.origin(("tool", "uv", "sources", name), f"{name} = {value!r}"[:200])
            self.builder.note(
                UNMANAGED,
                f"{name}: installed from {where} in the checkout ([tool.uv.sources]), not "
                f"from an index; `gpuenv run -- pip install --no-deps ./{where}` installs it"
                if where != "the workspace"
                else f"{name}: a member of the uv workspace, installed from the checkout",
                origin,
            )

    def read(self) -> None:
        if isinstance(self.data.get("project"), dict):
            self.project(self.data["project"])
        poetry = _table(self.data.get("tool")).get("poetry")
        if isinstance(poetry, dict):
            if isinstance(poetry.get("name"), str) and "project" not in self.data:
                where: KeyPath = ("tool", "poetry", "name")
                self.builder.fact(NAME, poetry["name"], self.origin(where, poetry["name"]))
            self.poetry(poetry)
        self.tools()
        self.ctx.readings.append(self.builder.build())


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    _Reader(ctx, path, text).read()
