"""Checking parsed data (a spec, a lock, a data or facts file) against its pydantic
model: text fields validated by a parser, and every problem at once as (location,
message) pairs the caller turns into its own error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import AfterValidator, BaseModel, ValidationError

Problem = tuple[tuple[str | int, ...], str]


def parsed_by(
    parse: Callable[[str], object],
    errors: type[Exception],
    message: Callable[[str, Exception], str] = lambda _text, exc: str(exc),
) -> AfterValidator:
    """A text field's validator: the text as it is when ``parse`` accepts it, else
    ``message(text, error)`` (the parser's own words by default) as the problem."""

    def check(text: str) -> str:
        try:
            parse(text)
        except errors as exc:
            raise ValueError(message(text, exc)) from None
        return text

    return AfterValidator(check)


def schema_problems(model: type[BaseModel], raw: dict[str, Any]) -> list[Problem]:
    """Every problem of ``raw`` against ``model``: (location, message); empty when valid."""
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        return [(tuple(e["loc"]), str(e["msg"])) for e in exc.errors()]
    return []
