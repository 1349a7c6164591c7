"""`gpuenv kernel install|list|remove`: Jupyter kernels that run through `gpuenv run`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    install = sub.add_parser("install", help="write a kernelspec for a target")
    _common.add_target_flag(install, what="the target (default: the only one)")
    install.add_argument("--name", metavar="NAME", help="kernel name (gpuenv-<project>-<target>)")
    listing = sub.add_parser("list", help="the kernelspecs gpuenv wrote")
    remove = sub.add_parser("remove", help="remove a kernelspec gpuenv wrote")
    remove.add_argument("name", metavar="NAME")
    for each in (install, listing, remove):
        each.add_argument(
            "--prefix",
            type=_folder,
            metavar="DIR",
            help="DIR/share/jupyter/kernels (a Jupyter installation's prefix) instead of "
            "the user's kernels",
        )
        _common.add_json_flag(each)


def _folder(text: str) -> Path:
    """--prefix's folder; an empty one was the current folder (a script's unset variable
    wrote kernels there)."""
    if not text:
        raise argparse.ArgumentTypeError("needs a folder")
    return Path(text)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv import kernels

    environ = kernels.environ_of()
    if args.action == "list":
        found = kernels.listing(environ, args.prefix)
        if args.json:
            _output.emit_json({"kernels": [k.to_json() for k in found]})
        for k in [] if args.json else found:
            _output.out(f"{k.name}: {k.display_name}  {k.project} (target {k.target})")
        if not found and not args.json:
            where = kernels.kernels_dir(environ, args.prefix)
            _output.err(f"no gpuenv kernels in {where} (write one with 'gpuenv kernel install')")
        return 0
    if args.action == "remove":
        kernel = kernels.remove(args.name, environ, args.prefix)
        if args.json:
            _output.emit_json({"removed": kernel.to_json()})
        else:
            _output.out(f"removed {kernel.name} ({kernel.directory})")
        return 0
    return _install(args, environ)


def _install(args: argparse.Namespace, environ: dict[str, str]) -> int:
    from gpuenv import kernels
    from gpuenv.errors import UsageError
    from gpuenv.spec import load_spec
    from gpuenv.store import current_prefix

    spec_file = _common.spec_path(args)
    loaded = load_spec(spec_file, cache_dir=_common.cache_dir())
    names = list(loaded.spec.targets)
    _common.check_target(args.target, names)
    if args.target is None and len(names) != 1:
        raise UsageError(
            f"this project has several targets ({', '.join(names)}): say which",
            hint=f"gpuenv kernel install --target {names[0]}",
        )
    target = args.target or names[0]
    kernel = kernels.install(
        spec_file,
        loaded.spec.project.name,
        target,
        name=args.name,
        environ=environ,
        prefix=args.prefix,
    )
    prefix = current_prefix(spec_file.parent.absolute(), target)
    missing = prefix is None or not kernels.has_ipykernel(str(prefix))
    if args.json:
        _output.emit_json({"kernel": kernel.to_json(), "ipykernel": not missing})
        return 0
    _output.out(f"wrote {kernel.directory / 'kernel.json'}: {kernel.display_name}")
    if missing:
        _output.err(
            f"gpuenv: warning: target {target} has no ipykernel installed: the kernel will not "
            f"start until it has. Add it: gpuenv add --group jupyter ipykernel && "
            f"gpuenv install --target {target} --group jupyter"
        )
    return 0
