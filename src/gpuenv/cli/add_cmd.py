"""`gpuenv add`: add pip requirements to gpuenv.toml (comments and layout kept), check
the result like any spec, relock the targets it touches and install those installed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _edit

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="+", metavar="REQ", help='requirements ("pillow>=10")')
    _edit.where_flags(parser)
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.spec.edit import add, added

    where = _edit.where_of(args)
    return _edit.apply(
        args,
        settings,
        lambda text, file: add(text, args.packages, where, file=file),
        lambda normalised: added(normalised, args.packages, where),
    )
