"""`gpuenv pack`: one archive with the lock and every artifact it names, for machines
without network (``gpuenv install --from``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv.cli import _common, _output, _progress
from gpuenv.cli._pack_progress import progress_display
from gpuenv.errors import UsageError

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.pack import PackRequest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_target_flag(
        parser,
        what="pack this target (repeatable; default: every target in the lock)",
        repeatable=True,
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
    from gpuenv._fetch import credentials_from

    spec_file = _common.spec_path(args)
    loaded, lock = _common.load_locked(args)
    for name in args.target or ():
        _common.check_target(name, sorted(lock.targets))
    pip = loaded.spec.pip
    indexes = [pip.index_url, pip.torch_index, *pip.extra_index_urls]
    indexes += [_common.url_override(v) for v in ("GPUENV_INDEX_URL", "GPUENV_TORCH_INDEX")]
    return pack.PackRequest(
        lock=lock,
        # -t cpu -t cpu is one target (the archive listed it twice)
        targets=tuple(dict.fromkeys(args.target)) if args.target else tuple(sorted(lock.targets)),
        project=loaded.spec.project.name,
        spec_file=spec_file,
        store=_common.store(),
        sources=ArtifactSources(mirrors=_common.mirrors()),  # fetched as install would
        credentials=credentials_from(indexes),
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuenv import pack
    from gpuenv._fs import output_path

    if _common.is_stdout(args.output):
        raise UsageError(
            "an archive is not written to stdout (-o -): it is checked and renamed into "
            "place once complete",
            hint="name a file: gpuenv pack -o env.gpuenv.tar",
        )
    request = _request(args)
    output = args.output or Path(pack.default_name(request.project, request.targets))
    output = output_path(output, hint="name a file for the archive (-o FILE)")
    how = _progress.mode(args)
    cost = pack.pack_budget(request, output)  # said, and the disk checked, before starting
    if not args.json:
        _output.err(
            f"packing {output}: {cost.download.count} artifacts not in the store yet "
            f"({cost.download.shown}); the archive takes about {pack.human_size(cost.archive)}"
        )
    with (
        request.store.using_artifacts(),  # gc prunes none of them while the archive is made
        progress_display(bar=how == _progress.LIVE, lines=how == _progress.LINES) as report,
    ):
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
