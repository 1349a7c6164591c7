"""gpuenv._sha256: the run path's sha256, the same digests as hashlib's."""

from __future__ import annotations

import builtins
import hashlib
import importlib
import sys

import pytest

from gpuenv import _sha256


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"abc",
        "/opt/store/cpu-1f1a\udcff".encode("utf-8", "surrogateescape"),
        bytes(range(256)) * 4099,
    ],
)
def test_the_same_digest_as_hashlib_whole_and_in_parts(data: bytes) -> None:
    assert _sha256.hexdigest(data) == hashlib.sha256(data).hexdigest()
    parts = _sha256.new(data[:7])
    parts.update(data[7:1000])
    parts.update(data[1000:])
    assert parts.hexdigest() == hashlib.sha256(data).hexdigest()


def test_without_a_built_in_sha256_hashlib_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python without CPython's built-in module (or a FIPS build refusing it) still
    hashes, through hashlib."""
    real = builtins.__import__

    def no_builtin(name: str, *args: object, **kwargs: object) -> object:
        if name in ("_sha2", "_sha256"):
            raise ImportError(name)
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_builtin)
    monkeypatch.delitem(sys.modules, "gpuenv._sha256")
    fallback = importlib.import_module("gpuenv._sha256")
    try:
        assert fallback._sha256 is hashlib.sha256
        assert fallback.hexdigest(b"abc") == hashlib.sha256(b"abc").hexdigest()
    finally:
        monkeypatch.undo()
        sys.modules["gpuenv._sha256"] = _sha256
