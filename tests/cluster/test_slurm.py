"""gpuenv.cluster.slurm without a cluster: the srun command line, the node lines and their
parsing (garbled, interleaved, silent nodes), and one row per node from a probe result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuenv.cluster import slurm
from gpuenv.cluster.slurm import NodeRow, SlurmRequest, node_line, parse_reports, row_of, srun_argv
from gpuenv.verify.model import CheckResult, ProbeResult
from gpuenv.verify.summary import summarize

NODE = ("python", "-m", "gpuenv", "verify", "--target", "h100", "--node-report")


def test_outside_a_job_the_users_arguments_make_the_allocation_one_task_per_node() -> None:
    argv = srun_argv(SlurmRequest(NODE, ("--partition", "gpu", "--nodes", "4"), environ={}))
    assert argv == [
        "srun",
        "--job-name=gpuenv-verify",
        "--partition",
        "gpu",
        "--nodes",
        "4",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",
        *NODE,
    ]


def test_inside_a_job_with_no_arguments_every_node_of_the_allocation() -> None:
    environ = {"SLURM_JOB_ID": "17", "SLURM_JOB_NUM_NODES": "3"}
    argv = srun_argv(SlurmRequest(NODE, (), environ=environ))
    assert argv[:5] == [
        "srun",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",
    ]
    assert "--job-name=gpuenv-verify" not in argv


def _passing_gpu_result() -> ProbeResult:
    devices = [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(2)]
    checks = (
        CheckResult(
            name="devices", status="pass", passed=True, detail="2 GPUs", data={"devices": devices}
        ),
        CheckResult(
            name="matmul:cuda:0",
            status="pass",
            passed=True,
            detail="",
            data={"tflops": 702.5, "dtype": "bfloat16"},
        ),
        CheckResult(
            name="matmul:cuda:1",
            status="pass",
            passed=True,
            detail="",
            data={"tflops": 640.0, "dtype": "bfloat16"},
        ),
    )
    return ProbeResult(passed=True, checks=checks)


def test_a_row_names_the_gpus_the_weakest_bf16_rate_and_the_driver() -> None:
    fingerprint = {"driver": "550.54.15", "gpus": ["GPU-a", "GPU-b"]}
    row = row_of(_passing_gpu_result(), fingerprint, "/store/p/etc/gpuenv/verify/x.json", "gpu07")
    assert row == NodeRow(
        "gpu07",
        ("NVIDIA H100 80GB HBM3",) * 2,
        "550.54.15",
        True,
        gpu_count=2,
        tflops=640.0,
        dtype="bfloat16",
        failed=None,
        record="/store/p/etc/gpuenv/verify/x.json",
    )


def test_a_failed_result_names_its_first_failing_check_or_the_probes_own_reason() -> None:
    checks = (
        CheckResult(name="driver", status="pass", passed=True, detail="ok"),
        CheckResult(name="arch", status="fail", passed=False, detail="sm_120 not in the arch list"),
    )
    assert (
        summarize(ProbeResult(passed=False, checks=checks)).failed
        == "arch: sm_120 not in the arch list"
    )
    crashed = ProbeResult(passed=False, reason="the probe was killed by SIGSEGV")
    assert summarize(crashed).failed == "probe: the probe was killed by SIGSEGV"


def test_node_lines_round_trip_and_noise_is_ignored() -> None:
    environ = {"SLURM_STEP_NODELIST": "gpu[01-02]"}
    a = NodeRow("gpu01", ("A100",), "535.1", True, gpu_count=1, tflops=250.0, dtype="bfloat16")
    b = NodeRow("gpu02", (), None, False, failed="install: target h100 is not installed")
    stdout = "\n".join(
        [
            "some library printed this",
            node_line(a, environ).rstrip("\n"),
            f"{slurm.RESULT_TAG} {{not json",
            f"{slurm.RESULT_TAG} " + json.dumps(["not", "a", "row"]),
            "3: " + node_line(b, environ).rstrip("\n"),  # srun --label style prefix
        ]
    )
    rows, lists = parse_reports(stdout)
    assert rows == [a, b]
    assert lists == {"gpu[01-02]"}


def test_a_node_that_reports_nothing_is_a_failed_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuenv._proc import ProcResult

    line = node_line(NodeRow("n1", (), "550", True), {"SLURM_STEP_NODELIST": "n[1-2]"})

    def fake_run(argv: list[str], **_kwargs: object) -> ProcResult:
        if argv[0] == "scontrol":
            return ProcResult(tuple(argv), 0, "n1\nn2\n", "", 0.01)
        return ProcResult(tuple(argv), 1, line, "srun: error: n2: task 1: Killed\n", 1.0)

    from unittest.mock import create_autospec

    from gpuenv import _proc

    monkeypatch.setattr(slurm._proc, "run", create_autospec(_proc.run, side_effect=fake_run))
    outcome = slurm.verify_nodes(SlurmRequest(NODE, ("-N2",), environ={}))
    assert [(r.host, r.passed) for r in outcome.rows] == [("n1", True), ("n2", False)]
    assert outcome.rows[1].failed == slurm.NO_REPORT
    assert outcome.passed is False and outcome.srun_exit == 1


def test_nodes_that_share_a_record_are_pointed_out() -> None:
    record = str(Path("/p/etc/gpuenv/verify/same.json"))
    rows = [
        NodeRow("c1", (), None, True, record=record),
        NodeRow("c2", (), None, True, record=record),
    ]
    assert slurm._notes(rows) == [
        "nodes c1, c2 look alike (same driver and GPUs) and share one record: the last to finish wrote it"
    ]


def test_no_srun_says_where_to_run_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpuenv.errors import ExternalToolError

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ExternalToolError) as failed:
        slurm.verify_nodes(SlurmRequest(NODE, (), environ={"PATH": str(tmp_path)}))
    assert failed.value.hint and "login node" in failed.value.hint
