"""The probe's decision logic, as pure functions imported from the standalone file."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from types import ModuleType

import pytest

from gpuenv.verify.model import PROBE_VERSION
from tests.verify.conftest import PROBE_FILE

H100 = (9, 0)
TORCH_24_CU124 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


def test_probe_version_agrees_with_the_library(probe_module: ModuleType) -> None:
    assert probe_module.PROBE_VERSION == PROBE_VERSION


def test_probe_is_standalone_and_python38_syntax() -> None:
    source = PROBE_FILE.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert "gpuenv" not in imported
    assert imported - {"torch", "torchvision", "torchaudio"} <= set(
        __import__("sys").stdlib_module_names
    )
    # Runtime features newer than 3.8 that feature_version cannot see.
    for banned in (
        r"\.removeprefix\(",
        r"\.removesuffix\(",
        r"strict=",
        r"functools\.cache\b",
        r"is_relative_to",
        r"zoneinfo",
        r"\bmatch \w+:",
        r"list\[str\]\(",
        r"\| None\)",
    ):
        assert not re.search(banned, source), banned
    # Annotations stay strings (PEP 563) so ``list[str]`` in them is fine on 3.8; any
    # module-level alias must use typing's capitalised generics.
    assert "from __future__ import annotations" in source
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript):
            assert isinstance(node.value.value, ast.Name) and node.value.value.id[0].isupper()


@pytest.mark.parametrize(
    ("cc", "arch", "how"),
    [
        (H100, TORCH_24_CU124, "sm_90 compiled in"),
        ((8, 9), TORCH_24_CU124, "sm_86 machine code runs on sm_89"),
        ((8, 6), ["sm_80"], "sm_80 machine code runs on sm_86"),
        ((12, 0), ["sm_90", "compute_90"], "PTX for compute_90 is JIT-compiled for sm_120"),
        ((12, 0), ["8.0", "9.0+PTX"], "PTX for compute_90 is JIT-compiled for sm_120"),
        ((9, 0), ["sm_90a"], "sm_90 compiled in"),
        ((10, 3), ["sm_100f"], "sm_100 machine code runs on sm_103"),
        ((7, 5), ["7.0", "8.0"], "sm_70 machine code runs on sm_75"),
    ],
)
def test_arch_covered(
    probe_module: ModuleType, cc: tuple[int, int], arch: list[str], how: str
) -> None:
    assert probe_module.arch_covered(cc, arch) == how


@pytest.mark.parametrize(
    ("cc", "arch"),
    [
        (H100, ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]),  # torch 1.12 cu113
        ((12, 0), ["sm_90", "sm_100"]),  # SASS never crosses majors
        ((8, 0), ["sm_86"]),  # nor runs on a lower minor
        ((10, 0), ["sm_90a", "compute_90a"]),  # arch-specific code runs only on 9.0
        ((7, 0), ["compute_75"]),  # PTX only JITs upward
        ((6, 1), []),
    ],
)
def test_arch_not_covered(probe_module: ModuleType, cc: tuple[int, int], arch: list[str]) -> None:
    assert probe_module.arch_covered(cc, arch) is None


def test_builds_covering_names_the_builds_that_have_the_arch(probe_module: ModuleType) -> None:
    builds = {
        "cu128": ["7.5", "8.0", "9.0", "10.0", "12.0"],
        "cu126": ["5.0", "8.0", "9.0+PTX"],
        "cu118": ["3.7", "8.0", "8.6"],
    }
    assert probe_module.builds_covering((12, 0), builds) == ["cu126", "cu128"]
    assert probe_module.builds_covering((9, 0), builds) == ["cu126", "cu128"]
    assert probe_module.builds_covering((3, 7), builds) == ["cu118"]
    assert probe_module.builds_covering((2, 0), builds) == []


@pytest.mark.parametrize(
    ("cc", "dtype"),
    [
        ((9, 0), "bfloat16"),
        ((8, 0), "bfloat16"),
        ((12, 0), "bfloat16"),
        ((7, 0), "float16"),
        ((7, 5), "float16"),
        ((6, 1), "float32"),
    ],
)
def test_matmul_dtype(probe_module: ModuleType, cc: tuple[int, int], dtype: str) -> None:
    assert probe_module.matmul_dtype_for(cc) == dtype


def test_relative_error_ok(probe_module: ModuleType) -> None:
    ok = probe_module.relative_error_ok
    assert ok(0.003, "bfloat16") and not ok(0.05, "bfloat16")
    assert ok(3e-4, "float16") and not ok(0.01, "float16")
    assert ok(1e-6, "float32") and not ok(1e-3, "float32")
    for bad in (math.nan, math.inf, -1.0):
        assert not ok(bad, "bfloat16")


def test_tflops(probe_module: ModuleType) -> None:
    assert probe_module.tflops(8192, 10, 0.0011 * 10) == pytest.approx(999.6, rel=1e-3)
    assert probe_module.tflops(8192, 10, 0) == 0.0


@pytest.mark.parametrize(
    ("raw", "text"),
    [(8907, "8.9.7"), (90100, "9.1.0"), (91002, "9.10.2"), (7605, "7.6.5"), (None, None)],
)
def test_cudnn_version_text(probe_module: ModuleType, raw: int | None, text: str | None) -> None:
    assert probe_module.cudnn_version_text(raw) == text


@pytest.mark.parametrize(
    ("raw", "text"),
    [((2, 21, 5), "2.21.5"), (2708, "2.7.8"), (21805, "2.18.5"), ([2, 27, 3], "2.27.3")],
)
def test_nccl_version_text(probe_module: ModuleType, raw: object, text: str) -> None:
    assert probe_module.nccl_version_text(raw) == text


def test_version_comparisons(probe_module: ModuleType) -> None:
    m = probe_module
    assert m.torch_version_matches("2.4.1", "2.4.1+cu124")
    assert m.torch_version_matches("2.4.1+cu124", "2.4.1+cu124")
    assert not m.torch_version_matches("2.4.1+cu124", "2.4.1+cpu")
    assert not m.torch_version_matches("2.4.1", "2.4.0")
    assert not m.torch_version_matches("2.4.1", None)
    assert m.torch_version_matches(None, "anything")
    assert m.version_matches("12.4", "12.4")
    assert not m.version_matches("12.4", "12.1", 2)
    assert m.version_matches("9.1.0.70", "9.1.0", 3)
    assert not m.version_matches("9.1.0.70", "8.9.7", 3)
    assert not m.version_matches("9.1.0", None, 3)
    assert m.cuda_version_text(12040) == "12.4" and m.cuda_version_text(13000) == "13.0"
    assert m.cuda_version_text(0) is None
    assert m.cuda_at_least("12.4", "12.4") and m.cuda_at_least("13.0", "12.8")
    assert not m.cuda_at_least("12.2", "12.4") and not m.cuda_at_least(None, "12.4")


@pytest.mark.parametrize(
    "name",
    [
        "libcudart.so.12",
        "libcublasLt.so.12",
        "libcudnn_ops.so.9",
        "libcudnn.so.8",
        "libnccl.so.2",
        "libcufft.so.11",
        "libcusparse.so.12",
        "libnvrtc.so.12",
        "libnvrtc-builtins.so.12.4",
        "libcudart-9335f6a2.so.12",
        "libnvJitLink.so.12",
        "libcusparseLt.so.0",
        "libtorch_cuda.so",
    ],
)
def test_cuda_libraries_recognised(probe_module: ModuleType, name: str) -> None:
    assert probe_module.is_cuda_library("/x/" + name)
    assert not probe_module.is_driver_library("/x/" + name)


@pytest.mark.parametrize(
    "name",
    ["libcuda.so.1", "libcuda.so.550.54.15", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"],
)
def test_driver_libraries_recognised(probe_module: ModuleType, name: str) -> None:
    assert probe_module.is_driver_library("/usr/lib/x86_64-linux-gnu/" + name)


@pytest.mark.parametrize(
    "name", ["libc.so.6", "libstdc++.so.6", "libcudadevrt.a", "libtorch_cpu.so", "libgomp.so.1"]
)
def test_other_libraries_ignored(probe_module: ModuleType, name: str) -> None:
    assert not probe_module.is_cuda_library(name) and not probe_module.is_driver_library(name)


def test_parse_maps(probe_module: ModuleType) -> None:
    text = (
        "7f0000000000-7f0000001000 r--p 00000000 08:01 1 /env/lib/libcudart.so.12\n"
        "7f0000001000-7f0000002000 r-xp 00001000 08:01 1 /env/lib/libcudart.so.12\n"
        "7f0000003000-7f0000004000 rw-p 00000000 00:00 0 \n"
        "7f0000004000-7f0000005000 r--p 00000000 00:00 0 [heap]\n"
        "7f0000005000-7f0000006000 r--p 00000000 08:01 2 /tmp/x/libnccl.so.2 (deleted)\n"
        "7f0000006000-7f0000007000 r--p 00000000 08:01 3 /opt/my libs/libcufft.so.11\n"
    )
    assert probe_module.parse_maps(text) == [
        "/env/lib/libcudart.so.12",
        "/tmp/x/libnccl.so.2",
        "/opt/my libs/libcufft.so.11",
    ]


def test_classify_mapped_library(probe_module: ModuleType, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    stray = tmp_path / "other-env" / "lib"
    (prefix / "lib").mkdir(parents=True)
    stray.mkdir(parents=True)
    (stray / "libnccl.so.2.18.1").write_bytes(b"")
    (stray / "libnccl.so.2").symlink_to("libnccl.so.2.18.1")
    env = {"LD_LIBRARY_PATH": f"/nowhere:{stray}"}
    roots = [str(prefix)]
    classify = probe_module.classify_mapped_library

    inside = classify(str(prefix / "lib" / "libcudart.so.12"), roots, env)
    assert inside["kind"] == "inside"
    driver = classify("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", roots, env)
    assert driver["kind"] == "driver"
    assert classify("/usr/lib/libc.so.6", roots, env)["kind"] == "other"

    # /proc/self/maps shows the resolved file; the entry holds the SONAME link to it.
    outside = classify(str(stray / "libnccl.so.2.18.1"), roots, env)
    assert outside["kind"] == "outside"
    assert outside["source"] == f"LD_LIBRARY_PATH entry {stray}"
    assert outside["entry"] == str(stray)
    fix = probe_module.linkage_fix([outside])
    assert f"remove {stray} from LD_LIBRARY_PATH" in fix

    preload = classify("/opt/x/libcudnn.so.9", roots, {"LD_PRELOAD": "/opt/x/libcudnn.so.9"})
    assert preload["source"] == "LD_PRELOAD entry /opt/x/libcudnn.so.9"
    assert "remove /opt/x/libcudnn.so.9 from LD_PRELOAD" in probe_module.linkage_fix([preload])
    system = classify("/usr/local/cuda-12.1/lib64/libcublas.so.12", roots, {})
    assert system["kind"] == "outside" and "system library path" in system["source"]


def test_why_no_gpu(probe_module: ModuleType) -> None:
    why = probe_module.why_no_gpu
    assert "CPU-only build" in why(None, "12.4", {}, 1)[0]
    assert "hides every GPU" in why("12.4", "12.4", {"CUDA_VISIBLE_DEVICES": ""}, 1)[0]
    assert "no NVIDIA driver" in why("12.4", None, {}, None)[0]
    assert "reports no GPU" in why("12.4", "12.4", {}, 0)[0]


def test_explain_cuda_error(probe_module: ModuleType) -> None:
    context = {"sm": "sm_90", "builds": ["cu118", "cu121"]}
    fix = probe_module.explain_cuda_error(
        "CUDA error: no kernel image is available for execution", context
    )
    assert "sm_90" in fix and "cu118, cu121" in fix
    assert "memory" in probe_module.explain_cuda_error("CUDA out of memory. Tried", {})


def test_arch_list_differences(probe_module: ModuleType) -> None:
    diff = probe_module.arch_list_differences
    assert diff(["8.0", "9.0+PTX"], ["sm_80", "sm_90", "compute_90"]) == ""
    assert diff([], ["sm_80"]) == ""
    assert diff(["8.0", "9.0"], ["sm_80", "sm_86"]) == "missing sm_90; extra sm_86"
