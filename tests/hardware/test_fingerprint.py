"""The run-time fingerprint: /proc first, NVML only as a documented fallback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuenv.hardware import GpuFacts, HardwareFacts
from gpuenv.hardware.fingerprint import Fingerprint, fingerprint, read_proc_fingerprint
from gpuenv.versions import DriverVersion

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hardware"
PROC = str(FIXTURES / "proc-h100x2")
H100_A = "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11"
H100_B = "GPU-0c1d2e3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5"


def test_reads_proc() -> None:
    found = fingerprint(proc_root=PROC, nvml_fallback=False)
    assert found == Fingerprint("550.54.15", (H100_B, H100_A), "proc")  # UUIDs sorted
    assert found.key == f"driver=550.54.15;gpus={H100_B},{H100_A}"


def test_no_proc_and_no_fallback_is_empty(tmp_path: Path) -> None:
    found = fingerprint(proc_root=str(tmp_path), nvml_fallback=False)
    assert found == Fingerprint(None, (), "none")
    assert found.key == "driver=-;gpus="


def test_unknown_uuid_makes_proc_unable_to_answer(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    shutil.copytree(PROC, proc)
    info = proc / "driver" / "nvidia" / "gpus" / "0000:2a:00.0" / "information"
    info.write_text((FIXTURES / "proc-gpu-information-uninitialised.txt").read_text())
    assert read_proc_fingerprint(str(proc)) is None


def test_driver_loaded_without_gpus(tmp_path: Path) -> None:
    nvidia = tmp_path / "driver" / "nvidia"
    (nvidia / "gpus").mkdir(parents=True)
    (nvidia / "version").write_text((FIXTURES / "proc-version-390.txt").read_text())
    assert read_proc_fingerprint(str(tmp_path)) == Fingerprint("390.157", (), "proc")


def test_matches_ignores_source_and_order() -> None:
    from_proc = Fingerprint.of("550.54.15", [H100_A, H100_B], source="proc")
    from_nvml = Fingerprint.of("550.54.15", [H100_B, H100_A], source="nvml")
    assert from_proc.matches(from_nvml)
    assert not from_proc.matches(Fingerprint.of("550.90.07", [H100_A, H100_B], source="proc"))
    assert not from_proc.matches(Fingerprint.of("550.54.15", [H100_A], source="proc"))


def test_facts_give_the_same_fingerprint_as_proc() -> None:
    facts = HardwareFacts(
        gpus=(GpuFacts(0, "H100", H100_A, None), GpuFacts(1, "H100", H100_B, None)),
        driver_version=DriverVersion.parse("550.54.15"),
        cuda_driver_version=None,
        sources={"gpus": "nvml"},
    )
    assert facts.fingerprint().matches(fingerprint(proc_root=PROC, nvml_fallback=False))
    assert facts.fingerprint().source == "nvml"


def test_under_5_ms_in_process() -> None:
    fingerprint(proc_root=PROC, nvml_fallback=False)  # warm the file cache
    times = []
    for _ in range(51):
        started = time.perf_counter()
        fingerprint(proc_root=PROC, nvml_fallback=False)
        times.append(time.perf_counter() - started)
    assert sorted(times)[len(times) // 2] < 0.005


def test_module_imports_only_the_standard_library() -> None:
    code = (
        "import sys, json; before = set(sys.modules);"
        "import gpuenv.hardware.fingerprint as f; f.fingerprint(nvml_fallback=False);"
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(out.stdout))
    ours = {m for m in loaded if m.split(".")[0] == "gpuenv"}
    assert ours == {
        "gpuenv",
        "gpuenv.hardware",
        "gpuenv.hardware._identity",
        "gpuenv.hardware.proctext",
        "gpuenv.hardware.fingerprint",
    }
    third_party = {m.split(".")[0] for m in loaded} - set(sys.stdlib_module_names) - {"gpuenv"}
    assert third_party == set()
    # The `gpuenv run` path: none of these (pynvml ~40 ms, dataclasses and typing ~20 ms).
    assert not {"pynvml", "subprocess", "pathlib", "ctypes", "dataclasses", "typing", "re"} & loaded


@pytest.mark.parametrize("text", ["", "NVRM version: garbage\n"])
def test_unparseable_version_cannot_answer(tmp_path: Path, text: str) -> None:
    nvidia = tmp_path / "driver" / "nvidia"
    (nvidia / "gpus").mkdir(parents=True)
    (nvidia / "version").write_text(text)
    assert read_proc_fingerprint(str(tmp_path)) is None


def test_the_nvml_library_is_found_where_the_loader_would_look(tmp_path: Path) -> None:
    from gpuenv.hardware.fingerprint import NVML_LIBRARY, nvml_library_present

    here = tmp_path / "lib"
    here.mkdir()
    (here / NVML_LIBRARY).write_bytes(b"\x7fELF")
    assert nvml_library_present({"LD_LIBRARY_PATH": f"/nowhere::{here}"})
    if not nvml_library_present({}):  # this machine has no NVIDIA driver
        assert not nvml_library_present({"LD_LIBRARY_PATH": str(tmp_path)})


def test_without_a_driver_library_nvml_is_never_imported(tmp_path: Path) -> None:
    """A GPU target's `run --unverified` on a machine without NVIDIA's driver: NVML
    could only say "library not found", so pynvml (about 30 ms) is not imported."""
    from gpuenv.hardware.fingerprint import nvml_library_present

    if nvml_library_present({}):
        pytest.skip("this machine has libnvidia-ml.so.1")
    code = (
        "import sys, json; from gpuenv.hardware.fingerprint import fingerprint;"
        f"found = fingerprint(proc_root={str(tmp_path)!r});"
        "print(json.dumps([found.driver_version, found.source, 'pynvml' in sys.modules]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert json.loads(out.stdout) == [None, "none", False]
