"""The verification gate: only a passing record for this lock on this machine counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuenv._marker import Marker
from gpuenv.errors import NotVerified
from gpuenv.runtime import Selected
from gpuenv.verify import _recordcheck, gate

LOCK = "sha256:" + "1" * 64
NODE_A = {"driver": "550.54.15", "gpus": ["GPU-a"]}
NODE_B = {"driver": "550.54.15", "gpus": ["GPU-b"]}


def write(
    prefix: Path,
    fingerprint: dict[str, object],
    *,
    lock: str = LOCK,
    passed: bool = True,
    probe: bool = True,
) -> None:
    path = Path(_recordcheck.record_file(prefix, fingerprint))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "schema": 1,
                "lock_hash": lock,
                "fingerprint": fingerprint,
                "passed": passed,
                "probe": {"passed": probe},
            }
        )
    )


@pytest.fixture
def selected(tmp_path: Path) -> Selected:
    return Selected("h100", str(tmp_path), Marker(LOCK, "h100", "3.11", "0", 0.0))


@pytest.fixture
def on_node_a(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "machine_fingerprint", lambda nvml_fallback=True: dict(NODE_A))


@pytest.mark.usefixtures("on_node_a")
def test_a_passing_record_for_this_machine_and_lock_opens_the_gate(selected: Selected) -> None:
    write(Path(selected.prefix), NODE_A)
    assert gate.check_gate(selected, unverified=False) == []


@pytest.mark.usefixtures("on_node_a")
@pytest.mark.parametrize(
    "record",
    [
        {"fingerprint": NODE_B},
        {"fingerprint": NODE_A, "lock": "sha256:" + "2" * 64},
        {"fingerprint": NODE_A, "passed": False},
        {"fingerprint": NODE_A, "probe": False},
    ],
    ids=["other-machine", "other-lock", "failed", "probe-failed"],
)
def test_anything_else_keeps_it_shut(selected: Selected, record: dict[str, object]) -> None:
    fingerprint = record.pop("fingerprint")
    write(Path(selected.prefix), fingerprint, **record)  # type: ignore[arg-type]
    with pytest.raises(NotVerified, match="has not passed verification on this machine") as caught:
        gate.check_gate(selected, unverified=False)
    assert caught.value.hint is not None and "gpuenv verify --target h100" in caught.value.hint


@pytest.mark.usefixtures("on_node_a")
def test_unverified_runs_with_a_warning(selected: Selected) -> None:
    warnings = gate.check_gate(selected, unverified=True)
    assert len(warnings) == 1 and "--unverified" in warnings[0]


@pytest.mark.usefixtures("on_node_a")
def test_damaged_records_are_no_records(selected: Selected) -> None:
    path = Path(_recordcheck.record_file(selected.prefix, NODE_A))
    path.parent.mkdir(parents=True)
    path.write_text("{half a rec")
    with pytest.raises(NotVerified):
        gate.check_gate(selected, unverified=False)


def test_machines_keep_separate_records_and_are_counted(tmp_path: Path) -> None:
    (tmp_path / "etc/gpuenv").mkdir(parents=True)
    (tmp_path / "etc/gpuenv/installed.json").write_text(
        json.dumps(
            {
                "lock_hash": LOCK,
                "target": "h100",
                "python": "3.11",
                "gpuenv": "0",
                "installed_at": 0,
            }
        )
    )
    write(tmp_path, NODE_A)
    write(tmp_path, NODE_B)
    write(tmp_path, {"driver": "535.104.05", "gpus": ["GPU-c"]}, passed=False)
    assert gate.passing_machines(tmp_path) == 2
