"""What long work tells whoever shows its progress.

The library reports through a plain callable: ``progress("cpu: resolving pip packages")``
starts a *phase* (a step that may take seconds: a resolution, a download, a build, a
check of the probe). A phase may also have *details* that change often (a build's
current compile step): ``detail(progress, text)``, which reaches the display only when
it can show them (a terminal) and is dropped otherwise, so a log gets one line per
phase. ``failed(progress)`` says the current phase failed while the work goes on (a
check of the probe, one target of several), so the display does not mark it done.
The CLI decides how (or whether) any of it is drawn; the library never prints.
Standard library only, nothing imported.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def detail(progress: Callable[[str], None], text: str) -> None:
    """A detail of the current phase: shown live where the display can, else dropped."""
    show = getattr(progress, "detail", None)
    if callable(show):
        show(text)


def failed(progress: Callable[[str], None]) -> None:
    """The current phase failed, and the work goes on: where the display marks finished
    phases, it marks this one failed."""
    show = getattr(progress, "failed", None)
    if callable(show):
        show()


class Prefixed:
    """``progress`` with every message (phases and details) prefixed, e.g. by a target's
    name: unlike a lambda, it keeps the display's ``detail``."""

    __slots__ = ("_inner", "_prefix")

    def __init__(self, inner: Callable[[str], None], prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    def __call__(self, text: str) -> None:
        self._inner(self._prefix + text)

    def detail(self, text: str) -> None:
        detail(self._inner, self._prefix + text)

    def failed(self) -> None:
        failed(self._inner)
