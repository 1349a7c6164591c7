"""The steps of bench/gpu/check.sh: verify this machine's torch, plant faults, show each
is caught, and summarise (with timings and the bf16 TFLOP/s).

Run by an interpreter that can import gpuenv (check.sh installs it from wheels). Every
step is timed and wrapped: a failed step is reported and the next one runs. Exit 0
only when every step met its expectation.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FAKE_TORCH = REPO / "tests" / "fixtures" / "fake_torch"
STEP_TIMEOUT = 240

PEAK_CODE = r"""
import json, torch
best = {}
for n, iters in ((8192, 60), (16384, 12)):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        c = a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        c = a @ b
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3
    best[str(n)] = 2.0 * n ** 3 * iters / seconds / 1e12
    del a, b, c
print(json.dumps({"tflops": best, "device": torch.cuda.get_device_name(0)}))
"""


class Check:
    def __init__(self, args: argparse.Namespace) -> None:
        self.python = args.python
        self.gpuenv = shlex.split(args.gpuenv)
        self.out = Path(args.out)
        self.work = Path(args.work)
        self.steps: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {}
        self.baseline: dict[str, Any] = {}

    # ---- plumbing -------------------------------------------------------------------

    def env(self, **changes: str | None) -> dict[str, str]:
        env = dict(os.environ)
        for key, value in changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def call(
        self, name: str, argv: list[str], env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=STEP_TIMEOUT, check=False
        )
        (self.out / f"{name}.out").write_text(proc.stdout, encoding="utf-8")
        (self.out / f"{name}.err").write_text(proc.stderr, encoding="utf-8")
        return proc

    def verify(
        self, name: str, env: dict[str, str], *, as_json: bool = True
    ) -> tuple[int, dict[str, Any]]:
        argv = [*self.gpuenv, "verify", "--python", self.python, "--timeout", "180"]
        proc = self.call(name, [*argv, "--json"] if as_json else argv, env)
        if not as_json:
            return proc.returncode, {"text": proc.stdout}
        try:
            return proc.returncode, json.loads(proc.stdout)
        except ValueError:
            return proc.returncode, {"garbled": proc.stdout[-2000:], "stderr": proc.stderr[-2000:]}

    def step(self, name: str, expected: str, fn: Callable[[], tuple[bool, str]]) -> None:
        print(f"== {name}: expect {expected}", flush=True)
        start = time.monotonic()
        try:
            ok, note = fn()
            status = "ok" if ok else "MISSED"
        except Exception as exc:  # noqa: BLE001 - a broken step is reported, the rest run
            ok, status, note = False, "ERROR", f"{type(exc).__name__}: {exc}"
        seconds = time.monotonic() - start
        self.steps.append(
            {
                "step": name,
                "expected": expected,
                "status": status,
                "ok": ok,
                "seconds": round(seconds, 1),
                "note": note,
            }
        )
        print(f"   {status} in {seconds:.1f} s: {note}", flush=True)

    # ---- steps ----------------------------------------------------------------------

    def baseline_verify(self) -> tuple[bool, str]:
        start = time.monotonic()
        code, data = self.verify("verify-baseline", self.env())
        wall = time.monotonic() - start
        self.baseline = data
        (self.out / "baseline.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
        self.facts["verify_wall_s"] = round(wall, 1)
        matmul = _check(data, "matmul:cuda:0")
        if matmul:
            self.facts["probe_tflops"] = matmul.get("data", {}).get("tflops")
            self.facts["probe_dtype"] = matmul.get("data", {}).get("dtype")
        failed = [f"{c['name']}: {c['detail']}" for c in data.get("checks", []) if not c["passed"]]
        note = f"exit {code}, {wall:.1f} s (budget 30 s)" + (
            "; " + " | ".join(failed) if failed else ""
        )
        return code == 0 and data.get("passed") is True and wall < 30, note

    def table_verify(self) -> tuple[bool, str]:
        code, data = self.verify("verify-table", self.env(), as_json=False)
        print(data["text"], flush=True)
        return code == 0, f"exit {code}"

    def peak(self) -> tuple[bool, str]:
        proc = self.call("peak-bf16", [self.python, "-c", PEAK_CODE], self.env())
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        peak = max(found["tflops"].values())
        self.facts["peak_tflops"] = round(peak, 1)
        self.facts["peak_by_size"] = {k: round(v, 1) for k, v in found["tflops"].items()}
        probe = float(self.facts.get("probe_tflops") or 0.0)
        ratio = probe / peak if peak else 0.0
        self.facts["probe_over_peak"] = round(ratio, 3)
        return (
            ratio >= 0.6,
            f"probe {probe:.0f} / measured {peak:.0f} TFLOP/s = {ratio:.0%} (need 60%)",
        )

    def real_nccl(self) -> Path | None:
        linkage = _check(self.baseline, "linkage") or {}
        for lib in linkage.get("data", {}).get("libraries", []):
            if Path(lib["path"]).name.startswith("libnccl"):
                return Path(lib["path"])
        for root in self.site_dirs():
            found = sorted(glob.glob(f"{root}/nvidia/**/libnccl.so*", recursive=True))
            if found:
                return Path(found[0])
        return None

    def site_dirs(self) -> list[str]:
        code = (
            "import json, site\n"
            "print(json.dumps(site.getsitepackages() + [site.getusersitepackages()]))"
        )
        proc = self.call("site-dirs", [self.python, "-c", code], self.env())
        return [d for d in json.loads(proc.stdout) if os.path.isdir(d)]

    def stray_nccl(self, variable: str) -> tuple[bool, str]:
        real = self.real_nccl()
        if real is None:
            return False, "no libnccl found to copy"
        stray_dir = self.work / "stray-nccl"
        stray = stray_dir / "libnccl.so.2"
        if not stray.exists():
            stray_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(real, stray)
        if variable == "LD_LIBRARY_PATH":
            value = f"{stray_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":")
        else:
            value = str(stray)
        code, data = self.verify(f"fault-nccl-{variable.lower()}", self.env(**{variable: value}))
        linkage = _check(data, "linkage") or {}
        caught = (
            code == 1
            and not linkage.get("passed", True)
            and str(stray_dir) in linkage.get("detail", "")
        )
        detail = linkage.get("detail", data.get("reason"))
        note = f"exit {code}; linkage: {detail}; fix: {linkage.get('fix')}"
        if code == 0 and variable == "LD_LIBRARY_PATH" and "all from" in str(detail):
            # torch's preload opens its nvidia-nccl wheel's copy by absolute path before
            # anything searches LD_LIBRARY_PATH (torch 2.11 on an H200): the stray is never
            # mapped, and verify rightly passes and says every library came from the env.
            return True, f"not loaded (torch's preload kept {real}): " + note
        if code == 0:
            note = f"not planted (the loader kept {real}): " + note
        return caught, note

    def hidden_gpus(self) -> tuple[bool, str]:
        code, data = self.verify("fault-hidden-gpus", self.env(CUDA_VISIBLE_DEVICES=""))
        devices = _check(data, "devices") or {}
        caught = code == 1 and "hides every GPU" in devices.get("detail", "")
        return caught, f"exit {code}; devices: {devices.get('detail')}; fix: {devices.get('fix')}"

    def standin_site(self, name: str, config: dict[str, Any]) -> Path:
        site = self.work / name
        shutil.rmtree(site, ignore_errors=True)
        shutil.copytree(FAKE_TORCH, site, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
        (site / "torch" / "version.py").write_text(
            "from typing import Optional\n"
            f"__version__ = {config['version']!r}\ncuda: Optional[str] = {config['cuda']!r}\n",
            encoding="utf-8",
        )
        return site

    def locked(self, **changes: Any) -> Any:
        """Expectations as a lock for this machine's torch would give (from the baseline)."""
        from gpuenv.verify import Expectations

        found = (_check(self.baseline, "versions") or {}).get("data", {}).get("found", {})
        return Expectations(
            torch=found.get("torch"),
            cuda=found.get("cuda"),
            cudnn=found.get("cudnn"),
            nccl=found.get("nccl"),
            **changes,
        )

    def cpu_torch(self) -> tuple[bool, str]:
        """A CPU-only torch where the lock says CUDA (the stand-in plays the CPU wheel)."""
        from gpuenv.verify import run_probe

        version = str(self.locked().torch or "2.11.0").split("+")[0] + "+cpu"
        config = {"version": version, "cuda": None, "torchvision": None, "torchaudio": None}
        site = self.standin_site("cpu-torch", config)
        env = self.env(PYTHONPATH=str(site), GPUENV_FAKE_TORCH=json.dumps(config))
        result = run_probe(Path(self.python), self.locked(), env=env, timeout=120, isolated=False)
        (self.out / "fault-cpu-torch.json").write_text(
            json.dumps(result.to_json(), indent=2), encoding="utf-8"
        )
        devices = next((c for c in result.checks if c.name == "devices"), None)
        caught = not result.passed and devices is not None and "CPU-only build" in devices.detail
        # The contract: --python on a CPU build verifies it as a CPU build.
        code, data = self.verify("cpu-torch-as-cpu", env)
        # The stand-in shadows torch only: the machine's real torchvision and torchaudio
        # are still installed and cannot import against it, which verify rightly reports.
        failed = {c["name"] for c in data.get("checks", []) if not c.get("passed", True)}
        as_cpu = data.get("mode") == "cpu" and (
            code == 0 or (code == 1 and failed <= {"torchvision", "torchaudio"})
        )
        detail = devices.detail if devices else result.reason
        return caught and as_cpu, f"locked CUDA: {detail}; --python as CPU build: exit {code}"

    def bogus_cudnn(self) -> tuple[bool, str]:
        """A libcudnn.so.9 that is not cuDNN, first on LD_LIBRARY_PATH."""
        bogus_dir = self.work / "bogus-cudnn"
        bogus_dir.mkdir(parents=True, exist_ok=True)
        target = bogus_dir / "libcudnn.so.9"
        if not target.exists():
            shutil.copy2(_some_shared_object(self.python, self.work), target)
        value = f"{bogus_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":")
        how = "LD_LIBRARY_PATH"
        code, data = self.verify("fault-bogus-cudnn", self.env(LD_LIBRARY_PATH=value))
        if code == 0:  # an RPATH beat LD_LIBRARY_PATH: preload it (needs the stub's SONAME)
            how = "LD_PRELOAD"
            code, data = self.verify("fault-bogus-cudnn-preload", self.env(LD_PRELOAD=str(target)))
        failed = [
            f"{c['name']}: {c['detail'][:160]}" for c in data.get("checks", []) if not c["passed"]
        ]
        caught = code == 1 and data.get("passed") is False
        return caught, f"via {how}: exit {code}; " + (" | ".join(failed) or str(data.get("reason")))

    def cudnn_none(self) -> tuple[bool, str]:
        """cuDNN None (the stand-in plays a torch whose cuDNN did not load)."""
        from gpuenv.verify import run_probe

        base = self.locked()
        config = {
            "version": base.torch or "2.11.0",
            "cuda": base.cuda or "13.0",
            "cudnn": None,
            "driver_cuda": 13000,
            "torchvision": None,
            "torchaudio": None,
        }
        site = self.standin_site("cudnn-none", config)
        env = self.env(PYTHONPATH=str(site), GPUENV_FAKE_TORCH=json.dumps(config))
        result = run_probe(Path(self.python), base, env=env, timeout=120, isolated=False)
        (self.out / "fault-cudnn-none.json").write_text(
            json.dumps(result.to_json(), indent=2), encoding="utf-8"
        )
        cudnn = next((c for c in result.checks if c.name == "cudnn"), None)
        caught = not result.passed and cudnn is not None and "did not load" in cudnn.detail
        return (
            caught,
            f"cudnn: {cudnn.detail if cudnn else result.reason}; fix: {cudnn.fix if cudnn else ''}",
        )

    # ---- summary --------------------------------------------------------------------

    def summary(self) -> int:
        rows = [
            (s["step"], s["status"], f"{s['seconds']:.1f}", s["expected"], s["note"][:150])
            for s in self.steps
        ]
        headers = ("step", "result", "s", "expected", "observed")
        widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(4)]
        lines = [
            "  ".join(str(v).ljust(w) for v, w in zip(row[:4], widths, strict=False))
            + "  "
            + row[4]
            for row in [headers, *rows]
        ]
        facts = self.facts
        lines.append("")
        lines.append(
            f"bf16 product in the probe: {facts.get('probe_tflops')} TFLOP/s "
            f"({facts.get('probe_dtype')}); "
            f"measured peak {facts.get('peak_tflops')} TFLOP/s {facts.get('peak_by_size')}; "
            f"ratio {facts.get('probe_over_peak')}; full verify {facts.get('verify_wall_s')} s"
        )
        passed = all(s["ok"] for s in self.steps)
        good = sum(s["ok"] for s in self.steps)
        lines.append(f"{good} passed, {len(self.steps) - good} failed")
        text = "\n".join(lines)
        print("\n" + text, flush=True)
        (self.out / "summary.txt").write_text(text + "\n", encoding="utf-8")
        (self.out / "summary.json").write_text(
            json.dumps({"passed": passed, "steps": self.steps, "facts": facts}, indent=2),
            encoding="utf-8",
        )
        return 0 if passed else 1


def _check(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((c for c in data.get("checks", []) if c.get("name") == name), None)


def _some_shared_object(python: str, work: Path) -> Path:
    """A real shared object that is not cuDNN: a C stub when a compiler is here, else
    one of the interpreter's own extension modules."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc:
        source = work / "stub.c"
        source.write_text("int gpuenv_not_cudnn(void) { return 0; }\n", encoding="utf-8")
        out = work / "stub.so"
        argv = [cc, "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.9", "-o", str(out), str(source)]
        subprocess.run(argv, check=True, timeout=60)
        return out
    code = (
        "import importlib\n"
        "for n in ('_csv', '_json', '_bisect', '_heapq', '_random', 'math', 'select'):\n"
        "    f = getattr(importlib.import_module(n), '__file__', None)\n"
        "    if f and f.endswith('.so'):\n"
        "        print(f); break\n"
    )
    found = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return Path(found.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", required=True, help="the interpreter whose torch to verify")
    parser.add_argument("--gpuenv", required=True, help="how to run gpuenv (a command line)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", required=True)
    check = Check(parser.parse_args())
    check.step("verify-baseline", "exit 0 in < 30 s", check.baseline_verify)
    check.step("verify-table", "exit 0, the table", check.table_verify)
    check.step("peak-bf16", "probe >= 60% of measured bf16", check.peak)
    check.step(
        "stray-nccl-ld-library-path",
        "linkage fails, names the entry",
        lambda: check.stray_nccl("LD_LIBRARY_PATH"),
    )
    check.step(
        "stray-nccl-ld-preload",
        "linkage fails, names LD_PRELOAD",
        lambda: check.stray_nccl("LD_PRELOAD"),
    )
    check.step("hidden-gpus", "exit 1, says CUDA_VISIBLE_DEVICES", check.hidden_gpus)
    check.step(
        "cpu-only-torch", "fails vs a CUDA lock; --python verifies it as CPU", check.cpu_torch
    )
    check.step("bogus-libcudnn", "exit 1 (a check fails or the probe dies)", check.bogus_cudnn)
    check.step("cudnn-none", "cudnn check fails, names the libcudnn found", check.cudnn_none)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
