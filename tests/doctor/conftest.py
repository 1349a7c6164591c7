"""Fixture environments on disk: fake conda-meta and dist-info, real ELF shared objects
built with gcc (chosen SONAME, NEEDED, RUNPATH or RPATH), toolkits with an ``nvcc``
script, and a host tree standing in for ``/`` (``/proc``, ``/usr/local/cuda``, ...).

``clean_env`` is a venv with a coherent torch 2.4.1+cu124 stack that has no findings;
each test plants one problem into it (or builds a conda environment) and asserts the
finding that names it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuenv.doctor import DoctorRequest, Finding, Host, Report, diagnose
from gpuenv.hardware import GpuFacts, HardwareFacts
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion
from tests.nvml.conftest import standin_dir, standin_env  # noqa: F401 (fixtures for doctor tests)

GCC = shutil.which("gcc")
BUILD_ENV = dict(os.environ)  # gcc's PATH, whatever a test later does to the environment
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc builds the ELF fixtures")


def hardware(
    cc: str | None = "9.0",
    driver: str | None = "550.54.15",
    cuda: str | None = "12.4",
    name: str = "NVIDIA H100 80GB HBM3",
) -> HardwareFacts:
    gpus = (GpuFacts(0, name, "GPU-0", ComputeCapability.parse(cc)),) if cc else ()
    return HardwareFacts(
        gpus=gpus,
        driver_version=DriverVersion.parse(driver) if driver else None,
        cuda_driver_version=CudaVersion.parse(cuda) if cuda else None,
        sources={"gpus": "declared"},
    )


H100 = hardware()
NO_GPU = hardware(cc=None, driver=None, cuda=None)


class ElfFactory:
    """Builds small shared objects once per session and copies them where needed."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.source = cache / "empty.c"
        self.source.write_text("int gpuenv_fixture_symbol(void) { return 0; }\n")

    def _source(self, variant: str) -> Path:
        """The C source; a ``variant`` gives other bytes (a wheel of another build)."""
        if not variant:
            return self.source
        path = self.cache / f"variant-{hashlib.sha256(variant.encode()).hexdigest()[:12]}.c"
        path.write_text(
            "int gpuenv_fixture_symbol(void) { return 0; }\n"
            f"const char gpuenv_fixture_variant[] = {json.dumps(variant)};\n"
        )
        return path

    def build(
        self,
        soname: str | None,
        needed: Iterable[str] = (),
        runpath: Iterable[str] = (),
        rpath: Iterable[str] = (),
        variant: str = "",
    ) -> Path:
        needed, runpath, rpath = tuple(needed), tuple(runpath), tuple(rpath)
        key = hashlib.sha256(repr((soname, needed, runpath, rpath, variant)).encode()).hexdigest()[
            :16
        ]
        out = self.cache / f"{key}.so"
        if out.exists():
            return out
        stubs = self.cache / f"{key}-stubs"
        stubs.mkdir(exist_ok=True)
        argv = [GCC or "gcc", "-shared", "-fPIC", "-o", str(out), str(self._source(variant))]
        if soname:
            argv.append(f"-Wl,-soname,{soname}")
        if needed:
            for name in needed:
                shutil.copy2(self.build(name), stubs / name)
            argv += ["-Wl,--no-as-needed", f"-L{stubs}", *(f"-l:{n}" for n in needed)]
        if runpath or rpath:
            argv.append("-Wl,--enable-new-dtags" if runpath else "-Wl,--disable-new-dtags")
            argv.append("-Wl,-rpath," + ":".join(runpath or rpath))
        subprocess.run(argv, check=True, capture_output=True, env=BUILD_ENV)
        return out

    def install(self, dest: Path, soname: str | None, **kwargs: Any) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        shutil.copy2(self.build(soname, **kwargs), dest)
        return dest


@pytest.fixture(scope="session")
def elf(tmp_path_factory: pytest.TempPathFactory) -> ElfFactory:
    if GCC is None:
        pytest.skip("gcc builds the ELF fixtures")
    return ElfFactory(tmp_path_factory.mktemp("elf"))


TORCH_NEEDED = ("libcudart.so.12", "libcublas.so.12", "libcudnn.so.9", "libnccl.so.2")
NVIDIA_WHEELS = (
    # (site-packages/nvidia/<pkg>, distribution, version, file (also its SONAME))
    ("cuda_runtime", "nvidia-cuda-runtime-cu12", "12.4.127", "libcudart.so.12"),
    ("cublas", "nvidia-cublas-cu12", "12.4.5.8", "libcublas.so.12"),
    ("cudnn", "nvidia-cudnn-cu12", "9.1.0.70", "libcudnn.so.9"),
    ("nccl", "nvidia-nccl-cu12", "2.20.5", "libnccl.so.2"),
)


@dataclass
class FakeEnv:
    prefix: Path
    elf: ElfFactory
    python_dir: str = "python3.11"

    @property
    def site(self) -> Path:
        return self.prefix / "lib" / self.python_dir / "site-packages"

    def dist(
        self,
        name: str,
        version: str,
        *,
        installer: str | None = "pip",
        files: Iterable[str] = (),
        top_level: Iterable[str] | None = None,
        site: Path | None = None,
        requires: Iterable[str] = (),
    ) -> Path:
        site = site or self.site
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        requirements = "".join(f"Requires-Dist: {r}\n" for r in requires)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requirements}\n"
        )
        if installer:
            (info / "INSTALLER").write_text(installer + "\n")
        if top_level is not None:
            (info / "top_level.txt").write_text("".join(t + "\n" for t in top_level))
        record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
        for rel in files:
            path = site / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_text("")
        (info / "RECORD").write_text("".join(record_line(site, r) for r in record))
        return info

    def conda(self, name: str, version: str, files: Iterable[str] = (), build: str = "0") -> Path:
        meta = self.prefix / "conda-meta"
        meta.mkdir(parents=True, exist_ok=True)
        path = meta / f"{name}-{version}-{build}.json"
        record = {
            "name": name,
            "version": version,
            "build": build,
            "channel": "conda-forge",
            "files": list(files),
        }
        path.write_text(json.dumps(record))
        for rel in files:
            target = self.prefix / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.write_text("")
        return path

    def lib(
        self,
        directory: Path,
        filename: str,
        soname: str,
        links: Iterable[str] = (),
        **kwargs: Any,
    ) -> Path:
        real = self.elf.install(directory / filename, soname, **kwargs)
        for link in links:
            (directory / link).symlink_to(filename)
        return real

    def torch(
        self,
        version: str = "2.4.1+cu124",
        cuda: str | None = "12.4",
        *,
        runpath: Iterable[str] | None = None,
        rpath: Iterable[str] = (),
        needed: Iterable[str] = TORCH_NEEDED,
    ) -> None:
        pkg = self.site / "torch"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "version.py").write_text(
            "from typing import Optional\n\n"
            f"__version__ = {version!r}\n"
            "debug = False\n"
            f"cuda: Optional[str] = {cuda!r}\n"
            "git_version = 'abc'\n"
            "hip: Optional[str] = None\n"
        )
        self.dist("torch", version)
        if cuda is None:
            return
        if runpath is None and not rpath:
            runpath = [f"$ORIGIN/../../nvidia/{p}/lib" for p, *_ in NVIDIA_WHEELS]
        self.elf.install(
            pkg / "lib" / "libtorch_cuda.so",
            "libtorch_cuda.so",
            needed=needed,
            runpath=runpath or (),
            rpath=rpath,
        )

    def nvidia_wheels(self, skip: Iterable[str] = ()) -> None:
        for pkg, dist, version, filename in NVIDIA_WHEELS:
            if pkg in skip:
                continue
            self.lib(self.site / "nvidia" / pkg / "lib", filename, filename)
            self.dist(dist, version, files=[f"nvidia/{pkg}/lib/{filename}"])


def record_line(site: Path, rel: str) -> str:
    """A RECORD line as installers write it: sha256 and size of the file as it is now."""
    path = site / rel
    if rel.endswith("/RECORD") or not path.is_file():
        return f"{rel},,\n"
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}\n"


def make_clean_venv(prefix: Path, elf: ElfFactory) -> FakeEnv:
    env = FakeEnv(prefix, elf)
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    env.site.mkdir(parents=True)
    env.torch()
    env.nvidia_wheels()
    env.dist("torchvision", "0.19.1+cu124")
    env.dist("torchaudio", "2.4.1+cu124")
    env.dist("numpy", "1.26.4")
    return env


@pytest.fixture
def clean_env(tmp_path: Path, elf: ElfFactory) -> FakeEnv:
    return make_clean_venv(tmp_path / "env", elf)


@pytest.fixture
def host_root(tmp_path: Path) -> Path:
    root = tmp_path / "host"
    root.mkdir()
    return root


Run = Callable[..., Report]


@pytest.fixture
def run(tmp_path: Path, host_root: Path) -> Run:
    def go(
        env: FakeEnv | Path,
        *,
        environ: Mapping[str, str] | None = None,
        facts: HardwareFacts = H100,
        deep: bool = False,
    ) -> Report:
        prefix = env.prefix if isinstance(env, FakeEnv) else env
        request = DoctorRequest(
            environ=dict(environ or {}),
            hardware=facts,
            prefix=prefix,
            deep=deep,
            cwd=tmp_path,
            host=Host(root=host_root),
        )
        return diagnose(request)

    return go


def only(report: Report, code: str) -> Finding:
    """The one finding with ``code``; fails listing every finding otherwise."""
    found = [f for f in report.findings if f.code == code]
    assert len(found) == 1, [(f.code, f.message) for f in report.findings]
    finding = found[0]
    assert finding.evidence, f"{code} has no evidence"
    values = list(_scalars(finding.evidence))
    assert any(v in finding.message for v in values), (finding.message, values)
    assert finding.fix
    return finding


def _scalars(value: object) -> Iterator[str]:
    """Every path or version in the evidence (strings of 3+ characters)."""
    if isinstance(value, str) and len(value) >= 3:
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _scalars(item)
    elif isinstance(value, list):
        for item in value:
            yield from _scalars(item)


def codes(report: Report) -> set[str]:
    return {f.code for f in report.findings}


def write_nvcc(directory: Path, release: str) -> Path:
    nvcc = directory / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.99'\n"
    )
    nvcc.chmod(0o755)
    return nvcc


def make_toolkit(root: Path, version: str) -> Path:
    """A toolkit directory: version.json and a bin/nvcc script of that version."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "version.json").write_text(json.dumps({"cuda": {"version": f"{version}.1"}}))
    write_nvcc(root / "bin", version)
    return root


# A torch 2.13.0+cu130 venv laid out like the real wheels: CUDA 13 libraries share
# site-packages/nvidia/cu13/lib; cuDNN and NCCL keep nvidia/cudnn/lib and nvidia/nccl/lib
# (the folders their CUDA 12 wheels use too).
CU13_WHEELS = (
    # (folder under nvidia/, distribution, version, files)
    ("cu13", "nvidia-cuda-runtime", "13.0.96", ("libcudart.so.13",)),
    ("cu13", "nvidia-cublas", "13.1.0.3", ("libcublasLt.so.13", "libcublas.so.13")),
    ("cu13", "nvidia-curand", "10.4.0.35", ("libcurand.so.10",)),
    ("cudnn", "nvidia-cudnn-cu13", "9.20.0.48", ("libcudnn.so.9",)),
    ("nccl", "nvidia-nccl-cu13", "2.29.7", ("libnccl.so.2",)),
)
CU13_NEEDED = (
    "libcudart.so.13",
    "libcublasLt.so.13",
    "libcublas.so.13",
    "libcurand.so.10",
    "libcudnn.so.9",
    "libnccl.so.2",
)


def make_cu13_venv(prefix: Path, elf: ElfFactory) -> FakeEnv:
    env = FakeEnv(prefix, elf)
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    env.site.mkdir(parents=True)
    for folder, dist, version, files in CU13_WHEELS:
        lib = env.site / "nvidia" / folder / "lib"
        for name in files:
            needed = ("libcublasLt.so.13",) if name == "libcublas.so.13" else ()
            env.lib(
                lib,
                name,
                name,
                needed=needed,
                runpath=("$ORIGIN",) if needed else (),
                variant=f"{dist} {version}",
            )
        env.dist(dist, version, files=[f"nvidia/{folder}/lib/{n}" for n in files])
    runpath = [f"$ORIGIN/../../nvidia/{d}/lib" for d in ("cu13", "cudnn", "nccl")]
    env.torch(version="2.13.0+cu130", cuda="13.0", runpath=runpath, needed=CU13_NEEDED)
    elf.install(
        env.site / "torch" / "lib" / "libtorch_global_deps.so",
        "libtorch_global_deps.so",
        needed=("libcudart.so.13",),
        runpath=runpath,
    )
    requires = [f"{d}=={v}; platform_system == 'Linux'" for _f, d, v, _n in CU13_WHEELS]
    env.dist("torch", "2.13.0+cu130", requires=requires)
    env.dist("torchvision", "0.28.0+cu130")
    return env


def plant_cu12_wheel(
    env: FakeEnv, folder: str, dist: str, version: str, files: Iterable[str]
) -> list[Path]:
    """A CUDA 12 wheel installed over the environment: its files go to
    nvidia/<folder>/lib, replacing whatever another wheel put there."""
    lib = env.site / "nvidia" / folder / "lib"
    written = [env.lib(lib, name, name, variant=f"{dist} {version}") for name in files]
    env.dist(dist, version, files=[f"nvidia/{folder}/lib/{n}" for n in files])
    return written
