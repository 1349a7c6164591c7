"""Activation operations: what a prefix changes in the environment, as frozen values,
and the same operations as the JSON delta ``gpuenv run`` applies (see the package doc).

``activation_ops`` is the only place that decides *what* activation does; to make
activation set another variable, append a ``SetVar`` there (its backup, restore and
the delta follow from the op). Standard library only: ``gpuenv run`` loads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from gpuenv import _envdelta
from gpuenv._envdelta import ACTIVE_VAR, DELTA_FORMAT, RESERVED_PREFIX
from gpuenv.errors import ActivationError, FileFormatError

__all__ = ["ACTIVE_VAR", "DELTA_FORMAT"]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CUDA_VERSION_RE = re.compile(r"[0-9]+\.[0-9]+\Z")
# What may appear in a prompt marker: bash expands $, ` and \ in PS1, zsh expands %
# (and $ with PROMPT_SUBST), so the marker is limited to characters none of them touch.
_PROMPT_RE = re.compile(r"[A-Za-z0-9._+:() -]*\Z")
_PROMPT_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")

# --------------------------------------------------------------------------- checks


def _check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise ActivationError(f"invalid environment variable name {name!r}")
    if name.startswith(RESERVED_PREFIX):
        raise ActivationError(f"{name}: names starting with {RESERVED_PREFIX} are gpuenv's own")


def _check_value(what: str, value: str) -> None:
    if "\0" in value:
        raise ActivationError(f"{what}: a NUL byte cannot be stored in the environment")


def _check_abs(what: str, path: str) -> None:
    _check_value(what, path)
    if not path.startswith("/"):
        raise ActivationError(f"{what}: {path!r} is not an absolute path")


def _check_entry(what: str, entry: str) -> None:
    _check_abs(what, entry)
    if ":" in entry:
        raise ActivationError(f"{what}: {entry!r} contains ':', the path-list separator")


# ------------------------------------------------------------------------------ ops


@dataclass(frozen=True)
class Guard:
    """Starts every activation script: the nesting guard and the records hang off it.
    ``store_root``: after deactivating, an outer activation whose prefix is in this
    store gets its ``gpuenv_deactivate`` back (its script is sourced again)."""

    prefix: str
    store_root: str | None = None

    def __post_init__(self) -> None:
        _check_abs("prefix", self.prefix)
        if self.store_root is not None:
            _check_abs("store root", self.store_root)


@dataclass(frozen=True)
class SetVar:
    """Set the variable ``name`` to ``value``; deactivation gives back what it was."""

    name: str
    value: str

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_value(self.name, self.value)


@dataclass(frozen=True)
class UnsetVar:
    """Remove the variable ``name``; deactivation gives back what it was."""

    name: str

    def __post_init__(self) -> None:
        _check_name(self.name)


@dataclass(frozen=True)
class PathCleaning:
    """Which existing entries of a path list a ``PrependPath`` drops (see module doc)."""

    prefix: str
    store_root: str
    cuda_version: str | None

    def __post_init__(self) -> None:
        _check_abs("prefix", self.prefix)
        _check_abs("store root", self.store_root)
        if self.store_root.rstrip("/") == "" or self.prefix.rstrip("/") == "":
            raise ActivationError("the store root and the prefix cannot be '/'")
        if self.cuda_version is not None and not _CUDA_VERSION_RE.match(self.cuda_version):
            raise ActivationError(f"CUDA version {self.cuda_version!r} is not MAJOR.MINOR")


@dataclass(frozen=True)
class PrependPath:
    """Put ``entries`` in front of the ``:``-separated list ``name``; with ``clean``,
    first drop unwanted existing entries (an empty ``entries`` is then allowed)."""

    name: str
    entries: tuple[str, ...]
    clean: PathCleaning | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        for entry in self.entries:
            _check_entry(self.name, entry)
        if not self.entries and self.clean is None:
            raise ActivationError(f"{self.name}: nothing to prepend")


@dataclass(frozen=True)
class Prompt:
    """Prefix the interactive prompt with ``marker``; shells only, not in the delta."""

    marker: str

    def __post_init__(self) -> None:
        if not _PROMPT_RE.match(self.marker):
            raise ActivationError(f"prompt marker {self.marker!r} has unsafe characters")


@dataclass(frozen=True)
class Source:
    """Source another script of the same shell; shells only, cannot be in the delta."""

    path: str

    def __post_init__(self) -> None:
        _check_abs("sourced script", self.path)


Op: TypeAlias = Guard | SetVar | UnsetVar | PrependPath | Prompt | Source


@dataclass(frozen=True)
class ActivationInputs:
    """What activation needs to know about a prefix; the caller computes the dirs.

    ``cuda_home`` is the prefix's own toolkit or a pinned system toolkit; ``None``
    unsets ``CUDA_HOME`` and ``CUDA_PATH``. ``cuda_version`` is the locked CUDA
    (``"12.4"``), ``None`` for a CPU environment. ``name`` is only used for the prompt
    marker, with characters a prompt could expand replaced by ``_``.

    JIT extensions (``torch.utils.cpp_extension.load``): with ``torch_extensions_dir``,
    activation sets ``TORCH_EXTENSIONS_DIR`` to it (a folder of this prefix's own, so a
    JIT build never reuses one made for another torch) and sets ``TORCH_CUDA_ARCH_LIST``
    to ``torch_arch_list`` (the target's GPUs), or unsets it for a CPU environment.
    Without ``torch_extensions_dir`` neither variable is touched.
    """

    prefix: Path
    name: str
    store_root: Path
    bin_dirs: tuple[Path, ...]
    lib_dirs: tuple[Path, ...]
    cuda_home: Path | None
    cuda_version: str | None
    torch_arch_list: str | None = None  # "8.9;9.0+PTX"
    torch_extensions_dir: Path | None = None


def prompt_marker(name: str) -> str:
    return f"(gpuenv:{_PROMPT_NAME_UNSAFE.sub('_', name) or '_'}) "


def activation_ops(inputs: ActivationInputs) -> tuple[Op, ...]:
    """The operations that activate ``inputs.prefix``, in the order they run."""
    prefix = str(inputs.prefix)
    ops: list[Op] = [Guard(prefix, str(inputs.store_root))]
    if inputs.bin_dirs:
        ops.append(PrependPath("PATH", tuple(str(d) for d in inputs.bin_dirs)))
    cleaning = PathCleaning(prefix, str(inputs.store_root), inputs.cuda_version)
    ops.append(PrependPath("LD_LIBRARY_PATH", tuple(str(d) for d in inputs.lib_dirs), cleaning))
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if inputs.cuda_home is None:
            ops.append(UnsetVar(name))
        else:
            ops.append(SetVar(name, str(inputs.cuda_home)))
    if inputs.torch_extensions_dir is not None:
        ops.append(SetVar("TORCH_EXTENSIONS_DIR", str(inputs.torch_extensions_dir)))
        if inputs.torch_arch_list is None:
            ops.append(UnsetVar("TORCH_CUDA_ARCH_LIST"))
        else:
            ops.append(SetVar("TORCH_CUDA_ARCH_LIST", inputs.torch_arch_list))
    ops.append(Prompt(prompt_marker(inputs.name)))
    return tuple(ops)


def split_guard(ops: Sequence[Op]) -> tuple[Guard, tuple[Op, ...]]:
    if not ops or not isinstance(ops[0], Guard):
        raise ActivationError("activation ops must start with a Guard")
    if any(isinstance(op, Guard) for op in ops[1:]):
        raise ActivationError("activation ops may hold only one Guard")
    return ops[0], tuple(ops[1:])


# -------------------------------------------------------------------- Python replay


def apply_ops(ops: Sequence[Op], environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The environment the activation script would leave, computed from ``environ``,
    and the lines it would print on stderr. ``Prompt`` is ignored (not interactive);
    ``Source`` cannot be replayed and is refused."""
    return _envdelta.apply(environment_delta(ops), environ)


# --------------------------------------------------------------------------- delta


def _op_to_json(op: Op) -> dict[str, Any]:
    if isinstance(op, SetVar):
        return {"op": "set", "name": op.name, "value": op.value}
    if isinstance(op, UnsetVar):
        return {"op": "unset", "name": op.name}
    if isinstance(op, PrependPath):
        body: dict[str, Any] = {"op": "prepend", "name": op.name, "entries": list(op.entries)}
        if op.clean is not None:
            body["clean"] = {
                "prefix": op.clean.prefix,
                "store_root": op.clean.store_root,
                "cuda_version": op.clean.cuda_version,
            }
        return body
    raise ActivationError(f"{type(op).__name__} cannot be part of an environment delta")


def environment_delta(ops: Sequence[Op]) -> dict[str, Any]:
    """The JSON-serialisable delta ``gpuenv run`` applies (see the module doc).
    ``Prompt`` is left out; a ``Source`` op is refused (Python cannot replay it)."""
    guard, body = split_guard(ops)
    return {
        "format": DELTA_FORMAT,
        "active": guard.prefix,
        "ops": [_op_to_json(op) for op in body if not isinstance(op, Prompt)],
    }


def _op_from_json(item: Mapping[str, Any]) -> Op:
    kind = item["op"]
    if kind == "set":
        return SetVar(item["name"], item["value"])
    if kind == "unset":
        return UnsetVar(item["name"])
    if kind == "prepend":
        clean = item.get("clean")
        cleaning = None
        if clean is not None:
            cleaning = PathCleaning(clean["prefix"], clean["store_root"], clean["cuda_version"])
        return PrependPath(item["name"], tuple(item["entries"]), cleaning)
    raise KeyError(kind)


def ops_from_delta(delta: Mapping[str, Any]) -> tuple[Op, ...]:
    """Rebuild (and re-validate) the ops a delta was made from, minus the prompt."""
    active, items = _envdelta.checked_ops(delta)
    try:
        return (Guard(active), *(_op_from_json(item) for item in items))
    except (KeyError, TypeError, AttributeError) as exc:
        raise FileFormatError(f"malformed environment delta ({exc!r})") from exc


def apply_delta(
    delta: Mapping[str, Any], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The child environment for ``gpuenv run``: ``environ`` with the delta applied
    exactly as the activation script would apply it, and the stderr lines the script
    would print (dropped entries, a deactivated other prefix) for the caller to show."""
    ops_from_delta(delta)  # full validation; the run path calls _envdelta.apply directly
    return _envdelta.apply(delta, environ)


def read_delta(path: Path) -> dict[str, Any]:
    """Load an ``env-delta.json``; a missing file raises ``FileNotFoundError``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the reader
        raise FileFormatError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise FileFormatError(f"{path}: an environment delta must be a JSON object")
    return data


# ----------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """What both emitters write besides the ops themselves: this prefix's record
    names (see ``gpuenv._envdelta``), the variables it manages, and for each the value
    activation leaves when the variable was unset before (``None``: left unset).
    Deactivation unsets a variable only while it still holds exactly that value, so
    a forged "was unset" record cannot make it unset ``PATH``."""

    guard: Guard
    body: tuple[Op, ...]
    tag: str
    names: tuple[str, ...]
    path_lists: frozenset[str]
    from_unset: Mapping[str, str | None]

    @classmethod
    def of(cls, ops: Sequence[Op]) -> Layout:
        guard, body = split_guard(ops)
        replayable = [op for op in body if isinstance(op, SetVar | UnsetVar | PrependPath)]
        ops_json = [_op_to_json(op) for op in replayable]
        delta = {"format": DELTA_FORMAT, "active": guard.prefix, "ops": ops_json}
        names = tuple(_envdelta.managed_names(ops_json))
        left, _ = _envdelta.apply(delta, {})
        return cls(
            guard=guard,
            body=body,
            tag=_envdelta.prefix_tag(guard.prefix),
            names=names,
            path_lists=frozenset(op.name for op in body if isinstance(op, PrependPath)),
            from_unset={name: left.get(name) for name in names},
        )

    def backup(self, name: str) -> str:
        return _envdelta.backup_var(self.tag, name)

    @property
    def unset_list(self) -> str:
        return _envdelta.unset_var(self.tag)

    @property
    def local_list(self) -> str:
        """fish: the names that were set but not exported before activation (restored
        unexported: fish's ``set -gx`` would export them)."""
        return f"{_envdelta.RESERVED_PREFIX}{self.tag}_LOCAL"

    @property
    def prompt_backup(self) -> str:
        """The prompt's backup: a shell variable, never exported."""
        return self.backup("PS1")

    @property
    def has_prompt(self) -> bool:
        return any(isinstance(op, Prompt) for op in self.body)

    @property
    def not_active_message(self) -> str:
        return (
            f"gpuenv: {_envdelta.shown(self.guard.prefix)} is not the active environment: "
            "nothing deactivated"
        )

    @property
    def beneath_message(self) -> str:
        return _envdelta.beneath_message(self.guard.prefix)


# ---------------------------------------------------------------------- quoting


def indent(lines: Sequence[str], depth: int = 1) -> list[str]:
    pad = "    " * depth
    return [pad + line if line else line for line in lines]


def sh_quote(value: str) -> str:
    """A POSIX single-quoted literal: nothing inside is expanded by sh, bash or zsh."""
    _check_value("value", value)
    return "'" + value.replace("'", "'\\''") + "'"


def fish_quote(value: str) -> str:
    """A fish single-quoted literal: only ``\\`` and ``'`` are special inside."""
    _check_value("value", value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def pcre_literal(text: str) -> str:
    """``text`` as a PCRE2 pattern matching itself: every ASCII character that is not
    a letter, digit or ``_`` is backslash-escaped (PCRE2 treats those as literal)."""
    return "".join(
        "\\" + ch if ch.isascii() and not (ch.isalnum() or ch == "_") else ch for ch in text
    )
