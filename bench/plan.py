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


def _seen_cache(cache: Path) -> int:
    """The builds cache ``gpuenv lock`` writes after reading an index as large as the real
    one: every build the knowledge base has (each release, tag and platform, with its
    Pythons) plus builds and Pythons it lacks (cu129 of 2.14 and 2.15, cp315 of every
    2.12 build, Windows cu129 of 2.9 to 2.11); the cache keeps only what the data lacks.
    Returns how many (release, tag, platform) entries it holds."""
    from gpuenv.knowledge import knowledge_base
    from gpuenv.plan import KNOWN_PYTHONS
    from gpuenv.plan._seen import unknown_builds

    kb = knowledge_base()
    listed: dict[str, dict[str, dict[str, list[str]]]] = {}
    for release in kb.torch_releases:
        version = str(release.version)
        for build in release.all_builds:
            pythons = [p for p in KNOWN_PYTHONS if release.python_of(build).contains(p)]
            if version.startswith("2.12."):
                pythons.append("3.15")
            listed.setdefault(version, {}).setdefault(build.tag, {})[build.platform] = pythons
        if version.startswith(("2.14.", "2.15.")):
            listed[version]["cu129"] = {"linux-64": ["3.11", "3.12", "3.13"]}
        if version.startswith(("2.9.", "2.10.", "2.11.")):
            listed[version].setdefault("cu129", {})["win-64"] = ["3.10", "3.11", "3.12"]
    builds = unknown_builds(kb, listed)
    index = cache / "index"
    index.mkdir(parents=True)
    entry = {"at": 0, "builds": builds}
    (index / "builds.json").write_text(json.dumps({"https://download.pytorch.org/whl": entry}))
    return sum(len(p) for tags_ in builds.values() for p in tags_.values())


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
        entries = _seen_cache(Path(cache))
        seen_env = {"GPUENV_CACHE_DIR": cache}
        plan_seen = wall(
            [python, "-m", "gpuenv", "-f", str(example), "plan"], runs=args.runs, env=seen_env
        )
    report("python -c pass", bare)
    report("gpuenv --help", help_, baseline=bare)
    report("gpuenv plan (two targets)", plan, baseline=bare)
    report("gpuenv plan --json (two targets)", plan_json, baseline=bare)
    report(f"gpuenv plan, seen-index cache ({entries})", plan_seen, baseline=bare)
    budget = 300.0
    for name, times in (("plan", plan), ("plan with seen-index cache", plan_seen)):
        verdict = "within" if median_ms(times) < budget else "OVER"
        print(f"{name} median {median_ms(times):.1f} ms: {verdict} the {budget:.0f} ms budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
