"""`gpuenv plan` wall time on the two-target example (issue budget: < 0.3 s), also with
a seen-index cache (what ``gpuenv lock`` keeps of the torch index: every release, build
tag, platform and Python of a real root page, plus builds the data lacks) in place.

Usage: .venv/bin/python bench/plan.py [--runs N]
Prints medians, and the ratio to a bare interpreter start measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _timing import REPO, interpreter, median_ms, report, wall


def _seen_cache(cache: Path) -> None:
    """A builds cache as large as the real index's: 2.0 .. 2.15 and one release beyond,
    eight tags, four platforms, seven Pythons each."""
    pythons = [f"3.{m}" for m in range(9, 16)]
    tags = ("cpu", "cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132")
    platforms = ("linux-64", "linux-aarch64", "win-64", "osx-arm64")
    versions = [f"2.{minor}.{patch}" for minor in range(0, 17) for patch in range(3)]
    builds = {v: {t: {p: pythons for p in platforms} for t in tags} for v in versions}
    index = cache / "index"
    index.mkdir(parents=True)
    entry = {"at": 0, "builds": builds}
    (index / "builds.json").write_text(json.dumps({"https://download.pytorch.org/whl": entry}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    python = interpreter()
    example = REPO / "examples" / "h100-and-cpu" / "gpuenv.toml"
    bare = wall([python, "-c", "pass"], runs=args.runs)
    help_ = wall([python, "-m", "gpuenv", "--help"], runs=args.runs)
    plan = wall([python, "-m", "gpuenv", "-f", str(example), "plan"], runs=args.runs)
    plan_json = wall([python, "-m", "gpuenv", "-f", str(example), "plan", "--json"], runs=args.runs)
    with tempfile.TemporaryDirectory() as cache:
        _seen_cache(Path(cache))
        seen_env = {"GPUENV_CACHE_DIR": cache}
        plan_seen = wall(
            [python, "-m", "gpuenv", "-f", str(example), "plan"], runs=args.runs, env=seen_env
        )
    report("python -c pass", bare)
    report("gpuenv --help", help_, baseline=bare)
    report("gpuenv plan (two targets)", plan, baseline=bare)
    report("gpuenv plan --json (two targets)", plan_json, baseline=bare)
    report("gpuenv plan, seen-index cache", plan_seen, baseline=bare)
    budget = 300.0
    for name, times in (("plan", plan), ("plan with seen-index cache", plan_seen)):
        verdict = "within" if median_ms(times) < budget else "OVER"
        print(f"{name} median {median_ms(times):.1f} ms: {verdict} the {budget:.0f} ms budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
