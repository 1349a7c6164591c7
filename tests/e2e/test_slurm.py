"""`gpuenv verify --slurm`, `gpuenv run` on a node and `export slurm` through a real Slurm
(munged, slurmctld, two slurmd) on localhost. Skipped where Slurm is not installed.

Each node gets its own stand-in GPU (through the cluster's TaskProlog), so each node
has its own fingerprint and writes its own record in the shared prefix. The target is
a CPU build whose torch is the test stand-in, so the probe really runs on each node;
a `[verify] extra` planted to fail on n2 makes that node fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import Slurm, make_cluster, missing_programs
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.nvml import standin

NODES = ("n1", "n2")
FAKE_TORCH = {
    "version": "2.4.1+cpu",
    "cuda": None,
    "devices": [],
    "torchvision": "0.19.1+cpu",
    "torchaudio": "2.4.1+cpu",
}
PLANTED = "import os; assert os.environ.get('SLURMD_NODENAME') != 'n2', 'planted failure on n2'"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the test cluster's daemons run as root"
    missing = missing_programs()
    if missing:
        return f"Slurm is not installed here (no {', '.join(missing)})"
    if standin.compiler() is None:
        return "no C compiler for the stand-in NVML"
    return None


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    library = standin.build(tmp_path_factory.mktemp("slurm-nvml"))
    node_env = {
        node: {
            "LD_LIBRARY_PATH": str(library),
            standin.SPEC_VAR: standin.FakeNvml(
                gpus=(standin.t4(i),), driver=f"550.54.{15 + i}"
            ).spec(),
        }
        for i, node in enumerate(NODES)
    }
    cluster = make_cluster(NODES, node_env)
    try:
        cluster.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        leftover = cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
        assert not leftover
        pytest.skip(f"Slurm could not start here: {exc}")
    yield cluster
    leftover = cluster.stop()
    logs = cluster.logs()
    shutil.rmtree(cluster.root, ignore_errors=True)
    assert leftover == [], f"daemons left running: {leftover}\n{logs}"


def _fake_torch_prefix(project: Project) -> Path:
    prefix = Path(os.readlink(project.dir / ".gpuenv" / "cpu"))
    site = next(prefix.glob("lib/python3*/site-packages"))
    fake = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torch"
    for name in ("torch", "torchvision", "torchaudio"):
        shutil.rmtree(site / name)
        shutil.copytree(fake / name, site / name)
    return prefix


def test_verify_through_slurm_records_each_node_and_fails_on_the_bad_one(
    slurm: Slurm, make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    started = time.monotonic()
    text = spec_text(pkgindex) + f"\n[verify]\nextra = [{json.dumps(PLANTED)}]\n"
    project = make_project(text)
    project.env.update(slurm.env, GPUENV_FAKE_TORCH=json.dumps(FAKE_TORCH))
    project.env.pop("LD_LIBRARY_PATH", None)
    project.gpuenv("install", "--target", "cpu", check=True)
    prefix = _fake_torch_prefix(project)
    gpuenv = [sys.executable, "-m", "gpuenv"]

    # Inside an allocation of both nodes, with no srun arguments: every node of it.
    inside = subprocess.run(
        ["salloc", "-N2", *gpuenv, "verify", "--target", "cpu", "--slurm"],
        cwd=project.dir,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert inside.returncode == 1, inside.stdout + inside.stderr
    rows = {line.split()[0]: line for line in inside.stdout.splitlines() if line[:2] in NODES}
    assert set(rows) == set(NODES), inside.stdout
    assert rows["n1"].split()[1:4] == ["1", "550.54.15", "pass"], rows  # the node's one GPU
    assert "550.54.15" in rows["n1"] and "550.54.16" in rows["n2"]
    assert "FAIL" in rows["n2"] and "extra:0" in rows["n2"] and "planted failure" in rows["n2"]
    assert "NOT verified on 1 of 2 nodes: n2" in inside.stdout

    records = [json.loads(p.read_text()) for p in (prefix / "etc/gpuenv/verify").glob("*.json")]
    by_node = {r["extra"]["slurm_node"]: r for r in records}
    assert set(by_node) == set(NODES), "one record per node"
    assert by_node["n1"]["passed"] is True and by_node["n2"]["passed"] is False
    assert by_node["n1"]["fingerprint"]["driver"] == "550.54.15"

    # gpuenv run on a node: n1 runs, n2 is refused with the command that verifies it.
    ran = slurm.run(
        "srun",
        "-w",
        "n1",
        *gpuenv,
        "-f",
        str(project.spec),
        "run",
        "--",
        "python",
        "-c",
        "print('ran on n1')",
        env=project.env,
    )
    assert ran.returncode == 0 and "ran on n1" in ran.stdout, ran.stderr
    refused = slurm.run(
        "srun", "-w", "n2", *gpuenv, "-f", str(project.spec), "run", "--", "true", env=project.env
    )
    assert refused.returncode == 4, refused.stderr
    assert "gpuenv verify --target cpu --slurm" in refused.stderr

    # The exported batch script starts jobs the same way, and refuses on n2.
    script = project.dir / "job.sh"
    project.gpuenv("export", "slurm", "--target", "cpu", "-o", str(script), check=True)
    for node, expected in (("n1", 0), ("n2", 4)):
        out = project.dir / f"job-{node}.out"
        job = slurm.run(
            "sbatch",
            "--wait",
            "-w",
            node,
            f"--output={out}",
            str(script),
            "python",
            "-c",
            "print('job ran')",
            env=project.env,
            timeout=120,
        )
        assert job.returncode == expected, job.stdout + job.stderr
    assert "job ran" in (project.dir / "job-n1.out").read_text()
    assert "gpuenv verify --target cpu --slurm" in (project.dir / "job-n2.out").read_text()

    # A new allocation from srun's arguments, on n1 alone: every node passes, exit 0.
    alone = project.gpuenv(
        "verify", "--target", "cpu", "--slurm", "--json", "--", "-N1", "-w", "n1", timeout=120
    )
    assert alone.returncode == 0, alone.stdout + alone.stderr
    report = json.loads(alone.stdout)
    assert report["passed"] is True and [n["host"] for n in report["nodes"]] == ["n1"]
    assert report["nodes"][0]["record"].startswith(str(prefix))
    assert time.monotonic() - started < 60
