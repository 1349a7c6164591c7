"""Activation: what a prefix changes in the environment, as shell scripts and as a delta.

Three layers, each only talking to the one below:

1. ``activation_ops(inputs)`` turns an ``ActivationInputs`` into a tuple of operations
   (frozen dataclasses): ``Guard``, ``PrependPath``, ``SetVar``, ``UnsetVar``,
   ``Prompt``, ``Source``. This is the only place that decides *what* activation does.
2. Emitters (``BashEmitter`` for POSIX sh/dash/bash, ``ZshEmitter``, ``FishEmitter``;
   one ``Emitter`` protocol) turn operations into text and decide nothing. No other
   module writes shell syntax. ``environment_delta(ops)`` turns the same operations into
   JSON for ``gpuenv run``, and ``apply_delta`` replays them in Python.
3. ``write_activation_files`` writes the scripts, the conda hooks and the delta into a
   prefix, each file atomically.

Quoting. Every value from the inputs is a single-quoted literal (sh: ``'`` becomes
``'\\''``; fish: ``\\`` and ``'`` are backslash-escaped). The only ``$`` in a script is
the emitter's own reference to a variable it manages (the variable being extended, its
``_GPUENV_*`` backup, or a ``_gpuenv_*`` loop temporary); no value ever reaches an
``eval`` or a double-quoted string. Variable names must match ``[A-Za-z_][A-Za-z0-9_]*``
and may not start with ``_GPUENV_`` (those are the backups'); a NUL anywhere is refused
with ``ActivationError``. Comments in the scripts contain no input data.

Backups are taken when the script is *sourced*, never when it is generated: for every
variable it touches, the script exports the old value as ``_GPUENV_OLD_<NAME>``, or, if
the variable was unset, adds ``NAME`` to the space-separated ``_GPUENV_UNSET``, so
deactivation tells an empty value from an absent one. Backups are exported, so a child
shell (or ``gpuenv run`` started from an activated shell) can still undo the activation
exactly. The prompt backup (``_GPUENV_OLD_PS1``; fish: the copied ``fish_prompt``) stays
in the shell that made it.

Nesting. ``_GPUENV_ACTIVE`` (exported) holds the active prefix. Sourcing the script of
the prefix that is already active changes nothing (so ``PATH`` is never prepended twice)
and only (re)defines ``gpuenv_deactivate``. Sourcing prefix B while prefix A is active
deactivates A first (restoring from A's exported backups, announced on stderr) and then
activates B, so ``gpuenv_deactivate`` always returns to the environment from before the
first activation rather than stacking. ``apply_delta`` follows the same rules.

``LD_LIBRARY_PATH`` is cleaned when the script is sourced (the scripts do not depend on
the environment they were generated in): entries that are empty, relative, inside
another prefix of the gpuenv store, or a CUDA directory of another version than the
locked one (any entry containing ``/cuda-<digit>`` that is not ``/cuda-X.Y``,
``/cuda-X.Y/...`` or ``/cuda-X.Y.<digit>...`` for the locked X.Y) are dropped, each
distinct entry announced once on stderr; entries equal to one of the prefix's own lib
dirs are dropped silently (they are prepended again). Matching is textual: no symlinks
are resolved. A CPU environment (no locked CUDA) drops no entry for its CUDA version.

The delta JSON (``<prefix>/etc/gpuenv/env-delta.json``)::

    {"format": 1,
     "active": "/store/p",
     "ops": [{"op": "prepend", "name": "PATH", "entries": ["/store/p/bin"]},
             {"op": "prepend", "name": "LD_LIBRARY_PATH", "entries": ["/store/p/lib"],
              "clean": {"prefix": "/store/p", "store_root": "/store",
                        "cuda_version": "12.4"}},
             {"op": "set", "name": "CUDA_HOME", "value": "/store/p"},
             {"op": "unset", "name": "CUDA_PATH"}]}

This module imports only the standard library: ``gpuenv run`` loads it on every call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from gpuenv import _envdelta
from gpuenv._envdelta import (
    ACTIVE_VAR,
    BACKUP_PREFIX,
    DELTA_FORMAT,
    OWN,
    REASON_EMPTY,
    REASON_OTHER_PREFIX,
    REASON_RELATIVE,
    UNSET_LIST_VAR,
    deactivating_message,
    reason_other_cuda,
    removal_message,
)
from gpuenv._fs import atomic_write_text
from gpuenv.errors import ActivationError, FileFormatError

__all__ = [
    "ACTIVE_VAR",
    "BACKUP_PREFIX",
    "DELTA_FORMAT",
    "EMITTERS",
    "UNSET_LIST_VAR",
    "ActivationInputs",
    "BashEmitter",
    "Emitter",
    "FishEmitter",
    "Guard",
    "Op",
    "PathCleaning",
    "PrependPath",
    "Prompt",
    "SetVar",
    "Source",
    "UnsetVar",
    "ZshEmitter",
    "activation_files",
    "activation_ops",
    "apply_delta",
    "apply_ops",
    "emitter_for",
    "environment_delta",
    "fish_quote",
    "ops_from_delta",
    "read_delta",
    "sh_quote",
    "write_activation_files",
]

RESERVED_PREFIX = "_GPUENV_"

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
    """Starts every activation script: the nesting guard and the backups hang off it."""

    prefix: str

    def __post_init__(self) -> None:
        _check_abs("prefix", self.prefix)


@dataclass(frozen=True)
class SetVar:
    name: str
    value: str

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_value(self.name, self.value)


@dataclass(frozen=True)
class UnsetVar:
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
    ops: list[Op] = [Guard(prefix)]
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


def _managed_names(ops: Sequence[Op]) -> tuple[str, ...]:
    """Variables the ops change, in first-use order: these get backups."""
    names: dict[str, None] = {}
    for op in ops:
        if isinstance(op, SetVar | UnsetVar | PrependPath):
            names.setdefault(op.name, None)
    return tuple(names)


def _split_guard(ops: Sequence[Op]) -> tuple[Guard, tuple[Op, ...]]:
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
    guard, body = _split_guard(ops)
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
    except ValueError as exc:
        raise FileFormatError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise FileFormatError(f"{path}: an environment delta must be a JSON object")
    return data


# ------------------------------------------------------------------------ emitters


class Emitter(Protocol):
    """Turns ops into one shell's text; decides nothing."""

    shell: str
    extension: str

    def emit(self, ops: Sequence[Op]) -> str:
        """The whole activation script (ops must start with a ``Guard``)."""
        ...

    def conda_activate_hook(self, script: Path) -> str:
        """Text for ``etc/conda/activate.d``: source ``script``."""
        ...

    def conda_deactivate_hook(self) -> str:
        """Text for ``etc/conda/deactivate.d``: call ``gpuenv_deactivate`` if defined."""
        ...


def _indent(lines: Sequence[str], depth: int = 1) -> list[str]:
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


def _pcre_literal(text: str) -> str:
    """``text`` as a PCRE2 pattern matching itself: every ASCII character that is not
    a letter, digit or ``_`` is backslash-escaped (PCRE2 treats those as literal)."""
    return "".join(
        "\\" + ch if ch.isascii() and not (ch.isalnum() or ch == "_") else ch for ch in text
    )


class BashEmitter:
    """POSIX sh: the script runs unchanged in sh, dash, bash and zsh."""

    shell = "bash"
    extension = "sh"
    header = (
        "# gpuenv activation script (POSIX sh: sh, dash, bash).",
        "# Generated by gpuenv; do not edit. Use: . <this file>; undo: gpuenv_deactivate",
    )

    def emit(self, ops: Sequence[Op]) -> str:
        guard, body = _split_guard(ops)
        names = _managed_names(body)
        lines = [
            *self.header,
            "",
            *self._restore_function(names),
            "",
            "gpuenv_deactivate() {",
            "    _gpuenv_restore",
            "    unset -f _gpuenv_restore gpuenv_deactivate",
            "    hash -r 2>/dev/null || :",
            "}",
            "",
            f'if [ "${{{ACTIVE_VAR}-}}" != {sh_quote(guard.prefix)} ]; then',
            *_indent(self._activate(guard, body, names)),
            "fi",
        ]
        return "\n".join(lines) + "\n"

    def conda_activate_hook(self, script: Path) -> str:
        return f"# gpuenv: activate with conda\n. {sh_quote(str(script))}\n"

    def conda_deactivate_hook(self) -> str:
        return (
            "# gpuenv: deactivate with conda\n"
            "if command -v gpuenv_deactivate >/dev/null 2>&1; then\n"
            "    gpuenv_deactivate\n"
            "fi\n"
        )

    # -- pieces

    def _restore_function(self, names: Sequence[str]) -> list[str]:
        lines = ["_gpuenv_restore() {"]
        for name in names:
            backup = BACKUP_PREFIX + name
            lines += _indent(
                [
                    f'if [ -n "${{{backup}+x}}" ]; then',
                    f'    {name}="${backup}"',
                    f"    export {name}",
                    f"    unset {backup}",
                    "else",
                    f'    case " ${{{UNSET_LIST_VAR}-}} " in',
                    f"        *' {name} '*) unset {name} ;;",
                    "    esac",
                    "fi",
                ]
            )
        lines += _indent(
            [
                'if [ -n "${_GPUENV_OLD_PS1+x}" ]; then',
                '    PS1="$_GPUENV_OLD_PS1"',
                "    unset _GPUENV_OLD_PS1",
                "fi",
                f"unset {ACTIVE_VAR} {UNSET_LIST_VAR}",
            ]
        )
        return [*lines, "}"]

    def _activate(self, guard: Guard, body: Sequence[Op], names: Sequence[str]) -> list[str]:
        fmt = sh_quote(deactivating_message("%s") + "\\n")
        lines = [
            f'if [ -n "${{{ACTIVE_VAR}+x}}" ]; then',
            f'    printf {fmt} "${ACTIVE_VAR}" >&2',
            "    _gpuenv_restore",
            "fi",
            f"{UNSET_LIST_VAR}=",
        ]
        for name in names:
            lines += [
                f'if [ -n "${{{name}+x}}" ]; then',
                f'    export {BACKUP_PREFIX}{name}="${name}"',
                "else",
                f'    {UNSET_LIST_VAR}="${{{UNSET_LIST_VAR}:+${UNSET_LIST_VAR} }}{name}"',
                "fi",
            ]
        for op in body:
            lines += self._op(op)
        return [
            *lines,
            f"export {UNSET_LIST_VAR}",
            f"export {ACTIVE_VAR}={sh_quote(guard.prefix)}",
            "hash -r 2>/dev/null || :",
        ]

    def _op(self, op: Op) -> list[str]:
        if isinstance(op, SetVar):
            return [f"export {op.name}={sh_quote(op.value)}"]
        if isinstance(op, UnsetVar):
            return [f"unset {op.name}"]
        if isinstance(op, Source):
            return [f". {sh_quote(op.path)}"]
        if isinstance(op, Prompt):
            return [
                'case "$-" in',
                "    *i*)",
                '        if [ -n "${PS1+x}" ]; then',
                '            _GPUENV_OLD_PS1="$PS1"',
                f'            PS1={sh_quote(op.marker)}"$PS1"',
                "        fi",
                "        ;;",
                "esac",
            ]
        if isinstance(op, PrependPath):
            return self._prepend(op)
        raise ActivationError(f"{type(op).__name__} cannot appear after the Guard")

    def _prepend(self, op: PrependPath) -> list[str]:
        head = sh_quote(":".join(op.entries)) if op.entries else ""
        if op.clean is None:
            return [f'export {op.name}={head}"${{{op.name}:+:${op.name}}}"']
        keep = '"$_gpuenv_keep"' if op.entries else '"${_gpuenv_keep#:}"'
        return [
            "_gpuenv_keep=",
            "_gpuenv_said=:",
            f'if [ -n "${{{op.name}-}}" ]; then',
            f'    _gpuenv_rest="${op.name}:"',
            '    while [ -n "$_gpuenv_rest" ]; do',
            '        _gpuenv_e="${_gpuenv_rest%%:*}"',
            '        _gpuenv_rest="${_gpuenv_rest#*:}"',
            *_indent(self._classify(op.entries, op.clean), 2),
            '        case "$_gpuenv_why" in',
            "            '') _gpuenv_keep=\"$_gpuenv_keep:$_gpuenv_e\" ;;",
            f"            {OWN}) ;;",
            "            *)",
            '                case "$_gpuenv_said" in',
            '                    *":$_gpuenv_e:"*) ;;',
            "                    *)",
            '                        _gpuenv_said="$_gpuenv_said$_gpuenv_e:"',
            f"                        printf {self._removal_format(op.name)} "
            '"$_gpuenv_e" "$_gpuenv_why" >&2',
            "                        ;;",
            "                esac",
            "                ;;",
            "        esac",
            "    done",
            "fi",
            f"export {op.name}={head}{keep}",
            "unset _gpuenv_keep _gpuenv_said _gpuenv_rest _gpuenv_e _gpuenv_why",
        ]

    @staticmethod
    def _removal_format(name: str) -> str:
        return sh_quote(removal_message(name, "%s", "%s") + "\\n")

    @staticmethod
    def _classify(own: Sequence[str], clean: PathCleaning) -> list[str]:
        """Sets ``_gpuenv_why`` for ``_gpuenv_e``; mirrors ``_why_dropped``."""
        prefix, root = sh_quote(clean.prefix), sh_quote(clean.store_root)
        arms = []
        if own:
            arms.append(f"{'|'.join(sh_quote(e) for e in own)}) _gpuenv_why={OWN} ;;")
        arms += [
            f"{prefix}|{prefix}/*) ;;",
            f"{root}|{root}/*) _gpuenv_why={sh_quote(REASON_OTHER_PREFIX)} ;;",
        ]
        if clean.cuda_version is not None:
            v = clean.cuda_version  # validated MAJOR.MINOR: digits and one dot
            arms += [
                f"*/cuda-{v}|*/cuda-{v}/*|*/cuda-{v}.[0-9]*) ;;",
                f"*/cuda-[0-9]*) _gpuenv_why={sh_quote(reason_other_cuda(v))} ;;",
            ]
        return [
            '_gpuenv_why=""',
            'case "$_gpuenv_e" in',
            f"    '') _gpuenv_why={sh_quote(REASON_EMPTY)} ;;",
            "    /*) ;;",
            f"    *) _gpuenv_why={sh_quote(REASON_RELATIVE)} ;;",
            "esac",
            'if [ -z "$_gpuenv_why" ]; then',
            '    case "$_gpuenv_e" in',
            *_indent(arms, 2),
            "    esac",
            "fi",
        ]


class ZshEmitter(BashEmitter):
    """zsh runs the POSIX script as is (every expansion is quoted, so options such as
    SH_WORD_SPLIT, GLOB_SUBST or KSH_ARRAYS do not change it); only the file differs."""

    shell = "zsh"
    extension = "zsh"
    header = (
        "# gpuenv activation script (zsh).",
        "# Generated by gpuenv; do not edit. Use: . <this file>; undo: gpuenv_deactivate",
    )


class FishEmitter:
    """fish 3.2 or newer (uses ``set --path``)."""

    shell = "fish"
    extension = "fish"
    header = (
        "# gpuenv activation script (fish 3.2 or newer).",
        "# Generated by gpuenv; do not edit. Use: source <this file>; undo: gpuenv_deactivate",
    )

    def emit(self, ops: Sequence[Op]) -> str:
        guard, body = _split_guard(ops)
        names = _managed_names(body)
        path_lists = {op.name for op in body if isinstance(op, PrependPath)}
        lines = [
            *self.header,
            "",
            *self._restore_function(names, path_lists),
            "",
            "function gpuenv_deactivate",
            "    _gpuenv_restore",
            "    functions -e _gpuenv_restore",
            "    functions -e gpuenv_deactivate",
            "end",
            "",
            f'if test "${ACTIVE_VAR}" != {fish_quote(guard.prefix)}',
            *_indent(self._activate(guard, body, names)),
            "end",
        ]
        return "\n".join(lines) + "\n"

    def conda_activate_hook(self, script: Path) -> str:
        return f"# gpuenv: activate with conda\nsource {fish_quote(str(script))}\n"

    def conda_deactivate_hook(self) -> str:
        return (
            "# gpuenv: deactivate with conda\n"
            "if functions -q gpuenv_deactivate\n"
            "    gpuenv_deactivate\n"
            "end\n"
        )

    def _restore_function(self, names: Sequence[str], path_lists: set[str]) -> list[str]:
        lines = ["function _gpuenv_restore"]
        for name in names:
            backup = BACKUP_PREFIX + name
            if name in path_lists:
                assign = f"set -gx --path {name} (string split -- ':' \"${backup}\")"
            else:
                assign = f'set -gx {name} "${backup}"'
            lines += _indent(
                [
                    f"if set -q {backup}",
                    f"    {assign}",
                    f"    set -e {backup}",
                    f"else if contains -- {name} (string split -- ' ' \"${UNSET_LIST_VAR}\")",
                    f"    set -e {name}",
                    "end",
                ]
            )
        lines += _indent(
            [
                "if functions -q _gpuenv_old_fish_prompt",
                "    functions -e fish_prompt",
                "    functions -c _gpuenv_old_fish_prompt fish_prompt",
                "    functions -e _gpuenv_old_fish_prompt",
                "    functions -e _gpuenv_status",
                "end",
                f"set -e {ACTIVE_VAR}",
                f"set -e {UNSET_LIST_VAR}",
            ]
        )
        return [*lines, "end"]

    def _activate(self, guard: Guard, body: Sequence[Op], names: Sequence[str]) -> list[str]:
        fmt = fish_quote(deactivating_message("%s") + "\\n")
        lines = [
            f"if set -q {ACTIVE_VAR}",
            f'    printf {fmt} "${ACTIVE_VAR}" >&2',
            "    _gpuenv_restore",
            "end",
            f"set -gx {UNSET_LIST_VAR}",
        ]
        for name in names:
            lines += [
                f"if set -q {name}",
                f'    set -gx {BACKUP_PREFIX}{name} "${name}"',
                "else",
                f"    set -gxa {UNSET_LIST_VAR} {name}",
                "end",
            ]
        for op in body:
            lines += self._op(op)
        return [*lines, f"set -gx {ACTIVE_VAR} {fish_quote(guard.prefix)}"]

    def _op(self, op: Op) -> list[str]:
        if isinstance(op, SetVar):
            return [f"set -gx {op.name} {fish_quote(op.value)}"]
        if isinstance(op, UnsetVar):
            return [f"set -e {op.name}"]
        if isinstance(op, Source):
            return [f"source {fish_quote(op.path)}"]
        if isinstance(op, Prompt):
            return self._prompt(op)
        if isinstance(op, PrependPath):
            return self._prepend(op)
        raise ActivationError(f"{type(op).__name__} cannot appear after the Guard")

    @staticmethod
    def _prompt(op: Prompt) -> list[str]:
        return [
            "if status is-interactive; and functions -q fish_prompt;"
            " and not functions -q _gpuenv_old_fish_prompt",
            "    functions -c fish_prompt _gpuenv_old_fish_prompt",
            "    function _gpuenv_status",
            "        return $argv[1]",
            "    end",
            "    function fish_prompt",
            "        set -l _gpuenv_last $status",
            f"        printf '%s' {fish_quote(op.marker)}",
            "        _gpuenv_status $_gpuenv_last",
            "        _gpuenv_old_fish_prompt",
            "    end",
            "end",
        ]

    def _prepend(self, op: PrependPath) -> list[str]:
        head = " ".join(fish_quote(e) for e in op.entries)
        if op.clean is None:
            return [
                f'if test -n "${op.name}"',
                f"    set -gx --path {op.name} {head} (string split -- ':' \"${op.name}\")",
                "else",
                f"    set -gx --path {op.name} {head}",
                "end",
            ]
        fmt = fish_quote(removal_message(op.name, "%s", "%s") + "\\n")
        return [
            "set -l _gpuenv_keep",
            "set -l _gpuenv_said",
            f'if test -n "${op.name}"',
            f"    for _gpuenv_e in (string split -- ':' \"${op.name}\")",
            *_indent(self._classify(op.entries, op.clean), 2),
            '        if test -z "$_gpuenv_why"',
            '            set -a _gpuenv_keep "$_gpuenv_e"',
            f'        else if test "$_gpuenv_why" != {OWN}',
            '            and not contains -- "$_gpuenv_e" $_gpuenv_said',
            '            set -a _gpuenv_said "$_gpuenv_e"',
            f'            printf {fmt} "$_gpuenv_e" "$_gpuenv_why" >&2',
            "        end",
            "    end",
            "end",
            " ".join(["set -gx --path", op.name, *([head] if head else []), "$_gpuenv_keep"]),
        ]

    @staticmethod
    def _classify(own: Sequence[str], clean: PathCleaning) -> list[str]:
        """Sets ``_gpuenv_why`` for ``_gpuenv_e``; mirrors ``_why_dropped``."""

        def inside(root: str) -> str:
            return fish_quote("^" + _pcre_literal(root) + "(/|\\z)")

        lines = [
            "set -l _gpuenv_why ''",
            'if test -z "$_gpuenv_e"',
            f"    set _gpuenv_why {fish_quote(REASON_EMPTY)}",
            "else if not string match -q -- '/*' \"$_gpuenv_e\"",
            f"    set _gpuenv_why {fish_quote(REASON_RELATIVE)}",
        ]
        if own:
            own_list = " ".join(fish_quote(e) for e in own)
            lines += [
                f'else if contains -- "$_gpuenv_e" {own_list}',
                f"    set _gpuenv_why {OWN}",
            ]
        lines += [
            f'else if string match -qr -- {inside(clean.prefix)} "$_gpuenv_e"',
            "    # inside this prefix: kept",
            f'else if string match -qr -- {inside(clean.store_root)} "$_gpuenv_e"',
            f"    set _gpuenv_why {fish_quote(REASON_OTHER_PREFIX)}",
        ]
        if clean.cuda_version is not None:
            v = clean.cuda_version
            same = fish_quote("/cuda-" + _pcre_literal(v) + "(/|\\.[0-9]|\\z)")
            lines += [
                f'else if string match -qr -- {same} "$_gpuenv_e"',
                "    # the locked CUDA version: kept",
                "else if string match -qr -- '/cuda-[0-9]' \"$_gpuenv_e\"",
                f"    set _gpuenv_why {fish_quote(reason_other_cuda(v))}",
            ]
        return [*lines, "end"]


EMITTERS: dict[str, Emitter] = {
    "bash": BashEmitter(),
    "zsh": ZshEmitter(),
    "fish": FishEmitter(),
}


def emitter_for(shell: str) -> Emitter:
    """The emitter for a shell name (``sh``, ``dash`` and ``bash`` share one)."""
    key = "bash" if shell in ("sh", "dash") else shell
    try:
        return EMITTERS[key]
    except KeyError:
        known = ", ".join(sorted({*EMITTERS, "sh", "dash"}))
        raise ActivationError(f"unsupported shell {shell!r} (supported: {known})") from None


# --------------------------------------------------------------------------- files


def activation_files(inputs: ActivationInputs) -> dict[str, str]:
    """Relative path inside the prefix -> text, for every file activation installs."""
    ops = activation_ops(inputs)
    files: dict[str, str] = {}
    scripts: dict[str, Path] = {}
    for emitter in EMITTERS.values():
        rel = f"etc/gpuenv/activate.{emitter.extension}"
        files[rel] = emitter.emit(ops)
        scripts[emitter.extension] = inputs.prefix / rel
    posix, fish = EMITTERS["bash"], EMITTERS["fish"]
    files["etc/conda/activate.d/gpuenv.sh"] = posix.conda_activate_hook(scripts["sh"])
    files["etc/conda/deactivate.d/gpuenv.sh"] = posix.conda_deactivate_hook()
    files["etc/conda/activate.d/gpuenv.fish"] = fish.conda_activate_hook(scripts["fish"])
    files["etc/conda/deactivate.d/gpuenv.fish"] = fish.conda_deactivate_hook()
    delta = environment_delta(ops)
    files["etc/gpuenv/env-delta.json"] = json.dumps(delta, indent=2, sort_keys=True) + "\n"
    return files


def write_activation_files(prefix: Path, inputs: ActivationInputs) -> list[Path]:
    """Write the activation scripts, conda hooks and delta under ``prefix``.

    ``prefix`` is where the files go; the paths written *into* them come from
    ``inputs.prefix``. The two differ when an install builds in a staging directory
    that is renamed to the final prefix afterwards. Each file is written atomically.
    """
    written = []
    for rel, text in activation_files(inputs).items():
        path = prefix / rel
        # not fsynced: see Store.mark_installed
        atomic_write_text(path, text, durable=False, what="an activation file")
        written.append(path)
    return written
