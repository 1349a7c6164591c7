"""detect() in-process on fixture trees: the /proc and nvidia-smi fallbacks, the
merge of sources, overrides, the no-GPU explanations and WSL.

NVML is switched off here (``HostPaths(use_nvml=False)``, as if libnvidia-ml.so.1 were
absent); tests/nvml drives the real pynvml path against the stand-in library.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuenv.errors import HardwareDetectionError
from gpuenv.hardware import DetectOverrides, HostPaths, NoGpuReason, detect
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hardware"
H100_A = "GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11"
H100_B = "GPU-0c1d2e3f-4a5b-6c7d-8e9f-a0b1c2d3e4f5"


def host(tmp_path: Path, *, proc: Path | None = None, smi_dir: Path | None = None) -> HostPaths:
    """A machine with nothing on it unless given: empty /proc, /sys, root and PATH."""
    for name in ("proc", "sys", "root", "empty-bin"):
        (tmp_path / name).mkdir(exist_ok=True)
    return HostPaths(
        proc=proc or tmp_path / "proc",
        sys=tmp_path / "sys",
        root=tmp_path / "root",
        search_path=str(smi_dir or tmp_path / "empty-bin"),
        use_nvml=False,
    )


def fake_smi(
    tmp_path: Path, *, query: str = "", banner: str = "", code: int = 0, old: bool = False
) -> Path:
    """A fake nvidia-smi: prints ``query`` for --query-gpu and ``banner`` otherwise,
    exiting ``code``; ``old`` rejects the compute_cap field like a pre-510 driver."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "query.txt").write_text(query)
    (tmp_path / "banner.txt").write_text(banner)
    reject = (
        "  --query-gpu=*compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.';"
        " exit 2 ;;\n"
        if old
        else ""
    )
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"{reject}"
        f"  --query-gpu=*) cat '{tmp_path / 'query.txt'}'; exit {code} ;;\n"
        f"  *) cat '{tmp_path / 'banner.txt'}'; exit {code} ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return bin_dir


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_proc_tree_fallback(tmp_path: Path) -> None:
    facts = detect(host=host(tmp_path, proc=FIXTURES / "proc-h100x2"))
    assert facts.driver_version == DriverVersion.parse("550.54.15")
    assert [(g.index, g.name, g.uuid) for g in facts.gpus] == [
        (0, "NVIDIA H100 80GB HBM3", H100_A),
        (1, "NVIDIA H100 80GB HBM3", H100_B),
    ]
    # /proc knows no compute capability, memory or CUDA version, and nvidia-smi is absent.
    assert facts.min_compute_capability is None
    assert facts.cuda_driver_version is None
    assert facts.sources == {"driver_version": "proc", "gpus": "proc"}
    assert facts.measured
    assert facts.no_gpu_reason is None
    assert "nvidia-smi: not found" in facts.notes


def test_proc_then_nvidia_smi_completes_by_uuid(tmp_path: Path) -> None:
    smi = fake_smi(
        tmp_path,
        query=read("nvidia-smi-query-h100x2.csv"),
        banner=read("nvidia-smi-banner.txt"),
    )
    facts = detect(host=host(tmp_path, proc=FIXTURES / "proc-h100x2", smi_dir=smi))
    assert facts.sources == {
        "driver_version": "proc",
        "gpus": "proc",
        "compute_capability": "nvidia-smi",
        "cuda_driver_version": "nvidia-smi",
    }
    assert [g.compute_capability for g in facts.gpus] == [ComputeCapability(9, 0)] * 2
    assert [g.memory_total_bytes for g in facts.gpus] == [81559 << 20] * 2
    assert facts.cuda_driver_version == CudaVersion(12, 4)


def test_nvidia_smi_only(tmp_path: Path) -> None:
    smi = fake_smi(
        tmp_path,
        query=read("nvidia-smi-query-h100x2.csv"),
        banner=read("nvidia-smi-banner.txt"),
    )
    facts = detect(host=host(tmp_path, smi_dir=smi))
    assert [g.uuid for g in facts.gpus] == [H100_A, H100_B]
    assert facts.driver_version == DriverVersion.parse("550.54.15")
    assert set(facts.sources.values()) == {"nvidia-smi"}


def test_old_nvidia_smi_without_compute_cap_is_retried(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, query=read("nvidia-smi-query-no-compute-cap.csv"), old=True)
    facts = detect(host=host(tmp_path, smi_dir=smi))
    (gpu,) = facts.gpus
    assert gpu.name == "Tesla T4"
    assert gpu.compute_capability is None
    assert facts.driver_version == DriverVersion.parse("470.223.02")


@pytest.mark.parametrize(
    ("output", "code", "reason"),
    [
        ("nvidia-smi-no-driver.txt", 9, NoGpuReason.DRIVER_NOT_LOADED),
        ("nvidia-smi-no-devices.txt", 6, NoGpuReason.NO_DEVICES),
    ],
)
def test_nvidia_smi_failures_explain_no_gpu(
    tmp_path: Path, output: str, code: int, reason: str
) -> None:
    smi = fake_smi(tmp_path, query=read(output), banner=read(output), code=code)
    facts = detect(host=host(tmp_path, smi_dir=smi))
    assert facts.gpus == ()
    assert facts.no_gpu_reason == reason
    assert any(note.startswith(f"nvidia-smi: exit {code}:") for note in facts.notes)


def test_nvidia_smi_garbage_is_an_error(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, query="Segmentation fault\n")
    with pytest.raises(HardwareDetectionError, match="unexpected nvidia-smi line"):
        detect(host=host(tmp_path, smi_dir=smi))


def test_nothing_here(tmp_path: Path) -> None:
    facts = detect(host=host(tmp_path))
    assert facts.gpus == ()
    assert facts.no_gpu_reason == NoGpuReason.NO_DRIVER
    assert facts.notes[0] == "no GPU: no NVIDIA driver is installed"
    assert facts.wsl is None


def _pci(tmp_path: Path, bus: str, vendor: str, pci_class: str) -> None:
    device = tmp_path / "sys" / "bus" / "pci" / "devices" / bus
    device.mkdir(parents=True)
    (device / "vendor").write_text(vendor + "\n")
    (device / "class").write_text(pci_class + "\n")


def test_gpu_on_pci_bus_without_driver(tmp_path: Path) -> None:
    _pci(tmp_path, "0000:01:00.0", "0x10de", "0x030200")
    _pci(tmp_path, "0000:01:00.1", "0x10de", "0x040300")  # its audio function
    _pci(tmp_path, "0000:00:02.0", "0x8086", "0x030000")
    facts = detect(host=host(tmp_path))
    assert "PCI: NVIDIA GPU(s) present at 0000:01:00.0 but no driver answered" in facts.notes


def test_no_gpu_on_pci_bus(tmp_path: Path) -> None:
    _pci(tmp_path, "0000:00:02.0", "0x8086", "0x030000")
    assert "PCI: no NVIDIA GPU on the PCI bus" in detect(host=host(tmp_path)).notes


def test_driver_loaded_without_devices(tmp_path: Path) -> None:
    nvidia = tmp_path / "proc" / "driver" / "nvidia"
    (nvidia / "gpus").mkdir(parents=True)
    (nvidia / "version").write_text(read("proc-version-550-open.txt"))
    facts = detect(host=host(tmp_path))
    assert facts.gpus == ()
    assert facts.no_gpu_reason == NoGpuReason.NO_DEVICES
    assert facts.driver_version == DriverVersion.parse("550.54.15")


def test_sys_module_version_when_proc_is_absent(tmp_path: Path) -> None:
    module = tmp_path / "sys" / "module" / "nvidia"
    module.mkdir(parents=True)
    (module / "version").write_text("550.54.15\n")
    facts = detect(host=host(tmp_path))
    assert facts.driver_version == DriverVersion.parse("550.54.15")
    assert facts.sources["driver_version"] == "sys"


def test_unreadable_proc_file_is_an_error(tmp_path: Path) -> None:
    proc = tmp_path / "proc-copy"
    shutil.copytree(FIXTURES / "proc-h100x2", proc)
    information = proc / "driver" / "nvidia" / "gpus" / "0000:18:00.0" / "information"
    information.unlink()
    information.mkdir()  # reading it fails with EISDIR: not "absent", so unexpected
    with pytest.raises(HardwareDetectionError, match="cannot read"):
        detect(host=host(tmp_path, proc=proc))


def test_overrides_win_and_mark_facts_unmeasured(tmp_path: Path) -> None:
    overrides = DetectOverrides(CudaVersion(12, 1), ComputeCapability(8, 6))
    facts = detect(overrides=overrides, host=host(tmp_path, proc=FIXTURES / "proc-h100x2"))
    assert facts.cuda_driver_version == CudaVersion(12, 1)
    assert [g.compute_capability for g in facts.gpus] == [ComputeCapability(8, 6)] * 2
    assert facts.sources["cuda_driver_version"] == "override"
    assert facts.sources["compute_capability"] == "override"
    assert facts.sources["gpus"] == "proc"
    assert not facts.measured


def test_compute_capability_override_stands_for_a_gpu_when_none(tmp_path: Path) -> None:
    facts = detect(
        overrides=DetectOverrides(compute_capability=ComputeCapability(9, 0)), host=host(tmp_path)
    )
    assert facts.min_compute_capability == ComputeCapability(9, 0)
    assert facts.sources["gpus"] == "override"
    assert facts.no_gpu_reason is None


# ---- WSL ---------------------------------------------------------------------------


def wsl_machine(tmp_path: Path, release: str = "5.15.146.1-microsoft-standard-WSL2") -> HostPaths:
    machine = host(tmp_path)
    kernel = machine.proc / "sys" / "kernel"
    kernel.mkdir(parents=True)
    (kernel / "osrelease").write_text(release + "\n")
    machine.wsl_lib.mkdir(parents=True)
    for name in ("libcuda.so", "libcuda.so.1", "libcuda.so.1.1", "libnvidia-ml.so.1"):
        (machine.wsl_lib / name).write_text("")
    return machine


def test_healthy_wsl2(tmp_path: Path) -> None:
    machine = wsl_machine(tmp_path)
    # The distribution links the host's libcuda into its own library folder: not a shadow.
    lib = machine.root / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.1").symlink_to(machine.wsl_lib / "libcuda.so.1")
    facts = detect(host=machine)
    assert facts.wsl is not None
    assert facts.wsl.version == 2
    assert facts.wsl.kernel_release == "5.15.146.1-microsoft-standard-WSL2"
    assert facts.wsl.wsl_lib_dir == str(machine.wsl_lib)
    assert facts.wsl.problems == ()
    assert not [n for n in facts.notes if n.startswith("WSL:")]


def test_wsl2_host_driver_from_nvidia_smi(tmp_path: Path) -> None:
    machine = wsl_machine(tmp_path)
    query = (
        "0, NVIDIA GeForce RTX 4090, GPU-5b3bb5e9-8a4c-4c6e-9a51-2b1f3c0d7e11, 24564, 546.33, 8.9\n"
    )
    smi = fake_smi(tmp_path, query=query, banner=read("nvidia-smi-banner-wsl.txt"))
    facts = detect(host=HostPaths(machine.proc, machine.sys, machine.root, str(smi), False))
    assert facts.wsl is not None
    assert facts.wsl.host_driver_version == DriverVersion.parse("546.33")
    assert facts.cuda_driver_version == CudaVersion(12, 3)


def test_wsl2_with_linux_driver_and_libcuda_inside(tmp_path: Path) -> None:
    machine = wsl_machine(tmp_path)
    lib = machine.root / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.550.54.15").write_text("")
    (lib / "libcuda.so.1").symlink_to("libcuda.so.550.54.15")
    (lib / "libnvidia-ml.so.550.54.15").write_text("")
    (machine.root / "usr" / "bin").mkdir(parents=True)
    (machine.root / "usr" / "bin" / "nvidia-smi").write_text("")
    facts = detect(host=machine)
    assert facts.wsl is not None
    # One entry per real file: the loader-visible name (libcuda.so.1 links to the other).
    assert facts.wsl.shadowing_libcuda == ("/usr/lib/x86_64-linux-gnu/libcuda.so.1",)
    assert facts.wsl.linux_driver_files == (
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
        "/usr/bin/nvidia-smi",
    )
    wsl_notes = [n for n in facts.notes if n.startswith("WSL:")]
    assert len(wsl_notes) == 2
    assert "Linux NVIDIA driver is installed inside WSL" in wsl_notes[0]
    assert "libcuda.so outside /usr/lib/wsl/lib" in wsl_notes[1]


def test_wsl1_has_no_gpu(tmp_path: Path) -> None:
    machine = host(tmp_path)
    kernel = machine.proc / "sys" / "kernel"
    kernel.mkdir(parents=True)
    (kernel / "osrelease").write_text("4.4.0-19041-Microsoft\n")
    facts = detect(host=machine)
    assert facts.wsl is not None
    assert facts.wsl.version == 1
    assert any("WSL1 has no GPU support" in n for n in facts.notes)


def test_wsl2_kernel_without_host_libraries(tmp_path: Path) -> None:
    machine = host(tmp_path)
    kernel = machine.proc / "sys" / "kernel"
    kernel.mkdir(parents=True)
    (kernel / "osrelease").write_text("5.15.146.1-microsoft-standard-WSL2\n")
    facts = detect(host=machine)
    assert facts.wsl is not None
    assert facts.wsl.wsl_lib_dir is None
    assert any("Windows NVIDIA driver is missing" in n for n in facts.notes)
