"""Seeded mutations of parsed TOML documents, for tests that hold two readings of one
file to the same answer (spec._fast against spec._models, lock._plain against
lock._models): values of every type and shape replaced, keys removed, unknown, or spelt
as their Python names."""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any


def tables(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every table (and list) in ``value``."""
    found = [at]
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        if isinstance(child, (dict, list)):
            found += tables(child, (*at, key))
    return found


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


@dataclass(frozen=True)
class Mutations:
    """What a mutation draws from, and how often it removes, renames or adds a key
    (cumulative thresholds of one draw; the rest replace a value)."""

    values: list[Any]
    keys: list[str]
    most: int = 3  # edits per mutation, at most
    remove: float = 0.15
    rename: float = 0.25
    add: float = 0.35

    def mutated(self, raw: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        out = copy.deepcopy(raw)
        for _ in range(rng.randint(1, self.most)):
            container = at(out, rng.choice(tables(out)))
            if isinstance(container, list):
                if container:
                    where = rng.randrange(len(container))
                    container[where] = copy.deepcopy(rng.choice(self.values))
                else:
                    container.append(copy.deepcopy(rng.choice(self.values)))
                continue
            keys = list(container)
            move = rng.random()
            if keys and move < self.remove:
                del container[rng.choice(keys)]
            elif keys and move < self.rename:
                key = rng.choice(keys)
                container[key.replace("-", "_")] = container.pop(key)
            elif move < self.add:
                container[rng.choice(self.keys)] = copy.deepcopy(rng.choice(self.values))
            elif keys:
                container[rng.choice(keys)] = copy.deepcopy(rng.choice(self.values))
        return out
