"""Activation: what a prefix changes in the environment, as shell scripts and as a delta.

Three layers, each only talking to the one below:

1. ``activation_ops(inputs)`` (``_ops``) turns an ``ActivationInputs`` into a tuple of
   operations (frozen dataclasses): ``Guard``, ``PrependPath``, ``SetVar``,
   ``UnsetVar``, ``Prompt``, ``Source``. This is the only place that decides *what*
   activation does: a new variable is one more ``SetVar`` there.
2. Emitters (``_posix.BashEmitter`` for sh/dash/bash, ``ZshEmitter``,
   ``_fish.FishEmitter``) turn operations into text and decide nothing: the script's
   structure is written once (``_shell.ShellEmitter``, ``Emitter`` here), each shell
   gives its syntax; what both need besides the ops (record names, what deactivation
   checks) is computed once, in ``_ops.Layout``. No other module writes shell syntax.
   ``environment_delta(ops)`` turns the same operations into JSON for ``gpuenv run``,
   and ``apply_delta`` replays them in Python (``gpuenv._envdelta``).
3. ``write_activation_files`` writes the scripts, the conda hooks and the delta into a
   prefix, each file atomically.

Quoting. Every value from the inputs is a single-quoted literal (sh: ``'`` becomes
``'\\''``; fish: ``\\`` and ``'`` are backslash-escaped). The only ``$`` in a script is
the emitter's own reference to a variable it manages (the variable being extended, its
``_GPUENV_*`` records, or a ``_gpuenv_*`` temporary); no value ever reaches an ``eval``
or a double-quoted string. Variable names must match ``[A-Za-z_][A-Za-z0-9_]*`` and may
not start with ``_GPUENV_`` (gpuenv's own); a NUL anywhere is refused with
``ActivationError``. Comments in the scripts contain no input data.

Helper names. The sourcing shell gets nothing but the managed variables, the
prefix's records (``_GPUENV_<tag>_*``, ``<tag>`` a hash of the prefix's path) and
``gpuenv_deactivate``. POSIX scripts run the ``LD_LIBRARY_PATH`` loop in a command
substitution, so its temporaries live in a subshell; fish's are ``set -l``; the fish
prompt wrapper's helpers carry the tag. A user's ``_gpuenv_keep`` survives.

Records are taken when the script is *sourced*, never when it is generated: for every
variable it touches, and ``_GPUENV_ACTIVE``, the script exports the old value as
``_GPUENV_<tag>_OLD_<NAME>``, or, if the variable was unset, adds ``NAME`` to the
space-separated ``_GPUENV_<tag>_UNSET`` (and removes any stale backup of it), so
deactivation tells an empty value from an absent one. Records are exported, so a
child shell (or ``gpuenv run`` started from an activated shell) can still undo the
activation exactly. The prompt backup (``_GPUENV_<tag>_OLD_PS1``; fish: the copied
``fish_prompt``) stays in the shell that made it.

Nesting. ``_GPUENV_ACTIVE`` (exported) holds the active prefix. Sourcing the script of
the prefix that is already active changes nothing (so ``PATH`` is never prepended
twice) and only (re)defines ``gpuenv_deactivate``. Sourcing prefix B while prefix A is
active stacks B on A: B records the A-activated state under B's own names, and
``gpuenv_deactivate`` returns to exactly that state, ``_GPUENV_ACTIVE=A`` and A's
records included (and sources A's script again, when it is in the same store, so A's
``gpuenv_deactivate`` is back). A prefix active further down the stack is not
activated again (it says so). Deactivation acts only on the top activation, reads only
its own records, and unsets a variable only while it still holds exactly what
activation put there: inherited or forged ``_GPUENV_*`` variables cannot make it unset
``PATH``. ``apply_delta`` follows the same rules.

``LD_LIBRARY_PATH`` is cleaned when the script is sourced (the scripts do not depend on
the environment they were generated in): entries that are empty, relative, inside
another prefix of the gpuenv store, or a CUDA directory of another version than the
locked one (any entry containing ``/cuda-<digit>`` that is not ``/cuda-X.Y``,
``/cuda-X.Y/...`` or ``/cuda-X.Y.<digit>...`` for the locked X.Y) are dropped, each
distinct entry announced once on stderr with its control characters shown as ``?``;
entries equal to one of the prefix's own lib dirs are dropped silently (they are
prepended again). Matching is textual: no symlinks are resolved. A CPU environment
(no locked CUDA) drops no entry for its CUDA version.

The delta JSON (``<prefix>/etc/gpuenv/env-delta.json``)::

    {"format": 1,
     "active": "/store/p",
     "ops": [{"op": "prepend", "name": "PATH", "entries": ["/store/p/bin"]},
             {"op": "prepend", "name": "LD_LIBRARY_PATH", "entries": ["/store/p/lib"],
              "clean": {"prefix": "/store/p", "store_root": "/store",
                        "cuda_version": "12.4"}},
             {"op": "set", "name": "CUDA_HOME", "value": "/store/p"},
             {"op": "unset", "name": "CUDA_PATH"}]}

This package imports only the standard library: ``gpuenv run`` loads it on every call.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuenv._envdelta import (
    ACTIVE_VAR,
    DELTA_FORMAT,
    OWN,
    REASON_EMPTY,
    REASON_OTHER_PREFIX,
    REASON_RELATIVE,
    RESERVED_PREFIX,
    backup_var,
    beneath_message,
    prefix_tag,
    reason_other_cuda,
    removal_message,
    unset_var,
)
from gpuenv._fs import atomic_write_text
from gpuenv.activation._fish import FishEmitter
from gpuenv.activation._ops import (
    ActivationInputs,
    Guard,
    Layout,
    Op,
    PathCleaning,
    PrependPath,
    Prompt,
    SetVar,
    Source,
    UnsetVar,
    activation_ops,
    apply_delta,
    apply_ops,
    environment_delta,
    fish_quote,
    ops_from_delta,
    pcre_literal,
    prompt_marker,
    read_delta,
    sh_quote,
)
from gpuenv.activation._posix import BashEmitter, ZshEmitter
from gpuenv.activation._shell import ShellEmitter
from gpuenv.errors import ActivationError

__all__ = [
    "ACTIVE_VAR",
    "DELTA_FORMAT",
    "EMITTERS",
    "OWN",
    "REASON_EMPTY",
    "REASON_OTHER_PREFIX",
    "REASON_RELATIVE",
    "RESERVED_PREFIX",
    "ActivationInputs",
    "BashEmitter",
    "Emitter",
    "FishEmitter",
    "Guard",
    "Layout",
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
    "backup_var",
    "beneath_message",
    "emitter_for",
    "environment_delta",
    "fish_quote",
    "forget_stale",
    "ops_from_delta",
    "pcre_literal",
    "prefix_tag",
    "prompt_marker",
    "read_delta",
    "reason_other_cuda",
    "removal_message",
    "sh_quote",
    "unset_var",
    "write_activation_files",
]


# What every emitter is: the script's structure once, each shell's syntax in its subclass.
Emitter = ShellEmitter


EMITTERS: dict[str, Emitter] = {
    "bash": BashEmitter(),
    "zsh": ZshEmitter(),
    "fish": FishEmitter(),
}


def forget_stale(prefix: str, shell: str) -> str:
    """Shell lines that forget an inherited ``_GPUENV_ACTIVE`` naming ``prefix`` and its
    records, printed by ``gpuenv activate`` before the script when the marker is stale
    (``gpuenv._envdelta.stale``: its PATH or variables are not in place), so the script
    activates the prefix again instead of believing it is active."""
    names = f"{ACTIVE_VAR} {unset_var(prefix_tag(prefix))}"
    if emitter_for(shell).shell == "fish":
        return f"set -e {names}\n"
    return f"unset {names}\n"


def emitter_for(shell: str) -> Emitter:
    """The emitter for a shell name (``sh``, ``dash`` and ``bash`` share one)."""
    key = "bash" if shell in ("sh", "dash") else shell
    try:
        return EMITTERS[key]
    except KeyError:
        known = ", ".join(sorted({*EMITTERS, "sh", "dash"}))
        raise ActivationError(f"unsupported shell {shell!r} (supported: {known})") from None


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
