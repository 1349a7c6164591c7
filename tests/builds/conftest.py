"""Helpers for build tests: a fake CUDA toolkit (an ``nvcc`` script that answers
``--version``, and a ``host_config.h``), fixture sdists on disk, and prefixes with the
fixture index's torch installed by real uv."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuenv.builds.model import BuildEntry, BuildInputs, BuildSource, compute_identity
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.fixtures.sdists import SdistSpec, build_sdist

NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then
  echo "nvcc: NVIDIA (R) Cuda compiler driver"
  echo "Cuda compilation tools, release {cuda}, V{cuda}.131"
  exit 0
fi
echo "fake nvcc: $*" >&2
exit 1
"""
HOST_CONFIG = "#if defined(__GNUC__)\n#if __GNUC__ > {gcc_max}\n#error -- unsupported GNU version!\n#endif\n#endif\n"

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def uv_bin() -> Path:
    import uv

    return Path(uv.find_uv_bin())


def fake_toolkit(root: Path, cuda: str = "12.4", gcc_max: int = 13) -> Path:
    """A directory that looks like a CUDA toolkit to gpuenv (not to a real build)."""
    home = root / f"cuda-{cuda}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(NVCC.format(cuda=cuda))
    nvcc.chmod(0o755)
    (home / "include" / "crt").mkdir(parents=True)
    (home / "include" / "crt" / "host_config.h").write_text(HOST_CONFIG.format(gcc_max=gcc_max))
    return home


def gcc_major() -> int | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    out = subprocess.run([gcc, "-dumpversion"], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().split(".")[0])


def write_sdist(directory: Path, spec: SdistSpec) -> tuple[Path, str]:
    data = build_sdist(spec)
    path = directory / spec.filename
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def make_prefix(directory: Path, pkgindex: PkgIndex, torch: str = "torch-2.4.1+cpu") -> Path:
    """A venv with the fixture index's torch (the cpu build's wheel) installed by uv."""
    prefix = directory / "prefix"
    uv = uv_bin()
    subprocess.run([uv, "venv", "-q", "--no-config", "--python", "3.11", prefix], check=True)
    wheel = next((pkgindex.root / "whl" / "cpu").glob(f"{torch}-cp311-cp311-linux_x86_64.whl"))
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--no-config",
            "--no-deps",
            "--python",
            prefix / "bin/python",
            wheel,
        ],
        check=True,
    )
    return prefix


def entry_for(
    sdist: Path,
    sha256: str,
    spec: SdistSpec,
    *,
    torch_sha: str | None = "0" * 64,
    arch_list: str | None = "9.0+PTX",
    toolkit: str | None = "12.4.131",
    host_compiler: str | None = None,
    env: tuple[tuple[str, str], ...] = (),
    no_build_isolation: bool = True,
    max_jobs: int | None = None,
    cuda: str | None = None,
) -> BuildEntry:
    source = BuildSource("sdist", sdist.as_uri(), sha256)
    inputs = BuildInputs(
        python="3.11",
        platform="linux-64",
        against_torch=spec.needs_torch,
        no_build_isolation=no_build_isolation,
        torch="2.4.1+cpu" if spec.needs_torch else None,
        torch_sha256=torch_sha if spec.needs_torch else None,
        cuda=cuda or ("12.4" if toolkit else None),
        toolkit=toolkit,
        arch_list=arch_list,
        host_compiler=host_compiler,
        env=env,
    )
    name = spec.name
    identity = compute_identity(name, spec.version, source, inputs, {"torch": torch_sha or ""})
    return BuildEntry(name, spec.version, source, inputs, identity, spec.requires, max_jobs)


from tests.e2e.conftest import make_project  # noqa: E402, F401 - the e2e projects, here too
