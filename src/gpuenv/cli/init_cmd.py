"""`gpuenv init`: write a commented starter gpuenv.toml."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _hardware, _output
from gpuenv.errors import SpecError, UsageError

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings

# The spec key each flag of init writes (the last part of a key path; a target's table
# name comes from --target, or from the GPU).
_FLAGS = {
    "name": "--name",
    "python": "--python",
    "torch": "--torch",
    "cuda": "--cuda",
    "gpu": "--gpu",
    "driver": "--driver",
    "dependencies": "--pip",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="project name (default: the directory's name)")
    parser.add_argument("--python", default="3.11", help="Python version (default: 3.11)")
    parser.add_argument(
        "--torch", default="*", help='torch version: "2.4" means 2.4.* (default: newest)'
    )
    parser.add_argument("--cuda", default="auto", help='CUDA build: "auto" or e.g. 12.4')
    parser.add_argument("--target", default=None, help="target name (default: from the GPU)")
    parser.add_argument("--gpu", help='GPU name ("H100", "RTX 4060 Ti"), or "none" for CPU')
    parser.add_argument("--driver", help="driver version on that machine, e.g. 550.54.15")
    parser.add_argument(
        "--detect",
        action="store_true",
        help="describe this machine: its GPU and driver, as 'gpuenv detect' finds them",
    )
    parser.add_argument(
        "--cpu",
        nargs="?",
        const="cpu",
        choices=("cpu", "pypi"),
        help="also add a CPU-only target; '--cpu pypi': with PyPI's default torch build "
        "(a CUDA build that runs on a CPU; no PyTorch index needed, several GB more)",
    )
    parser.add_argument(
        "--pip",
        nargs="+",
        action="extend",
        default=[],
        metavar="REQ",
        help='pip dependencies for [pip] dependencies, e.g. --pip "transformers>=4.44" accelerate',
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    _common.add_json_flag(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.starter import StarterOptions, options_for_machine, write_starter

    path = _common.spec_path(args)
    options = StarterOptions(
        name=args.name or path.resolve().parent.name,
        python=args.python,
        torch=args.torch,
        cuda=args.cuda,
        target=args.target,
        gpu=args.gpu,
        driver=args.driver,
        cpu_target=args.cpu is not None,
        cpu_build="pypi" if args.cpu == "pypi" else None,
        pip=tuple(args.pip),
    )
    if args.detect:
        if args.gpu or args.driver:
            raise UsageError("--detect reads the GPU and driver: do not also give --gpu/--driver")
        facts = _hardware.machine_facts()
        options = options_for_machine(options, facts)
        if not facts.gpus and not args.json:
            _output.err(
                f"gpuenv: no NVIDIA GPU here ({facts.no_gpu_reason}): the target is CPU-only"
            )
    try:
        written = write_starter(path, options, overwrite=args.force)
    except SpecError as exc:  # a value given on the command line: name its flag
        raise _flag_error(exc, path) from None
    if args.json:
        _output.emit_json({"written": str(path), "targets": written})
    else:
        _output.out(f"wrote {path} (targets: {', '.join(written)})")
        # -f new.toml: "gpuenv plan" alone would read ./gpuenv.toml, not the file written
        named = getattr(args, "file", None)
        _output.out(f"next: gpuenv -f {path} plan" if named else "next: gpuenv plan")
    return 0


def _flag_error(exc: SpecError, path: object) -> UsageError:
    """The starter init would write refused, said of the flags given (the file was
    never written, so no line of it is cited)."""
    lines = []
    for problem in exc.problems:
        key = re.sub(r"\[\d+\]$", "", problem.path.rsplit(".", 1)[-1].strip('"'))
        flag = _FLAGS.get(key)
        if flag is None and problem.path.startswith("targets."):
            flag = "--target (or the name taken from --gpu)"
        flag = flag or problem.path or "a flag"
        lines.append(f"{flag}: {problem.message}" + (f" ({problem.hint})" if problem.hint else ""))
    return UsageError(
        "\n".join(lines),
        hint=f"nothing was written to {path}; see 'gpuenv init --help'",
    )
