"""YAML documents read without trusting them, every value with its line.

PyYAML's event parser (libyaml when present: iterative, no recursion) feeds a builder
here that keeps the line of every node and refuses what no environment file needs:
more than one document, explicit tags other than YAML's core ones (``!!python/object``
and friends), nesting deeper than ``MAX_DEPTH``, and documents whose aliases expand to
more than ``MAX_NODES`` nodes (the "billion laughs"). Nothing is ever constructed into
Python objects by PyYAML; scalars are resolved to str/int/float/bool/None by YAML's
core rules only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpuenv.importers._text import fail

MAX_DEPTH = 64
MAX_NODES = 500_000  # counting every alias expansion

_CORE_TAGS = {
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")
} | {"!"}


@dataclass
class YNode:
    """A YAML node: ``kind`` is "scalar", "seq" or "map"; ``line`` is 1-based."""

    kind: str
    line: int
    value: Any = None  # scalar: str/int/float/bool/None; seq: list[YNode]; map: dict[str, YNode]
    key_lines: dict[str, int] = field(default_factory=dict)
    weight: int = 1  # nodes in this subtree, aliases expanded

    def get(self, key: str) -> YNode | None:
        if self.kind != "map":
            return None
        found: YNode | None = self.value.get(key)
        return found

    def items(self) -> Iterator[tuple[str, YNode]]:
        if self.kind == "map":
            yield from self.value.items()

    def children(self) -> list[YNode]:
        return list(self.value) if self.kind == "seq" else []

    def text(self) -> str | None:
        """A scalar as text (numbers as written: ``3.10`` stays "3.10" via ``raw``)."""
        if self.kind != "scalar" or self.value is None:
            return None
        return str(self.raw if self.raw is not None else self.value)

    raw: str | None = None  # a scalar's text as written

    def plain(self) -> Any:
        """Plain Python values (shared subtrees stay shared: the weight bounds them)."""
        if self.kind == "scalar":
            return self.value
        if self.kind == "seq":
            return [child.plain() for child in self.value]
        return {key: child.plain() for key, child in self.value.items()}


_CONVERT: dict[str, Callable[[str], Any]] = {
    "tag:yaml.org,2002:null": lambda v: None,
    "tag:yaml.org,2002:bool": lambda v: v.lower() in ("yes", "true", "on", "y"),
    "tag:yaml.org,2002:int": lambda v: int(v.replace("_", ""), 0),
    "tag:yaml.org,2002:float": lambda v: float(v.replace("_", "")),
}


def _scalar_value(value: str, tag: str | None, plain: bool) -> Any:
    """YAML 1.1 core resolution of a scalar, without constructing anything else."""
    if not plain or tag == "tag:yaml.org,2002:str":
        return value
    import yaml

    resolved = yaml.resolver.Resolver().resolve(yaml.ScalarNode, value, (True, False))
    convert = _CONVERT.get(resolved)
    if convert is None:
        return value
    try:
        return convert(value)
    except ValueError:
        return value


class _Builder:
    def __init__(self, display: str) -> None:
        self.display = display
        self.stack: list[tuple[YNode, str | None]] = []  # (container, pending map key)
        self.anchors: dict[str, YNode] = {}
        self.root: YNode | None = None
        self.documents = 0

    def _check_tag(self, event: Any) -> None:
        tag = getattr(event, "tag", None)
        if tag and tag not in _CORE_TAGS:
            fail(
                self.display,
                event.start_mark.line + 1,
                f"YAML tag {tag!r} is not allowed in an environment file",
                "remove the tag: gpuenv reads plain YAML only",
            )

    def _add(self, node: YNode, line: int) -> None:
        if not self.stack:
            self.root = node
            return
        parent, key = self.stack[-1]
        if parent.kind == "seq":
            parent.value.append(node)
        elif key is None:  # this node is a key
            if node.kind != "scalar":
                fail(self.display, line, "a mapping key must be a plain value")
            self.stack[-1] = (parent, "" if node.value is None else str(node.raw or node.value))
            return
        else:
            parent.value[key] = node
            parent.key_lines[key] = line
            self.stack[-1] = (parent, None)
        parent.weight += node.weight
        if parent.weight > MAX_NODES:
            fail(self.display, line, f"more than {MAX_NODES} YAML nodes (an alias bomb?)")

    def _open(self, kind: str, event: Any) -> None:
        self._check_tag(event)
        if len(self.stack) >= MAX_DEPTH:
            fail(self.display, event.start_mark.line + 1, f"nested more than {MAX_DEPTH} deep")
        node = YNode(kind, event.start_mark.line + 1, [] if kind == "seq" else {})
        if event.anchor:
            self.anchors[event.anchor] = node
        self.stack.append((node, None))

    def _close(self) -> None:
        node, _ = self.stack.pop()
        self._add(node, node.line)

    def event(self, event: Any) -> None:
        import yaml

        line = event.start_mark.line + 1 if event.start_mark else 0
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                fail(self.display, line, "more than one YAML document ('---')")
        elif isinstance(event, yaml.ScalarEvent):
            self._check_tag(event)
            value = _scalar_value(event.value, event.tag, event.implicit[0])
            node = YNode("scalar", line, value, raw=event.value)
            if event.anchor:
                self.anchors[event.anchor] = node
            self._add(node, line)
        elif isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is None:
                fail(self.display, line, f"unknown YAML alias *{event.anchor}")
            if any(target is open_node for open_node, _ in self.stack):
                fail(self.display, line, f"YAML alias *{event.anchor} refers to itself")
            self._add(target, line)
        elif isinstance(event, yaml.SequenceStartEvent):
            self._open("seq", event)
        elif isinstance(event, yaml.MappingStartEvent):
            self._open("map", event)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            self._close()


def load(text: str, display: str) -> YNode:
    """The single YAML document in ``text``; ``ForeignFileError`` (with the line) when it
    is malformed, empty, or breaks one of the limits above."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    builder = _Builder(display)
    try:
        for event in yaml.parse(text, Loader=loader):
            builder.event(event)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        fail(display, line, f"not valid YAML: {exc.problem or exc.context}")
    except yaml.YAMLError as exc:
        fail(display, None, f"not valid YAML: {exc}")
    except RecursionError:
        fail(display, None, "not valid YAML: nested too deeply")
    if builder.root is None:
        fail(display, 1, "an empty YAML document")
    return builder.root
