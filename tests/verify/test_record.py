"""Verification records: one per machine, atomic, bound to the lock hash and machine."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path

from gpuenv.verify import (
    CheckResult,
    ProbeResult,
    VerificationRecord,
    find_passing_record,
    fingerprint_hash,
    make_record,
    read_record,
    record_path,
    write_record,
)

NODE_A = {"driver_version": "550.54.15", "gpu_uuids": ["GPU-aaaa", "GPU-bbbb"]}
NODE_B = {"driver_version": "550.54.15", "gpu_uuids": ["GPU-cccc", "GPU-dddd"]}
LOCK = "sha256:0123abcd"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _result(passed: bool = True) -> ProbeResult:
    check = CheckResult(
        name="matmul:cuda:0",
        status="pass" if passed else "fail",
        passed=passed,
        detail="8192x8192 bfloat16: 700 TFLOP/s",
    )
    return ProbeResult(passed=passed, checks=(check,), mode="cuda", probe_version=1, returncode=0)


def _record(
    fingerprint: dict[str, object] = NODE_A, *, passed: bool = True, lock: str = LOCK
) -> VerificationRecord:
    return make_record(
        lock_hash=lock,
        fingerprint=fingerprint,
        result=_result(passed),
        started_at=T0,
        finished_at=T0,
        target="h100",
    )


def test_a_written_record_is_found_for_its_machine_and_lock(tmp_path: Path) -> None:
    path = write_record(tmp_path, _record())
    assert path == tmp_path / "etc" / "gpuenv" / "verify" / f"{fingerprint_hash(NODE_A)}.json"
    assert path == record_path(tmp_path, NODE_A)
    found = find_passing_record(tmp_path, LOCK, NODE_A)
    assert found == _record()
    assert found is not None and found.started_at == "2026-01-02T03:04:05+00:00"
    assert found.target == "h100" and found.probe.checks[0].detail.endswith("TFLOP/s")


def test_the_fingerprint_hash_ignores_key_order() -> None:
    assert fingerprint_hash({"a": 1, "b": [1, 2]}) == fingerprint_hash({"b": [1, 2], "a": 1})
    assert fingerprint_hash(NODE_A) != fingerprint_hash(NODE_B)


def test_another_machine_or_lock_never_counts(tmp_path: Path) -> None:
    write_record(tmp_path, _record(NODE_A))
    assert find_passing_record(tmp_path, LOCK, NODE_B) is None
    assert find_passing_record(tmp_path, "sha256:other", NODE_A) is None
    newer_driver = {**NODE_A, "driver_version": "570.86.15"}
    assert find_passing_record(tmp_path, LOCK, newer_driver) is None


def test_a_record_copied_to_another_machines_name_is_refused(tmp_path: Path) -> None:
    source = write_record(tmp_path, _record(NODE_A))
    record_path(tmp_path, NODE_B).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    assert find_passing_record(tmp_path, LOCK, NODE_B) is None


def test_one_record_per_machine_on_a_shared_prefix(tmp_path: Path) -> None:
    write_record(tmp_path, _record(NODE_A))
    write_record(tmp_path, _record(NODE_B, passed=False))
    write_record(tmp_path, _record(NODE_A, lock="sha256:newer"))
    files = sorted(p.name for p in (tmp_path / "etc" / "gpuenv" / "verify").iterdir())
    assert files == sorted(f"{fingerprint_hash(n)}.json" for n in (NODE_A, NODE_B))
    assert find_passing_record(tmp_path, "sha256:newer", NODE_A) is not None
    assert find_passing_record(tmp_path, LOCK, NODE_A) is None  # replaced by the newer lock
    assert find_passing_record(tmp_path, LOCK, NODE_B) is None  # B failed
    failed = read_record(tmp_path, NODE_B)
    assert failed is not None and not failed.passed


def test_a_failed_probe_never_makes_a_passing_record(tmp_path: Path) -> None:
    write_record(tmp_path, _record(passed=False))
    assert find_passing_record(tmp_path, LOCK, NODE_A) is None
    path = record_path(tmp_path, NODE_A)
    forged = json.loads(path.read_text(encoding="utf-8"))
    forged["passed"] = True  # the record says pass, its probe result does not
    path.write_text(json.dumps(forged), encoding="utf-8")
    assert find_passing_record(tmp_path, LOCK, NODE_A) is None


def test_damaged_or_foreign_records_count_as_none(tmp_path: Path) -> None:
    assert find_passing_record(tmp_path, LOCK, NODE_A) is None
    path = write_record(tmp_path, _record())
    for text in (
        "",
        "{",
        "[]",
        json.dumps({**_record().to_json(), "schema": 2}),
        json.dumps({**_record().to_json(), "lock_hash": None}),
    ):
        path.write_text(text, encoding="utf-8")
        assert find_passing_record(tmp_path, LOCK, NODE_A) is None


def test_concurrent_writers_never_leave_a_partial_record(tmp_path: Path) -> None:
    """Several nodes verifying at once: a reader sees a whole record or none, and no
    temporary file is left behind."""
    records = [_record(NODE_A, lock=f"sha256:{i}") for i in range(4)]
    stop = threading.Event()
    bad: list[str] = []

    def read() -> None:
        while not stop.is_set():
            path = record_path(tmp_path, NODE_A)
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            try:
                VerificationRecord.from_json(json.loads(text))
            except Exception as exc:  # noqa: BLE001 - any failure to parse is the bug
                bad.append(repr(exc))

    def write(record: VerificationRecord) -> None:
        for _ in range(40):
            write_record(tmp_path, record)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(r,)) for r in records]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert bad == []
    assert [p.name for p in record_path(tmp_path, NODE_A).parent.iterdir()] == [
        f"{fingerprint_hash(NODE_A)}.json"
    ]
    last = read_record(tmp_path, NODE_A)
    assert last is not None and last.lock_hash in {r.lock_hash for r in records}
