"""``cli._common.Settings``: what the environment tells a command, read once. The paths
are read at once; what reads files or refuses a bad value is read on first use, so a
command that never locks never meets a bad GPUENV_INDEX_URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.cli._common import Settings
from gpuenv.errors import UsageError


def test_the_paths_are_read_once_and_stay(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUENV_STATE_DIR", str(tmp_path / "state"))
    settings = Settings()
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert settings.cache_dir == tmp_path / "cache"
    assert settings.state_dir == str(tmp_path / "state")
    assert settings.store().state_dir == tmp_path / "state"
    with pytest.raises(AttributeError, match="read once"):
        settings.cache_dir = None  # type: ignore[misc]


def test_no_cache_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUENV_NO_CACHE", "1")
    assert Settings().cache_dir is None


def test_a_bad_index_override_is_refused_only_where_a_lock_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUENV_INDEX_URL", "ftp://mirror.example/simple")
    settings = Settings()  # every command builds it: nothing refused yet
    with pytest.raises(
        UsageError, match=r"GPUENV_INDEX_URL: .ftp://mirror\.example/simple. is not an http"
    ):
        _ = settings.lock


def test_the_lock_settings_are_built_once_from_the_same_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUENV_TORCH_INDEX", "https://torch.example/whl")
    settings = Settings()
    lock = settings.lock
    monkeypatch.setenv("GPUENV_TORCH_INDEX", "https://other.example/whl")
    assert settings.lock is lock and lock.torch_index == "https://torch.example/whl"
    assert lock.cache_dir == settings.cache_dir and lock.mirrors is settings.mirrors
