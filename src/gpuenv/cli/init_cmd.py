"""`gpuenv init`: write a commented starter gpuenv.toml."""

from __future__ import annotations

import argparse

from gpuenv.cli import _common, _output


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
    parser.add_argument("--cpu", action="store_true", help="also add a CPU-only target")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    _common.add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    from gpuenv.starter import StarterOptions, write_starter

    path = _common.spec_path(args)
    options = StarterOptions(
        name=args.name or path.resolve().parent.name,
        python=args.python,
        torch=args.torch,
        cuda=args.cuda,
        target=args.target,
        gpu=args.gpu,
        driver=args.driver,
        cpu_target=args.cpu,
    )
    written = write_starter(path, options, overwrite=args.force)
    if args.json:
        _output.emit_json({"written": str(path), "targets": written})
    else:
        _output.out(f"wrote {path} (targets: {', '.join(written)})")
        _output.out("next: gpuenv plan")
    return 0
