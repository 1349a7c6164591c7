"""Dotted key paths as users write them: ``targets.h100.driver``, ``pip.dependencies[2]``."""

from __future__ import annotations

import json
import re


def render_path(loc: tuple[str | int, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else json.dumps(part)
            text += f".{key}" if text else key
    return text
