"""A real Jupyter kernel started through gpuenv's kernelspec (marked `network`: ipykernel
and its dependencies come from the default package index; skipped offline). The target
is locked, installed and verified, `gpuenv kernel install` writes the kernelspec, and
jupyter_client starts it as Jupyter does: the kernel answers from the target's prefix,
through `gpuenv run` and its gate."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import SPEC, Project
from tests.e2e.test_first_day import _give_the_probe_a_torch
from tests.fixtures.pkgindex.plugin import PkgIndex

pytestmark = [pytest.mark.network, pytest.mark.slow]


def _default_index() -> str | None:
    """uv's own default index, as its help states it (no host is written here)."""
    from gpuenv._uvbin import find_uv

    text = subprocess.run(
        [find_uv(), "pip", "compile", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    match = re.search(r"by default: <(https?://[^>]+)>", text)
    return match.group(1) if match else None


def _reachable(url: str) -> bool:
    host = urlsplit(url).hostname
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        return False
    return True


def _output(client: object, msg_id: str, timeout: float = 60) -> str:
    """The stream text the kernel printed for ``msg_id``, until it went idle."""
    text = []
    while True:
        try:
            msg = client.get_iopub_msg(timeout=timeout)  # type: ignore[attr-defined]
        except queue.Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            text.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            text.append("\n".join(msg["content"]["traceback"]))
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    return "".join(text)


def test_a_real_kernel_starts_in_the_targets_prefix_through_the_gate(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager_module = pytest.importorskip("jupyter_client.manager")
    default = _default_index()
    if default is None or not _reachable(default):
        pytest.skip("offline: the default package index is not reachable")
    text = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base, deps="")
    text = text.replace(
        "dependencies = []", f'extra-index-urls = ["{default}"]\ndependencies = ["ipykernel"]'
    )
    project = make_project(text)
    data = tmp_path / "jupyter"
    project.env["JUPYTER_DATA_DIR"] = str(data)
    installed = project.gpuenv("install", "--target", "cpu", timeout=600)
    assert installed.returncode == 0, installed.stderr
    _give_the_probe_a_torch(project.dir, project.env)  # the index's torch is a stand-in
    for step in (("verify", "--target", "cpu"), ("kernel", "install", "--target", "cpu")):
        done = project.gpuenv(*step, timeout=600)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    prefix = Path(os.readlink(project.dir / ".gpuenv" / "cpu"))

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    for name, value in project.env.items():
        monkeypatch.setenv(name, value)
    manager = manager_module.KernelManager(kernel_name="gpuenv-e2e-cpu")
    manager.start_kernel(cwd=str(project.dir))
    try:
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=120)
        msg_id = client.execute("import sys; print(sys.prefix)")
        assert _output(client, msg_id).strip() == str(prefix)
        client.stop_channels()
    finally:
        manager.shutdown_kernel(now=True)
