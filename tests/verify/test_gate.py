"""The verification gate: only a passing record for this lock on this machine counts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest.mock import create_autospec

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


def on(monkeypatch: pytest.MonkeyPatch, fingerprint: dict[str, object]) -> None:
    """This machine is ``fingerprint`` (a double with the real function's signature)."""
    fake = create_autospec(gate.machine_fingerprint, side_effect=lambda **_: dict(fingerprint))
    monkeypatch.setattr(gate, "machine_fingerprint", fake)


@pytest.fixture
def on_node_a(monkeypatch: pytest.MonkeyPatch) -> None:
    on(monkeypatch, NODE_A)


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


# --- why it is shut, by case ----------------------------------------------------------------


def _probe(*failed: str) -> dict[str, object]:
    checks = [{"name": n, "passed": False, "detail": "x"} for n in failed]
    checks.append({"name": "torch", "passed": True, "detail": "ok"})
    return {"passed": False, "checks": checks, "reason": None}


def refusal(selected: Selected) -> str:
    with pytest.raises(NotVerified) as caught:
        gate.check_gate(selected, unverified=False)
    assert caught.value.exit_code == 4
    return caught.value.message


@pytest.mark.usefixtures("on_node_a")
def test_never_verified_here(selected: Selected) -> None:
    assert refusal(selected).endswith("it has never been verified here (driver 550.54.15, 1 GPU)")


@pytest.mark.usefixtures("on_node_a")
def test_verified_on_other_hardware(selected: Selected) -> None:
    write(Path(selected.prefix), NODE_B)
    write(Path(selected.prefix), {"driver": "535.1", "gpus": ["GPU-c"]})
    assert "it passed on other hardware (2 machines), not on this machine" in refusal(selected)


@pytest.mark.usefixtures("on_node_a")
def test_verified_for_another_lock(selected: Selected) -> None:
    write(Path(selected.prefix), NODE_A, lock="sha256:" + "2" * 64)
    assert "verified here for another lock (222222222222), not for the one installed" in (
        refusal(selected)
    )


@pytest.mark.usefixtures("on_node_a")
def test_last_verification_failed_lists_the_failing_checks(selected: Selected) -> None:
    path = Path(_recordcheck.record_file(selected.prefix, NODE_A))
    path.parent.mkdir(parents=True)
    record = {"schema": 1, "lock_hash": LOCK, "fingerprint": NODE_A, "passed": False}
    record.update(
        probe=_probe("matmul-bf16", "cudnn-conv"), finished_at="2024-09-17T10:00:00+00:00"
    )
    path.write_text(json.dumps(record))
    message = refusal(selected)
    assert "its last verification here failed (2024-09-17T10:00:00+00:00)" in message
    assert message.endswith("matmul-bf16, cudnn-conv")


NO_DRIVER: dict[str, object] = {"driver": None, "gpus": []}


def test_no_driver_is_the_reason_only_for_a_cuda_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    on(monkeypatch, NO_DRIVER)
    cuda = Selected("h100", str(tmp_path), Marker(LOCK, "h100", "3.11", "0", 0.0, "12.4"))
    assert refusal(cuda).endswith("this machine has no NVIDIA driver, and it is a CUDA 12.4 build")
    cpu = Selected("cpu", str(tmp_path), Marker(LOCK, "cpu", "3.11", "0", 0.0, None))
    assert refusal(cpu).endswith("it has never been verified here"), "a CPU build needs no driver"


@pytest.mark.usefixtures("on_node_a")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep", "huge", "list", "wrong-types"])
def test_a_hostile_record_is_no_record(selected: Selected, kind: str) -> None:
    path = Path(_recordcheck.record_file(selected.prefix, NODE_A))
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "deep":
        path.write_text("[" * 10_000 + "]" * 10_000)
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.truncate(5 << 20)
    elif kind == "list":
        path.write_text("[1, 2]")
    else:
        path.write_text(json.dumps({"schema": 1, "lock_hash": 5, "passed": "yes", "probe": []}))
    assert "never been verified here" in refusal(selected)
    assert gate.passing_machines(selected.prefix) == 0


def test_without_a_driver_a_cuda_target_is_not_sent_to_verify_here(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The hint that went in a circle ('run gpuenv verify (or pass --unverified)' after
    verify failed for lack of a driver) now says where it can be verified."""
    on(monkeypatch, NO_DRIVER)
    cuda = Selected("h100", str(tmp_path), Marker(LOCK, "h100", "3.11", "0", 0.0, "12.4"))
    with pytest.raises(NotVerified) as caught:
        gate.check_gate(cuda, unverified=False)
    hint = caught.value.hint or ""
    assert hint.startswith("a CUDA build can only be verified on its hardware: there, ")
    assert "'gpuenv verify --target h100 --slurm' from the login node" in hint
    assert hint.endswith("here, --unverified runs it without that check")
    cpu = Selected("cpu", str(tmp_path), Marker(LOCK, "cpu", "3.11", "0", 0.0, None))
    with pytest.raises(NotVerified) as caught:
        gate.check_gate(cpu, unverified=False)
    assert caught.value.hint == "run 'gpuenv verify --target cpu' (or pass --unverified)"
