"""A real Slurm on localhost for the tests: munged, slurmctld and one slurmd per node.

Everything lives in a fresh folder under /tmp (short: munge's socket path must fit a
unix socket name), on ports the kernel hands out, with a ``slurm.conf`` written here:
several ``NodeName``s on one host (Debian's slurmd takes ``-N NAME``), no cgroups, no
accounting. A ``TaskProlog`` gives each node's tasks their own environment (for the
tests: each node a stand-in GPU of its own, so each writes its own record). ``stop``
cancels what is left, stops the daemons (SIGTERM, then SIGKILL) and checks none is left.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "salloc", "scontrol", "sinfo")


def missing_programs() -> list[str]:
    return [name for name in DAEMONS if shutil.which(name) is None]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CONF = """\
ClusterName=gpuenvtest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog={root}/taskprolog.sh
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
MinJobAge=2
"""


@dataclass
class Slurm:
    root: Path
    nodes: tuple[str, ...]
    node_env: Mapping[str, Mapping[str, str]]  # what each node's TaskProlog exports
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    stepds_before: set[int] = field(default_factory=set)

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.root / "slurm.conf")}

    def client_env(self, base: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if not k.startswith("SLURM_")}
        env.update(self.env)
        return env

    def write(self) -> None:
        ports = [_free_port() for _ in self.nodes]
        text = CONF.format(root=self.root, ctld_port=_free_port(), slurmd_port=ports[0])
        for node, port in zip(self.nodes, ports, strict=True):
            text += (
                f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
                "CPUs=1 State=UNKNOWN\n"
            )
        text += f"PartitionName=debug Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP\n"
        (self.root / "slurm.conf").write_text(text)
        prolog = ["#!/bin/sh", 'case "$SLURMD_NODENAME" in']
        for node, exports in self.node_env.items():
            prolog.append(f"  {node})")
            prolog += [f"    echo 'export {k}={v}'" for k, v in exports.items()]
            prolog.append("    ;;")
        prolog.append("esac")
        (self.root / "taskprolog.sh").write_text("\n".join(prolog) + "\n")
        (self.root / "taskprolog.sh").chmod(0o755)
        for sub in ("state", "log", *(f"spool/{n}" for n in self.nodes)):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)

    def _start(self, argv: list[str], log: str) -> None:
        with open(self.root / "log" / log, "wb") as out:
            self.processes.append(
                subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            )

    def start(self, timeout: float = 30) -> None:
        r = self.root
        self.stepds_before = running_stepds()
        self._start(
            [
                "munged",
                "-f",
                "-F",
                f"--socket={r}/munge.socket",
                f"--key-file={r}/munge.key",
                f"--log-file={r}/log/munged.log",
                f"--pid-file={r}/munged.pid",
                f"--seed-file={r}/munge.seed",
                "--num-threads=4",
            ],
            "munged.out",
        )
        deadline = time.monotonic() + timeout
        while not (r / "munge.socket").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not start")
            time.sleep(0.05)
        conf = str(r / "slurm.conf")
        self._start(["slurmctld", "-D", "-f", conf], "slurmctld.out")
        for node in self.nodes:
            self._start(["slurmd", "-D", "-f", conf, "-N", node], f"slurmd-{node}.out")
        self.wait_idle(deadline)

    def run(
        self,
        *argv: str,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        full = self.client_env(env if env is not None else os.environ)
        return subprocess.run(
            list(argv), env=full, capture_output=True, text=True, timeout=timeout, check=check
        )

    def wait_idle(self, deadline: float) -> None:
        while True:
            states = self.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=10).stdout.split("\n")
            idle = {line.split()[0] for line in states if line.strip().endswith("idle")}
            if idle >= set(self.nodes):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurm nodes did not come up: {states}\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
            for p in sorted((self.root / "log").glob("*"))
        )

    def stop(self) -> list[int]:
        """Stop everything; returns the pids still alive afterwards (none, normally)."""
        if self.processes:
            self.run("scancel", "--user=root", timeout=10)
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        leftover = [p.pid for p in self.processes if p.poll() is None]
        deadline = time.monotonic() + 5
        while (stepds := running_stepds() - self.stepds_before) and time.monotonic() < deadline:
            time.sleep(0.1)
        return leftover + sorted(stepds)


def running_stepds() -> set[int]:
    """slurmstepd processes that are running (zombies, reaped by init, do not count)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        name, _, rest = stat.partition(") ")
        if name.endswith("(slurmstepd") and not rest.startswith("Z"):
            found.add(int(proc.name))
    return found


def make_cluster(nodes: tuple[str, ...], node_env: Mapping[str, Mapping[str, str]]) -> Slurm:
    root = Path(tempfile.mkdtemp(prefix="gpuenv-slurm-", dir="/tmp"))
    cluster = Slurm(root, nodes, node_env)
    cluster.write()
    return cluster
