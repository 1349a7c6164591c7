"""Optional dependencies: what a command needs that ``pip install gpuenv`` leaves out.

conda-lock brings most of a full install's distributions (keyring, cryptography,
dulwich, gitpython, ...) for two uses, writing and reading ``conda-lock.yml``; it is the
``conda-lock`` extra. A command that needs a missing extra is bad input for this install
(exit 2), with the command that adds it.
"""

from __future__ import annotations

from gpuenv.errors import UsageError

# extra -> the top-level module it provides
EXTRAS = {"conda-lock": "conda_lock"}


def missing_extra(exc: ImportError, extra: str, needed_for: str) -> ImportError | UsageError:
    """What to raise for ``exc``, met importing ``extra``'s module: a UsageError naming the
    extra when the module is absent, else ``exc`` itself (a broken install, a bug)."""
    module = EXTRAS[extra]
    if not isinstance(exc, ModuleNotFoundError) or (exc.name or "").split(".")[0] != module:
        return exc
    return UsageError(
        f"{needed_for} needs {extra}, which this install of gpuenv does not have",
        hint=f"pip install 'gpuenv[{extra}]' (in the environment gpuenv runs from)",
    )
