"""gpuenv's verification probe: a standalone script, run by the interpreter under test.

    python -I probe.py --expect '{"torch": "2.4.1", "cuda": "12.4", ...}'
    python -I probe.py --inspect

It imports only the standard library and the framework under test (never gpuenv), and
runs on Python 3.8 and newer, because the environments it checks can be old. It prints
exactly one JSON object on stdout:

    {"probe_version": 1, "mode": "cuda" | "cpu", "python": {...},
     "checks": [{"name", "status": "pass"|"fail"|"skip", "passed", "detail", "fix",
                 "seconds", "data"}],
     "timings": {...}, "passed": bool}

and exits 0 when every check passed, 1 when one failed, 3 when its watchdog ended a
check that ran past its time budget (the JSON is still printed). Anything else the
framework prints goes to stderr: file descriptor 1 is pointed at stderr at start-up and
the JSON is written to a saved copy of the original stdout.

``--inspect`` reports what is installed (versions from package metadata and torch's
version.py, read without importing torch) so gpuenv can derive expectations for an
interpreter it did not install.

The decision logic is kept in small pure functions (``arch_covered``,
``relative_error_ok``, ``classify_mapped_library``, ...) that gpuenv's tests import
from this file directly.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import faulthandler
import functools
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

PROBE_VERSION = 1
# The CUDA driver library: nvcuda.dll on Windows (the Windows driver's), else libcuda.
DRIVER_LIBRARY = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"
EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMED_OUT = 3

Check = Dict[str, Any]

# Relative-error ceilings for a product compared with a float64 reference. The inputs
# are exactly representable in both, so the error comes from accumulation and from
# rounding the output: about 2^-9 for bf16, 2^-12 for fp16, 1e-7 for fp32.
MATMUL_TOLERANCE = {"bfloat16": 2e-2, "float16": 5e-3, "float32": 1e-4}
# cuDNN may use TF32 for fp32 convolutions on Ampere and newer (about 1e-3).
CONV_TOLERANCE = 1e-2

DEFAULT_CHECK_BUDGET = 60.0
NCCL_CHECK_BUDGET = 120.0
DEFAULT_TIME_BUDGET = 240.0

# CUDA user-space libraries: the ones a prefix ships and the lock pins. Matches
# versioned names (libcudart.so.12), auditwheel's hashed copies (libcudart-9335f6a2.so.12)
# and cuDNN's sub-libraries (libcudnn_ops.so.9).
_CUDA_LIB = re.compile(
    r"^lib(cudart|cublas|cublasLt|cudnn|cufft|cufftw|curand|cusparse|cusparseLt|cusolver"
    r"|cusolverMg|nccl|nvrtc|nvrtc-builtins|nvJitLink|nvToolsExt|nvtx3interop|cupti|cufile"
    r"|cufile_rdma|nvshmem|nvshmem_host|cudss|npp[a-z]*|nvjpeg|nvblas|caffe2_nvrtc"
    r"|torch_cuda|torch_cuda_linalg|c10_cuda|cuda_runtime)"
    r"(?:[-_.][^/]*)?\.so(?:\.[0-9.]+)?$"
)
# The driver's own libraries come from the machine, never from a prefix.
_DRIVER_LIB = re.compile(
    r"^lib(cuda|cudadebugger|nvidia-[A-Za-z0-9_-]+|nvcuvid|nvoptix)\.so(?:\.[0-9.]+)?$"
)
_SYSTEM_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
_SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")


# --------------------------------------------------------------------------------------
# Pure decision logic (imported by gpuenv's tests).
# --------------------------------------------------------------------------------------


def parse_arch_entry(text: str) -> Optional[Tuple[int, int, str]]:
    """One arch-list entry as (major, minor, kind); kind is "sass", "ptx", "exact" (an
    arch-specific sm_90a) or "family" (sm_100f). Accepts torch's spelling (sm_86,
    compute_90, sm_90a) and gpuenv's (8.6, 9.0+PTX: the PTX half is added by
    ``expand_arch_list``). None when the text is not an arch entry."""
    text = text.strip()
    m = re.match(r"^(sm|compute)_(\d+?)(\d)([af]?)$", text)
    if m:
        kind = "ptx" if m.group(1) == "compute" else "sass"
        if m.group(4) == "a":
            kind = "exact" if kind == "sass" else "ptx-exact"
        elif m.group(4) == "f":
            kind = "family" if kind == "sass" else "ptx-exact"
        return int(m.group(2)), int(m.group(3)), kind
    m = re.match(r"^(\d+)\.(\d+)(\+PTX)?$", text, re.IGNORECASE)
    if m:
        return int(m.group(1)), int(m.group(2)), "sass"
    return None


def expand_arch_list(arch_list: Sequence[str]) -> List[str]:
    """gpuenv's "9.0+PTX" becomes torch's two entries, sm_90 and compute_90."""
    out: List[str] = []
    for entry in arch_list:
        m = re.match(r"^(\d+)\.(\d+)(\+PTX)?$", entry.strip(), re.IGNORECASE)
        if m:
            out.append("sm_%s%s" % (m.group(1), m.group(2)))
            if m.group(3):
                out.append("compute_%s%s" % (m.group(1), m.group(2)))
        else:
            out.append(entry.strip())
    return out


def sm_name(cc: Sequence[int]) -> str:
    return "sm_%d%d" % (cc[0], cc[1])


def arch_covered(cc: Sequence[int], arch_list: Sequence[str]) -> Optional[str]:
    """How a GPU of compute capability ``cc`` runs code from ``arch_list``, or None.

    SASS for sm_XY runs on sm_XZ with Z >= Y (same major); an arch-specific sm_90a runs
    only on 9.0; PTX for compute_XY is JIT-compiled by the driver for any GPU >= XY.
    """
    gpu = (int(cc[0]), int(cc[1]))
    sass: List[Tuple[int, int]] = []
    ptx: List[Tuple[int, int]] = []
    for entry in expand_arch_list(arch_list):
        parsed = parse_arch_entry(entry)
        if parsed is None:
            continue
        major, minor, kind = parsed
        if (
            kind == "exact"
            and (major, minor) == gpu
            or kind in ("sass", "family")
            and major == gpu[0]
            and minor <= gpu[1]
        ):
            sass.append((major, minor))
        elif (
            kind == "ptx" and (major, minor) <= gpu or kind == "ptx-exact" and (major, minor) == gpu
        ):
            ptx.append((major, minor))
    if gpu in sass:
        return "%s compiled in" % sm_name(gpu)
    if sass:
        best = max(sass)
        return "%s machine code runs on %s" % (sm_name(best), sm_name(gpu))
    if ptx:
        best = max(ptx)
        return "PTX for compute_%d%d is JIT-compiled for %s" % (best[0], best[1], sm_name(gpu))
    return None


def arch_list_differences(expected: Sequence[str], actual: Sequence[str]) -> str:
    """ "" when both lists name the same targets (in either spelling), else what differs;
    nothing expected differs from nothing."""
    if not expected:
        return ""
    want = set(expand_arch_list(expected))
    got = set(expand_arch_list(actual))
    parts = []
    if want - got:
        parts.append("missing " + " ".join(sorted(want - got)))
    if got - want:
        parts.append("extra " + " ".join(sorted(got - want)))
    return "; ".join(parts)


def builds_covering(cc: Sequence[int], builds: Dict[str, Sequence[str]]) -> List[str]:
    """The build tags (cu121, cu128, ...) whose arch list covers ``cc``, oldest first."""
    tags = [tag for tag, arch in builds.items() if arch_covered(cc, arch)]
    return sorted(tags, key=_tag_key)


# ---- compiled extensions: the GPU code in a shared object's fat binary -------------------
#
# The layout gpuenv.builds.elfscan reads (the tests hold the two readers together): the
# ``.nv_fatbin`` section holds fatbins (magic 0xBA55ED50; u16 version, u16 header size,
# u64 size), each a list of entries (u16 kind: 1 PTX, 2 cubin; u32 header size at 4; u64
# payload size at 8; u32 arch at 28).

FATBIN_MAGIC = 0xBA55ED50


def _elf_sections(data: bytes) -> List[Tuple[str, int, int]]:
    """(name, offset, size) of each section of an ELF image, [] when it is not one."""
    import struct

    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return []
    end = "<" if data[5] == 1 else ">"
    if data[4] == 2:
        shoff = struct.unpack_from(end + "Q", data, 40)[0]
        entsize, count, names_at = struct.unpack_from(end + "HHH", data, 58)
        layout, offset_at, size_at = end + "IIQQQQIIQQ", 4, 5
    else:
        shoff = struct.unpack_from(end + "I", data, 32)[0]
        entsize, count, names_at = struct.unpack_from(end + "HHH", data, 46)
        layout, offset_at, size_at = end + "IIIIIIIIII", 4, 5
    if not shoff or shoff + entsize * count > len(data) or names_at >= count:
        return []
    headers = [struct.unpack_from(layout, data, shoff + i * entsize) for i in range(count)]
    names = headers[names_at]
    table = data[names[offset_at] : names[offset_at] + names[size_at]]
    out = []
    for h in headers:
        stop = table.find(b"\0", h[0])
        name = table[h[0] : stop].decode("ascii", "replace") if stop >= 0 else ""
        out.append((name, h[offset_at], h[size_at]))
    return out


def fatbin_entries(path: str) -> Optional[List[str]]:
    """The GPU code ``path`` carries, in torch's spelling (``sm_90``, ``compute_90``);
    [] for a shared object without GPU code; None when it cannot be read as ELF."""
    import struct

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    sections = _elf_sections(data)
    if not sections:
        return None
    end = "<" if data[5] == 1 else ">"
    sass: Set[int] = set()
    ptx: Set[int] = set()
    for name, offset, size in sections:
        if name != ".nv_fatbin":
            continue
        blob, pos = data[offset : offset + size], 0
        while pos + 16 <= len(blob):
            magic, _v, header, fat = struct.unpack_from(end + "IHHQ", blob, pos)
            if magic != FATBIN_MAGIC:
                pos += 8
                continue
            entry, stop = pos + header, min(len(blob), pos + header + fat)
            while entry + 32 <= stop:
                kind, _f, entry_header, payload = struct.unpack_from(end + "HHIQ", blob, entry)
                arch = struct.unpack_from(end + "I", blob, entry + 28)[0]
                (sass if kind == 2 else ptx if kind == 1 else set()).add(arch)
                if not entry_header:
                    break
                entry += entry_header + payload
            pos = max(stop, pos + 16)
    return ["sm_%d" % a for a in sorted(sass)] + ["compute_%d" % a for a in sorted(ptx)]


def extension_fix(message: str) -> str:
    """What to do when importing a built extension failed."""
    if re.search(r"undefined symbol: _ZN(K)?(3c10|2at|5torch)", message):
        return (
            "the extension was compiled against another torch: reinstall the prefix "
            "(gpuenv install), which rebuilds it against this torch"
        )
    if "cannot open shared object file" in message:
        return "import torch first (the extension links torch's libraries), or reinstall it"
    return "see the build log of this extension (gpuenv install prints where it is)"


def _tag_key(tag: str) -> Tuple[int, str]:
    digits = re.sub(r"\D", "", tag)
    return (int(digits) if digits else 0, tag)


def matmul_dtype_for(cc: Sequence[int]) -> str:
    """bf16 on Ampere and newer (tensor cores), fp16 on Volta/Turing, fp32 before."""
    if cc[0] >= 8:
        return "bfloat16"
    if cc[0] == 7:
        return "float16"
    return "float32"


def relative_error_ok(error: float, dtype: str) -> bool:
    """A finite relative error within the ceiling for ``dtype`` (NaN and inf fail)."""
    if error is None or not math.isfinite(error) or error < 0:
        return False
    return error <= MATMUL_TOLERANCE.get(dtype, MATMUL_TOLERANCE["float32"])


def tflops(n: int, iterations: int, seconds: float) -> float:
    """TFLOP/s of ``iterations`` n x n x n products taking ``seconds``."""
    if seconds <= 0 or iterations <= 0:
        return 0.0
    return 2.0 * n * n * n * iterations / seconds / 1e12


def release_parts(text: Optional[str]) -> Tuple[int, ...]:
    """The leading numeric release of a version ("2.4.1+cu124" -> (2, 4, 1))."""
    if not text:
        return ()
    public = str(text).split("+", 1)[0]
    parts: List[int] = []
    for piece in public.split("."):
        m = re.match(r"^(\d+)", piece)
        if not m:
            break
        parts.append(int(m.group(1)))
        if m.group(1) != piece:
            break
    return tuple(parts)


def local_tag(text: Optional[str]) -> Optional[str]:
    if not text or "+" not in text:
        return None
    return text.split("+", 1)[1]


def version_matches(expected: Optional[str], actual: Optional[str], parts: int = 0) -> bool:
    """``actual`` equals ``expected`` on the numeric components ``expected`` gives (or on
    the first ``parts`` of them). Nothing expected matches anything."""
    if expected is None or expected == "":
        return True
    want = release_parts(expected)
    got = release_parts(actual)
    if parts:
        want = want[:parts]
    if not want:
        return str(expected) == str(actual)
    return got[: len(want)] == want


def torch_version_matches(expected: Optional[str], actual: Optional[str]) -> bool:
    """Release and, where the expectation names one, the local tag (+cu124, +cpu)."""
    if not expected:
        return True
    if not actual:
        return False
    if release_parts(expected) != release_parts(actual):
        return False
    tag = local_tag(expected)
    return tag is None or tag == local_tag(actual)


def cudnn_version_text(value: Any) -> Optional[str]:
    """torch.backends.cudnn.version() as text: 8907 -> 8.9.7, 90100 -> 9.1.0."""
    if value is None:
        return None
    return _packed_version(int(value), 10000)  # cuDNN 9+: major * 10000 + ...


def nccl_version_text(value: Any) -> Optional[str]:
    """torch.cuda.nccl.version() as text: a tuple (2, 21, 5), or an int (2708, 21805)."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return ".".join(str(int(p)) for p in value[:3])
    return _packed_version(int(value), 20900)  # NCCL 2.9+: major * 10000 + ...


def _packed_version(v: int, wide_from: int) -> str:
    """major.minor.patch from a packed integer: major * 10000 + minor * 100 + patch from
    ``wide_from`` on, major * 1000 + minor * 100 + patch below it."""
    if v >= wide_from:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def cuda_version_text(value: Any) -> Optional[str]:
    """A CUDA driver/runtime integer as text: 12040 -> 12.4."""
    if value is None:
        return None
    v = int(value)
    if v <= 0:
        return None
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def cuda_at_least(have: Optional[str], need: Optional[str]) -> bool:
    if not need:
        return True
    if not have:
        return False
    return release_parts(have)[:2] >= release_parts(need)[:2]


def cuda_from_tag(tag: str) -> Optional[str]:
    m = re.match(r"^cu(\d+)(\d)$", tag)
    return "%s.%s" % (m.group(1), m.group(2)) if m else None


def is_cuda_library(name: str) -> bool:
    return bool(_CUDA_LIB.match(os.path.basename(name)))


def is_driver_library(name: str) -> bool:
    return bool(_DRIVER_LIB.match(os.path.basename(name)))


def parse_maps(text: str) -> List[str]:
    """The distinct files mapped in a /proc/PID/maps text, in order of first mapping."""
    seen: Dict[str, None] = {}
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        path = fields[5].strip()
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        if path.startswith("/") and path not in seen:
            seen[path] = None
    return list(seen)


def _real(path: str) -> str:
    return os.path.realpath(path)


def path_inside(path: str, roots: Sequence[str]) -> bool:
    real = _real(path)
    for root in roots:
        if not root:
            continue
        base = _real(root).rstrip("/") or "/"
        if base in ("/", real) or real.startswith(base + "/"):
            return True
    return False


def library_source(path: str, env: Dict[str, str]) -> Tuple[str, Optional[str]]:
    """Which variable (or loader mechanism) brought the library at ``path`` in:
    (description, the offending entry or None)."""
    real = _real(path)
    name = os.path.basename(path)
    for var in ("LD_PRELOAD", "LD_AUDIT"):
        for entry in re.split(r"[: ]", env.get(var, "")):
            if entry and (_real(entry) == real or os.path.basename(entry) == name):
                return ("%s entry %s" % (var, entry), entry)
    for entry in env.get("LD_LIBRARY_PATH", "").split(":"):
        if not entry:
            continue
        if _real(entry) == os.path.dirname(real):
            return ("LD_LIBRARY_PATH entry %s" % entry, entry)
        for candidate in glob.glob(os.path.join(glob.escape(entry), name.split(".so")[0] + "*")):
            if _real(candidate) == real:
                return ("LD_LIBRARY_PATH entry %s" % entry, entry)
    for var in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX"):
        value = env.get(var)
        if value and path_inside(path, [value]):
            return ("%s=%s (through an RPATH or a dlopen by path)" % (var, value), None)
    if os.path.dirname(real).startswith(_SYSTEM_LIB_DIRS) or "/cuda" in real:
        return ("the system library path (ld.so.conf / ld.so.cache)", None)
    return ("an RPATH/RUNPATH or a dlopen by absolute path", None)


def classify_mapped_library(path: str, roots: Sequence[str], env: Dict[str, str]) -> Dict[str, Any]:
    """One mapped file: kind "driver" (the machine's driver, always allowed), "inside"
    (a CUDA library from an allowed root), "outside" (a CUDA library from elsewhere:
    with the variable that brought it in) or "other" (not a CUDA library)."""
    info: Dict[str, Any] = {"path": path, "kind": "other", "source": None, "entry": None}
    if is_driver_library(path):
        info["kind"] = "driver"
    elif is_cuda_library(path):
        if path_inside(path, roots):
            info["kind"] = "inside"
        else:
            info["kind"] = "outside"
            info["source"], info["entry"] = library_source(path, env)
    return info


def root_of(path: str, roots: Sequence[str]) -> Optional[str]:
    """The first root ``path`` lies in."""
    for root in roots:
        if root and path_inside(path, [root]):
            return root
    return None


def why_root(root: str, env: Dict[str, str], prefix: str) -> Optional[str]:
    """Why a root outside the interpreter's prefix is on its path, when it is."""
    if path_inside(root, [prefix]) and _real(prefix) not in ("/",):
        return None
    for i, entry in enumerate(env.get("PYTHONPATH", "").split(":")):
        if entry and _real(entry) == _real(root):
            return "PYTHONPATH entry %d" % (i + 1)
    return "outside this interpreter's prefix %s" % prefix


def summarise_roots(
    paths: Sequence[str], roots: Sequence[str], env: Dict[str, str], prefix: str
) -> str:
    """'12 CUDA libraries, all from /env' when they come from the interpreter's own
    prefix; otherwise each place they come from, and why it is on the path."""
    counts: Dict[str, int] = {}
    for path in paths:
        root = root_of(path, roots) or os.path.dirname(path)
        counts[root] = counts.get(root, 0) + 1
    total = "%d CUDA librar%s" % (len(paths), "y" if len(paths) == 1 else "ies")
    if not counts:
        return total
    parts = []
    for root, count in counts.items():
        why = why_root(root, env, prefix)
        parts.append("%d from %s%s" % (count, root, " (%s)" % why if why else ""))
    if len(counts) == 1 and why_root(next(iter(counts)), env, prefix) is None:
        return "%s, all from %s" % (total, next(iter(counts)))
    return "%s: %s" % (total, "; ".join(parts))


def linkage_fix(outside: Sequence[Dict[str, Any]]) -> str:
    """What to change so the prefix's own copies load instead."""
    steps: List[str] = []
    for lib in outside:
        entry = lib.get("entry")
        source = str(lib.get("source") or "")
        if entry and source.startswith("LD_LIBRARY_PATH"):
            step = "remove %s from LD_LIBRARY_PATH" % entry
        elif entry:
            step = "remove %s from %s" % (entry, source.split(" ", 1)[0])
        else:
            step = "find why %s is loaded (%s)" % (lib["path"], source)
        if step not in steps:
            steps.append(step)
    return "; ".join(steps) + " so that the prefix's own copies are loaded"


CUDA_ERROR_STUB_LIBRARY = 34
CUDA_ERRORS = {
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    100: "CUDA_ERROR_NO_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}


def is_stub_libcuda(path: Optional[str], rc: Optional[int]) -> bool:
    """A toolkit's stub libcuda: it answers CUDA_ERROR_STUB_LIBRARY, and lives in a
    stubs directory (or is the unversioned libcuda.so copied under the driver's name)."""
    if rc == CUDA_ERROR_STUB_LIBRARY:
        return True
    if not path:
        return False
    real = _real(path)
    return "/stubs/" in path or "/stubs/" in real or os.path.basename(real) == "libcuda.so"


def _libcuda_cause(libcuda: Dict[str, Any], env: Dict[str, str]) -> Optional[Tuple[str, str]]:
    path, rc = libcuda.get("path"), libcuda.get("rc")
    if not path:
        return None
    source, entry = library_source(path, env)
    code = "%s (%s)" % (rc, CUDA_ERRORS.get(rc, "error")) if rc is not None else "an error"
    if is_stub_libcuda(path, rc):
        return (
            "a stub libcuda.so.1 loaded instead of the driver's: %s (brought in by %s; "
            "cuDriverGetVersion returned %s)" % (path, source, code),
            ("remove %s from LD_LIBRARY_PATH" % entry if entry else "remove %s" % path)
            + ": stubs are for linking only; the driver provides the real libcuda.so.1",
        )
    return (
        "libcuda.so.1 loaded from %s (brought in by %s) but cuDriverGetVersion returned %s"
        % (path, source, code),
        "check that %s belongs to the running driver (nvidia-smi shows its version)" % path,
    )


def why_no_gpu(
    torch_cuda: Optional[str],
    driver_cuda: Optional[str],
    env: Dict[str, str],
    proc_gpus: Optional[int],
    libcuda: Optional[Dict[str, Any]] = None,
) -> Tuple[str, str]:
    """(cause, fix) for torch.cuda.is_available() being False. ``libcuda`` says what
    loading libcuda.so.1 did: {"path": the file mapped, "rc": cuDriverGetVersion's
    result, "error": the loader's message}."""
    if torch_cuda is None:
        return (
            "this torch is a CPU-only build (torch.version.cuda is None)",
            "install the CUDA build of torch the lock names (its cuXYZ index), "
            "or verify this environment as a CPU target",
        )
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return (
            "CUDA_VISIBLE_DEVICES=%r hides every GPU" % visible,
            "unset CUDA_VISIBLE_DEVICES or list the GPUs to use",
        )
    if driver_cuda is None:
        loaded = _libcuda_cause(libcuda or {}, env)
        if loaded is not None:
            return loaded
        error = (libcuda or {}).get("error")
        return (
            "no NVIDIA driver is usable here (libcuda.so.1 did not load%s%s)"
            % (
                ": %s" % error if error else "",
                "; /proc/driver/nvidia is absent" if proc_gpus is None else "",
            ),
            "install the NVIDIA driver, or in a container run it with the GPU runtime (--gpus all)",
        )
    if proc_gpus == 0:
        return ("the driver is loaded but reports no GPU", "check nvidia-smi and the devices")
    return (
        "CUDA %s build, driver CUDA %s, but torch sees no GPU" % (torch_cuda, driver_cuda),
        "run nvidia-smi; check the device permissions (/dev/nvidia*) and CUDA_VISIBLE_DEVICES",
    )


def explain_cuda_error(message: str, context: Dict[str, Any]) -> str:
    """The likely fix for an exception raised by a GPU check."""
    text = message.lower()
    if "no kernel image" in text or "invalid device function" in text:
        sm = context.get("sm", "this GPU's arch")
        tags = context.get("builds") or []
        if tags:
            return "this torch build has no kernels for %s; install a build that has: %s" % (
                sm,
                ", ".join(tags),
            )
        return "this torch build has no kernels for %s; install a build whose arch list has it" % sm
    if "out of memory" in text:
        return "another process holds the GPU's memory: free it (nvidia-smi) and retry"
    if "driver version is insufficient" in text or "driver too old" in text:
        return "upgrade the NVIDIA driver, or lock a build for an older CUDA"
    if "cudnn" in text:
        return "cuDNN failed: check which libcudnn loaded (the cudnn check) and reinstall it"
    if "cublas" in text:
        return "cuBLAS failed: check the linkage check for a stray libcublas"
    if "nccl" in text:
        return "NCCL failed: check the linkage check for a stray libnccl"
    return "see the detail; rerun with the prefix activated"


def describe_cudnn(state: Dict[str, Any]) -> str:
    """What happened to cuDNN, in words, from ``Probe.cudnn_state``."""
    mapped = state.get("mapped") or []
    where = mapped[0] if mapped else None
    if state.get("error"):
        runtime = state.get("runtime")
        return "cuDNN %sloaded%s but failed torch's version check (%s)" % (
            "%s " % runtime if runtime else "",
            " from %s" % where if where else "",
            state["error"],
        )
    if state.get("version"):
        return str(state["version"])
    if where:
        return "None (libcudnn is mapped from %s, but torch reports no version)" % where
    if state.get("has_cudnn") is False:
        return "None (this torch was built without cuDNN)"
    return "None: cuDNN did not load (no libcudnn is mapped)"


def extra_hint(message: str) -> str:
    if "No module named" in message:
        return "install the missing package in the environment (add it to the spec)"
    return "fix the statement or the environment it imports"


# --------------------------------------------------------------------------------------
# Inspection: what is installed, without importing torch.
# --------------------------------------------------------------------------------------


def _dist_version(name: str) -> Optional[str]:
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return str(metadata.version(name))
    except Exception:
        return None


def _torch_version_file() -> Dict[str, Optional[str]]:
    import importlib.util

    out: Dict[str, Optional[str]] = {"version": None, "cuda": None, "location": None}
    try:
        spec = importlib.util.find_spec("torch")
    except Exception:
        return out
    if spec is None or not spec.submodule_search_locations:
        return out
    for location in spec.submodule_search_locations:
        path = os.path.join(location, "version.py")
        if not os.path.exists(path):
            continue
        out["location"] = location
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            target, value = None, None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
                text = value.value if isinstance(value.value, str) else None
                if target.id == "__version__":
                    out["version"] = text
                elif target.id == "cuda":
                    out["cuda"] = text
        break
    return out


def inspect_installed() -> Dict[str, Any]:
    """Versions from package metadata; cuDNN and NCCL from the nvidia-*-cuXX wheels of
    torch's CUDA major (a conda environment has none: they are then not compared)."""
    version_file = _torch_version_file()
    major = release_parts(version_file["cuda"])[:1]
    suffixes = ["cu%d" % major[0]] if major else []
    suffixes += [s for s in ("cu13", "cu12", "cu11") if s not in suffixes]
    cudnn = nccl = None
    for suffix in suffixes:
        cudnn = cudnn or _dist_version("nvidia-cudnn-" + suffix)
        nccl = nccl or _dist_version("nvidia-nccl-" + suffix)
    return {
        "probe_version": PROBE_VERSION,
        "python": _python_info(),
        "torch": _dist_version("torch") or version_file["version"],
        "torch_cuda": version_file["cuda"],
        "torch_location": version_file["location"],
        "torchvision": _dist_version("torchvision"),
        "torchaudio": _dist_version("torchaudio"),
        "cudnn": cudnn,
        "nccl": nccl,
    }


def _python_info() -> Dict[str, Any]:
    return {
        "version": "%d.%d.%d" % sys.version_info[:3],
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    }


# --------------------------------------------------------------------------------------
# The checks. Each returns (passed, detail, fix, data) or raises; the runner wraps it.
# --------------------------------------------------------------------------------------


class Skip(Exception):
    """Raised by a check that does not apply here (it counts as passed)."""


Outcome = Tuple[bool, str, Optional[str], Dict[str, Any]]


class Probe:
    def __init__(self, expect: Dict[str, Any], out: Any) -> None:
        self.expect = expect
        self.out = out
        self.cpu = bool(expect.get("cpu"))
        self.mps = bool(expect.get("mps"))
        self.checks: List[Check] = []
        self.timings: Dict[str, float] = {}
        self.started = time.monotonic()
        self.budget = float(expect.get("time_budget") or DEFAULT_TIME_BUDGET)
        self.check_budget = float(expect.get("check_budget") or DEFAULT_CHECK_BUDGET)
        self.torch: Any = None
        self.env: Dict[str, str] = dict(os.environ)
        self.state: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self._emitted = False
        self._current: Optional[Tuple[str, float, float]] = None

    # ---- output ---------------------------------------------------------------------

    def document(self) -> Dict[str, Any]:
        self.timings["total"] = round(time.monotonic() - self.started, 3)
        return {
            "probe_version": PROBE_VERSION,
            "mode": "cpu" if self.cpu else "cuda",
            "python": _python_info(),
            "checks": self.checks,
            "timings": self.timings,
            "passed": bool(self.checks) and all(c["passed"] for c in self.checks),
        }

    def emit(self, extra: Optional[Check] = None) -> bool:
        """Print the one JSON object, once (the watchdog and the main thread race)."""
        with self._lock:
            if self._emitted:
                return False
            self._emitted = True
            if extra is not None:
                self.checks.append(extra)
            text = json.dumps(self.document(), default=str)
            self.out.write(text + "\n")
            self.out.flush()
            return True

    # ---- running --------------------------------------------------------------------

    def watchdog(self) -> None:
        while True:
            time.sleep(0.1)
            current = self._current
            now = time.monotonic()
            overall = now - self.started > self.budget
            if current is None or (now < current[1] and not overall):
                continue
            name, _deadline, budget = current
            limit = "the probe's time budget of %g s" % self.budget if overall else "%g s" % budget
            check = _check(
                name,
                False,
                "did not finish within %s (hung)" % limit,
                "a GPU call that hangs usually means a wedged GPU or driver (check nvidia-smi "
                "and dmesg) or, for nccl, blocked peer-to-peer/IPC: try NCCL_P2P_DISABLE=1",
                {"timed_out": True},
                now - (current[1] - budget),
            )
            if self.emit(check):
                os._exit(EXIT_TIMED_OUT)
            return

    def run(self, name: str, fn: Callable[[], Outcome], budget: Optional[float] = None) -> bool:
        budget = budget or self.check_budget
        if time.monotonic() - self.started > self.budget:
            self.checks.append(
                _check(
                    name,
                    False,
                    "not run: the probe's time budget of %g s was spent" % self.budget,
                    "raise the time limit (--timeout)",
                    {},
                    0.0,
                )
            )
            return False
        sys.stderr.write("gpuenv-probe: running %s\n" % name)
        sys.stderr.flush()
        start = time.monotonic()
        self._current = (name, start + budget, budget)
        try:
            passed, detail, fix, data = fn()
            status = "pass" if passed else "fail"
        except Skip as skip:
            passed, detail, fix, data, status = True, str(skip), None, {}, "skip"
        except BaseException as exc:  # every check is wrapped; the JSON is always printed
            if isinstance(exc, KeyboardInterrupt):
                raise
            message = "%s: %s" % (type(exc).__name__, _first_line(str(exc)))
            passed, status = False, "fail"
            detail = "raised " + message
            fix = explain_cuda_error(str(exc), self.state.get("error_context", {}))
            data = {"traceback": traceback.format_exc(limit=6)[-2000:]}
        finally:
            self._current = None
        seconds = time.monotonic() - start
        check = _check(name, passed, detail, None if passed else fix, data, seconds)
        check["status"] = status
        self.checks.append(check)
        if not passed:
            sys.stderr.write("gpuenv-probe: failed %s\n" % name)
            sys.stderr.flush()
        return passed

    # ---- the sequence ---------------------------------------------------------------

    def run_all(self) -> None:
        if not self.run("torch-import", self.check_import):
            return
        if self.cpu:
            self.run("versions", self.check_versions_cpu)
            self.run("matmul:cpu", self.check_matmul_cpu)
            if self.mps:
                self.run("mps", self.check_mps)
        else:
            self.run("driver", self.check_driver)
            gpus = self.run("devices", self.check_devices)
            self.run("versions", self.check_versions)
            if gpus:
                self.run("arch", self.check_arch)
                for index in range(int(self.state.get("device_count", 0))):
                    self.run(
                        "matmul:cuda:%d" % index, functools.partial(self.check_matmul_gpu, index)
                    )
                self.run("cudnn", self.check_cudnn)
        if self.expect.get("torchvision"):
            self.run("torchvision", self.check_torchvision)
        if self.expect.get("torchaudio"):
            self.run("torchaudio", self.check_torchaudio)
        self.run("linkage", self.check_linkage)
        if self.expect.get("extensions"):
            self.run("extensions", self.check_extensions)
        if not self.cpu and self.state.get("device_count"):
            self.run("nccl", self.check_nccl, NCCL_CHECK_BUDGET)
        for i, statement in enumerate(self.expect.get("extra") or []):
            self.run("extra:%d" % i, functools.partial(self.check_extra, statement))

    def check_import(self) -> Outcome:
        start = time.monotonic()
        try:
            import torch
        except Exception as exc:  # ImportError, or an OSError from a missing .so
            return (
                False,
                "import torch failed: %s: %s" % (type(exc).__name__, _first_line(str(exc))),
                "install torch in this environment; if a shared library is named, see which "
                "LD_LIBRARY_PATH entry or missing package should provide it",
                {"sys_path": sys.path},
            )
        self.torch = torch
        self.timings["import_torch"] = round(time.monotonic() - start, 3)
        where = os.path.dirname(getattr(torch, "__file__", "") or "")
        self.state["torch_dir"] = where
        return True, "torch %s from %s" % (torch.__version__, where), None, {"location": where}

    def check_driver(self) -> Outcome:
        driver_cuda, how = self.driver_cuda()
        driver_version, proc_gpus = _proc_driver()
        self.state["driver_cuda"] = driver_cuda
        self.state["proc_gpus"] = proc_gpus
        need = self.expect.get("cuda") or self.torch.version.cuda
        data = {
            "driver_version": driver_version,
            "driver_cuda": driver_cuda,
            "how": how,
            "proc_gpus": proc_gpus,
            "libcuda": self.state.get("libcuda"),
        }
        if driver_cuda is None:
            cause, fix = why_no_gpu(
                self.torch.version.cuda or "?", None, self.env, proc_gpus, self.state.get("libcuda")
            )
            return False, cause, fix, data
        shown = "driver %s (CUDA %s)" % (driver_version or "?", driver_cuda)
        if not cuda_at_least(driver_cuda, need):
            return (
                False,
                "%s is older than the locked CUDA %s" % (shown, need),
                "upgrade the NVIDIA driver to one for CUDA %s or newer, or lock a build for "
                "CUDA %s or older" % (need, driver_cuda),
                data,
            )
        return True, "%s runs CUDA %s" % (shown, need), None, data

    def driver_cuda(self) -> Tuple[Optional[str], str]:
        getter = getattr(getattr(self.torch, "_C", None), "_cuda_getDriverVersion", None)
        if getter is not None:
            try:
                found = cuda_version_text(getter())
                if found:
                    return found, "torch._C._cuda_getDriverVersion"
            except Exception:
                pass
        libcuda: Dict[str, Any] = {"path": None, "rc": None, "error": None}
        self.state["libcuda"] = libcuda
        try:
            import ctypes

            lib = ctypes.CDLL(DRIVER_LIBRARY)
        except OSError as exc:
            libcuda["error"] = _first_line(str(exc))
            return None, "none"
        libcuda["path"] = next(
            (p for p in _mapped() if os.path.basename(p).startswith("libcuda.so")), None
        )
        value = ctypes.c_int(0)
        try:
            rc = int(lib.cuDriverGetVersion(ctypes.byref(value)))
        except AttributeError:  # a libcuda.so.1 without the driver API
            libcuda["error"] = "no cuDriverGetVersion in %s" % libcuda["path"]
            return None, "none"
        libcuda["rc"] = rc
        if rc == 0:
            return cuda_version_text(value.value), "cuDriverGetVersion"
        return None, "none"

    def check_devices(self) -> Outcome:
        torch = self.torch
        available = bool(torch.cuda.is_available())
        if not available:
            cause, fix = why_no_gpu(
                torch.version.cuda,
                self.state.get("driver_cuda"),
                self.env,
                self.state.get("proc_gpus"),
                self.state.get("libcuda"),
            )
            return False, "torch.cuda.is_available() is False: " + cause, fix, {}
        count = int(torch.cuda.device_count())
        self.state["device_count"] = count
        devices: List[Dict[str, Any]] = []
        for i in range(count):
            props = torch.cuda.get_device_properties(i)
            cc = tuple(torch.cuda.get_device_capability(i))
            devices.append(
                {
                    "index": i,
                    "name": str(torch.cuda.get_device_name(i)),
                    "capability": "%d.%d" % cc,
                    "memory_bytes": int(getattr(props, "total_memory", 0) or 0),
                    "uuid": str(getattr(props, "uuid", "") or "") or None,
                }
            )
        self.state["devices"] = devices
        if count == 0:
            return False, "torch sees no GPU", "check nvidia-smi and CUDA_VISIBLE_DEVICES", {}
        names = ", ".join("%d: %s (%s)" % (d["index"], d["name"], sm_name(_cc(d))) for d in devices)
        return (
            True,
            "%d GPU%s: %s" % (count, "" if count == 1 else "s", names),
            None,
            {"devices": devices},
        )

    def check_versions(self) -> Outcome:
        torch = self.torch
        found = {
            "torch": str(torch.__version__),
            "cuda": torch.version.cuda,
            "cudnn": None,
            "nccl": None,
        }
        cudnn = self.cudnn_state()
        found["cudnn"] = cudnn["version"]
        with contextlib.suppress(Exception):
            found["nccl"] = nccl_version_text(torch.cuda.nccl.version())
        problems, fixes = self._compare_versions(found)
        if found["cuda"] is None:
            problems.insert(0, "torch %s is a CPU-only build" % found["torch"])
            fixes.insert(0, "install torch from the cu%s index" % _cu(self.expect.get("cuda")))
        shown = ", ".join("%s %s" % (k, v) for k, v in found.items())
        data = {"found": found, "cudnn": cudnn}
        if problems:
            return False, "; ".join(problems), "; ".join(fixes), data
        return True, shown, None, data

    def cudnn_state(self) -> Dict[str, Any]:
        """torch's answer about cuDNN (its version, or the error of its version check,
        with the compiled and runtime versions) and the libcudnn files mapped."""
        known: Optional[Dict[str, Any]] = self.state.get("cudnn")
        if known is not None:
            return known
        torch = self.torch
        state: Dict[str, Any] = {"version": None, "error": None, "compiled": None, "runtime": None}
        state["has_cudnn"] = getattr(getattr(torch, "_C", None), "_has_cudnn", None)
        try:
            state["version"] = cudnn_version_text(torch.backends.cudnn.version())
        except Exception as exc:  # torch's own compatibility check raises RuntimeError
            state["error"] = _first_line(str(exc))
            lib = getattr(getattr(torch, "_C", None), "_cudnn", None)
            for key, getter in (
                ("compiled", "getCompileVersion"),
                ("runtime", "getRuntimeVersion"),
            ):
                with contextlib.suppress(Exception):
                    state[key] = ".".join(str(int(p)) for p in getattr(lib, getter)())
        state["mapped"] = [p for p in _mapped() if os.path.basename(p).startswith("libcudnn")]
        self.state["cudnn"] = state
        return state

    def _compare_versions(self, found: Dict[str, Any]) -> Tuple[List[str], List[str]]:
        expect = self.expect
        problems: List[str] = []
        fixes: List[str] = []
        if not torch_version_matches(expect.get("torch"), found["torch"]):
            problems.append("torch is %s, the lock says %s" % (found["torch"], expect["torch"]))
            fixes.append("reinstall the prefix from the lock (gpuenv install)")
        if found.get("cuda") is not None and not version_matches(
            expect.get("cuda"), found["cuda"], 2
        ):
            problems.append(
                "torch.version.cuda is %s, the lock says %s" % (found["cuda"], expect["cuda"])
            )
            fixes.append("install torch from the cu%s index" % _cu(expect.get("cuda")))
        for lib in ("cudnn", "nccl"):
            want = expect.get(lib)
            if want and found.get("cuda") is not None and not version_matches(want, found[lib], 3):
                if lib == "cudnn":
                    got = describe_cudnn(self.cudnn_state())
                else:
                    got = found[lib] or "None (did not load)"
                problems.append("%s is %s, the lock says %s" % (lib, got, want))
                fixes.append("see the linkage and cudnn checks for the %s that loaded" % lib)
        return problems, fixes

    def check_versions_cpu(self) -> Outcome:
        torch = self.torch
        found = {"torch": str(torch.__version__), "cuda": torch.version.cuda}
        if self.expect.get("cuda"):  # build = "pypi": PyPI's CUDA build on a CPU target
            problems, fixes = self._compare_versions(dict(found, cuda=None))  # torch alone
            if found["cuda"] is None or not version_matches(self.expect["cuda"], found["cuda"], 2):
                problems.append(
                    "torch %s is built for CUDA %s; the lock says CUDA %s"
                    % (found["torch"], found["cuda"], self.expect["cuda"])
                )
                fixes.append("reinstall the prefix from the lock (gpuenv install)")
            if problems:
                return False, "; ".join(problems), "; ".join(fixes), {"found": found}
            return (
                True,
                "torch %s, CUDA %s build, run on the CPU" % (found["torch"], found["cuda"]),
                None,
                {"found": found},
            )
        problems, fixes = self._compare_versions(dict(found, cuda=None))
        if found["cuda"] is not None:
            problems.append(
                "torch %s is a CUDA %s build; the target is CPU-only"
                % (found["torch"], found["cuda"])
            )
            fixes.append("install the CPU build (torch from the cpu index)")
        if problems:
            return False, "; ".join(problems), "; ".join(fixes), {"found": found}
        return True, "torch %s, CPU build" % found["torch"], None, {"found": found}

    def check_arch(self) -> Outcome:
        arch = [str(a) for a in self.torch.cuda.get_arch_list()]
        builds = self.expect.get("builds") or {}
        lines, bad, fixes = [], [], []
        for dev in self.state.get("devices", []):
            cc = _cc(dev)
            how = arch_covered(cc, arch)
            if how:
                lines.append("%d: %s" % (dev["index"], how))
                continue
            bad.append(
                "%d: %s (%s) is not in the arch list %s"
                % (dev["index"], dev["name"], sm_name(cc), " ".join(arch))
            )
            tags = builds_covering(cc, builds)
            fixes.append(
                "install a torch build that has %s: %s" % (sm_name(cc), ", ".join(tags))
                if tags
                else "install a torch build whose arch list has %s (a newer cu build)" % sm_name(cc)
            )
        data = {"arch_list": arch}
        differs = arch_list_differences(self.expect.get("arch_list") or [], arch)
        if differs:
            # Informational: the compiled list is not the lock's, so this is not the
            # locked build (the versions check says which); coverage is what counts here.
            lines.append("arch list differs from the lock's (%s)" % differs)
            data["lock_arch_list"] = list(self.expect.get("arch_list") or [])
        if bad:
            return False, "; ".join(bad), "; ".join(sorted(set(fixes))), data
        return True, "; ".join(lines), None, data

    def check_matmul_gpu(self, index: int) -> Outcome:
        torch = self.torch
        cc = tuple(torch.cuda.get_device_capability(index))
        dtype_name = matmul_dtype_for(cc)
        builds = builds_covering(cc, self.expect.get("builds") or {})
        self.state["error_context"] = {"sm": sm_name(cc), "builds": builds}
        n = int(self.expect.get("matmul_size") or (8192 if dtype_name != "float32" else 4096))
        device = torch.device("cuda", index)
        with contextlib.suppress(Exception):
            torch.backends.cuda.matmul.allow_tf32 = False
        result = _timed_matmul(
            torch, device, getattr(torch, dtype_name), n, lambda: torch.cuda.synchronize(device)
        )
        ok = relative_error_ok(result["relative_error"], dtype_name)
        result.update({"dtype": dtype_name, "n": n, "device": index})
        detail = "%dx%d %s: %.1f TFLOP/s, relative error %.2e" % (
            n,
            n,
            dtype_name,
            result["tflops"],
            result["relative_error"],
        )
        if not ok:
            return (
                False,
                detail + " (limit %.0e)" % MATMUL_TOLERANCE[dtype_name],
                "wrong results from the GPU: check the linkage check for a stray libcublas, "
                "then the GPU itself (nvidia-smi -q for ECC errors)",
                result,
            )
        return True, detail, None, result

    def check_matmul_cpu(self) -> Outcome:
        fix = "wrong results from the CPU build: reinstall torch"
        return self._float32_product("cpu", lambda: None, "", fix)

    def _float32_product(
        self, device: str, sync: Callable[[], None], where: str, fix: str
    ) -> Outcome:
        """A float32 n x n product on ``device`` (``where``: how the detail names it),
        timed and checked against the float64 reference; ``fix`` when it is wrong."""
        torch = self.torch
        n = int(self.expect.get("matmul_size") or 1024)
        result = _timed_matmul(torch, torch.device(device), torch.float32, n, sync)
        result.update({"dtype": "float32", "n": n, "device": device})
        detail = "%dx%d float32%s: %.3f TFLOP/s, relative error %.2e" % (
            n,
            n,
            where,
            result["tflops"],
            result["relative_error"],
        )
        if not relative_error_ok(result["relative_error"], "float32"):
            return False, detail, fix, result
        return True, detail, None, result

    def check_mps(self) -> Outcome:
        """macOS on Apple silicon: the wheel's MPS backend, and a product on the GPU."""
        torch = self.torch
        backend = getattr(getattr(torch, "backends", None), "mps", None)
        available = bool(backend is not None and backend.is_available())
        built = bool(backend is not None and backend.is_built())
        if not available:
            why = "this torch was built without MPS" if not built else "no Apple GPU is usable"
            return (
                False,
                "torch.backends.mps.is_available() is False: %s" % why,
                "MPS needs Apple silicon and macOS 12.3 or newer, and PyTorch's arm64 macOS "
                "wheel; in a virtual machine or under Rosetta it is not available",
                {"built": built},
            )
        sync = getattr(getattr(torch, "mps", None), "synchronize", lambda: None)
        fix = "wrong results from the Apple GPU: reinstall torch"
        return self._float32_product("mps", sync, " on the Apple GPU", fix)

    def check_cudnn(self) -> Outcome:
        torch = self.torch
        state = self.cudnn_state()
        version = state["version"]
        cu = str(self.torch.version.cuda or "?").split(".")[0]
        if state["error"]:
            where = (state.get("mapped") or [None])[0]
            source = library_source(where, self.env) if where else ("", None)
            remove = (
                "remove %s from LD_LIBRARY_PATH, or " % source[1]
                if source[1] and source[0].startswith("LD_LIBRARY_PATH")
                else ""
            )
            return (
                False,
                describe_cudnn(state),
                "torch was compiled against cuDNN %s; the loader found %s at %s (brought in by "
                "%s): %sinstall the cuDNN the lock names (nvidia-cudnn-cu%s)"
                % (
                    state.get("compiled") or "?",
                    state.get("runtime") or "another version",
                    where or "?",
                    source[0] or "?",
                    remove,
                    cu,
                ),
                {"cudnn": state},
            )
        if version is None:
            found = self.libraries_named("libcudnn")
            return (
                False,
                "torch.backends.cudnn.version() is %s" % describe_cudnn(state),
                "the loader found %s; install the cuDNN the lock names (nvidia-cudnn-cu%s) and "
                "remove any LD_LIBRARY_PATH entry holding another libcudnn"
                % (", ".join(found) if found else "no libcudnn at all", cu),
                {"found": found, "cudnn": state},
            )
        self.state["error_context"] = {"sm": "cuda:0"}
        errors = _conv_errors(torch, torch.device("cuda", 0))
        worst = max(errors.values())
        detail = "cuDNN %s: conv2d forward+backward, worst relative error %.2e" % (version, worst)
        data = {"cudnn": version, "relative_errors": errors}
        if not (math.isfinite(worst) and worst <= CONV_TOLERANCE):
            return False, detail, "cuDNN returned wrong results: check the linkage check", data
        return True, detail, None, data

    def libraries_named(self, stem: str) -> List[str]:
        """Copies of a library the loader could see: mapped, on LD_LIBRARY_PATH, in the
        prefix or the interpreter's site-packages."""
        found: List[str] = [p for p in _mapped() if os.path.basename(p).startswith(stem)]
        dirs = [d for d in self.env.get("LD_LIBRARY_PATH", "").split(":") if d]
        for root in self.roots():
            dirs.append(os.path.join(root, "lib"))
            dirs.extend(glob.glob(os.path.join(glob.escape(root), "nvidia", "*", "lib")))
            dirs.extend(
                glob.glob(
                    os.path.join(
                        glob.escape(root), "lib", "python*", "site-packages", "nvidia", "*", "lib"
                    )
                )
            )
        for directory in dirs:
            for path in sorted(glob.glob(os.path.join(glob.escape(directory), stem + "*.so*"))):
                if path not in found:
                    found.append(path)
        return found[:12]

    def check_torchvision(self) -> Outcome:
        import torchvision

        torch = self.torch
        version = str(torchvision.__version__)
        want = self.expect.get("torchvision")
        problems = []
        if not torch_version_matches(want, version):
            problems.append("torchvision is %s, the lock says %s" % (version, want))
        boxes = torch.tensor(
            [[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]]
        )
        scores = torch.tensor([0.9, 0.8, 0.7])
        expected = [int(i) for i in torchvision.ops.nms(boxes, scores, 0.5).tolist()]
        where = "cpu"
        got = expected
        if not self.cpu and self.state.get("device_count"):
            where = "cuda:0"
            got = [
                int(i)
                for i in torchvision.ops.nms(boxes.to(where), scores.to(where), 0.5).cpu().tolist()
            ]
        if got != [0, 2] or got != expected:
            problems.append("nms on %s kept %s, expected [0, 2]" % (where, got))
        data = {"version": version, "nms_device": where}
        if problems:
            return (
                False,
                "; ".join(problems),
                "install the torchvision paired with this torch from the same index",
                data,
            )
        return True, "torchvision %s, nms on %s" % (version, where), None, data

    def check_torchaudio(self) -> Outcome:
        import torchaudio

        version = str(torchaudio.__version__)
        want = self.expect.get("torchaudio")
        if not torch_version_matches(want, version):
            return (
                False,
                "torchaudio is %s, the lock says %s" % (version, want),
                "install the torchaudio paired with this torch from the same index",
                {"version": version},
            )
        return True, "torchaudio %s imports" % version, None, {"version": version}

    def roots(self) -> List[str]:
        """Where the environment's own libraries may come from: the prefix (and any
        extra roots gpuenv names), else the interpreter's prefix and site-packages."""
        if self.expect.get("prefix"):
            return [self.expect["prefix"]] + list(self.expect.get("library_roots") or [])
        roots = list(self.expect.get("library_roots") or [])
        if os.path.realpath(sys.prefix) not in _SYSTEM_PREFIXES:
            roots.append(sys.prefix)
        torch_dir = self.state.get("torch_dir")
        if torch_dir:
            roots.append(os.path.dirname(torch_dir))
        with contextlib.suppress(Exception):
            import site

            roots.extend(site.getsitepackages())
            roots.append(site.getusersitepackages())
        return [r for r in roots if r]

    def check_linkage(self) -> Outcome:
        if not sys.platform.startswith("linux"):  # /proc/self/maps is Linux's
            return True, "not checked on %s (no /proc/self/maps)" % sys.platform, None, {}
        roots = self.roots()
        libs = [classify_mapped_library(p, roots, self.env) for p in _mapped()]
        cuda_libs = [lib for lib in libs if lib["kind"] != "other"]
        outside = [lib for lib in cuda_libs if lib["kind"] == "outside"]
        data = {"roots": roots, "libraries": cuda_libs}
        if self.cpu and not self.expect.get("cuda"):
            loaded = [lib["path"] for lib in cuda_libs]
            if loaded:
                return (
                    False,
                    "a CPU build mapped CUDA libraries: %s" % ", ".join(loaded),
                    "install the CPU build of torch; a CUDA build is installed",
                    data,
                )
            return True, "no CUDA library mapped", None, data
        if outside:
            detail = "; ".join(
                "%s (brought in by %s)" % (lib["path"], lib["source"]) for lib in outside
            )
            return (
                False,
                "from outside %s: %s" % (" ".join(roots[:1]) or "the prefix", detail),
                linkage_fix(outside),
                data,
            )
        inside = [lib["path"] for lib in cuda_libs if lib["kind"] == "inside"]
        prefix = self.expect.get("prefix") or sys.prefix
        return True, summarise_roots(inside, roots, self.env, prefix), None, data

    def check_nccl(self) -> Outcome:
        count = int(self.state.get("device_count") or 0)
        if count < 2:
            raise Skip("one GPU: no all-reduce to run")
        world = min(count, 8)
        return _all_reduce(world, NCCL_CHECK_BUDGET - 5)

    def check_extensions(self) -> Outcome:
        """Every extension gpuenv built: each module imports, and each shared object
        carries machine code for every GPU here, or PTX the driver can JIT for it."""
        import importlib

        lines, bad, fixes = [], [], []
        data: Dict[str, Any] = {}
        devices = [] if self.cpu else self.state.get("devices", [])
        for ext in self.expect.get("extensions") or []:
            label = "%s %s" % (ext.get("name"), ext.get("version"))
            for module in ext.get("modules") or []:
                try:
                    importlib.import_module(module)
                except Exception as exc:  # ImportError, OSError from the loader
                    message = "%s: %s" % (type(exc).__name__, _first_line(str(exc)))
                    bad.append("%s: import %s failed: %s" % (label, module, message))
                    fixes.append(extension_fix(message))
            for path in ext.get("files") or []:
                entries = fatbin_entries(path)
                data[path] = entries
                if not entries:
                    continue  # no GPU code (a CPU extension) or unreadable: the import says
                for dev in devices:
                    if not arch_covered(_cc(dev), entries):
                        bad.append(
                            "%s: %s has %s, no code for GPU %d (%s)"
                            % (
                                label,
                                os.path.basename(path),
                                " ".join(entries),
                                dev["index"],
                                sm_name(_cc(dev)),
                            )
                        )
                        fixes.append(
                            "rebuild it for this GPU: the target's GPU in gpuenv.toml must "
                            "be this one (or add extra-archs), then gpuenv install"
                        )
            lines.append(label)
        if bad:
            return False, "; ".join(bad), "; ".join(sorted(set(fixes))), data
        return True, "built extensions load: " + ", ".join(lines), None, data

    def check_extra(self, statement: str) -> Outcome:
        namespace: Dict[str, Any] = {"__name__": "__gpuenv_extra__"}
        try:
            exec(compile(statement, "<verify.extra>", "exec"), namespace)
        except Exception as exc:
            message = "%s: %s" % (type(exc).__name__, _first_line(str(exc)))
            return False, "%s raised %s" % (statement, message), extra_hint(message), {}
        return True, statement, None, {}


def _check(
    name: str, passed: bool, detail: str, fix: Optional[str], data: Dict[str, Any], seconds: float
) -> Check:
    return {
        "name": name,
        "status": "pass" if passed else "fail",
        "passed": bool(passed),
        "detail": detail,
        "fix": fix,
        "seconds": round(seconds, 3),
        "data": data,
    }


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0][:500] if lines else ""


def _cc(device: Dict[str, Any]) -> Tuple[int, int]:
    major, minor = str(device["capability"]).split(".")
    return int(major), int(minor)


def _cu(cuda: Optional[str]) -> str:
    parts = release_parts(cuda)
    return "".join(str(p) for p in parts[:2]) if parts else "XYZ"


def _mapped() -> List[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            return parse_maps(handle.read())
    except OSError:
        return []


def _proc_driver() -> Tuple[Optional[str], Optional[int]]:
    """The driver version from /proc/driver/nvidia/version, and the number of GPUs the
    driver lists (None when /proc/driver/nvidia is absent)."""
    version = None
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as handle:
            m = re.search(r"Kernel Module(?: for [^ ]+)?\s+([0-9]+(?:\.[0-9]+)+)", handle.read())
            version = m.group(1) if m else None
    except OSError:
        return None, None
    try:
        gpus: Optional[int] = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        gpus = None
    return version, gpus


def _timed_matmul(
    torch: Any, device: Any, dtype: Any, n: int, sync: Callable[[], None]
) -> Dict[str, Any]:
    """A warmed-up, synchronised n x n product: TFLOP/s and the relative error of the
    first rows against a float64 reference computed from the same inputs."""
    with contextlib.suppress(Exception):
        torch.manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    c = a @ b
    sync()
    start = time.perf_counter()
    c = a @ b
    sync()
    once = max(time.perf_counter() - start, 1e-6)
    iterations = max(3, min(200, int(0.3 / once)))
    for _ in range(min(iterations, 5)):  # warm the clocks
        c = a @ b
    sync()
    start = time.perf_counter()
    for _ in range(iterations):
        c = a @ b
    sync()
    seconds = time.perf_counter() - start
    rows = min(256, n)
    if device.type == "mps":  # MPS has no float64: the reference is computed on the CPU
        ref = a[:rows].cpu().double() @ b.cpu().double()
    else:
        ref = a[:rows].double() @ b.double()
    error = _rel_err(c[:rows], ref)
    del a, b, c, ref
    with contextlib.suppress(Exception):
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {
        "tflops": round(tflops(n, iterations, seconds), 2),
        "iterations": iterations,
        "seconds": round(seconds, 4),
        "relative_error": error,
    }


def _rel_err(got: Any, ref: Any) -> float:
    got = got.detach().double().cpu()
    ref = ref.detach().double().cpu()
    diff = float((got - ref).norm().item())
    scale = float(ref.norm().item())
    if scale == 0:
        return 0.0 if diff == 0 else float("inf")
    return diff / scale


def _conv_errors(torch: Any, device: Any) -> Dict[str, float]:
    """conv2d forward and backward through cuDNN against a float64 CPU reference."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.randn(8, 32, 28, 28, device=device, requires_grad=True)
    w = torch.randn(64, 32, 3, 3, device=device, requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    y.sum().backward()
    torch.cuda.synchronize(device)
    xr = x.detach().cpu().double().requires_grad_(True)
    wr = w.detach().cpu().double().requires_grad_(True)
    yr = F.conv2d(xr, wr, padding=1)
    yr.sum().backward()
    return {
        "forward": _rel_err(y, yr),
        "grad_input": _rel_err(x.grad, xr.grad),
        "grad_weight": _rel_err(w.grad, wr.grad),
    }


_RANK_CODE = r"""
import json, sys
try:
    import ctypes
    ctypes.CDLL("libc.so.6").prctl(1, 9)  # die with the probe (PR_SET_PDEATHSIG, SIGKILL)
except Exception:
    pass
import torch
import torch.distributed as dist
rank, world, init = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.cuda.set_device(rank)
dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world)
t = torch.ones(1, device="cuda:%d" % rank) * (rank + 1)
dist.all_reduce(t)
torch.cuda.synchronize()
value = float(t.item())
dist.destroy_process_group()
sys.stdout.write(json.dumps({"rank": rank, "value": value}) + "\n")
"""


def _all_reduce(world: int, timeout: float) -> Outcome:
    """An all-reduce over ``world`` GPUs: one process per GPU, a file store rendezvous."""
    tmp = tempfile.mkdtemp(prefix="gpuenv-nccl-")
    init = "file://" + os.path.join(tmp, "store")
    flags = ["-I"] if sys.flags.isolated else []
    procs = [
        subprocess.Popen(
            [sys.executable] + flags + ["-c", _RANK_CODE, str(r), str(world), init],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        for r in range(world)
    ]
    deadline = time.monotonic() + timeout
    values: Dict[int, float] = {}
    errors: List[str] = []
    start = time.monotonic()
    for rank, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                with contextlib.suppress(Exception):
                    other.kill()
            errors.append("rank %d did not finish within %g s" % (rank, timeout))
            break
        if proc.returncode != 0:
            errors.append("rank %d exited %d: %s" % (rank, proc.returncode, _last_line(err)))
            continue
        with contextlib.suppress(Exception):
            values[rank] = float(json.loads(out.strip().splitlines()[-1])["value"])
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.kill()
            proc.wait(1)
    seconds = time.monotonic() - start
    want = world * (world + 1) / 2.0
    data = {"world_size": world, "values": values, "expected": want, "seconds": round(seconds, 3)}
    if errors:
        return False, "; ".join(errors), explain_cuda_error("nccl " + " ".join(errors), {}), data
    wrong = {r: v for r, v in values.items() if abs(v - want) > 1e-6}
    if wrong or len(values) != world:
        return (
            False,
            "all-reduce gave %s, expected %g on every rank" % (values, want),
            "NCCL returned wrong sums: check the linkage check for a stray libnccl",
            data,
        )
    return True, "all-reduce over %d GPUs in %.1f s" % (world, seconds), None, data


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else ""


# --------------------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------------------


def _take_stdout() -> Any:
    """Keep the real stdout for the JSON; point file descriptor 1 at stderr so that
    whatever the framework prints cannot corrupt it."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(saved, "w", encoding="utf-8")


def main(argv: Optional[Sequence[str]] = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    parser = argparse.ArgumentParser(prog="probe.py", description="gpuenv verification probe")
    parser.add_argument("--expect", help="expectations, a JSON object")
    parser.add_argument("--inspect", action="store_true", help="report what is installed")
    args = parser.parse_args(argv)
    out = _take_stdout()
    with contextlib.suppress(Exception):
        faulthandler.enable(sys.stderr)
    if args.inspect:
        out.write(json.dumps(inspect_installed()) + "\n")
        out.flush()
        return EXIT_PASSED
    try:
        expect = json.loads(args.expect or "{}")
        if not isinstance(expect, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        sys.stderr.write("probe.py: --expect: %s\n" % exc)
        return EXIT_USAGE
    probe = Probe(expect, out)
    threading.Thread(target=probe.watchdog, name="gpuenv-probe-watchdog", daemon=True).start()
    try:
        probe.run_all()
    except BaseException as exc:  # never leave without the JSON
        probe.checks.append(
            _check("probe", False, "the probe itself failed: %r" % exc, None, {}, 0.0)
        )
    if not probe.emit():
        time.sleep(3600)  # the watchdog is printing and will exit
    passed = bool(probe.checks) and all(c["passed"] for c in probe.checks)
    return EXIT_PASSED if passed else EXIT_FAILED


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: CUDA/NCCL atexit hooks can hang or crash
