"""Find the environment to examine and take its inventory, by reading files only.

The inventory is cheap on purpose: one ``scandir`` per site-packages directory (dist-info
directory names carry name and version), the ``conda-meta/*.json`` records, and torch's
``version.py``. RECORD, INSTALLER and METADATA files are read later, and only for the
few distributions a check needs.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gpuenv.errors import UsageError
from gpuenv.versions import CudaVersion, VersionFormatError

_DIST_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+?)(?:-py\d.*)?\.(?:dist|egg)-info$")
_ASSIGN_RE = re.compile(r"^(?P<key>\w+)\s*(?::[^=]*)?=\s*(?P<value>.+)$")
_PYTHON_QUERY = (
    "import json, sys, sysconfig; p = sysconfig.get_paths(); "
    "print(json.dumps({'prefix': sys.prefix, 'executable': sys.executable, "
    "'site': sorted({p['purelib'], p['platlib']})}))"
)


@dataclass(frozen=True)
class Dist:
    """One ``*.dist-info`` (or ``*.egg-info``) directory."""

    name: str  # canonical (PEP 503) name
    version: str
    path: Path

    @property
    def site_packages(self) -> Path:
        return self.path.parent

    def installer(self) -> str | None:
        try:
            return (self.path / "INSTALLER").read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def local_tag(self) -> str | None:
        return local_tag(self.version)


@dataclass(frozen=True)
class CondaPackage:
    name: str
    version: str
    build: str
    channel: str
    meta: Path
    files: tuple[str, ...]


@dataclass(frozen=True)
class TorchInfo:
    """What torch's ``version.py`` says, read without importing torch."""

    version: str
    cuda: CudaVersion | None
    hip: str | None
    version_file: Path

    @property
    def public(self) -> str:
        return self.version.split("+", 1)[0]

    @property
    def tag(self) -> str:
        """The build's wheel tag: ``cu124``, ``cpu``, ``rocm6.1``."""
        local = local_tag(self.version)
        if local and (local.startswith(("cu", "rocm")) or local == "cpu"):
            return local
        if self.cuda is not None:
            return self.cuda.tag
        return f"rocm{self.hip}" if self.hip else "cpu"

    @property
    def lib_dir(self) -> Path:
        return self.version_file.parent / "lib"


@dataclass(frozen=True)
class Environment:
    prefix: Path
    kind: str  # "conda" | "venv" | "system"
    python: Path | None
    site_packages: tuple[Path, ...]
    dists: tuple[Dist, ...]
    conda_packages: tuple[CondaPackage, ...]
    torch: TorchInfo | None
    conda_base: bool

    def dist(self, name: str) -> Dist | None:
        wanted = canonicalize_name(name)
        return next((d for d in self.dists if d.name == wanted), None)

    def conda(self, name: str) -> CondaPackage | None:
        return next((p for p in self.conda_packages if p.name == name), None)

    def summary(self) -> dict[str, Any]:
        torch = self.torch
        return {
            "prefix": str(self.prefix),
            "kind": self.kind,
            "python": str(self.python) if self.python else None,
            "site_packages": [str(p) for p in self.site_packages],
            "conda_base": self.conda_base,
            "distributions": len(self.dists),
            "conda_packages": len(self.conda_packages),
            "torch": None
            if torch is None
            else {
                "version": torch.version,
                "cuda": str(torch.cuda) if torch.cuda else None,
                "build": torch.tag,
                "version_file": str(torch.version_file),
            },
        }


def local_tag(version: str) -> str | None:
    return version.split("+", 1)[1] if "+" in version else None


def public_version(version: str) -> Version | None:
    try:
        return Version(version.split("+", 1)[0])
    except InvalidVersion:
        return None


# --- locating -------------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    prefix: Path
    python: Path | None
    site_packages: tuple[Path, ...]


def locate(
    *,
    prefix: Path | None,
    python: Path | None,
    environ: Mapping[str, str],
    default_prefix: Path | None,
) -> Location:
    """The environment named by ``--prefix`` or ``--python``, else the active one."""
    if python is not None:
        return _from_python(python)
    if prefix is None:
        # A venv made from a conda Python and activated inside it sets both; the venv's
        # interpreter is the one that runs, so VIRTUAL_ENV wins.
        active = environ.get("VIRTUAL_ENV") or environ.get("CONDA_PREFIX")
        prefix = Path(active) if active else (default_prefix or Path(sys.prefix))
    if not prefix.is_dir():
        raise UsageError(f"no environment at {prefix}: not a directory")
    return Location(prefix, _prefix_python(prefix), _prefix_site_packages(prefix))


def _from_python(python: Path) -> Location:
    from gpuenv import _proc

    if not python.exists():
        raise UsageError(f"--python {python}: no such file")
    result = _proc.run([python, "-I", "-c", _PYTHON_QUERY], timeout=30, what=f"{python}")
    try:
        answer = json.loads(result.stdout)
        site = tuple(Path(p) for p in answer["site"] if Path(p).is_dir())
        return Location(Path(answer["prefix"]), Path(answer["executable"]), site)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--python {python}: not a Python interpreter we can ask") from exc


def _prefix_python(prefix: Path) -> Path | None:
    for name in ("bin/python", "bin/python3", "python.exe"):
        candidate = prefix / name
        if candidate.exists():
            return candidate
    return None


def _prefix_site_packages(prefix: Path) -> tuple[Path, ...]:
    found: list[Path] = []
    for lib in ("lib", "lib64"):
        try:
            entries = sorted(os.scandir(prefix / lib), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("python") and entry.is_dir():
                site = Path(entry.path) / "site-packages"
                if site.is_dir() and site.resolve() not in {f.resolve() for f in found}:
                    found.append(site)
    windows = prefix / "Lib" / "site-packages"
    if windows.is_dir():
        found.append(windows)
    return tuple(found)


# --- inventory ------------------------------------------------------------------------


def scan_dists(site_packages: Path) -> Iterator[Dist]:
    try:
        entries = list(os.scandir(site_packages))
    except OSError:
        return
    for entry in entries:
        if not entry.name.endswith((".dist-info", ".egg-info")):
            continue
        match = _DIST_RE.match(entry.name)
        if match:
            yield Dist(canonicalize_name(match["name"]), match["version"], Path(entry.path))
        elif entry.is_dir():
            name, version = _metadata_name(Path(entry.path))
            if name:
                yield Dist(canonicalize_name(name), version or "", Path(entry.path))


def _metadata_name(path: Path) -> tuple[str | None, str | None]:
    name = version = None
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with (path / filename).open(encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    if key == "Name":
                        name = value.strip()
                    elif key == "Version":
                        version = value.strip()
            return name, version
        except OSError:
            continue
    return None, None


def read_conda_meta(prefix: Path) -> tuple[CondaPackage, ...]:
    meta = prefix / "conda-meta"
    try:
        entries = sorted(e.path for e in os.scandir(meta) if e.name.endswith(".json"))
    except OSError:
        return ()
    packages = []
    for path in entries:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            continue
        files = data.get("files") or ()
        packages.append(
            CondaPackage(
                name=data["name"],
                version=str(data.get("version", "")),
                build=str(data.get("build", "")),
                channel=str(data.get("channel", "")),
                meta=Path(path),
                files=tuple(f for f in files if isinstance(f, str)),
            )
        )
    return tuple(packages)


def read_version_py(path: Path) -> dict[str, Any]:
    """The literal top-level assignments of a generated ``version.py``."""
    values: dict[str, Any] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return values
    for line in text.splitlines():
        match = _ASSIGN_RE.match(line.strip())
        if not match:
            continue
        try:
            values[match["key"]] = ast.literal_eval(match["value"].strip())
        except (ValueError, SyntaxError):
            continue
    return values


def read_torch(site_packages: tuple[Path, ...]) -> TorchInfo | None:
    for site in site_packages:
        path = site / "torch" / "version.py"
        values = read_version_py(path)
        version = values.get("__version__")
        if not isinstance(version, str):
            continue
        cuda_text = values.get("cuda")
        try:
            cuda = CudaVersion.parse(cuda_text) if isinstance(cuda_text, str) else None
        except VersionFormatError:
            cuda = None
        hip = values.get("hip")
        return TorchInfo(version, cuda, hip if isinstance(hip, str) else None, path)
    return None


def _is_conda_base(prefix: Path) -> bool:
    return (prefix / "conda-meta").is_dir() and (
        (prefix / "condabin").is_dir() or (prefix / "envs").is_dir()
    )


def inventory(location: Location) -> Environment:
    prefix = location.prefix
    conda = read_conda_meta(prefix)
    if (prefix / "conda-meta").is_dir():
        kind = "conda"
    elif (prefix / "pyvenv.cfg").is_file():
        kind = "venv"
    else:
        kind = "system"
    dists = tuple(d for site in location.site_packages for d in scan_dists(site))
    return Environment(
        prefix=prefix,
        kind=kind,
        python=location.python,
        site_packages=location.site_packages,
        dists=dists,
        conda_packages=conda,
        torch=read_torch(location.site_packages),
        conda_base=_is_conda_base(prefix),
    )
