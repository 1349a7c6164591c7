"""Jupyter kernels for a project's targets: kernelspecs whose argv starts the kernel
through ``gpuenv run``, so the verification gate holds in a notebook too (a prefix not
verified on this machine is refused, exit 4, and the refusal is in Jupyter's log).

Where a kernelspec goes (Jupyter's own search path, ``jupyter kernelspec list``):

- by default the user's: ``$JUPYTER_DATA_DIR/kernels``, else
  ``$XDG_DATA_HOME/jupyter/kernels`` (``~/.local/share/jupyter/kernels``);
- ``--prefix DIR``: ``DIR/share/jupyter/kernels``, as ``jupyter kernelspec install
  --prefix`` (``--sys-prefix`` is the prefix of the Python running Jupyter).

A kernelspec written by gpuenv carries ``metadata.gpuenv`` (project, target); ``list``
and ``remove`` touch only those. ipykernel is never added silently: without it in the
target, ``install`` says how to add it (a dependency group).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuenv._fs import atomic_write_text, writing
from gpuenv.errors import UsageError

KERNEL_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")


@dataclass(frozen=True)
class Kernel:
    """One kernelspec gpuenv wrote: its name and folder, the project folder and target it
    starts through ``gpuenv run``, and the name Jupyter shows."""

    name: str
    directory: Path
    project: str
    target: str
    display_name: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "directory": str(self.directory),
            "project": self.project,
            "target": self.target,
            "display_name": self.display_name,
        }


def kernels_dir(environ: Mapping[str, str], prefix: Path | None = None) -> Path:
    if prefix is not None:
        return prefix / "share" / "jupyter" / "kernels"
    if environ.get("JUPYTER_DATA_DIR"):
        return Path(environ["JUPYTER_DATA_DIR"]) / "kernels"
    from gpuenv._home import home_dir
    from gpuenv._settings import env_dir

    data = env_dir(environ, "XDG_DATA_HOME") or str(Path(home_dir(environ)) / ".local/share")
    return Path(data) / "jupyter" / "kernels"


def default_name(project_name: str, target: str) -> str:
    """``gpuenv-<project>-<target>``, lower case (Jupyter's kernel names are)."""
    return re.sub(r"[^a-z0-9._-]+", "-", f"gpuenv-{project_name}-{target}".lower())[:64]


def kernelspec(
    spec_file: Path, target: str, display_name: str, gpuenv_argv: list[str] | None = None
) -> dict[str, object]:
    """The kernel.json: ipykernel started by ``gpuenv run`` in the target's prefix."""
    gpuenv = gpuenv_argv or [sys.executable, "-m", "gpuenv"]
    argv = [*gpuenv, "-f", str(spec_file), "run", "--target", target, "--"]
    argv += ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    return {
        "argv": argv,
        "display_name": display_name,
        "language": "python",
        "metadata": {"gpuenv": {"project": str(spec_file.parent), "target": target}},
    }


def has_ipykernel(prefix: str) -> bool:
    return any(Path(prefix).glob("lib/python3*/site-packages/ipykernel/__init__.py"))


def install(
    spec_file: Path,
    project_name: str,
    target: str,
    *,
    name: str | None,
    environ: Mapping[str, str],
    prefix: Path | None = None,
) -> Kernel:
    spec_file = Path(os.path.normpath(spec_file.absolute()))  # -f ../gpuenv.toml: one place
    kernel = default_name(project_name, target) if name is None else name
    if not KERNEL_NAME.match(kernel) or len(kernel) > 64:
        long = KERNEL_NAME.match(kernel) is not None
        raise UsageError(
            f"{kernel[:80]!r}{'...' if len(kernel) > 80 else ''} is not a kernel name"
            + (f": {len(kernel)} characters, 64 at most" if long else ""),
            hint="at most 64 lower-case letters, digits, '.', '_' and '-' (Jupyter's rule)",
        )
    directory = kernels_dir(environ, prefix) / kernel
    existing = _read(directory)
    display = f"{project_name} ({target})"
    here = str(spec_file.absolute().parent)
    if name is None and existing is not None and existing.project != here:
        # Another checkout of the project has the name: its kernel was replaced without a
        # word. This one gets its own, named for its path, shown with its folder.
        from gpuenv import _sha256

        kernel = f"{kernel[:55]}-{_sha256.hexdigest(here.encode())[:8]}"  # 64 at most
        directory = kernels_dir(environ, prefix) / kernel
        existing = _read(directory)
        display = f"{project_name} ({target}, {Path(here).name})"
    if name is not None and existing is not None and existing.project != here:
        # The name asked for is another project's kernel: it would start this one.
        raise UsageError(
            f"kernel {kernel} starts {existing.display_name} of {existing.project}: not "
            "replacing it",
            hint=f"choose another --name, or 'gpuenv kernel remove {kernel}' first",
        )
    if directory.exists() and existing is None:
        raise UsageError(
            f"{directory} is a kernel gpuenv did not write: not replacing it",
            hint="choose another name with --name",
        )
    body = kernelspec(spec_file.absolute(), target, display)
    with writing(directory, "the kernelspec"):
        directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / "kernel.json", json.dumps(body, indent=1) + "\n")
    return Kernel(kernel, directory, str(spec_file.absolute().parent), target, display)


def _read(directory: Path) -> Kernel | None:
    """The gpuenv kernel in ``directory`` (None: none, or not gpuenv's)."""
    from gpuenv import _fsread
    from gpuenv.errors import InputFileError

    try:
        data = _fsread.load_json(directory / "kernel.json", what="kernelspec")
    except (OSError, InputFileError):
        return None
    meta = data.get("metadata", {}) if isinstance(data, dict) else {}
    info = meta.get("gpuenv") if isinstance(meta, dict) else None
    if not isinstance(data, dict) or not isinstance(info, dict):
        return None
    project, target = info.get("project"), info.get("target")
    display = data.get("display_name")
    if not (isinstance(project, str) and isinstance(target, str) and isinstance(display, str)):
        return None
    return Kernel(directory.name, directory, project, target, display)


def listing(environ: Mapping[str, str], prefix: Path | None = None) -> list[Kernel]:
    root = kernels_dir(environ, prefix)
    try:
        entries = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    return [k for k in (_read(p) for p in entries) if k is not None]


def remove(name: str, environ: Mapping[str, str], prefix: Path | None = None) -> Kernel:
    if not KERNEL_NAME.match(name):  # never a path: "../x" names no kernel directory
        raise UsageError(
            f"{name!r} is not a kernel name",
            hint="see 'gpuenv kernel list' for the names of gpuenv's kernels",
        )
    directory = kernels_dir(environ, prefix) / name
    kernel = _read(directory)
    if kernel is None:
        raise UsageError(
            f"no gpuenv kernel {name!r} in {directory.parent}", hint="see 'gpuenv kernel list'"
        )
    with writing(directory, "the kernelspec"):
        if directory.is_symlink():  # the entry is the link: what it points to is not ours
            directory.unlink()
        else:
            shutil.rmtree(directory)
    return kernel


def environ_of() -> dict[str, str]:
    return dict(os.environ)
