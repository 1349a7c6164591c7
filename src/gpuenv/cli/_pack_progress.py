"""The progress of an archive's artifacts (bytes downloaded or unpacked), shown the
same way by ``gpuenv pack`` and ``gpuenv install --from``: its own module so that
neither command imports the other."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from gpuenv.cli import _output

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from gpuenv.pack import PackProgress


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
