"""The knowledge base's full schema, enforced on the shipped data files.

Run-time loading converts entries without pydantic (start-up cost, see
``gpuenv.knowledge._load``); this test is where unknown keys, missing sources and
malformed versions are caught, before they ship. The models live in
``gpuenv.knowledge._schema``, which also checks a user's facts file when it is read.
"""

from __future__ import annotations

import pytest

from gpuenv.knowledge._data import DATA_FILES, read_data
from gpuenv.knowledge._schema import MODELS, RawCudaFile


@pytest.mark.parametrize("name", DATA_FILES)
def test_data_file_matches_schema(name: str) -> None:
    MODELS[name].model_validate(read_data(name))


def test_every_data_file_has_a_schema() -> None:
    assert set(MODELS) == set(DATA_FILES)


def test_schema_rejects_an_entry_without_source() -> None:
    data = read_data("cuda.toml")
    broken = dict(data)
    broken["release"] = [{k: v for k, v in data["release"][0].items() if k != "source"}]
    with pytest.raises(ValueError, match="source"):
        RawCudaFile.model_validate(broken)
