"""A probe result in a few words: the GPUs, the matrix-product rate, the first failure.

What a one-row report needs (``verify --slurm``'s table, ``export notes``), read from
the checks' data as the probe wrote it; nothing here re-judges a result.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuenv.verify.model import CheckResult, ProbeResult

PREFERRED = ("bfloat16", "float16", "float32")


@dataclass(frozen=True)
class ResultSummary:
    """A probe result in a few words: whether it passed, the GPUs seen, the weakest GPU's
    matrix-product rate, and the first failure."""

    passed: bool
    gpus: tuple[str, ...]  # device names, in index order (empty: no GPU seen)
    tflops: float | None  # the lowest rate among the devices' products (the weakest GPU)
    dtype: str | None  # the product's dtype ("bfloat16" on Ampere and newer)
    failed: str | None  # "check: detail" of the first failure (or the probe's own reason)


def _rate(check: CheckResult) -> tuple[float, str] | None:
    tflops, dtype = check.data.get("tflops"), check.data.get("dtype")
    if isinstance(tflops, int | float) and not isinstance(tflops, bool) and isinstance(dtype, str):
        return float(tflops), dtype
    return None


def _product(checks: tuple[CheckResult, ...]) -> tuple[float | None, str | None]:
    rates = [r for c in checks if c.name.startswith("matmul:") and (r := _rate(c))]
    if not rates:
        return None, None
    for dtype in PREFERRED:
        same = [t for t, d in rates if d == dtype]
        if same:
            return min(same), dtype
    tflops, dtype = min(rates)
    return tflops, dtype


def _gpus(checks: tuple[CheckResult, ...]) -> tuple[str, ...]:
    devices = next((c.data.get("devices") for c in checks if c.name == "devices"), None)
    if not isinstance(devices, list):
        return ()
    return tuple(str(d.get("name")) for d in devices if isinstance(d, dict) and d.get("name"))


def summarize(result: ProbeResult) -> ResultSummary:
    checks = result.report_checks()
    failed = next((c for c in checks if not c.passed), None)
    tflops, dtype = _product(result.checks)
    return ResultSummary(
        passed=result.passed,
        gpus=_gpus(result.checks),
        tflops=tflops,
        dtype=dtype,
        failed=f"{failed.name}: {failed.detail}" if failed is not None else None,
    )
