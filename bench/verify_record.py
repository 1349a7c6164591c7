"""The record check `gpuenv run` will make: import gpuenv.verify and find this machine's
passing record (issue 6: it must add next to nothing to `gpuenv run`).

Usage: .venv/bin/python bench/verify_record.py [--runs N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from _timing import interpreter, report, wall

from gpuenv.verify import CheckResult, ProbeResult, find_passing_record, make_record, write_record

FINGERPRINT = {"driver_version": "550.54.15", "gpu_uuids": [f"GPU-{i}" for i in range(8)]}
LOCK = "sha256:" + "0" * 64


def _prefix(root: Path) -> Path:
    checks = tuple(
        CheckResult(name=f"check-{i}", status="pass", passed=True, detail="x" * 80)
        for i in range(14)
    )
    now = datetime.now(timezone.utc)
    result = ProbeResult(passed=True, checks=checks, probe_version=1, returncode=0)
    record = make_record(
        lock_hash=LOCK, fingerprint=FINGERPRINT, result=result, started_at=now, finished_at=now
    )
    write_record(root, record)
    return root


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = _prefix(Path(tmp))
        start = time.perf_counter()
        for _ in range(1000):
            assert find_passing_record(prefix, LOCK, FINGERPRINT) is not None
        per_call_us = (time.perf_counter() - start) / 1000 * 1e6
        python = interpreter()
        code = (
            "from pathlib import Path; from gpuenv.verify import find_passing_record as f; "
            f"assert f(Path({str(prefix)!r}), {LOCK!r}, {FINGERPRINT!r})"
        )
        base = wall([python, "-c", "import gpuenv.cli"], runs=args.runs)
        check = wall([python, "-c", "import gpuenv.cli; " + code], runs=args.runs)
    report("import gpuenv.cli", base)
    report("+ import gpuenv.verify + find_passing_record", check, baseline=base)
    print(f"find_passing_record, warm: {per_call_us:.0f} us per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
