"""`gpuenv add PKG` against `uv add PKG` on the same project (torch 2.4.1 CPU build and
transformers, the tests' local index on loopback): each edits its file, relocks and
installs the result. Run alternately (uv, gpuenv, gpuenv, uv, ...) so the machine's
load falls on both alike; medians, the same-run ratio and the load printed.

Before each timed run (untimed) both projects are put back as they were: the spec or
pyproject and the lock restored, uv's .venv synced back, and gpuenv's prefix for the
added package removed from the store, so every gpuenv run installs a whole new prefix
(its store is content-addressed: a prefix is never changed in place) while uv adds one
package to its existing .venv. Warm caches for both (each installed once before).

Also measured: `gpuenv install` of a project whose compiled tree is unchanged (no
build: the editable project is current) next to a plain `gpuenv install` of the same
prefix without a project.

Target (issue 22): gpuenv add <= 1.3x uv add.

Usage: .venv/bin/python bench/add.py [--runs N] [--package NAME]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _project import bench_index
from _timing import REPO, alternate, compiled, interpreter, load, ratio, report

PYPROJECT = """[project]
name = "bench-uv"
version = "0"
requires-python = "==3.11.*"
dependencies = ["torch==2.4.1", "transformers>=4.44"]

[tool.uv]
environments = ["sys_platform == 'linux' and platform_machine == 'x86_64'"]

[[tool.uv.index]]
name = "default"
url = "{default}"
default = true

[[tool.uv.index]]
name = "torch-cpu"
url = "{torch}/cpu"
explicit = true

[tool.uv.sources]
torch = {{ index = "torch-cpu" }}
"""

SPEC = """[project]
name = "bench"
path = false

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = false
torchaudio = false

[targets.cpu]
gpu = "none"

[pip]
index-url = "{default}"
torch-index = "{torch}"
dependencies = ["transformers>=4.44"]
"""


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--package", default="anyio")
    args = parser.parse_args()
    compiled()
    python = interpreter()
    uv = str(REPO / ".venv" / "bin" / "uv")
    base = str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}")
    with tempfile.TemporaryDirectory() as tmp, bench_index(Path(tmp)) as bench:
        work = Path(tmp)
        env = {**bench.env, "UV_PYTHON": base, "UV_PYTHON_DOWNLOADS": "never"}
        ours, theirs = work / "gpuenv-project", work / "uv-project"
        ours.mkdir()
        theirs.mkdir()
        (ours / "gpuenv.toml").write_text(
            SPEC.format(default=bench.default_index, torch=bench.torch_base)
        )
        (theirs / "pyproject.toml").write_text(
            PYPROJECT.format(default=bench.default_index, torch=bench.torch_base)
        )
        gpuenv = [python, "-m", "gpuenv"]
        _run([*gpuenv, "install"], env, ours)
        _run([uv, "sync", "--no-config"], env, theirs)
        saved = {p: p.read_bytes() for p in (ours / "gpuenv.toml", ours / "gpuenv.lock")}
        saved.update({p: p.read_bytes() for p in (theirs / "pyproject.toml", theirs / "uv.lock")})
        first_prefix = (ours / ".gpuenv" / "cpu").resolve()

        def reset_gpuenv() -> None:
            for path in (ours / "gpuenv.toml", ours / "gpuenv.lock"):
                path.write_bytes(saved[path])
            current = (ours / ".gpuenv" / "cpu").resolve()
            _run([*gpuenv, "install"], env, ours)  # back to the first prefix (exists: a link)
            if current != first_prefix:
                shutil.rmtree(current, ignore_errors=True)  # the next add builds it anew

        def reset_uv() -> None:
            for path in (theirs / "pyproject.toml", theirs / "uv.lock"):
                path.write_bytes(saved[path])
            _run([uv, "sync", "--no-config"], env, theirs)

        times = {}
        for name, argv, cwd in (
            ("uv add", [uv, "add", "--no-config", args.package], theirs),
            ("gpuenv add", [*gpuenv, "add", args.package], ours),
        ):
            times[name] = (argv, cwd)
        measured: dict[str, list[float]] = {}
        # alternate() takes one cwd: run each tool through `sh -c 'cd DIR && ...'`.
        commands = {
            name: ["sh", "-c", f'cd "{cwd}" && exec "$@"', "sh", *argv]
            for name, (argv, cwd) in times.items()
        }
        measured = alternate(
            commands,
            runs=args.runs,
            env=env,
            before={"uv add": reset_uv, "gpuenv add": reset_gpuenv},
        )
        print(f"gpuenv add {args.package} vs uv add {args.package}; {load()}")
        report("uv add (edit, relock, sync .venv)", measured["uv add"])
        report(
            "gpuenv add (edit, relock, new prefix)",
            measured["gpuenv add"],
            baseline=measured["uv add"],
        )
        print(f"ratio gpuenv/uv: {ratio(measured['gpuenv add'], measured['uv add']):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
