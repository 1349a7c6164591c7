"""Checking parsed data (a lock, a facts file) against its pydantic model, every problem
at once, as (location, message) pairs the caller turns into its own error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

Problem = tuple[tuple[str | int, ...], str]


def schema_problems(model: type[BaseModel], raw: dict[str, Any]) -> list[Problem]:
    """Every problem of ``raw`` against ``model``: (location, message); empty when valid."""
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        return [(tuple(e["loc"]), str(e["msg"])) for e in exc.errors()]
    return []
