"""`gpuenv plan`: the chosen stack per target, with reasons. No network."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output
from gpuenv.errors import UsageError

if TYPE_CHECKING:
    from gpuenv.plan import Plan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(parser)
    _common.add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    from gpuenv.compat import knowledge_base
    from gpuenv.plan import make_plan
    from gpuenv.spec import load_spec

    kb = knowledge_base()
    loaded = load_spec(_common.spec_path(args), kb=kb, cache_dir=_common.cache_dir())
    _common.check_target(args.target, list(loaded.spec.targets))
    if loaded.spec.uses_detect:
        raise UsageError(
            '"detect" targets need hardware detection, which this build of gpuenv lacks',
            hint="declare gpu and driver for the target",
        )
    plan = make_plan(
        loaded.spec,
        kb,
        only=args.target,
        torch_index=_common.env_override("GPUENV_TORCH_INDEX"),
    )
    if args.json:
        _output.emit_json(plan.to_json())
    else:
        _output.out(render(plan, verbose=bool(args.verbose)))
    return 0


def render(plan: Plan, *, verbose: bool) -> str:
    rows = []
    for t in plan.targets:
        hw = t.hardware
        gpu = (
            "none"
            if hw.cpu
            else f"{hw.gpu_name} ({', '.join(c.sm for c in hw.compute_capabilities)})"
        )
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
    for t in plan.targets:
        parts.append(f"\n{t.target}:")
        parts.extend(f"  - {reason}" for reason in t.reasons)
    return "\n".join(parts)
