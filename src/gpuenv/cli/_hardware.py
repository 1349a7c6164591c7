"""This machine's hardware facts for the commands that need them (detect, plan, init).

The ``GPUENV_OVERRIDE_*`` variables are read once, by ``_common.hardware_overrides``,
and passed to the library.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common

if TYPE_CHECKING:
    from gpuenv.hardware.model import HardwareFacts


def add_facts_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--facts",
        metavar="PATH",
        help="hardware facts for 'detect' targets from a file written by 'gpuenv detect --json' "
        "(default: detect this machine)",
    )


def machine_facts(facts_file: str | None = None) -> HardwareFacts:
    """Facts from ``facts_file`` when given, else detected on this machine."""
    if facts_file:
        from gpuenv import hardware

        return hardware.facts_from_json(facts_file)
    return _common.detect_machine()
