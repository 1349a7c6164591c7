"""`gpuenv remove`: remove pip requirements from gpuenv.toml (comments and layout kept),
relock the targets it touches and install those installed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _edit

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="+", metavar="NAME", help="package names")
    _edit.where_flags(parser)
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.spec.edit import remove, removed

    where = _edit.where_of(args) if args.target is not None or args.group is not None else None
    return _edit.apply(
        args,
        settings,
        lambda text, file: remove(text, args.packages, where, file=file),
        lambda normalised: removed(normalised, args.packages, where),
    )
