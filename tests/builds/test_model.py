"""Build identity, the arch list, MAX_JOBS, host compilers and failure diagnoses: the pure
and nearly pure parts of gpuenv.builds."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from gpuenv.builds import compiler, knowledge
from gpuenv.builds.diagnose import diagnose, tail
from gpuenv.builds.jobs import GIB, available_memory, max_jobs
from gpuenv.builds.model import (
    BuildInputs,
    BuildSource,
    arch_list,
    check_entry,
    compiled_arch,
    compute_identity,
    env_problems,
)
from gpuenv.errors import BuildError, FileFormatError
from tests.builds.conftest import entry_for
from tests.fixtures.sdists import SdistSpec

SOURCE = BuildSource("sdist", "https://files.invalid/flash_attn-2.6.3.tar.gz", "a" * 64)
INPUTS = BuildInputs(
    python="3.11",
    platform="linux-64",
    against_torch=True,
    no_build_isolation=True,
    torch="2.4.1+cu124",
    torch_sha256="b" * 64,
    cuda="12.4",
    toolkit="12.4.131",
    arch_list="9.0+PTX",
    host_compiler="gcc-12",
    env=(("FLASH_ATTENTION_FORCE_BUILD", "TRUE"),),
    build_requires=("ninja",),
)
HASHES = {"torch": "b" * 64, "ninja": "c" * 64}


def _identity(**changes: object) -> str:
    inputs = dataclasses.replace(INPUTS, **changes)  # type: ignore[arg-type]
    return compute_identity("flash-attn", "2.6.3", SOURCE, inputs, HASHES)


def test_every_build_input_changes_the_identity() -> None:
    base = _identity()
    assert base.startswith("sha256:") and base == _identity(), "deterministic"
    changes = {
        "python": "3.12",
        "platform": "linux-aarch64",
        "no_build_isolation": False,
        "torch": "2.4.0+cu124",
        "torch_sha256": "d" * 64,
        "cuda": "12.1",
        "toolkit": "12.4.99",
        "arch_list": "8.9+PTX",
        "host_compiler": "gcc-13",
        "env": (("FLASH_ATTENTION_FORCE_BUILD", "FALSE"),),
    }
    seen = {base}
    for key, value in changes.items():
        changed = _identity(**{key: value})
        assert changed not in seen, key
        seen.add(changed)
    other_source = dataclasses.replace(SOURCE, sha256="e" * 64)
    assert compute_identity("flash-attn", "2.6.3", other_source, INPUTS, HASHES) != base
    other_ninja = {**HASHES, "ninja": "f" * 64}
    assert compute_identity("flash-attn", "2.6.3", SOURCE, INPUTS, other_ninja) != base


@pytest.mark.parametrize(
    ("ccs", "nvcc_max", "torch_archs", "expected"),
    [
        (["8.9"], "8.7", ["7.5", "8.0", "8.6"], "8.6+PTX"),  # torch 1.12 cu116, RTX 4090
        (["8.9", "8.0"], "8.7", ["8.0", "8.6"], "8.0;8.6+PTX"),
        (["8.9", "9.0"], "9.0", [], "8.9;9.0+PTX"),  # nvcc 11.8 knows both
        (["9.0"], "8.7", ["8.6"], "8.7+PTX"),  # no 9.x in torch: nvcc's newest, as PTX
    ],
)
def test_the_arch_list_stays_within_what_nvcc_knows(
    ccs: list[str], nvcc_max: str, torch_archs: list[str], expected: str
) -> None:
    assert arch_list(ccs, nvcc_max=nvcc_max, torch_archs=torch_archs) == expected


def test_the_arch_list_has_ptx_on_the_highest_entry() -> None:
    assert arch_list(["9.0"]) == "9.0+PTX"
    assert arch_list(["8.9"]) == "8.9+PTX"
    assert arch_list(["9.0", "8.0", "9.0"]) == "8.0;9.0+PTX"
    assert arch_list(["8.9"], ["8.0", "7.5+PTX"]) == "7.5+PTX;8.0;8.9+PTX"
    assert arch_list([]) is None
    with pytest.raises(ValueError, match="not an arch entry"):
        arch_list(["sm_90"])


def test_a_lock_entry_whose_identity_does_not_match_its_inputs_is_refused(tmp_path: Path) -> None:
    spec = SdistSpec("fixture-ext", "1.0.0", "fixture_ext", ("torch",))
    entry = entry_for(tmp_path / "x.tar.gz", "a" * 64, spec)
    check_entry(entry, {"torch": "0" * 64}, where="gpuenv.lock")
    edited = dataclasses.replace(entry, inputs=dataclasses.replace(entry.inputs, arch_list="8.0"))
    with pytest.raises(FileFormatError, match="identity does not match"):
        check_entry(edited, {"torch": "0" * 64}, where="gpuenv.lock")
    with pytest.raises(FileFormatError, match="torch-sha256 differs"):
        check_entry(entry, {"torch": "9" * 64}, where="gpuenv.lock")
    bad_env = dataclasses.replace(
        entry, inputs=dataclasses.replace(entry.inputs, env=(("CUDA_HOME", "/x"),))
    )
    with pytest.raises(FileFormatError, match="CUDA_HOME is set by gpuenv"):
        check_entry(bad_env, {"torch": "0" * 64}, where="gpuenv.lock")


def test_env_values_may_hold_anything_but_nul() -> None:
    assert env_problems("HOSTILE_A", "$(rm -rf /); `x` '\"\\ | & ; > <") == []
    assert env_problems("A", "x\ny") == ["the value of A contains a control character"]
    assert env_problems("A", "x\0y") == ["the value of A contains a NUL byte"]
    assert env_problems("1A", "x") == ["'1A' is not an environment variable name"]
    assert env_problems("A B", "x") and env_problems("A=B", "x")
    assert env_problems("TORCH_CUDA_ARCH_LIST", "9.0") == [
        "TORCH_CUDA_ARCH_LIST is set by gpuenv from the lock"
    ]


def test_max_jobs_follows_cores_unless_memory_is_short() -> None:
    assert max_jobs(2, ncores=16, memory=64 * GIB).count == 16
    short = max_jobs(8, ncores=64, memory=40 * GIB)
    assert short.count == 5 and "GiB free" in short.reason
    assert max_jobs(8, ncores=64, memory=1 * GIB).count == 1, "never zero"
    assert max_jobs(2, ncores=16, memory=64 * GIB, limit=4).count == 4
    assert max_jobs(8, ncores=64, memory=40 * GIB, limit=20).count == 5, "a limit never raises it"


def test_available_memory_reads_meminfo_and_the_cgroup(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 100 kB\nMemAvailable:  8388608 kB\n")
    assert available_memory(tmp_path) == 8 * GIB
    cgroup = tmp_path / "sys" / "fs" / "cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "memory.max").write_text(str(3 * GIB))
    (cgroup / "memory.current").write_text(str(1 * GIB))
    assert available_memory(tmp_path) == 2 * GIB, "the container's limit wins"


def test_the_data_files_load_and_every_entry_has_a_source() -> None:
    flash = knowledge.defaults_for("flash-attn")
    assert flash is not None and flash.no_build_isolation and flash.toolkit
    assert ("FLASH_ATTENTION_FORCE_BUILD", "TRUE") in flash.env
    assert all(p.source.startswith("https://") for p in knowledge.packages().values())
    support = knowledge.support_for("12.4.131")
    assert support is not None and support.gcc_max == 13
    assert knowledge.support_for("13.0") is not None
    maxima = [
        knowledge.compiler_support()[c].gcc_max
        for c in sorted(
            knowledge.compiler_support(), key=lambda v: tuple(int(x) for x in v.split("."))
        )
    ]
    assert maxima == sorted(maxima), "a newer CUDA never accepts fewer GCC releases"
    codes = [c.code for c in knowledge.causes()]
    assert {
        "cuda-mismatch",
        "wrong-arch-list",
        "undefined-torch-symbol",
        "unsupported-host-compiler",
        "oom-killed",
        "no-torch-in-build-env",
    } <= set(codes)


@pytest.mark.parametrize(
    ("log", "returncode", "code"),
    [
        (
            "RuntimeError:\nThe detected CUDA version (12.1) mismatches the version that was "
            "used to compile\nPyTorch (12.4). Please make sure to use the same CUDA versions.",
            1,
            "cuda-mismatch",
        ),
        ("nvcc fatal   : Unsupported gpu architecture 'compute_120'", 1, "wrong-arch-list"),
        (
            "ImportError: /x/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
            1,
            "undefined-torch-symbol",
        ),
        (
            "#error -- unsupported GNU version! gcc versions later than 13 are not supported!",
            1,
            "unsupported-host-compiler",
        ),
        ("ninja: build stopped: subcommand failed.", -9, "oom-killed"),
        ("ModuleNotFoundError: No module named 'torch'", 1, "no-torch-in-build-env"),
        ("OSError: CUDA_HOME environment variable is not set.", 1, "no-toolkit"),
    ],
)
def test_each_known_cause_is_diagnosed_from_the_log(log: str, returncode: int, code: str) -> None:
    found = diagnose("building...\n" + log + "\nerror: subprocess failed", returncode)
    assert [d.code for d in found] == [code]
    assert found[0].evidence and found[0].fix


def test_an_unknown_failure_has_no_diagnosis_and_the_tail_is_the_end() -> None:
    assert diagnose("something odd\n", 1) == []
    assert tail("\n".join(str(i) for i in range(100)), 3) == "97\n98\n99"


def _fake_gcc(directory: Path, name: str, version: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in -dumpfullversion) echo {version};; --version) echo "{name} (GCC) {version}";;'
        " *) exit 1;; esac\n"
    )
    script.chmod(0o755)
    return script


def test_the_compiler_is_chosen_by_the_locked_major_and_checked_against_the_toolkit(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    _fake_gcc(bin_dir, "gcc", "14.2.0")
    _fake_gcc(bin_dir, "g++", "14.2.0")
    _fake_gcc(bin_dir, "gcc-12", "12.3.0")
    _fake_gcc(bin_dir, "g++-12", "12.3.0")
    environ = {"PATH": str(bin_dir)}
    found = compiler.select(environ, "gcc-12", "12.4", None)
    assert found is not None and found.cc == bin_dir / "gcc-12" and found.cxx == bin_dir / "g++-12"
    # The locking machine's default gcc (14) is too new for CUDA 12.4: gcc-12 is chosen.
    assert compiler.for_lock(environ, "12.4") == "gcc-12"
    assert compiler.for_lock(environ, "12.8") == "gcc-14"
    assert compiler.for_lock(environ, "12.8", previous="gcc-12") == "gcc-12", "pins are kept"
    assert compiler.for_lock({"PATH": str(tmp_path / "none")}, "12.4") == "gcc-13"
    with pytest.raises(BuildError) as caught:
        compiler.select(environ, "gcc-13", "12.4", None)
    message = caught.value.message
    assert "gcc 14.2.0" in message and "gcc 12.3.0" in message
    assert "accepts gcc 6 to 13" in message
    assert "gcc-13" in (caught.value.hint or "")


def test_the_toolkits_own_host_config_wins_over_the_table(tmp_path: Path) -> None:
    from tests.builds.conftest import fake_toolkit

    home = fake_toolkit(tmp_path, "12.4", gcc_max=11)
    limits = compiler.support("12.4", home)
    assert limits is not None and limits.gcc_max == 11 and "host_config.h" in limits.source
    bin_dir = tmp_path / "bin"
    _fake_gcc(bin_dir, "gcc", "12.3.0")
    with pytest.raises(BuildError, match="accepts gcc 6 to 11"):
        compiler.select({"PATH": str(bin_dir)}, "gcc-12", "12.4", home)


@pytest.mark.skipif(
    not Path("/usr/local/cuda-13.0/include/crt/host_config.h").exists(),
    reason="needs the CUDA 13.0 toolkit",
)
def test_the_real_toolkits_host_config_is_read() -> None:
    assert compiler.toolkit_gcc_max(Path("/usr/local/cuda-13.0")) == 15


def test_a_clang_answering_like_gcc_is_not_taken_for_one(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    clang = bin_dir / "gcc"
    clang.write_text(
        '#!/bin/sh\ncase "$1" in -dumpfullversion) echo 17.0.0;;'
        ' --version) echo "clang version 17";; esac\n'
    )
    clang.chmod(0o755)
    assert compiler.candidates({"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "")}) == []


@pytest.mark.parametrize(
    ("cc", "nvcc_max", "torch_archs", "compiled"),
    [
        ("8.9", "8.6", ("3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6"), "8.6"),  # 4090, CUDA 11.6
        ("9.0", "8.6", ("8.0", "8.6"), "8.6+PTX"),  # no 9.x in torch's build: PTX
        ("9.0", "9.0", ("8.0", "9.0"), None),  # nvcc targets the GPU itself
        ("8.9", None, (), None),  # nvcc's newest arch not known: nothing said
    ],
)
def test_the_arch_compiled_for_a_gpu_newer_than_nvcc_is_the_one_arch_list_takes(
    cc: str, nvcc_max: str | None, torch_archs: tuple[str, ...], compiled: str | None
) -> None:
    """What the import's report says a build compiles for (an RTX 4090 with torch's CUDA
    11.7 is sm_86) is what TORCH_CUDA_ARCH_LIST gets."""
    assert compiled_arch(cc, nvcc_max, torch_archs) == compiled
    if compiled is not None:
        listed = arch_list([cc], nvcc_max=nvcc_max, torch_archs=torch_archs)
        assert listed is not None and listed.split(";")[0].split("+")[0] == compiled.split("+")[0]
