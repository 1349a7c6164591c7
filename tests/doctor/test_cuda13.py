"""A torch 2.13.0+cu130 venv (the CUDA 13 wheel layout), and CUDA 12 wheels installed
into it: shared files overwritten, torch's own preload taking a cu12 library first."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.doctor import Severity
from tests.doctor.conftest import (
    H100,
    ElfFactory,
    FakeEnv,
    Run,
    codes,
    make_cu13_venv,
    only,
    plant_cu12_wheel,
)

H100_580 = H100.__class__(
    gpus=H100.gpus,
    driver_version=H100.driver_version.__class__.parse("580.65.06"),
    cuda_driver_version=H100.cuda_driver_version.__class__.parse("13.0"),
    sources=H100.sources,
)


@pytest.fixture
def cu13(tmp_path: Path, elf: ElfFactory) -> FakeEnv:
    return make_cu13_venv(tmp_path / "cu13", elf)


def test_clean_cu13_venv_has_no_findings(cu13: FakeEnv, run: Run) -> None:
    report = run(cu13, facts=H100_580)
    assert report.findings == (), [(f.code, f.message) for f in report.findings]


def test_torch_preload_takes_a_cu12_curand_first(cu13: FakeEnv, run: Run) -> None:
    (stray,) = plant_cu12_wheel(
        cu13, "curand", "nvidia-curand-cu12", "10.3.7.77", ["libcurand.so.10"]
    )
    report = run(cu13, facts=H100_580)
    finding = only(report, "duplicate-cuda-library")
    assert finding.severity is Severity.ERROR
    ev = finding.evidence
    assert ev["needed_name"] == "libcurand.so.10"
    assert ev["picked"]["path"] == str(stray.resolve())
    assert ev["picked"]["by"] == "torch's preload"
    assert ev["picked"]["cuda_major"] == 12
    assert ev["picked"]["owner"] == "pip nvidia-curand-cu12 10.3.7.77"
    assert {c["cuda_major"] for c in ev["copies"]} == {12, 13}
    assert "nvidia/cu13/lib" in finding.message or "cu13" in str(ev["copies"])
    assert "torch's preload takes it first" in finding.message
    assert "(torch tries nvidia/<library>/lib before nvidia/cu<major>/lib)" in finding.message
    assert "pip uninstall -y nvidia-curand-cu12" in finding.fix
    assert "LD_LIBRARY_PATH" not in finding.fix
    assert "stray-cuda-wheel" not in codes(report)  # the library finding names it


def test_cu12_cudnn_over_cu13s_shared_files(cu13: FakeEnv, run: Run) -> None:
    plant_cu12_wheel(cu13, "cudnn", "nvidia-cudnn-cu12", "9.10.2.21", ["libcudnn.so.9"])
    report = run(cu13, facts=H100_580)
    clash = only(report, "file-ownership-clash")
    assert clash.severity is Severity.ERROR
    ev = clash.evidence
    assert {o["owner"] for o in ev["owners"]} == {
        "pip nvidia-cudnn-cu13 9.20.0.48",
        "pip nvidia-cudnn-cu12 9.10.2.21",
    }
    assert ev["on_disk"] == {"pip nvidia-cudnn-cu12 9.10.2.21": 1}
    assert ev["keep"] == "pip nvidia-cudnn-cu13 9.20.0.48"
    assert ev["keep_because"] == "torch requires nvidia-cudnn-cu13"
    # the order matters: uninstalling the stray wheel deletes the shared files
    uninstall = clash.fix.index("pip uninstall -y nvidia-cudnn-cu12")
    reinstall = clash.fix.index("--force-reinstall --no-deps nvidia-cudnn-cu13==9.20.0.48")
    assert uninstall < reinstall
    # what loads is cu12's cuDNN: the library finding says so, with the same fix
    mismatch = only(report, "cuda-library-mismatch")
    assert mismatch.evidence["picked"]["owner"] == "pip nvidia-cudnn-cu12 9.10.2.21"
    assert mismatch.evidence["picked"]["cuda_major"] == 12
    assert "nvidia-cudnn-cu12" in mismatch.fix and mismatch.fix.index(
        "uninstall"
    ) < mismatch.fix.index("--force-reinstall")
    assert "stray-cuda-wheel" not in codes(report)  # the clash names it more precisely


def test_stray_cu12_wheel_with_its_own_files(cu13: FakeEnv, run: Run) -> None:
    plant_cu12_wheel(
        cu13, "cublas", "nvidia-cublas-cu12", "12.8.4.1", ["libcublasLt.so.12", "libcublas.so.12"]
    )
    report = run(cu13, facts=H100_580)
    # libcublas.so.12 is not a rival of libcublas.so.13: no library finding
    assert "duplicate-cuda-library" not in codes(report)
    stray = only(report, "stray-cuda-wheel")
    assert stray.severity is Severity.WARNING
    assert stray.evidence["distributions"][0]["name"] == "nvidia-cublas-cu12"
    # torch's preload globs nvidia/cublas/lib first and loads the cu12 copies, unused
    loaded = stray.evidence["loaded_by_torch_preload"]
    assert [Path(p).name for p in loaded] == ["libcublas.so.12", "libcublasLt.so.12"]
    assert "uninstall -y nvidia-cublas-cu12" in stray.fix


def test_changed_file_no_longer_matches_its_record(cu13: FakeEnv, run: Run) -> None:
    target = cu13.site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    target.write_bytes(target.read_bytes() + b"garbage")
    finding = only(run(cu13, facts=H100_580), "record-mismatch")
    assert finding.evidence["owner"]["owner"] == "pip nvidia-nccl-cu13 2.29.7"
    assert finding.evidence["files"][0]["path"] == str(target.resolve())
    assert "--force-reinstall --no-deps nvidia-nccl-cu13==2.29.7" in finding.fix


def test_missing_library_names_the_wheel_torch_requires(cu13: FakeEnv, run: Run) -> None:
    (cu13.site / "nvidia" / "cu13" / "lib" / "libcurand.so.10").unlink()
    report = run(cu13, facts=H100_580)
    finding = only(report, "cuda-library-missing")
    assert finding.evidence["needed_name"] == "libcurand.so.10"
    assert "nvidia-curand==10.4.0.35" in finding.fix
    assert "record-mismatch" in codes(report)  # the wheel's file is gone


def write_cache(path: Path, entries: list[tuple[str, str]]) -> None:
    """An ld.so.cache in glibc's new format (what ldconfig writes since glibc 2.32)."""
    import struct

    strings = b""
    offsets = []
    header = 48
    table = 24 * len(entries)
    for name, target in entries:
        key = header + table + len(strings)
        strings += name.encode() + b"\0"
        value = header + table + len(strings)
        strings += target.encode() + b"\0"
        offsets.append((key, value))
    data = struct.pack("<20sIIB3xI12x", b"glibc-ld.so.cache1.1", len(entries), len(strings), 0, 0)
    for key, value in offsets:
        data += struct.pack("<iIIIQ", 0x0303, key, value, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data + strings)


def test_ld_so_cache_copy_is_named_by_its_conf_file_not_ld_library_path(
    cu13: FakeEnv, run: Run, host_root: Path, elf: ElfFactory
) -> None:
    """A system NCCL reached through ld.so.conf wins where the environment has none;
    LD_LIBRARY_PATH is unset, so the fix must not blame it."""
    import shutil

    shutil.rmtree(cu13.site / "nvidia" / "nccl")
    system = host_root / "opt" / "nccl-2.18" / "lib"
    elf.install(system / "libnccl.so.2.18.1", "libnccl.so.2", variant="system nccl")
    (system / "libnccl.so.2").symlink_to("libnccl.so.2.18.1")
    conf = host_root / "etc" / "ld.so.conf.d" / "nccl.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("/opt/nccl-2.18/lib\n")
    (host_root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    write_cache(
        host_root / "etc" / "ld.so.cache", [("libnccl.so.2", "/opt/nccl-2.18/lib/libnccl.so.2")]
    )
    report = run(cu13, facts=H100_580)
    finding = next(f for f in report.findings if f.evidence.get("needed_name") == "libnccl.so.2")
    picked = finding.evidence["picked"]
    assert finding.code == "cuda-library-mismatch"
    assert picked["path"] == str((system / "libnccl.so.2.18.1").resolve())
    assert picked["version"] == "2.18.1"
    assert picked["via"] == "ld.so.cache (listed in /etc/ld.so.conf.d/nccl.conf)"
    assert "/etc/ld.so.conf.d/nccl.conf" in finding.fix
    assert "not LD_LIBRARY_PATH" in finding.fix
    assert "remove" not in finding.fix.split("not LD_LIBRARY_PATH")[0].lower().split("install")[0]


def test_ld_preload_of_a_cuda_library_wins_over_everything(
    cu13: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory
) -> None:
    hook = elf.install(
        tmp_path / "hook" / "libcudart.so.13", "libcudart.so.13", variant="12.9 hook"
    )
    report = run(cu13, environ={"LD_PRELOAD": str(hook)}, facts=H100_580)
    finding = only(report, "duplicate-cuda-library")
    assert finding.evidence["picked"]["by"] == "LD_PRELOAD"
    assert finding.evidence["picked"]["path"] == str(hook.resolve())


def test_a_preloaded_cuda_library_is_fixed_through_ld_preload_not_ld_library_path(
    cu13: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory
) -> None:
    hook = elf.install(
        tmp_path / "hook" / "libcudart.so.13", "libcudart.so.13", variant="12.9 hook"
    )
    report = run(cu13, environ={"LD_PRELOAD": str(hook)}, facts=H100_580)
    preloaded = [
        f for f in report.findings if f.evidence.get("picked", {}).get("by") == "LD_PRELOAD"
    ]
    assert preloaded, report.codes()
    for finding in preloaded:
        assert f"remove {hook} from LD_PRELOAD" in finding.fix, finding
        assert "LD_LIBRARY_PATH" not in finding.fix, finding


def test_on_an_externally_managed_interpreter_pip_fixes_carry_the_flag_pip_demands(
    cu13: FakeEnv, run: Run
) -> None:
    """PEP 668: a plain 'pip install' is refused there; the fix says what pip accepts."""
    (cu13.prefix / "lib" / "python3.11" / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=use apt\n"
    )
    (cu13.site / "nvidia" / "cu13" / "lib" / "libcurand.so.10").unlink()
    report = run(cu13, facts=H100_580)
    missing = only(report, "cuda-library-missing")
    assert "install --break-system-packages nvidia-curand==10.4.0.35" in missing.fix
    mismatch = only(report, "record-mismatch")
    assert "--break-system-packages" in mismatch.fix, mismatch.fix


def test_a_cu12_wheel_on_pythonpath_is_fixed_by_taking_the_entry_off_the_path(
    cu13: FakeEnv, run: Run, tmp_path: Path, elf: ElfFactory
) -> None:
    """Seen on a real H200 (torch 2.11 cu130): a cu12 cuDNN in a PYTHONPATH folder that
    torch's preload takes first. pip uninstall in the environment cannot reach it: the
    fix removes the entry from PYTHONPATH."""
    overlay = FakeEnv(tmp_path / "overlay", elf)
    overlay.site.mkdir(parents=True)
    (stray,) = plant_cu12_wheel(
        overlay, "curand", "nvidia-curand-cu12", "10.3.7.77", ["libcurand.so.10"]
    )
    report = run(cu13, facts=H100_580, environ={"PYTHONPATH": str(overlay.site)})
    finding = only(report, "duplicate-cuda-library")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["picked"]["path"] == str(stray.resolve())
    assert finding.fix is not None
    assert finding.fix.startswith(f"1. remove {overlay.site} from PYTHONPATH"), finding.fix
    assert "uninstall" not in finding.fix
