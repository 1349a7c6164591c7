"""`gpuenv export FORMAT`: one locked target written for other tools (conda-lock,
pylock, requirements, environment-yml, dockerfile), as notes, or as a Slurm batch
script. From the lock alone: no network, nothing resolved again."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.lock.model import LockedTarget
    from gpuenv.spec import Spec

# Kept here (not imported from gpuenv.export) so that --help imports nothing heavy.
FORMATS = (
    "conda-lock",
    "pylock",
    "requirements",
    "environment-yml",
    "dockerfile",
    "notes",
    "slurm",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("format", choices=FORMATS, metavar="FORMAT", help=" | ".join(FORMATS))
    _common.add_target_flag(parser, what="the target to export (default: the only one)")
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        type=Path,
        help="write here (default, or -: stdout)",
    )
    _common.add_group_flags(parser, verb="export")


def _target(args: argparse.Namespace, names: list[str]) -> str:
    from gpuenv.errors import UsageError

    if args.target:
        _common.check_target(args.target, names)
        return str(args.target)
    if len(names) == 1:
        return names[0]
    raise UsageError(
        f"the lock has several targets ({', '.join(names)}): say which to export",
        hint=f"gpuenv export {args.format} --target {names[0]}",
    )


def _groups_left_out(
    args: argparse.Namespace, spec: Spec, target: LockedTarget
) -> tuple[frozenset[str], str | None]:
    """The pip packages of the dependency groups not chosen (as ``install`` chooses:
    ``dev`` unless ``--no-dev``, ``--group``, ``--all-groups``), and a sentence naming
    those groups: an export writes what ``install`` installs, never a group's tools
    silently (a requirements.txt of the docs' notebook recipe held the jupyter group's packages)."""
    from gpuenv.errors import UsageError
    from gpuenv.install.project import choose_groups
    from gpuenv.lock.extras import left_out

    if args.format == "slurm":  # the job runs the installed prefix, groups and all
        if args.group or args.all_groups or args.no_dev:
            raise UsageError(
                "export slurm runs the target's installed prefix: its groups are the ones "
                "it was installed with",
                hint="choose them at install: gpuenv install --group NAME (or --all-groups)",
            )
        return frozenset(), None
    wanted = choose_groups(spec, args.group or (), every=args.all_groups, dev=not args.no_dev)
    if not target.groups:
        return frozenset(), None
    names = left_out(target.groups, wanted)
    if not names:
        return frozenset(), None
    groups = [g for g in sorted(target.groups) if g not in wanted]
    counts = {g: sum(1 for n in target.groups[g] if n in names) for g in groups}
    counted = ", ".join(f"{g} ({n} package{'' if n == 1 else 's'})" for g, n in counts.items())
    return frozenset(names), (
        f"left out the dependency groups not chosen: {counted}; --group NAME or --all-groups "
        "exports them"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv import export
    from gpuenv._fs import atomic_write_text, output_path
    from gpuenv.verify.record import list_records

    spec_file = _common.spec_path(args)
    loaded, lock = _common.load_locked(args)
    target = lock.targets[_target(args, sorted(lock.targets))]
    store = settings.store()
    # The project's own prefix of this locked content (a project installed editable, or
    # groups, name it apart), else the one the content alone names.
    from gpuenv.store import current_prefix

    pointed = current_prefix(spec_file.parent.absolute(), target.name)
    prefix = (
        pointed
        if pointed is not None and store.is_installed(pointed, target.content_hash)
        else store.prefix_for(target.name, target.content_hash)
    )
    left_out, note = _groups_left_out(args, loaded.spec, target)
    if note:
        _output.err(f"note: {note}")
    context = export.ExportContext(
        lock=lock,
        target=target,
        left_out=left_out,
        project=loaded.spec.project.name,
        records=tuple(list_records(prefix)) if args.format == "notes" else (),
        prefix=prefix,
        project_dir=spec_file.parent.absolute(),
        store_root=store.root.absolute(),
        gpuenv_argv=(sys.executable, "-m", "gpuenv"),
    )
    exported = export.export(args.format, context)
    for note in exported.notes:
        _output.err(f"note: {note}")
    if args.output is None or _common.is_stdout(args.output):  # -o - is stdout
        sys.stdout.write(exported.text)
        sys.stdout.flush()
        return 0
    destination = output_path(
        args.output, hint=f"name a file, or leave out -o to write to stdout (> {args.output})"
    )
    atomic_write_text(
        destination,
        exported.text,
        mode=0o755 if args.format == "slurm" else 0o644,
        what=f"the {args.format} export",
        hint=f"write it elsewhere: -o PATH in a writable folder, or leave out -o for stdout "
        f"(> {args.output})",
    )
    _output.err(f"wrote {args.output} ({args.format}, target {target.name})")
    return 0
