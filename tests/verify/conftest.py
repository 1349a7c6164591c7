"""Fixtures for the verification tests: a fake-torch site per test, real tiny .so files."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpuenv.verify import Expectations, ProbeResult, run_probe
from tests.conftest import FIXTURES, REPO

FAKE_TORCH = FIXTURES / "fake_torch"
PROBE_FILE = REPO / "src" / "gpuenv" / "verify" / "probe.py"

# What the default fake (GPUENV_FAKE_TORCH={}) has installed: a passing H100 environment.
LOCKED = Expectations(
    torch="2.4.1+cu124",
    torchvision="0.19.1",
    torchaudio="2.4.1",
    cuda="12.4",
    cudnn="9.1.0.70",
    nccl="2.20.5",
    builds={
        "cu118": ("3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"),
        "cu121": ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"),
        "cu124": ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"),
    },
    check_budget=20,
)


def load_probe_module() -> ModuleType:
    """probe.py imported as a module (it is a standalone script in the package)."""
    spec = importlib.util.spec_from_file_location("gpuenv_probe_under_test", PROBE_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def probe_module() -> ModuleType:
    return load_probe_module()


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUENV_FAKE", "PYTHON"))}
    for var in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "CUDA_HOME"):
        env.pop(var, None)
    return env


def fake_env(config: Mapping[str, Any] | None = None, **extra: str) -> dict[str, str]:
    """An environment that puts the fake torch first on the path, configured."""
    env = _clean_env()
    env["PYTHONPATH"] = str(FAKE_TORCH)
    env["GPUENV_FAKE_TORCH"] = json.dumps(dict(config or {}))
    env.update(extra)
    return env


def make_site(root: Path, config: Mapping[str, Any]) -> Path:
    """A site directory holding the fake torch with real metadata: torch/version.py with
    constants (as real wheels have) and a .dist-info for each package, so gpuenv's
    inspection (which never imports torch) reads it like a real installation."""
    site = root / "site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(FAKE_TORCH, site, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
    version = config.get("version", "2.4.1+cu124")
    cuda = config.get("cuda", "12.4")
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n\n"
        f"__version__ = {version!r}\ncuda: Optional[str] = {cuda!r}\n",
        encoding="utf-8",
    )
    dists = {"torch": version}
    for name in ("torchvision", "torchaudio"):
        value = config.get(name, "0.19.1+cu124" if name == "torchvision" else "2.4.1+cu124")
        if value:
            dists[name] = value
    dists.update(config.get("dists", {}))
    for name, value in dists.items():
        info = site / f"{name.replace('-', '_')}-{value}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {value}\n", encoding="utf-8"
        )
    return site


@pytest.fixture
def site_env(tmp_path: Path) -> Callable[..., dict[str, str]]:
    def build(config: Mapping[str, Any] | None = None, **extra: str) -> dict[str, str]:
        config = dict(config or {})
        env = fake_env({k: v for k, v in config.items() if k != "dists"}, **extra)
        env["PYTHONPATH"] = str(make_site(tmp_path, config))
        return env

    return build


def probe(
    config: Mapping[str, Any] | None = None,
    expect: Expectations = LOCKED,
    *,
    timeout: float = 60,
    **extra: str,
) -> ProbeResult:
    """Run the real probe under this interpreter against the fake torch."""
    return run_probe(
        Path(sys.executable),
        expect,
        env=fake_env(config, **extra),
        timeout=timeout,
        isolated=False,
    )


def check(result: ProbeResult, name: str) -> Any:
    found = [c for c in result.checks if c.name == name]
    assert found, f"no {name} check in {[c.name for c in result.checks]} ({result.reason})"
    return found[0]


@pytest.fixture(scope="session")
def build_so(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path, str], Path]:
    """Build a real, tiny shared library named like a CUDA one (with that SONAME)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build a shared library")
    source = tmp_path_factory.mktemp("csrc") / "lib.c"
    source.write_text("int gpuenv_fake_symbol(void) { return 42; }\n", encoding="utf-8")

    def build(directory: Path, name: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        out = directory / name
        subprocess.run(
            [gcc, "-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", str(out), str(source)],
            check=True,
            capture_output=True,
        )
        return out

    return build
