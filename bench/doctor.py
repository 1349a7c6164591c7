"""Static `gpuenv doctor --prefix` on a generated 50,000-file conda environment
(issue budget: < 1 s wall), and what `python -m torch.utils.collect_env` names of the
same planted problems where some interpreter can import torch.

Usage: .venv/bin/python bench/doctor.py [--runs N] [--files N] [--torch-python PATH]

The environment is generated once under bench/out/ (reused while its marker matches):
a conda prefix with conda-meta records, many dist-info directories and package files,
torch 2.4.1+cu124 with nvidia-* wheels, and these planted problems, passed to both tools
through the same variables (the list is PLANTED below). collect_env has no way to point
it at a prefix: it reports on the interpreter that runs it, so it runs with the planted
variables in an interpreter that imports torch (--torch-python, $GPUENV_BENCH_TORCH_PYTHON,
or the first python here that can), and the table says which planted problems its output
names at all.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _timing import REPO, interpreter, median_ms, report, wall

OUT = REPO / "bench" / "out" / "doctor"
SITE = "lib/python3.11/site-packages"
GENERATOR_VERSION = "5"


@dataclass(frozen=True)
class Planted:
    problem: str
    code: str  # what the doctor should name
    tokens: tuple[str, ...]  # text that would show collect_env named it


PLANTED = (
    Planted("conda pytorch and pip torch", "mixed-managers", ("[conda] pytorch",)),
    Planted("two numpy dist-infos", "duplicate-dist-info", ("numpy==1.25.2",)),
    Planted("pip file over a conda file", "pip-overwrote-conda-files", ("fastjson",)),
    Planted(
        "stray libcudart 12.1 first on LD_LIBRARY_PATH",
        "duplicate-cuda-library",
        ("libcudart.so.12.1", "old-cuda"),
    ),
    Planted("empty LD_LIBRARY_PATH entry", "ld-library-path-relative", ("LD_LIBRARY_PATH",)),
    Planted("CUDA_HOME is an 11.8 toolkit", "toolkit-mismatch", ("11.8",)),
    Planted("torchvision 0.18.1 with torch 2.4.1", "trio-mismatch", ("torchvision==0.18.1",)),
    Planted(
        "a CUDA 13 cuDNN wheel over the CUDA 12 one's files",
        "file-ownership-clash",
        ("nvidia-cudnn-cu13",),
    ),
)


def _touch_many(root: Path, rels: list[str]) -> None:
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_bytes(b"")


def _so(dest: Path, soname: str, needed: tuple[str, ...] = (), runpath: str = "") -> None:
    """A real shared object when gcc is here, else a placeholder file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    gcc = shutil.which("gcc")
    if gcc is None:
        dest.write_bytes(b"")
        return
    src = OUT / "empty.c"
    src.write_text("int x(void) { return 0; }\n")
    argv = [gcc, "-shared", "-fPIC", "-o", str(dest), str(src), f"-Wl,-soname,{soname}"]
    if needed:
        stubs = OUT / "stubs"
        for name in needed:
            if not (stubs / name).exists():
                _so(stubs / name, name)
        argv += ["-Wl,--no-as-needed", f"-L{stubs}", *(f"-l:{n}" for n in needed)]
    if runpath:
        argv += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    subprocess.run(argv, check=True, capture_output=True)


def _record_line(site: Path, rel: str) -> str:
    """RECORD's line for a file: sha256 and size for the libraries (what installers
    write for every file; the bulk packages leave them out to keep generation quick)."""
    path = site / rel
    if ".so" not in rel or not path.is_file():
        return f"{rel},,\n"
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}\n"


def _dist(site: Path, name: str, version: str, files: list[str], installer: str) -> list[str]:
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    meta = [f"{info}/METADATA", f"{info}/RECORD", f"{info}/INSTALLER", f"{info}/top_level.txt"]
    _touch_many(site, files)
    (site / info).mkdir(parents=True, exist_ok=True)
    (site / info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )
    (site / info / "INSTALLER").write_text(installer + "\n")
    tops = sorted({f.split("/", 1)[0] for f in files if "/" in f})
    (site / info / "top_level.txt").write_text("".join(t + "\n" for t in tops))
    (site / info / "RECORD").write_text("".join(_record_line(site, f) for f in [*files, *meta]))
    return [*files, *meta]


def _conda(prefix: Path, name: str, version: str, files: list[str]) -> None:
    meta = prefix / "conda-meta" / f"{name}-{version}-0.json"
    meta.parent.mkdir(parents=True, exist_ok=True)
    record = {"name": name, "version": version, "build": "0", "channel": "conda-forge"}
    meta.write_text(json.dumps({**record, "files": files}))


def _bulk(prefix: Path, files_wanted: int) -> None:
    """Plain conda and pip packages (no problems) up to about ``files_wanted`` files."""
    site = prefix / SITE
    per_package = 30
    packages = max(files_wanted // (per_package + 5), 1)
    for i in range(packages):
        name = f"pkg{i:05d}"
        files = [f"{name}/mod{j}.py" for j in range(per_package)]
        if i % 3 == 0:  # a conda package with its dist-info
            owned = _dist(site, name, "1.0", files, "conda")
            _conda(prefix, name, "1.0", [f"{SITE}/{f}" for f in owned])
        else:
            _dist(site, name, "1.0", files, "pip")


def _torch_stack(prefix: Path) -> None:
    site = prefix / SITE
    (site / "torch").mkdir(parents=True, exist_ok=True)
    (site / "torch" / "version.py").write_text(
        "__version__ = '2.4.1+cu124'\ncuda: Optional[str] = '12.4'\nhip = None\n"
    )
    _dist(site, "torch", "2.4.1+cu124", ["torch/__init__.py"], "pip")
    wheels = [
        ("cuda_runtime", "nvidia-cuda-runtime-cu12", "12.4.127", "libcudart.so.12"),
        ("cublas", "nvidia-cublas-cu12", "12.4.5.8", "libcublas.so.12"),
        ("cudnn", "nvidia-cudnn-cu12", "9.1.0.70", "libcudnn.so.9"),
        ("nccl", "nvidia-nccl-cu12", "2.20.5", "libnccl.so.2"),
    ]
    for pkg, dist, version, lib in wheels:
        _so(site / "nvidia" / pkg / "lib" / lib, lib)
        _dist(site, dist, version, [f"nvidia/{pkg}/__init__.py", f"nvidia/{pkg}/lib/{lib}"], "pip")
    runpath = ":".join(f"$ORIGIN/../../nvidia/{w[0]}/lib" for w in wheels)
    needed = tuple(w[3] for w in wheels)
    _so(site / "torch" / "lib" / "libtorch_cuda.so", "libtorch_cuda.so", needed, runpath)
    _dist(site, "torchaudio", "2.4.1+cu124", ["torchaudio/__init__.py"], "pip")


def _plant(prefix: Path) -> None:
    site = prefix / SITE
    _conda(prefix, "python", "3.11.9", ["bin/python3.11"])
    _conda(prefix, "pytorch", "2.4.1", [])
    _dist(site, "numpy", "1.26.4", ["numpy/__init__.py"], "pip")
    _dist(site, "numpy", "1.25.2", ["numpy/core.py"], "pip")
    _conda(prefix, "fastjson-core", "1.0", [f"{SITE}/fastjson/__init__.py"])
    _dist(site, "turbojson", "2.0", ["fastjson/__init__.py", "turbojson/__init__.py"], "pip")
    _dist(site, "torchvision", "0.18.1+cu124", ["torchvision/__init__.py"], "pip")
    # nvidia-cudnn-cu13 writes nvidia/cudnn/lib/libcudnn.so.9 too: its bytes replace cu12's
    cudnn = site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    cudnn.write_bytes(cudnn.read_bytes() + b"\0cuDNN for CUDA 13")
    _dist(site, "nvidia-cudnn-cu13", "9.13.0.50", ["nvidia/cudnn/lib/libcudnn.so.9"], "pip")
    old = OUT / "old-cuda" / "lib64"
    _so(old / "libcudart.so.12.1.105", "libcudart.so.12")
    if not (old / "libcudart.so.12").exists():
        (old / "libcudart.so.12").symlink_to("libcudart.so.12.1.105")
    toolkit = OUT / "cuda-11.8"
    toolkit.mkdir(parents=True, exist_ok=True)
    (toolkit / "version.json").write_text(json.dumps({"cuda": {"version": "11.8.0"}}))
    (toolkit / "bin").mkdir(exist_ok=True)


def generate(files_wanted: int) -> Path:
    prefix = OUT / "env"
    marker = OUT / f"generated-{GENERATOR_VERSION}-{files_wanted}"
    if marker.exists():
        return prefix
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    _bulk(prefix, files_wanted)
    _torch_stack(prefix)
    _plant(prefix)
    marker.write_text("")
    return prefix


def count_files(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def planted_environ() -> dict[str, str]:
    return {
        "LD_LIBRARY_PATH": f"{OUT / 'old-cuda' / 'lib64'}::/usr/lib",
        "CUDA_HOME": str(OUT / "cuda-11.8"),
    }


def torch_python(explicit: str | None) -> str | None:
    candidates = [explicit] if explicit else []
    candidates += [os.environ.get("GPUENV_BENCH_TORCH_PYTHON"), interpreter(), sys.executable]
    candidates += [shutil.which("python3"), shutil.which("python")]
    for python in filter(None, candidates):
        probe = subprocess.run([python, "-c", "import torch"], capture_output=True, check=False)
        if probe.returncode == 0:
            return python
    return None


def compare(doctor_codes: set[str], collect_env_text: str | None) -> None:
    print(f"\n{'planted problem':<48} {'doctor':<8} collect_env")
    for item in PLANTED:
        named = "yes" if item.code in doctor_codes else "NO"
        if collect_env_text is None:
            other = "(not run)"
        else:
            other = "yes" if any(t in collect_env_text for t in item.tokens) else "no"
        print(f"{item.problem:<48} {named:<8} {other}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--torch-python", default=None)
    args = parser.parse_args()
    prefix = generate(args.files)
    print(f"environment: {prefix} ({count_files(prefix)} files)")
    python = interpreter()
    env = planted_environ()
    argv = [python, "-m", "gpuenv", "doctor", "--prefix", str(prefix), "--json"]
    bare = wall([python, "-c", "pass"], runs=args.runs)
    times = wall(argv, runs=args.runs, env=env)
    report("python -c pass", bare)
    report("gpuenv doctor --prefix (50k files, static)", times, baseline=bare)
    budget = 1000.0
    verdict = "within" if median_ms(times) < budget else "OVER"
    print(f"doctor median {median_ms(times):.1f} ms: {verdict} the {budget:.0f} ms budget")
    result = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    found = {f["code"] for f in json.loads(result.stdout)["findings"]}
    collect = None
    torch_py = torch_python(args.torch_python)
    if torch_py is None:
        print("collect_env: skipped (no interpreter here can import torch)")
    else:
        started = time.perf_counter()
        run = subprocess.run(
            [torch_py, "-m", "torch.utils.collect_env"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - started
        collect = run.stdout + run.stderr
        print(f"collect_env: {torch_py} (exit {run.returncode}, one run {seconds * 1000:.0f} ms)")
    compare(found, collect)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
