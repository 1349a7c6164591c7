"""`gpuenv import PATH...`: reproduce a published environment on this hardware."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _hardware, _output, _progress
from gpuenv.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuenv.cli._common import Settings
    from gpuenv.import_check import ResolveCheck
    from gpuenv.importers import Reproduction, TargetRequest, WheelIndex


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="environment files (environment.yml, requirements.txt, pyproject.toml, setup.py, "
        "Dockerfile, conda-lock.yml, pip freeze / conda env export / collect_env output, "
        "cog.yaml) or a repository folder to search",
    )
    parser.add_argument("--gpu", help='the GPU to reproduce on ("H100", "RTX 4090"), or "none"')
    parser.add_argument("--driver", help="the NVIDIA driver on that machine, e.g. 550.54.15")
    parser.add_argument(
        "--detect", action="store_true", help="reproduce on this machine's GPU and driver"
    )
    parser.add_argument("--target", dest="target_name", metavar="NAME", help="the target's name")
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="where to write (default: ./gpuenv.toml)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    parser.add_argument(
        "--prefer",
        action="append",
        default=[],
        metavar="FILE",
        help="where the files disagree, this one wins (repeatable; see the precedence rules)",
    )
    parser.add_argument(
        "--check-resolves",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask the package index which Pythons every pin has wheels for, choose the "
        "nearest to the paper's where they all do, then resolve the written pip dependencies "
        "with uv before writing and report what fails (exit 1, the spec still written); "
        "where the PyTorch index cannot be reached, a GPU target's torch is PyPI's own build "
        "(default; the index is $GPUENV_INDEX_URL, else uv's default; "
        "GPUENV_IMPORT_INDEX=off turns it off; an unreachable index is reported, not fatal)",
    )
    parser.add_argument(
        "--torch-builds",
        choices=TORCH_BUILDS,
        default=None,
        help="which torch builds a GPU target may take: 'pypi' (PyPI's own only: the lock "
        "then needs no PyTorch index, for a cluster that reaches PyPI only), 'any', or "
        "'auto' (the default, or $GPUENV_IMPORT_TORCH_BUILDS: 'pypi' where the PyTorch "
        "index answers no request from here, asked once when --check-resolves may use the "
        "network, else 'any')",
    )
    _common.add_json_flag(parser)


def _target(args: argparse.Namespace) -> TargetRequest:
    from gpuenv.importers import TargetRequest

    if args.detect:
        if args.gpu or args.driver:
            raise UsageError("--detect reads the GPU and driver: do not also give --gpu/--driver")
        from gpuenv.starter import StarterOptions, options_for_machine

        options = options_for_machine(StarterOptions(name="import"), _hardware.machine_facts())
        return TargetRequest(
            args.target_name, options.gpu, options.driver, options.compute_capability
        )
    if args.gpu is None:
        raise UsageError(
            "say which machine to reproduce on",
            hint="pass --gpu NAME --driver VERSION, --detect, or --gpu none",
        )
    if args.gpu.lower() == "none":
        if args.driver:
            raise UsageError("--gpu none plans a CPU build: do not also give --driver")
        return TargetRequest(args.target_name, "none", None)
    if not args.driver:
        raise UsageError(f"--gpu {args.gpu} needs --driver VERSION (nvidia-smi's first line)")
    return TargetRequest(args.target_name, args.gpu, args.driver)


def _wheel_index(announce: Callable[[str], None]) -> WheelIndex | None:
    """The index ``--check-resolves`` asks: GPUENV_IMPORT_INDEX (``off``: none), else
    GPUENV_INDEX_URL, else the one uv uses when none is configured (as uv states it);
    None when none can be had."""
    from gpuenv.errors import ExternalToolError
    from gpuenv.importers import WheelIndex

    if (_common.env_override("GPUENV_IMPORT_INDEX") or "").lower() == "off":
        return None
    index = _common.url_override("GPUENV_IMPORT_INDEX") or _common.url_override("GPUENV_INDEX_URL")
    if index is None:
        from gpuenv.lock.uv import UvResolver

        try:
            index = UvResolver().stated_default_index()  # it resolves nothing to wait for
        except ExternalToolError:
            return None
    if index is None or not index.startswith(("http://", "https://")):
        return None
    return WheelIndex(index, _common.cache_dir(), announce=announce)


TORCH_BUILDS = ("auto", "pypi", "any")
TORCH_BUILDS_VARIABLE = "GPUENV_IMPORT_TORCH_BUILDS"


def _pypi_only(args: argparse.Namespace, target: TargetRequest, network: bool) -> str | None:
    """Why a GPU target's torch is chosen among PyPI's own builds (the report's words),
    or None: ``--torch-builds``, else $GPUENV_IMPORT_TORCH_BUILDS, else ``auto`` (the
    PyTorch index asked once, where the import may use the ``network``)."""
    mode = args.torch_builds
    if mode is None:
        mode = (_common.env_override(TORCH_BUILDS_VARIABLE) or "auto").lower()
        if mode not in TORCH_BUILDS:
            raise UsageError(
                f"{TORCH_BUILDS_VARIABLE}={mode!r} is not one of {', '.join(TORCH_BUILDS)}",
                hint=f"unset it, or set one of {', '.join(TORCH_BUILDS)}",
            )
    if target.cpu or mode == "any":
        return None
    if mode == "pypi":
        source = "--torch-builds pypi" if args.torch_builds else f"{TORCH_BUILDS_VARIABLE}=pypi"
        return f"{source} asks for PyPI's own builds"
    down = _torch_index_down() if network else None
    return f"the PyTorch index ({down}) cannot be reached from here" if down else None


def _torch_index_down() -> str | None:
    """The PyTorch index (GPUENV_TORCH_INDEX, else PyTorch's own, through the configured
    mirrors), shown redacted, when it cannot be reached from here: its CPU torch page,
    which every release has, gets no HTTP answer at all. None when it answers (any
    status: a 401 or 404 is an index that is there) or the mirrors cannot be read."""
    from gpuenv._network import Index
    from gpuenv._redact import redact_url
    from gpuenv.errors import GpuenvError
    from gpuenv.lock._probe import page_status
    from gpuenv.plan import DEFAULT_TORCH_INDEX

    base = (_common.url_override("GPUENV_TORCH_INDEX") or DEFAULT_TORCH_INDEX).rstrip("/")
    try:
        index = Index.parse("torch", _common.mirrors().fetch_url(f"{base}/cpu"))
    except GpuenvError:  # lock says what is wrong with the mirror configuration
        return None
    if page_status(f"{index.url.rstrip('/')}/torch/", index) is not None:
        return None
    return redact_url(index.url.rsplit("/", 1)[0])


def _last_commit(root: Path, file: str) -> float | None:
    """When ``file`` (relative to ``root``) last changed in its git checkout; None when
    it is not in one, or git is missing. Hooks and fsmonitor are turned off."""
    from gpuenv import _proc
    from gpuenv.errors import ExternalToolError

    argv = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"]
    argv += ["-C", str(root), "log", "-1", "--format=%ct", "--", file]
    try:
        result = _proc.run(argv, timeout=10, check=False, what="git log")
    except ExternalToolError:
        return None
    text = result.stdout.strip()
    return float(text) if result.returncode == 0 and text.isdigit() else None


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv.importers import ImportRequest, reproduce
    from gpuenv.importers.report import render_markdown
    from gpuenv.importers.write import write_spec
    from gpuenv.knowledge import knowledge_base
    from gpuenv.knowledge.foreign import foreign_knowledge

    for name in args.prefer:
        if not name.strip():  # Path("") is "." and was said so
            raise UsageError(f"--prefer {name!r}: an empty file name", hint="name a file read")
    target = _target(args)
    to_stdout = _common.is_stdout(args.output)  # -o -: the spec on stdout, the report on stderr
    if to_stdout and args.json:
        raise UsageError("--json and -o - both want stdout", hint="name a file with -o")
    output = Path(args.output) if args.output else Path.cwd() / "gpuenv.toml"
    if not to_stdout and output.is_dir():
        raise UsageError(f"{output} is a directory", hint="name a file: -o FILE")
    if not to_stdout and output.exists() and not args.force:
        raise UsageError(f"{output} already exists", hint="pass --force to replace it, or -o FILE")
    if not to_stdout:
        _refuse_unwritable(output)
    kb = knowledge_base()
    with _progress.display(args) as progress:
        wheels = _wheel_index(progress) if args.check_resolves else None
        pypi_only = _pypi_only(args, target, wheels is not None and wheels.failure is None)
        request = ImportRequest(
            tuple(Path(p) for p in args.paths),
            target,
            kb,
            foreign_knowledge(),
            wheels,
            tuple(Path(p) for p in args.prefer),
            _last_commit,
            pypi_only=pypi_only,
        )
        result = reproduce(request)
        check = _check_resolves(result, wheels, progress, settings.cache_dir)  # before writing
        if check is not None and wheels is not None:
            from gpuenv.import_check import settle

            result, check = settle(request, result, check, wheels.index, settings.cache_dir)
    code = 1 if check is not None and check.resolves is False else 0
    report = render_markdown(result.report) + _check_text(check)
    if to_stdout:
        _output.err(report)
        sys.stdout.write(result.spec_text)
        sys.stdout.flush()
        return code
    write_spec(result.spec_text, output, kb, force=args.force)
    if args.json:
        resolution = check.to_json() if check is not None else None
        payload = {"written": str(output), **result.report.to_json()}
        _output.emit_json(
            {**payload, "resolves": check and check.resolves, "resolution": resolution}
        )
    else:
        _output.out(report)
        _output.out(f"wrote {output}")
        if code:
            _output.out(
                "next: change the pins named above, then gpuenv -f " + str(output) + " lock"
            )
        else:
            _output.out("next: gpuenv -f " + str(output) + " plan")
    return code


def _refuse_unwritable(output: Path) -> None:
    """A folder the spec cannot be written in is refused before the index is asked and
    uv resolves (a minute, on a slow index), not after: its nearest existing folder must
    be writable (write_spec makes the missing ones). What access() cannot tell (root in
    a folder that refuses new files) write_spec still refuses."""
    import os

    folder = output.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{output}: cannot write in {folder}", hint="pass -o with a writable path")


def _check_resolves(
    result: Reproduction,
    wheels: WheelIndex | None,
    announce: Callable[[str], None],
    cache_dir: Path | None,
) -> ResolveCheck | None:
    """``--check-resolves``: uv's resolution of the pip dependencies about to be written
    (None when the check is off), in the uv cache ``gpuenv lock`` reads next."""
    if wheels is None:
        return None
    from gpuenv._redact import redact_url
    from gpuenv.import_check import check_reproduction

    if wheels.failure is None:
        announce(f"resolving the pip dependencies with uv on {redact_url(wheels.index)}")
    return check_reproduction(result, wheels.index, wheels.failure, cache_dir)


def _check_text(check: ResolveCheck | None) -> str:
    if check is None:
        return ""
    from gpuenv.import_check import render_markdown

    return "\n" + render_markdown(check)
