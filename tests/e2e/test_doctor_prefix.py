"""No false alarm on a prefix gpuenv installed: real uv (and rattler) from the local
index and channel, then `gpuenv doctor --prefix` through its real interpreter."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from gpuenv.doctor import DoctorRequest, Host, diagnose
from gpuenv.hardware import GpuFacts, HardwareFacts
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import PkgIndex

H100 = HardwareFacts(
    gpus=(GpuFacts(0, "NVIDIA H100 80GB HBM3", "GPU-0", ComputeCapability.parse("9.0")),),
    driver_version=DriverVersion.parse("550.54.15"),
    cuda_driver_version=CudaVersion.parse("12.4"),
    sources={"gpus": "declared"},
)


def _prefix(project: Project, target: str) -> Path:
    return Path(os.readlink(project.dir / ".gpuenv" / target))


def _doctor(project: Project, prefix: Path, tmp_path: Path) -> list[tuple[str, str]]:
    root = tmp_path / "host"
    root.mkdir(exist_ok=True)
    environ = {k: v for k, v in project.env.items() if k != "PYTHONPATH"}
    # Not this machine's toolkits: an nvcc on its PATH (/usr/local/bin/nvcc of a CUDA 13
    # install) disagrees with the prefix's torch, whose conda nvcc the fixture channel
    # ships without a binary. The findings are the prefix's, wherever the tests run.
    bare = tmp_path / "no-toolkit-bin"
    bare.mkdir(exist_ok=True)
    environ["PATH"] = str(bare)
    report = diagnose(
        DoctorRequest(
            environ=environ, hardware=H100, prefix=prefix, cwd=project.dir, host=Host(root=root)
        )
    )
    assert report.environment["sys_path_from"] == "the interpreter"
    return [(f.code, f.message) for f in report.findings]


def test_gpuenv_prefix_with_conda_tools_has_no_findings(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    local_channel: LocalChannel,
    tmp_path: Path,
) -> None:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { "cuda-nvcc" = "12.4.*" }\npython = false\n'
    )
    project = make_project(text)
    project.gpuenv("install", "--target", "h100", check=True)
    prefix = _prefix(project, "h100")
    assert (prefix / "conda-meta").is_dir()
    assert _doctor(project, prefix, tmp_path) == []
    # the pip side of it: torch, its companions and the nvidia-* wheels, all RECORDed
    names = {p.name.split("-")[0] for p in prefix.glob("lib/python*/site-packages/*.dist-info")}
    assert {"torch", "torchvision", "nvidia_cudnn_cu12"} <= names


def test_doctor_cli_on_an_installed_cpu_prefix(make_project: Callable[..., Project]) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    result = project.gpuenv("doctor", "--prefix", str(_prefix(project, "cpu")), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # the doctor runs here with this machine's real host: whatever it finds about the
    # machine itself, nothing is about the prefix's own packages
    own = {
        "mixed-managers",
        "duplicate-dist-info",
        "file-ownership-clash",
        "record-mismatch",
        "trio-mismatch",
        "trio-cu-tag-mismatch",
        "python-path-shadowing",
    }
    assert not own & {f["code"] for f in data["findings"]}, data["findings"]
