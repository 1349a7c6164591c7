"""install asks uv for the locked artifacts from its cache alone first, and online
only when the cache lacks one (the real uv path: tests/e2e/test_install.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuenv import _proc
from gpuenv.errors import ExternalToolError
from gpuenv.install.pip import _cached_then_online

ARGV: list[str | Path] = ["uv", "pip", "install", "-r", "requirements.txt"]


@dataclass
class Uv:
    """A stand-in for ``_proc.run``: an offline run fails when ``miss`` is set."""

    miss: bool = False
    runs: list[tuple[str | None, bool]] = field(default_factory=list)  # (UV_OFFLINE, check)

    def run(self, argv, *, timeout, env, check=True, what, **kwargs) -> _proc.ProcResult:
        self.runs.append((env.get("UV_OFFLINE"), check))
        code = 1 if env.get("UV_OFFLINE") == "1" and self.miss else 0
        if code and check:
            raise ExternalToolError("uv pip install failed", returncode=code)
        return _proc.ProcResult(tuple(map(str, argv)), code, "", "not in the cache", 0.0)


@pytest.fixture
def uv(monkeypatch: pytest.MonkeyPatch) -> Uv:
    fake = Uv()
    monkeypatch.setattr("gpuenv.install.pip._proc.run", fake.run)
    return fake


def test_a_warm_cache_installs_in_one_offline_run(uv: Uv) -> None:
    _cached_then_online(ARGV, {"UV_CACHE_DIR": "/store/cache/uv"})
    assert uv.runs == [("1", False)]


def test_a_cache_miss_installs_online(uv: Uv) -> None:
    uv.miss = True
    _cached_then_online(ARGV, {"UV_CACHE_DIR": "/store/cache/uv"})
    assert uv.runs == [("1", False), (None, True)]


def test_install_from_an_archive_stays_offline_and_is_tried_once(uv: Uv) -> None:
    uv.miss = True
    with pytest.raises(ExternalToolError):
        _cached_then_online(ARGV, {"UV_OFFLINE": "1"})
    assert uv.runs == [("1", True)]
