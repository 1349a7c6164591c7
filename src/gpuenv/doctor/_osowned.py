"""What the operating system's package manager owns: an interpreter marked
``EXTERNALLY-MANAGED`` (PEP 668: pip refuses to change it) and the distributions a
dpkg package installed (Debian, Ubuntu: listed in ``/var/lib/dpkg/info/*.list``).

Fixes for those name the OS package manager or a venv, never a plain ``pip`` command
(which the interpreter refuses). The dpkg lists are read only when a check asks who
owns a path, once per diagnosis, with a bound on their number and size.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuenv.doctor._context import Context
from gpuenv.doctor._fsafe import is_file, read_text

MARKER = "EXTERNALLY-MANAGED"
_DPKG_INFO = "/var/lib/dpkg/info"
_MAX_LISTS = 20_000
_MAX_LIST_BYTES = 4 << 20


def externally_managed(ctx: Context) -> Path | None:
    """The environment's ``EXTERNALLY-MANAGED`` marker (beside its standard library)."""

    def find() -> Path | None:
        for lib in ("lib", "lib64"):
            try:
                names = sorted(e.name for e in os.scandir(ctx.env.prefix / lib))
            except OSError:
                continue
            for name in names:
                marker = ctx.env.prefix / lib / name / MARKER
                if name.startswith("python") and is_file(marker):
                    return marker
        return None

    return ctx.memo("externally-managed", find)


def _dpkg_paths(ctx: Context) -> dict[str, str]:
    """Every path a dpkg package lists -> the package."""
    info = ctx.request.host.path(_DPKG_INFO)
    owners: dict[str, str] = {}
    try:
        lists = sorted(e.name for e in os.scandir(info) if e.name.endswith(".list"))
        lists = lists[:_MAX_LISTS]
    except OSError:
        return owners
    for name in lists:
        text = read_text(info / name, _MAX_LIST_BYTES)
        package = name.removesuffix(".list").split(":", 1)[0]  # "python3-yaml:amd64"
        for line in (text or "").splitlines():
            if line.startswith("/"):
                owners.setdefault(line.rstrip("/"), package)
    return owners


def os_package(ctx: Context, path: Path) -> str | None:
    """The dpkg package that installed ``path``, if one did."""
    owners = ctx.memo("dpkg-paths", lambda: _dpkg_paths(ctx))
    return owners.get(str(path).rstrip("/")) or owners.get(os.path.realpath(path))
