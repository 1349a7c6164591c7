"""``gpuenv add`` / ``gpuenv remove``: gpuenv.toml edited with tomlkit, so that comments,
key order and formatting stay byte for byte outside the lines that change.

Where a requirement goes: ``[pip] dependencies`` (every target), ``[targets.<name>.pip]
dependencies`` (``--target``: that target only) or ``[pip.groups] <group>`` (``--group``).
A requirement for a package already listed there is merged into that entry in place, as
``uv add`` merges it (``merged``): nothing the entry said is dropped unless the new
requirement says otherwise. The torch family is refused, naming the key that chooses it.
The text returned is checked like any spec by the caller before it is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from gpuenv._redact import redact_url
from gpuenv.errors import SpecError, SpecProblem, UsageError
from gpuenv.names import TRIO, normalize_name
from gpuenv.spec import TORCH_FAMILY


@dataclass(frozen=True)
class Where:
    """One list of requirements in the spec: ``target`` or ``group`` (or neither)."""

    target: str | None = None
    group: str | None = None

    @property
    def key(self) -> str:
        if self.target is not None:
            return f"targets.{self.target}.pip.dependencies"
        if self.group is not None:
            return f"pip.groups.{self.group}"
        return "pip.dependencies"

    @property
    def label(self) -> str:
        """The list as gpuenv.toml shows it: ``[pip.groups] dev``."""
        if self.target is not None:
            return f"[targets.{self.target}.pip] dependencies"
        if self.group is not None:
            return f"[pip.groups] {self.group}"
        return "[pip] dependencies"


@dataclass(frozen=True)
class Entry:
    """One requirement of a list, where it is in the file: one line an edit added,
    changed or removed, or (``Edit.kept``) one an add found there already."""

    requirement: str  # as the list holds it after the edit (add) or held it (remove)
    where: Where
    line: int | None  # in the text after the edit (add) or before it (remove)
    was: str | None = None  # the entry an add changed, as it was written


@dataclass(frozen=True)
class Edit:
    """An ``add`` or ``remove`` made on the spec's text, not yet written: the new text, the
    requirement lines changed, and the targets whose lock it changes."""

    text: str
    changed: tuple[str, ...]  # the requirement lines added or removed
    touched: tuple[str, ...] | None  # the targets whose lock changes (None: every target)
    entries: tuple[Entry, ...] = ()  # each of ``changed``, where
    kept: tuple[Entry, ...] = ()  # what an add found there already, as it asked


def _name_of(line: str) -> str:
    return normalize_name(Requirement(line).name)


def check_requirement(line: str) -> str:
    """The requirement's normalised name; a usage error for what cannot be one, and for
    the torch family (its key is named instead)."""
    try:
        requirement = Requirement(line)
    except InvalidRequirement as exc:
        raise UsageError(f"{line!r} is not a requirement: {exc}", hint=_hint(line)) from None
    name = normalize_name(requirement.name)
    if requirement.url and not requirement.url.startswith("git+"):
        # Refused before gpuenv.toml is touched: the lock cannot take it (lock.uv).
        raise UsageError(
            f"{name} @ {redact_url(requirement.url)}: gpuenv locks a package from an index "
            "or a git repository, not from a file's URL",
            hint=f"add it by name from an index (gpuenv add '{name}==VERSION'; a company "
            "index goes in [pip] extra-index-urls), or as '"
            f"{name} @ git+https://...' of its repository",
        )
    if name in TORCH_FAMILY:
        trio = name in TRIO
        key = f"[stack] {name}" if trio else "[stack] torch"
        raise UsageError(
            f"{name} is chosen by {key} to match each target's CUDA build: it is not added "
            "as a pip dependency",
            hint=f'change it there: [stack] {name} = "..." in gpuenv.toml '
            "([targets.<name>] torch for one target)"
            if trio
            else "torch brings the one that matches it",
        )
    meant = _family_look_alike(name)
    if meant is not None:  # "Torch-Vision" locked an unrelated project of that name
        raise UsageError(
            f"{name} is not {meant}: the index's {name} is another project",
            hint=f"{meant} is chosen by [stack] {meant if meant in TRIO else 'torch'} to match "
            "each target's CUDA build; add a package of another name with gpuenv add",
        )
    return name


def _family_look_alike(name: str) -> str | None:
    """The torch family member ``name`` is a near miss of (its separators dropped, or
    PyTorch's own name), or None."""
    squashed = name.replace("-", "")
    if name == "pytorch":
        return "torch"
    return squashed if squashed != name and squashed in TORCH_FAMILY else None


def _hint(line: str) -> str | None:
    """What to write instead of a URL, a VCS URL, a path or a pip option (uv's add
    takes them bare and finds the name; a requirement names its package first)."""
    text = line.strip()
    if text.startswith(("-e", "--editable")):
        return (
            "the project beside gpuenv.toml is installed editable already ([project] path); "
            "gpuenv add takes requirements"
        )
    if "://" in text or text.startswith(("git+", "hg+", "svn+", "bzr+")):
        tail = text.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        stem = tail.split("@", 1)[0].removesuffix(".git")
        if stem.endswith((".whl", ".tar.gz", ".zip")):
            stem = stem.split("-", 1)[0]
        name = stem if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", stem) else "NAME"
        if text.startswith("git+"):
            return f"name the package first: gpuenv add '{name} @ {text}'"
        # A file's URL cannot be locked (lock.uv): the forms that can.
        return (
            f"gpuenv locks a package from an index or a git repository: gpuenv add "
            f"'{name}==VERSION' (a company index goes in [pip] extra-index-urls), or "
            f"'{name} @ git+https://...' of its repository"
        )
    if text.startswith((".", "/", "~")) or "/" in text:
        return (
            "a local folder: the project beside gpuenv.toml is installed editable "
            "([project] path); another local package is added from an index or as "
            "'NAME @ git+https://...' of its repository"
        )
    return None


def _parse(text: str, file: str) -> Any:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise SpecError([SpecProblem(file, exc.line, "", f"not valid TOML: {exc}")]) from None


def _table(parent: Any, key: str, file: str, path: str) -> Any:
    """``parent[key]``, a table made (at the end of ``parent``) when absent."""
    import tomlkit

    if key not in parent:
        table = tomlkit.table()
        parent[key] = table
        return parent[key]
    value = parent[key]
    if not isinstance(value, dict):
        raise SpecError([SpecProblem(file, None, path, "expected a table")])
    return value


def _array(parent: Any, key: str, file: str, path: str) -> Any:
    import tomlkit

    if key not in parent:
        parent[key] = tomlkit.array()
    value = parent[key]
    if not isinstance(value, list):
        raise SpecError([SpecProblem(file, None, path, "expected an array")])
    return value


def _path_of(doc: Any, where: Where, file: str) -> list[str]:
    """The keys of ``where``'s list, checking that a named target exists."""
    if where.target is not None:
        targets = doc.get("targets")
        if not isinstance(targets, dict) or where.target not in targets:
            known = ", ".join(targets) if isinstance(targets, dict) else "none"
            raise UsageError(f"no target {where.target!r} in {file} (targets: {known})")
        return ["targets", where.target, "pip", "dependencies"]
    if where.group is not None:
        return ["pip", "groups", where.group]
    return ["pip", "dependencies"]


def _find(doc: Any, where: Where, file: str) -> Any | None:
    """``where``'s list, or None when the spec has none there."""
    node = doc
    for key in _path_of(doc, where, file):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if not isinstance(node, list):
        raise SpecError([SpecProblem(file, None, where.key, "expected an array")])
    return node


def _make(doc: Any, where: Where, file: str) -> Any:
    """``where``'s list, made (with the tables above it) when absent."""
    import tomlkit

    path = _path_of(doc, where, file)
    node = doc
    for depth, key in enumerate(path[:-1]):
        if key not in node:
            table = tomlkit.table()
            if depth == 2:  # [targets.<name>.pip]: a blank line before the next table
                table["dependencies"] = tomlkit.array()
                table.add(tomlkit.nl())
            node[key] = table
        node = node[key]
        if not isinstance(node, dict):
            where_text = ".".join(path[: depth + 1])
            raise SpecError([SpecProblem(file, None, where_text, "expected a table")])
    if path[-1] not in node:
        node[path[-1]] = tomlkit.array()
    found = _find(doc, where, file)
    assert found is not None
    return found


def _index_of(items: Any, name: str) -> int | None:
    for index, item in enumerate(items):
        try:
            if isinstance(item, str) and _name_of(str(item)) == name:
                return index
        except InvalidRequirement:
            continue
    return None


def merged(old: str, new: str) -> str:
    """``new`` as it goes in place of ``old``, the entry of the same package (what ``uv
    add`` writes): the extras of both; the version range (or URL) and the marker of
    ``new`` where it gives one, else ``old``'s. ``add 'transformers[torch]'`` over
    ``transformers>=4.40`` is ``transformers[torch]>=4.40``, where the entry was replaced
    and its bound dropped, unsaid. ``new`` as written when it keeps all of ``old``."""
    before, given = Requirement(old), Requirement(new)
    extras = before.extras | given.extras
    versioned = bool(given.specifier) or given.url is not None
    unversioned = not before.specifier and before.url is None
    marked = given.marker is not None or before.marker is None
    if extras == given.extras and (versioned or unversioned) and marked:
        return new
    result = Requirement(new)
    result.extras = extras
    if not versioned:
        result.specifier, result.url = before.specifier, before.url
    if given.marker is None:
        result.marker = before.marker
    return str(result)


def _same(one: str, other: str) -> bool:
    """The two requirements say the same (``transformers >= 4.40`` is
    ``transformers>=4.40``)."""
    return Requirement(one) == Requirement(other)


def add(text: str, requirements: Iterable[str], where: Where, *, file: str) -> Edit:
    """``text`` with ``requirements`` added at ``where`` (an entry of the same package
    there is merged with the new one in place: ``merged``)."""
    lines = list(requirements)
    names = [check_requirement(line) for line in lines]
    for name in dict.fromkeys(n for n in names if names.count(n) > 1):
        # The last would win in place while both were said to be added.
        given = [line for line, n in zip(lines, names, strict=True) if n == name]
        raise UsageError(
            f"{name} is named {len(given)} times: {', '.join(given)}",
            hint=f"name it once, with every limit in one requirement ('{name}>=1,<2')",
        )
    doc = _parse(text, file)
    items = _make(doc, where, file)
    done: list[tuple[str, str | None]] = []  # (the line now, what it replaced)
    kept: list[str] = []
    for line, name in zip(lines, names, strict=True):
        index = _index_of(items, name)
        if index is None:
            items.append(line)
            done.append((line, None))
            continue
        was = str(items[index])
        now = merged(was, line)
        if _same(now, was):
            kept.append(was)  # there already, as asked: not "added"
            continue
        items[index] = now
        done.append((now, was))
    touched = (where.target,) if where.target is not None else None
    after = _dumps(doc)
    at = _lines_of(after, doc, where, file)
    entries = tuple(Entry(now, where, at.get(now), was) for now, was in done)
    return Edit(
        after,
        tuple(dict.fromkeys(e.requirement for e in entries)),
        touched,
        entries,
        tuple(Entry(line, where, at.get(line)) for line in kept),
    )


def _lines_of(text: str, doc: Any, where: Where, file: str) -> dict[str, int]:
    """The line in ``text`` of each requirement of ``where``'s list in ``doc`` (parsed
    from ``text``)."""
    from gpuenv._tomlpos import key_lines

    path = tuple(_path_of(doc, where, file))
    lines = key_lines(text)
    items = _find(doc, where, file) or []
    found = {str(item): lines.get((*path, i)) for i, item in enumerate(items)}
    return {item: line for item, line in found.items() if line is not None}


_PACKAGE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")  # PEP 508's


def remove(text: str, names: Iterable[str], where: Where | None, *, file: str) -> Edit:
    """``text`` without the named packages: from ``where``, or (None) from every list
    that holds them, each entry with its list and its line in ``text``. A name found
    nowhere is a usage error."""
    doc = _parse(text, file)
    for given in names:
        if not _PACKAGE_NAME.match(given):
            raise UsageError(
                f"{given!r} is not a package name",
                hint="name the package alone: gpuenv remove pillow",
            )
    wanted = [normalize_name(n) for n in names]
    places = [where] if where is not None else _every_list(doc)
    removed: list[Entry] = []
    touched: set[str | None] = set()
    at: dict[Where, dict[str, int]] = {}  # each list's lines, read before it changes
    for name in wanted:
        found = False
        for place in places:
            items = _find(doc, place, file)
            index = _index_of(items, name) if items is not None else None
            if index is None or items is None:
                continue
            line = str(items[index])
            lines = at.setdefault(place, _lines_of(text, doc, place, file))
            removed.append(Entry(line, place, lines.get(line)))
            items.pop(index)
            touched.add(place.target)
            found = True
        if not found:
            known = {p.group for p in _every_list(doc) if p.group is not None}
            if where is not None and where.group is not None and where.group not in known:
                listed = ", ".join(sorted(known)) or "none"
                raise UsageError(
                    f"no dependency group {where.group!r} in {file} (groups: {listed})"
                )
            where_text = where.key if where is not None else "any dependency list"
            raise UsageError(f"{name} is not in {where_text} of {file}")
    return Edit(
        _dumps(doc),
        tuple(e.requirement for e in removed),
        None if None in touched else tuple(sorted(t for t in touched if t is not None)),
        tuple(removed),
    )


def _every_list(doc: Any) -> list[Where]:
    places = [Where()]
    pip = doc.get("pip")
    groups = pip.get("groups") if isinstance(pip, dict) else None
    if isinstance(groups, dict):
        places += [Where(group=name) for name in groups]
    targets = doc.get("targets")
    if isinstance(targets, dict):
        places += [Where(target=name) for name in targets]
    return places


def _dumps(doc: Any) -> str:
    import tomlkit

    text: str = tomlkit.dumps(doc)
    return text


# --- the edited spec, checked without pydantic when its previous text was -------------


def _normalised_list(normalised: dict[str, Any], where: Where, *, create: bool) -> list[Any] | None:
    """``where``'s list in a validated (normalised) spec, made when absent and ``create``."""
    if where.target is not None:
        target = normalised["targets"][where.target]
        if "pip" not in target:
            if not create:
                return None
            target["pip"] = {"dependencies": []}
        found: list[Any] = target["pip"]["dependencies"]
        return found
    pip = normalised["pip"]
    if where.group is None:
        deps: list[Any] = pip["dependencies"]
        return deps
    if not create and where.group not in pip.get("groups", {}):
        return None
    groups: list[Any] = pip.setdefault("groups", {}).setdefault(where.group, [])
    return groups


def added(normalised: dict[str, Any], requirements: Iterable[str], where: Where) -> dict[str, Any]:
    """The normalised spec after ``add`` (what validating its new text gives)."""
    items = _normalised_list(normalised, where, create=True)
    assert items is not None
    for line in requirements:
        index = _index_of(items, _name_of(line))
        if index is None:
            items.append(line)
        elif not _same(now := merged(items[index], line), items[index]):
            items[index] = now
    return normalised


def removed(
    normalised: dict[str, Any], names: Iterable[str], where: Where | None
) -> dict[str, Any]:
    """The normalised spec after ``remove``."""
    places = [where] if where is not None else _normalised_places(normalised)
    for name in (normalize_name(n) for n in names):
        for place in places:
            items = _normalised_list(normalised, place, create=False)
            index = _index_of(items, name) if items is not None else None
            if items is not None and index is not None:
                items.pop(index)
    return normalised


def _normalised_places(normalised: dict[str, Any]) -> list[Where]:
    places = [Where()]
    places += [Where(group=g) for g in normalised["pip"].get("groups", {})]
    places += [Where(target=t) for t in normalised["targets"]]
    return places


def check_edited(
    before: str,
    after: str,
    *,
    file: str,
    kb: Any,
    cache_dir: Any,
    change: Any,
) -> None:
    """Check ``after`` like any spec. When ``before`` validated (it is in the spec
    cache), its normalised form with ``change`` applied is what validating ``after``
    gives: the knowledge checks run on it and it is cached for ``after`` (no pydantic,
    ~0.4 s); otherwise ``after`` is validated in full."""
    import copy

    from gpuenv._tomlpos import key_lines
    from gpuenv.spec import Spec, _cache, parse_spec_text

    old = _cache.read(cache_dir, _cache.key(before, with_knowledge=True)) if cache_dir else None
    if old is None:
        parse_spec_text(after, file=file, kb=kb, cache_dir=cache_dir)
        return
    normalised = change(copy.deepcopy(old[0]))
    lines = key_lines(after)
    from gpuenv.spec._checks import check_against_knowledge

    problems = check_against_knowledge(Spec.from_normalised(normalised), kb(), file, lines)
    if problems:
        raise SpecError(problems)
    _cache.write(cache_dir, _cache.key(after, with_knowledge=True), normalised, lines)
