"""Helpers for `gpuenv import` tests: run the real command in-process on fixture files."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, CliResult

IMPORTS = FIXTURES / "importers"

TARGETS = {
    "h100": ("--gpu", "H100", "--driver", "550.54.15"),
    "rtx4090": ("--gpu", "RTX 4090", "--driver", "550.54.15"),
    "rtx3090-470": ("--gpu", "RTX 3090", "--driver", "470.82.01"),
    "t4": ("--gpu", "T4", "--driver", "550.54.15"),
    "v100": ("--gpu", "V100", "--driver", "550.54.15"),
    "gh200": ("--gpu", "GH200", "--driver", "550.54.15"),
    "rtx5090": ("--gpu", "RTX 5090", "--driver", "570.86.10"),
    "cpu": ("--gpu", "none"),
}


@dataclass
class Imported:
    result: CliResult
    spec: Path

    @property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.result.out)
        return data

    def entries(self, kind: str) -> dict[str, dict[str, Any]]:
        return {e["package"]: e for e in self.report[kind] if e["package"]}

    def torch(self) -> str:
        return str(self.entries("changed").get("torch", self.entries("kept").get("torch"))["to"])


@pytest.fixture
def run_import(cli: Callable[..., CliResult], tmp_path: Path) -> Callable[..., Imported]:
    counter = iter(range(1000))

    def run(*inputs: str | Path, target: str = "h100", extra: tuple[str, ...] = ()) -> Imported:
        spec = tmp_path / f"gpuenv-{next(counter)}.toml"
        paths = [str(IMPORTS / p) if isinstance(p, str) else str(p) for p in inputs]
        result = cli("import", *paths, *TARGETS[target], "-o", str(spec), "--json", *extra)
        return Imported(result, spec)

    return run
