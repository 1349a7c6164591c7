"""``gpuenv export FORMAT``: one locked target written for tools other than gpuenv.

One module per format, each with ``render(context) -> Exported``, reading only the lock
model (and, for ``notes``, the verification records the caller read from the prefix).
Nothing here touches the network or re-resolves: the lock is the single source.

Secrets are removed from the values, never from the finished text: ``export`` hands each
format a target whose every URL went through the one redaction function
(``_common.redacted``), and each format writes those values with its own quoting
(``shlex.quote``, TOML and YAML writers, JSON strings). Rewriting the finished text would
cut through that quoting (a project path holding ``B_TOKEN=z`` once ate the closing
quote of the Slurm script's ``project=`` line and ran the rest of the path as commands).
The values themselves are checked as what they are by the lock reader (versions, known
platforms, URL schemes, no ``${``: ``lock._integrity.value_problems``).

| format          | writes            | installed by                                   |
| --------------- | ----------------- | ---------------------------------------------- |
| conda-lock      | conda-lock.yml    | conda-lock install, micromamba                 |
| pylock          | pylock.toml       | uv pip install -r / uv pip sync (PEP 751)      |
| requirements    | requirements.txt  | pip install --require-hashes -r                |
| environment-yml | environment.yml   | conda env create / micromamba create -f        |
| dockerfile      | Dockerfile        | docker build (BuildKit)                        |
| notes           | ENVIRONMENT.md    | a reader: hardware, stack, packages, results   |
| slurm           | job.sh            | sbatch job.sh COMMAND...                       |
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from gpuenv.export._common import ExportContext, Exported, chosen, redacted

if TYPE_CHECKING:
    from gpuenv.lock.model import LockedTarget

__all__ = ["FORMATS", "ExportContext", "Exported", "export"]

# format -> (module, the file name it is usually saved as)
FORMATS: dict[str, tuple[str, str]] = {
    "conda-lock": ("gpuenv.export.conda_lock", "conda-lock.yml"),
    "pylock": ("gpuenv.export.pylock", "pylock.toml"),
    "requirements": ("gpuenv.export.requirements", "requirements.txt"),
    "environment-yml": ("gpuenv.export.environment_yml", "environment.yml"),
    "dockerfile": ("gpuenv.export.dockerfile", "Dockerfile"),
    "notes": ("gpuenv.export.notes", "ENVIRONMENT.md"),
    "slurm": ("gpuenv.export.slurm", "job.sh"),
}


def export(fmt: str, context: ExportContext) -> Exported:
    """``context.target`` written as ``fmt`` (one of ``FORMATS``)."""
    _refuse_foreign(fmt, context.target)
    module = importlib.import_module(FORMATS[fmt][0])
    context = redacted(chosen(context))
    exported: Exported = module.render(context)
    return Exported(exported.text, (*exported.notes, *_builds_left_out(context, fmt)))


# Formats whose file runs only on Linux: an image FROM a Linux base, a job on Linux nodes.
_LINUX_ONLY = {
    "dockerfile": "a Docker image of this export runs Linux, where {platform} wheels do "
    "not install",
    "slurm": "a Slurm job runs on the cluster's Linux nodes, where an environment for {platform} "
    "cannot be installed or run",
}


def _refuse_foreign(fmt: str, target: LockedTarget) -> None:
    """A macOS or Windows target exported as a Linux-only file was written without a
    word (an Ubuntu image installing win_amd64 wheels, which fails at its build)."""
    why = _LINUX_ONLY.get(fmt)
    if why is None or target.platform.startswith("linux-"):
        return
    from gpuenv.errors import UsageError

    raise UsageError(
        f"target {target.name} is for {target.platform}: " + why.format(platform=target.platform),
        hint=f"for that machine: gpuenv export requirements --target {target.name} "
        f"(or pylock); a {fmt} export needs a Linux target",
    )


# Formats that use the installed prefix (its builds are in it).
_RUN_GPUENV = frozenset({"slurm"})


def _builds_left_out(context: ExportContext, fmt: str) -> tuple[str, ...]:
    """Packages gpuenv compiles at install (the target's ``builds``) are in no exported
    file: say so rather than leave them out silently."""
    builds = context.target.builds
    if not builds or fmt in _RUN_GPUENV:
        return ()
    names = ", ".join(f"{b.name} {b.version}" for b in builds)
    return (
        f"target {context.target.name} compiles {names} at install (gpuenv.lock's builds): "
        f"the {fmt} export leaves them out; 'gpuenv install' builds them for the target's GPUs",
    )
