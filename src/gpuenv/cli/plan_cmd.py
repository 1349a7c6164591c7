"""`gpuenv plan`: the chosen stack per target, with reasons. No network."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _hardware, _output

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.plan import Plan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser)
    _hardware.add_facts_flag(parser)
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.knowledge import knowledge_base
    from gpuenv.plan import make_plan
    from gpuenv.spec import load_spec

    kb = knowledge_base()
    loaded = load_spec(_common.spec_path(args), kb=kb, cache_dir=settings.cache_dir)
    _common.check_target(args.target, list(loaded.spec.targets))
    # With one torch for all targets, every target's hardware matters, not only --target's.
    spec = loaded.spec
    shared = spec.stack.same_torch
    wanted = [spec.targets[args.target]] if args.target and not shared else spec.targets.values()
    detected = (
        _hardware.machine_facts(args.facts)
        # A facts file given is read even when no target detects: a missing or broken
        # one was accepted in silence (exit 0) by a spec that never needed it.
        if any(t.uses_detect for t in wanted) or args.facts
        else None
    )
    torch_index = _common.url_override("GPUENV_TORCH_INDEX")
    plan = make_plan(
        spec,
        kb,
        only=args.target,
        detected=detected,
        torch_index=torch_index,
        newest_on_index=_common.newest_torch_seen(),
        seen_builds=_seen_builds(torch_index or spec.pip.torch_index),
    )
    if args.json:
        _output.emit_json(plan.to_json())
    else:
        _output.out(render(plan, verbose=bool(args.verbose)))
    return 0


def _seen_builds(torch_index: str | None) -> dict[str, dict[str, dict[str, list[str]]]]:
    """The builds the last ``gpuenv lock`` saw on the torch index (from the cache)."""
    from gpuenv.lock.index_builds import seen_builds
    from gpuenv.plan import DEFAULT_TORCH_INDEX

    cache = _common.cache_dir()
    return seen_builds(cache, torch_index or DEFAULT_TORCH_INDEX) if cache is not None else {}


def render(plan: Plan, *, verbose: bool) -> str:
    rows = []
    for t in plan.targets:
        hw = t.hardware
        gpu = (
            (hw.gpu_name or "none")  # "Apple GPU (MPS)" on a Mac
            if hw.cpu
            else f"{hw.gpu_name} ({', '.join(c.sm for c in hw.compute_capabilities)})"
        )
        if hw.platform in ("osx-arm64", "win-64"):  # another system's target: say which
            gpu += f", {hw.platform}"
        rows.append(
            [
                t.target,
                gpu,
                str(hw.driver or "-"),
                t.cuda or "-",
                t.cu_tag,
                t.torch,
                t.torchvision or "-",
                t.torchaudio or "-",
                t.python,
            ]
        )
    headers = [
        "target",
        "gpu",
        "driver",
        "cuda",
        "build",
        "torch",
        "torchvision",
        "torchaudio",
        "python",
    ]
    parts = [_output.table(headers, rows)]
    parts.extend(f"\nnote: {notice}" for notice in plan.notices)
    for t in plan.targets:
        parts.append(f"\n{t.target}:")
        parts.extend(f"  - {reason}" for reason in t.reasons)
        if t.unverified:
            parts.append("  unverified facts this rests on:")
            parts.extend(f"    * {u.fact}: {u.why} [{u.where}]" for u in t.unverified)
    return "\n".join(parts)
