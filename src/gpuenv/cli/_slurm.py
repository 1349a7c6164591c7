"""`gpuenv verify --slurm`: flags in, one table out (the cluster logic is gpuenv.cluster).

``cluster`` runs on the login node; ``node`` is what each srun task runs
(``gpuenv verify --node-report``): it verifies as ``gpuenv verify`` does and prints the
one line the login node reads, also when verifying could not start on that node.
"""

from __future__ import annotations

import argparse
import os
import sys

from gpuenv.cli import _common, _output
from gpuenv.errors import CheckFailed, GpuenvError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.cluster.slurm import SlurmVerification


def node(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.cluster.slurm import NodeRow, node_line, node_name, row_of
    from gpuenv.verify.target import verify_installed

    host = node_name(os.environ)
    try:
        # The report goes back through srun: no progress lines on this node.
        _selected, verification = verify_installed(
            _common.spec_path(args),
            args.target,
            cache_dir=settings.cache_dir,
            timeout=args.timeout,
        )
    except GpuenvError as err:
        row = NodeRow(host, (), None, False, failed=f"{err.kind}: {err.message}")
        sys.stdout.write(node_line(row, os.environ))
        sys.stdout.flush()
        return err.exit_code
    record = verification.record
    row = row_of(verification.result, record.fingerprint, str(verification.record_path), host)
    sys.stdout.write(node_line(row, os.environ))
    sys.stdout.flush()
    return 0 if row.passed else CheckFailed.exit_code


def _node_command(args: argparse.Namespace, target: str) -> tuple[str, ...]:
    spec = str(_common.spec_path(args).absolute())
    command = [sys.executable, "-m", "gpuenv", "-f", spec, "verify", "--target", target]
    if args.timeout is not None:
        command += ["--timeout", str(args.timeout)]
    return (*command, "--node-report")


def cluster(args: argparse.Namespace, srun_args: tuple[str, ...]) -> int:
    from gpuenv import runtime
    from gpuenv.cluster.slurm import SlurmRequest, verify_nodes
    from gpuenv.errors import UsageError
    from gpuenv.verify import DEFAULT_TIMEOUT

    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    spec_file = _common.spec_path(args)
    # Installed here, on the shared store: every node uses this very prefix.
    selected = runtime.select(runtime.project_of(str(spec_file)), args.target)
    request = SlurmRequest(
        node_command=_node_command(args, selected.target),
        srun_args=srun_args,
        environ=dict(os.environ),
        timeout=args.timeout or DEFAULT_TIMEOUT,
    )
    outcome = verify_nodes(request)
    if args.json:
        _output.emit_json(
            {
                "passed": outcome.passed,
                "target": selected.target,
                "nodes": [r.to_json() for r in outcome.rows],
                "notes": list(outcome.notes),
                "srun_exit": outcome.srun_exit,
            }
        )
    else:
        _render(selected.target, outcome)
    return 0 if outcome.passed else CheckFailed.exit_code


def _render(target: str, outcome: SlurmVerification) -> None:
    rows = []
    for r in outcome.rows:
        gpus = f"{len(r.gpus)} x {r.gpus[0]}" if r.gpus else str(r.gpu_count)
        if r.passed:
            rate = f"{r.tflops:g}" if r.tflops is not None else "-"
            detail = rate if r.dtype in (None, "bfloat16") else f"{rate} ({r.dtype})"
        else:
            detail = r.failed or "failed"
        rows.append([r.host, gpus, r.driver or "-", "pass" if r.passed else "FAIL", detail])
    headers = ["host", "GPUs", "driver", "result", "bf16 TFLOP/s or failing check"]
    if rows:
        _output.out(_output.table(headers, rows))
    for note in outcome.notes:
        _output.err(f"note: {note}")
    failed = [r.host for r in outcome.rows if not r.passed]
    if not outcome.rows:
        tail = outcome.srun_stderr.strip().splitlines()[-10:]
        _output.err(f"no node reported (srun exited {outcome.srun_exit}):")
        for line in tail:
            _output.err(f"  {line}")
    elif failed:
        _output.out(
            f"target {target}: NOT verified on {len(failed)} of {len(rows)} nodes: "
            + ", ".join(failed)
        )
    else:
        _output.out(f"target {target}: verified on all {len(rows)} nodes")
