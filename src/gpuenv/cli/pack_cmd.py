"""`gpuenv pack`: one archive with the lock and every artifact it names, for machines
without network (``gpuenv install --from``)."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output, _progress

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from gpuenv.pack import PackProgress, PackRequest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-t",
        "--target",
        action="append",
        metavar="NAME",
        help="pack this target (repeatable; default: every target in the lock)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        type=Path,
        help="the archive (default: NAME-TARGETS.gpuenv.tar)",
    )
    _common.add_json_flag(parser)


def _request(args: argparse.Namespace) -> PackRequest:
    from gpuenv import pack
    from gpuenv._artifacts import ArtifactSources
    from gpuenv.errors import UsageError
    from gpuenv.knowledge import knowledge_base
    from gpuenv.lock.format import LOCK_FILENAME, read_lock
    from gpuenv.pack._fetch import credentials_from
    from gpuenv.spec import load_spec

    spec_file = _common.spec_path(args)
    loaded = load_spec(spec_file, kb=knowledge_base, cache_dir=_common.cache_dir())
    lock = read_lock(spec_file.parent / LOCK_FILENAME, cache_dir=_common.cache_dir())
    if lock is None:
        raise UsageError(f"no {LOCK_FILENAME} beside {spec_file}", hint="run 'gpuenv lock' first")
    for name in args.target or ():
        _common.check_target(name, sorted(lock.targets))
    pip = loaded.spec.pip
    indexes = [pip.index_url, pip.torch_index, *pip.extra_index_urls]
    indexes += [_common.url_override(v) for v in ("GPUENV_INDEX_URL", "GPUENV_TORCH_INDEX")]
    return pack.PackRequest(
        lock=lock,
        targets=tuple(args.target) if args.target else tuple(sorted(lock.targets)),
        project=loaded.spec.project.name,
        spec_file=spec_file,
        store=_common.store(),
        sources=ArtifactSources(mirrors=_common.mirrors()),  # fetched as install would
        credentials=credentials_from(indexes),
    )


def run(args: argparse.Namespace) -> int:
    from gpuenv import pack
    from gpuenv._fs import output_path

    request = _request(args)
    output = args.output or Path(pack.default_name(request.project, request.targets))
    output = output_path(output, hint="name a file for the archive (-o FILE)")
    how = _progress.mode(args)
    with progress_display(bar=how == _progress.LIVE, lines=how == _progress.LINES) as report:
        plan = pack.prepare(request, report)
        count = len(plan.manifest.artifacts)
        if not args.json:
            fetched = f", {plan.downloaded} downloaded now" if plan.downloaded else ""
            size_text = pack.human_size(plan.size)
            _output.err(f"writing {output}: {size_text} ({count} artifacts{fetched})")
        size = pack.write(plan, output, report)
    if args.json:
        _output.emit_json(
            {
                "archive": str(output),
                "size_bytes": size,
                "targets": list(request.targets),
                "artifacts": count,
                "downloaded": plan.downloaded,
            }
        )
    else:
        targets = ", ".join(request.targets)
        _output.out(f"wrote {output} ({pack.human_size(size)}): targets {targets}")
        _output.out(f"  where there is no network: gpuenv install --from {output.name}")
    return 0


@contextmanager
def progress_display(*, bar: bool, lines: bool) -> Iterator[Callable[[PackProgress], None]]:
    """A rich progress bar on a terminal; else (``lines``) one plain line per phase and
    file downloaded; else nothing. Shared by pack and install --from."""
    if not bar:
        said: set[tuple[str, int]] = set()

        def plain(event: PackProgress) -> None:
            key = (event.phase, event.index)
            if lines and key not in said and event.phase in ("download", "unpack"):
                said.add(key)
                what = f"{event.index}/{event.count} {event.name}" if event.index else event.name
                _output.err(f"{event.phase}ing {what}")

        yield plain
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=_output.console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("", total=None)

        def update(event: PackProgress) -> None:
            where = f" {event.index}/{event.count}" if event.index else ""
            label = f"{event.phase}{where} {event.name}"
            progress.update(task, description=label, completed=event.done, total=event.total)

        yield update
