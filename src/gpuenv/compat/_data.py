"""The knowledge base's data files as bytes and raw TOML, and their digest.

Kept apart from the loader so that caches keyed on the data (the validated-spec
cache, the parsed-data cache) can compute the digest without importing the model.
"""

from __future__ import annotations

import sys
from importlib import resources
from typing import Any

from gpuenv.errors import FileFormatError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DATA_FILES = ("cuda.toml", "gpus.toml", "torch.toml")
SCHEMA_VERSION = 1


def _data_bytes(name: str) -> bytes:
    return resources.files("gpuenv.compat").joinpath("data").joinpath(name).read_bytes()


def data_digest() -> str:
    """A digest of the shipped data files: caches of derived results key on it."""
    import hashlib

    digest = hashlib.sha256()
    for name in DATA_FILES:
        digest.update(name.encode() + b"\0" + _data_bytes(name))
    return digest.hexdigest()


def read_data(name: str) -> dict[str, Any]:
    """The raw TOML of one data file (also used by the schema test)."""
    data: dict[str, Any] = tomllib.loads(_data_bytes(name).decode("utf-8"))
    if data.get("schema") != SCHEMA_VERSION:
        raise FileFormatError(
            f"compat/data/{name}: schema {data.get('schema')!r}, expected {SCHEMA_VERSION}"
        )
    return data
