"""What every activation script does, in the order it does it, written once; each
shell's emitter (``_posix``, ``_fish``) gives the syntax and the pieces that differ (as
rattler's ``Shell`` trait: a few required methods, the structure shared).

The script: if another prefix is active on top of this one, say so and stop; else
define ``gpuenv_deactivate`` (refusing when this prefix is not the active one, then
restoring), and, unless this prefix is already active, record and activate.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

from gpuenv.activation._ops import (
    Layout,
    Op,
    PrependPath,
    Prompt,
    SetVar,
    Source,
    UnsetVar,
    indent,
)
from gpuenv.errors import ActivationError


class ShellEmitter(ABC):
    """Turns ops into one shell's text; decides nothing."""

    shell: str
    extension: str
    header: tuple[str, ...]
    source: str  # the command that runs a script in this shell: "." or "source"
    end_if: str  # what closes an ``if``

    # -- the shell's syntax

    @abstractmethod
    def quote(self, value: str) -> str:
        """``value`` as a literal nothing inside is expanded."""

    @abstractmethod
    def if_(self, condition: str) -> str:
        """The line opening an ``if`` on ``condition``."""

    @abstractmethod
    def both(self, first: str, second: str) -> str:
        """A condition true when both are."""

    @abstractmethod
    def is_set(self, name: str) -> str:
        """A condition: the variable is set (maybe empty)."""

    @abstractmethod
    def not_active(self, prefix: str) -> str:
        """A condition: the active prefix is not ``prefix`` (quoted)."""

    @abstractmethod
    def has_function(self, name: str) -> str:
        """A condition: the function is defined."""

    @abstractmethod
    def function(self, name: str) -> tuple[str, str]:
        """The lines opening and closing a function's definition."""

    @abstractmethod
    def set_var(self, name: str, value: str) -> str:
        """Set and export ``name`` to ``value`` (quoted)."""

    @abstractmethod
    def unset_var(self, name: str) -> str:
        """Unset ``name``."""

    # -- the pieces that differ beyond syntax

    @abstractmethod
    def _restore_all(self, layout: Layout) -> list[str]:
        """Deactivation once it knows this prefix is the active one."""

    @abstractmethod
    def _record(self, layout: Layout) -> list[str]:
        """Activation's first lines: the records of every variable it touches."""

    @abstractmethod
    def _mark_active(self, layout: Layout) -> list[str]:
        """Activation's last lines: the prefix marked active."""

    @abstractmethod
    def _prompt(self, op: Prompt, layout: Layout) -> list[str]: ...

    @abstractmethod
    def _prepend(self, op: PrependPath) -> list[str]: ...

    # -- the structure

    def emit(self, ops: Sequence[Op]) -> str:
        """The whole activation script (ops must start with a ``Guard``)."""
        layout = Layout.of(ops)
        not_active = self.not_active(self.quote(layout.guard.prefix))
        lines = [
            *self.header,
            "",
            self.if_(self.both(not_active, self.is_set(layout.unset_list))),
            f"    printf '%s\\n' {self.quote(layout.beneath_message)} >&2",
            "else",
            *indent(self._deactivate_function(layout)),
            "",
            f"    {self.if_(not_active)}",
            *indent(self._activate(layout), 2),
            f"    {self.end_if}",
            self.end_if,
        ]
        return "\n".join(lines) + "\n"

    def conda_activate_hook(self, script: Path) -> str:
        """Text for ``etc/conda/activate.d``: source ``script``."""
        return f"# gpuenv: activate with conda\n{self.source} {self.quote(str(script))}\n"

    def conda_deactivate_hook(self) -> str:
        """Text for ``etc/conda/deactivate.d``: call ``gpuenv_deactivate`` if defined."""
        lines = [
            "# gpuenv: deactivate with conda",
            self.if_(self.has_function("gpuenv_deactivate")),
            "    gpuenv_deactivate",
            self.end_if,
        ]
        return "\n".join(lines) + "\n"

    def _deactivate_function(self, layout: Layout) -> list[str]:
        opening, closing = self.function("gpuenv_deactivate")
        return [
            opening,
            f"    {self.if_(self.not_active(self.quote(layout.guard.prefix)))}",
            f"        printf '%s\\n' {self.quote(layout.not_active_message)} >&2",
            "        return 1",
            f"    {self.end_if}",
            *indent(self._restore_all(layout)),
            closing,
        ]

    def _activate(self, layout: Layout) -> list[str]:
        lines = self._record(layout)
        for op in layout.body:
            lines += self._op(op, layout)
        return [*lines, *self._mark_active(layout)]

    def _op(self, op: Op, layout: Layout) -> list[str]:
        if isinstance(op, SetVar):
            return [self.set_var(op.name, self.quote(op.value))]
        if isinstance(op, UnsetVar):
            return [self.unset_var(op.name)]
        if isinstance(op, Source):
            return [f"{self.source} {self.quote(op.path)}"]
        if isinstance(op, Prompt):
            return self._prompt(op, layout)
        if isinstance(op, PrependPath):
            return self._prepend(op)
        raise ActivationError(f"{type(op).__name__} cannot appear after the Guard")
