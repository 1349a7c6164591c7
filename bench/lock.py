"""Warm-cache locking of the same inputs: `gpuenv lock` vs `uv pip compile
--generate-hashes` vs pip-compile (pip-tools), on the tests' local index.

The inputs: torch 2.4.1 (cu124 build), torchvision, torchaudio and transformers, for
Python 3.11 on x86_64. uv and pip-compile get the cu124 index as an extra index
(with uv's unsafe-best-match, so both indexes are considered as pip would);
gpuenv pins the torch family to that index. Issue budget: gpuenv within 1.3x of uv
and faster than pip-compile.

With --pypi (needs network) the same comparison runs against the default package
index instead: an H100 target on driver 535, where the chosen build (cu121) is PyPI's
own torch 2.4.1, so every tool takes everything from the default index.

Usage: .venv/bin/python bench/lock.py [--runs N] [--pypi]   (pip-compile: pip install pip-tools)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from _project import REQUIREMENTS, bench_index
from _timing import REPO, report, wall


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--pypi", action="store_true", help="lock against the default index")
    args = parser.parse_args()
    python = REPO / ".venv" / "bin" / "python"
    uv = REPO / ".venv" / "bin" / "uv"
    with tempfile.TemporaryDirectory() as tmp, bench_index(Path(tmp)) as bench:
        project = Path(tmp) / "project"
        project.mkdir()
        if args.pypi:
            spec = bench.spec("h100").replace("550.54.15", "535.104.05")
            spec = "\n".join(
                line
                for line in spec.splitlines()
                if not line.startswith(("index-url", "torch-index"))
            )
            (project / "gpuenv.toml").write_text(spec + "\n")
            (project / "requirements.in").write_text("\n".join(REQUIREMENTS) + "\n")
            indexes: list[str] = []
        else:
            (project / "gpuenv.toml").write_text(bench.spec("h100"))
            (project / "requirements.in").write_text(
                "\n".join(REQUIREMENTS).replace("torch==2.4.1", "torch==2.4.1+cu124") + "\n"
            )
            indexes = [
                "--index-url",
                bench.default_index,
                "--extra-index-url",
                f"{bench.torch_base}/cu124",
            ]
        lock = project / "gpuenv.lock"
        gpuenv = wall(
            ["sh", "-c", f"rm -f {lock} && {python} -m gpuenv lock"],
            runs=args.runs,
            env=bench.env,
            cwd=project,
        )
        relock = wall(
            [str(python), "-m", "gpuenv", "lock"], runs=args.runs, env=bench.env, cwd=project
        )
        uv_compile = wall(
            [
                str(uv),
                "pip",
                "compile",
                "--no-config",
                "--quiet",
                "requirements.in",
                "--generate-hashes",
                *indexes,
                "--index-strategy",
                "unsafe-best-match",
                "--python-version",
                "3.11",
                "--python-platform",
                "x86_64-manylinux_2_28",
                "-o",
                str(project / "uv.txt"),
            ],
            runs=args.runs,
            env=bench.env,
            cwd=project,
        )
        report("uv pip compile --generate-hashes", uv_compile)
        report("gpuenv lock (no lock file)", gpuenv, baseline=uv_compile)
        report("gpuenv lock (unchanged spec, pins kept)", relock, baseline=uv_compile)
        pip_compile = shutil.which("pip-compile", path=str(REPO / ".venv" / "bin"))
        if pip_compile:
            pip_tools = wall(
                [
                    pip_compile,
                    "--quiet",
                    "--generate-hashes",
                    *indexes,
                    "--output-file",
                    str(project / "pip.txt"),
                    "requirements.in",
                ],
                runs=max(3, args.runs // 3),
                env=bench.env,
                cwd=project,
            )
            report("pip-compile --generate-hashes", pip_tools, baseline=uv_compile)
            faster = statistics.median(gpuenv) < statistics.median(pip_tools)
            print(f"gpuenv lock {'faster' if faster else 'SLOWER'} than pip-compile")
        else:
            print("pip-compile: not installed (pip install pip-tools) - skipped")
        ratio = statistics.median(gpuenv) / statistics.median(uv_compile)
        print(
            f"gpuenv/uv ratio {ratio:.2f} ({'within' if ratio <= 1.3 else 'OVER'} the 1.3x budget)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
