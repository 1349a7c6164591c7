"""`gpuenv plan` wall time on the two-target example (issue budget: < 0.3 s).

Usage: .venv/bin/python bench/plan.py [--runs N]
Prints medians, and the ratio to a bare interpreter start measured in the same run.
"""

from __future__ import annotations

import argparse

from _timing import REPO, interpreter, median_ms, report, wall


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
    report("python -c pass", bare)
    report("gpuenv --help", help_, baseline=bare)
    report("gpuenv plan (two targets)", plan, baseline=bare)
    report("gpuenv plan --json (two targets)", plan_json, baseline=bare)
    budget = 300.0
    verdict = "within" if median_ms(plan) < budget else "OVER"
    print(f"plan median {median_ms(plan):.1f} ms: {verdict} the {budget:.0f} ms budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
