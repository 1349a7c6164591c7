"""On-GPU verification: the standalone probe, running it, and the per-machine record.

- ``probe.py`` (beside this file) is the standalone script the interpreter under test
  runs; it never imports gpuenv.
- ``run_probe`` / ``verify_python`` run it and judge the output (never trusting a
  crashed, timed-out or garbled run).
- ``write_record`` / ``find_passing_record`` keep one record per machine in a prefix;
  the record-reading path is standard-library only (it runs on every ``gpuenv run``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuenv.verify._run import (
        DEFAULT_TIMEOUT,
        expectations_for_installed,
        inspect_python,
        interpreter_problem,
        parse_probe_output,
        run_probe,
        verify_python,
    )
    from gpuenv.verify.model import CheckResult, Expectations, ProbeResult
    from gpuenv.verify.record import (
        VerificationRecord,
        find_passing_record,
        fingerprint_hash,
        make_record,
        read_record,
        record_path,
        write_record,
    )

# Every name loads on first use: `gpuenv run` imports gpuenv.verify.gate, and this
# package's __init__ runs first, so it must not pull in dataclasses, pathlib or
# the probe runner (_proc, logging, subprocess, importlib.resources).
_HOMES = {
    "gpuenv.verify._run": (
        "DEFAULT_TIMEOUT",
        "expectations_for_installed",
        "inspect_python",
        "interpreter_problem",
        "parse_probe_output",
        "run_probe",
        "verify_python",
    ),
    "gpuenv.verify.model": ("CheckResult", "Expectations", "ProbeResult"),
    "gpuenv.verify.record": (
        "VerificationRecord",
        "find_passing_record",
        "fingerprint_hash",
        "make_record",
        "read_record",
        "record_path",
        "write_record",
    ),
}


def __getattr__(name: str) -> Any:
    import importlib

    for module, names in _HOMES.items():
        if name in names:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'gpuenv.verify' has no attribute {name!r}")


__all__ = [
    "DEFAULT_TIMEOUT",
    "CheckResult",
    "Expectations",
    "ProbeResult",
    "VerificationRecord",
    "expectations_for_installed",
    "find_passing_record",
    "fingerprint_hash",
    "inspect_python",
    "interpreter_problem",
    "make_record",
    "parse_probe_output",
    "read_record",
    "record_path",
    "run_probe",
    "verify_python",
    "write_record",
]
