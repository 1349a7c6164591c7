"""--deep: the verification probe when gpuenv has one, a note when it does not."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from gpuenv.doctor import Severity
from tests.doctor.conftest import FakeEnv, Run, codes, only


def test_deep_without_probe_is_a_note(
    clean_env: FakeEnv, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gpuenv.verify", None)  # import fails
    report = run(clean_env, deep=True)
    finding = only(report, "deep-checks-unavailable")
    assert finding.severity is Severity.INFO
    assert finding.evidence["module"] == "gpuenv.verify.run_probe"
    assert not report.has_errors


def fake_probe(monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def run_probe(python: Any, *, record: bool = True) -> dict[str, Any]:
        calls.append({"python": python, "record": record})
        return answer

    module = types.ModuleType("gpuenv.verify")
    module.run_probe = run_probe  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpuenv.verify", module)
    return calls


def test_deep_probe_failure(clean_env: FakeEnv, run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    (clean_env.prefix / "bin").mkdir()
    (clean_env.prefix / "bin" / "python").write_text("")
    calls = fake_probe(monkeypatch, {"passed": False, "error": "CUDA error: no kernel image"})
    finding = only(run(clean_env, deep=True), "probe-failed")
    assert "no kernel image" in finding.message
    assert calls == [{"python": clean_env.prefix / "bin" / "python", "record": False}]


def test_deep_probe_arch_list(
    clean_env: FakeEnv, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean_env.prefix / "bin").mkdir()
    (clean_env.prefix / "bin" / "python").write_text("")
    clean_env.torch(version="2.4.99+cu124")  # unknown to the knowledge base
    fake_probe(monkeypatch, {"passed": True, "arch_list": ["sm_80", "sm_86"]})
    report = run(clean_env, deep=True)
    finding = only(report, "arch-not-covered")
    assert finding.evidence["arch_list_from"].startswith("probe")
    assert "probe-failed" not in codes(report)


def test_static_run_never_calls_the_probe(
    clean_env: FakeEnv, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_probe(monkeypatch, {"passed": False})
    assert run(clean_env).findings == ()
    assert calls == []
