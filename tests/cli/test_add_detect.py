"""`gpuenv add` relocks a "detect" target with this machine's facts, as `lock` and
`install` do: all three build their options with ``LockOptions.from_settings``. Before,
add built its own without detecting, and refused such a project ("no facts were given")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import gpuenv.hardware
import gpuenv.lock.backends
from gpuenv.hardware import DetectOverrides, HardwareFacts
from gpuenv.lock.format import read_lock
from tests.cli.test_detect import ONE_H100
from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip

# A workstation's project: whatever GPU the machine has, and a laptop target beside it.
SPEC = """[project]
name = "bench"

[stack]
python = "3.11"
torch = "2.4.*"
torchvision = false
torchaudio = false

[targets.here]
gpu = "detect"
driver = "detect"

[targets.cpu]
gpu = "none"
"""


def test_add_relocks_a_detect_target_for_the_machine_it_runs_on(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    monkeypatch.setattr(gpuenv.lock.backends, "resolvers", lambda: (pip, FakeConda()))
    asked: list[DetectOverrides | None] = []

    def detect(overrides: DetectOverrides | None = None) -> HardwareFacts:
        asked.append(overrides)
        return ONE_H100

    monkeypatch.setattr(gpuenv.hardware, "detect", detect)
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    result = cli("-f", str(spec), "add", "transformers>=1", "--no-install")
    assert result.code == 0, result.err
    assert len(asked) == 1  # once, however many targets
    lock = read_lock(tmp_path / "gpuenv.lock")
    assert lock is not None
    here = lock.targets["here"]
    assert here.stack.cu_tag == "cu124" and here.hardware.gpu == ONE_H100.gpus[0].name
    assert here.hardware.source == "measured"
    assert here.pip_package("transformers") is not None
