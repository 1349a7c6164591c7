"""``gpuenv verify --slurm``: the verification probe on every node of an allocation.

On the login node, ``verify_nodes`` runs ``srun`` (inside an allocation: on all of its
nodes; otherwise a new allocation from the user's ``srun`` arguments), always one task
per node and never killing the others when one fails. Each task runs ``gpuenv verify
--node-report`` on its node, which verifies the prefix there, writes that node's record
into the prefix (records are per machine) and prints exactly one line::

    gpuenv-node-result: {"host": ..., "gpus": [...], "driver": ..., "passed": ..., ...}

The login node reads those lines (anything else on stdout is ignored), adds a failed
row for every node of the step that reported nothing, and decides: every node passed.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuenv import _proc
from gpuenv.errors import ExternalToolError
from gpuenv.verify.model import ProbeResult
from gpuenv.verify.summary import summarize

RESULT_TAG = "gpuenv-node-result:"
QUEUE_WAIT = 3600.0  # how long srun may wait for the allocation, beyond the probe's time
NO_REPORT = "no result: the task did not report (see srun's output above)"


@dataclass(frozen=True)
class NodeRow:
    """One node's verification, as its task reports it: the GPUs and driver it saw, whether
    it passed (else the first failing check), its throughput and the record it wrote."""

    host: str
    gpus: tuple[str, ...]  # the names the probe saw (a CPU build sees none)
    driver: str | None
    passed: bool
    gpu_count: int = 0  # the GPUs of the node (its fingerprint), whatever the build uses
    tflops: float | None = None
    dtype: str | None = None
    failed: str | None = None  # the first failing check, or why the node did not verify
    record: str | None = None  # the record the node wrote (a path on the shared store)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "gpus": list(self.gpus),
            "gpu_count": self.gpu_count,
            "driver": self.driver,
            "passed": self.passed,
            "tflops": self.tflops,
            "dtype": self.dtype,
            "failed": self.failed,
            "record": self.record,
        }


@dataclass(frozen=True)
class SlurmRequest:
    """What ``verify_nodes`` runs: the command of each task, the user's srun arguments, this
    process's environment, the srun program and each node's time for the probe."""

    node_command: tuple[str, ...]  # what each task runs (gpuenv verify --node-report ...)
    srun_args: tuple[str, ...] = ()  # the user's, e.g. --partition gpu --gres gpu:1 --nodes 4
    environ: Mapping[str, str] | None = None  # this process's (SLURM_JOB_ID: inside a job)
    srun: str = "srun"
    timeout: float = 300.0  # the probe's budget on each node


@dataclass(frozen=True)
class SlurmVerification:
    """The outcome of ``verify --slurm``: one row per node (those that reported nothing
    failed), srun's exit status and stderr, and notes on nodes that share a record."""

    rows: tuple[NodeRow, ...]
    srun_exit: int
    srun_stderr: str
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.passed for r in self.rows)


# --- the node's side --------------------------------------------------------------------------


def node_name(environ: Mapping[str, str]) -> str:
    return environ.get("SLURMD_NODENAME") or socket.gethostname()


def node_line(row: NodeRow, environ: Mapping[str, str]) -> str:
    """The one line a task prints: the row, and the step's node list (to find silent nodes)."""
    body = row.to_json()
    body["step_nodes"] = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST")
    return f"{RESULT_TAG} {json.dumps(body, sort_keys=True, separators=(',', ':'))}\n"


def row_of(
    result: ProbeResult, fingerprint: Mapping[str, Any], record: str | None, host: str
) -> NodeRow:
    summary = summarize(result)
    driver = fingerprint.get("driver")
    uuids = fingerprint.get("gpus")
    return NodeRow(
        host=host,
        gpus=summary.gpus,
        driver=str(driver) if driver else None,
        passed=result.passed,
        gpu_count=max(len(summary.gpus), len(uuids) if isinstance(uuids, list) else 0),
        tflops=summary.tflops,
        dtype=summary.dtype,
        failed=summary.failed,
        record=record,
    )


# --- the login node's side -------------------------------------------------------------------


def srun_argv(request: SlurmRequest) -> list[str]:
    """srun with the user's arguments, then one task per node (these come last: they win)."""
    environ = request.environ or {}
    argv = [request.srun]
    if not environ.get("SLURM_JOB_ID"):
        argv.append("--job-name=gpuenv-verify")  # before the user's: theirs wins
    argv += list(request.srun_args)
    nodes = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES")
    if environ.get("SLURM_JOB_ID") and not request.srun_args and nodes and nodes.isdigit():
        argv += [f"--nodes={nodes}", f"--ntasks={nodes}"]  # every node of this allocation
    argv += ["--ntasks-per-node=1", "--kill-on-bad-exit=0"]
    return [*argv, *request.node_command]


def _row(raw: Any) -> NodeRow | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("host"), str):
        return None
    gpus = raw.get("gpus")
    tflops = raw.get("tflops")
    count = raw.get("gpu_count")
    return NodeRow(
        host=raw["host"],
        gpus=tuple(str(g) for g in gpus) if isinstance(gpus, list) else (),
        driver=raw["driver"] if isinstance(raw.get("driver"), str) else None,
        passed=raw.get("passed") is True,
        gpu_count=count if isinstance(count, int) and not isinstance(count, bool) else 0,
        tflops=float(tflops) if isinstance(tflops, int | float) else None,
        dtype=raw["dtype"] if isinstance(raw.get("dtype"), str) else None,
        failed=raw["failed"] if isinstance(raw.get("failed"), str) else None,
        record=raw["record"] if isinstance(raw.get("record"), str) else None,
    )


def parse_reports(stdout: str) -> tuple[list[NodeRow], set[str]]:
    """The rows the tasks printed (garbled lines are skipped), and the step node lists."""
    rows, node_lists = [], set()
    for line in stdout.splitlines():
        _, tag, payload = line.partition(RESULT_TAG)
        if not tag:
            continue
        try:
            raw = json.loads(payload)
        except ValueError:
            continue
        row = _row(raw)
        if row is not None:
            rows.append(row)
            if isinstance(raw.get("step_nodes"), str):
                node_lists.add(raw["step_nodes"])
    return rows, node_lists


def hostnames(node_list: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """``n[1-3]`` -> ``n1 n2 n3``, by Slurm itself (``scontrol show hostnames``)."""
    result = _proc.run(
        ["scontrol", "show", "hostnames", node_list],
        timeout=30,
        env=environ,
        check=False,
        what="scontrol show hostnames",
    )
    return result.stdout.split() if result.returncode == 0 else []


def _notes(rows: Sequence[NodeRow]) -> list[str]:
    """Nodes that share a record (the same driver and GPUs: two GPU-less nodes, say)."""
    by_record: dict[str, list[str]] = {}
    for row in rows:
        if row.record:
            by_record.setdefault(row.record, []).append(row.host)
    return [
        f"nodes {', '.join(hosts)} look alike (same driver and GPUs) and share one record: "
        "the last to finish wrote it"
        for hosts in by_record.values()
        if len(hosts) > 1
    ]


def verify_nodes(request: SlurmRequest) -> SlurmVerification:
    """Run the node command on every node through srun and gather one row per node."""
    argv = srun_argv(request)
    try:
        result = _proc.run(
            argv,
            timeout=request.timeout + QUEUE_WAIT,
            env=request.environ,
            check=False,
            what="srun",
        )
    except ExternalToolError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            exc.hint = "--slurm runs srun: use it on a Slurm login node (or inside a job)"
        raise
    rows, node_lists = parse_reports(result.stdout)
    seen = {r.host for r in rows}
    expected: list[str] = []
    for node_list in sorted(node_lists):
        expected += hostnames(node_list, request.environ)
    missing = [
        NodeRow(h, (), None, False, failed=NO_REPORT)
        for h in dict.fromkeys(expected)
        if h not in seen
    ]
    ordered = sorted(rows, key=lambda r: r.host) + missing
    return SlurmVerification(tuple(ordered), result.returncode, result.stderr, tuple(_notes(rows)))
