"""Find the environment to examine and take its inventory.

The environment's interpreter is asked once for its ``sys.path`` as its user gets it
(``_syspath``: ``PYTHONPATH``, the user site and ``.pth`` files count; torch is not
imported); without a runnable interpreter the path is modelled from the files. The
inventory is cheap on purpose: one ``scandir`` per ``sys.path`` entry (dist-info
directory names carry name and version), the ``conda-meta/*.json`` records, and the
``version.py`` of the torch that import finds first. RECORD, INSTALLER and METADATA files
are read later, and only where a check needs them.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from gpuenv.doctor import _syspath
from gpuenv.doctor._fsafe import (
    MAX_TEXT,
    executable,
    exists,
    is_dir,
    is_file,
    read_bytes,
    read_text,
    resolved,
)
from gpuenv.doctor._syspath import PathEntry
from gpuenv.errors import ExternalToolError, UsageError
from gpuenv.names import TORCH_IMPORTS, normalize_name
from gpuenv.versions import CudaVersion, VersionFormatError

_DIST_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+?)(?:-py\d.*)?\.(?:dist|egg)-info$")
_ASSIGN_RE = re.compile(r"^(?P<key>\w+)\s*(?::[^=]*)?=\s*(?P<value>.+)$")
_ASK_TIMEOUT = 30.0
_MAX_SMALL = 1 << 16  # an INSTALLER or a pyvenv.cfg is a few lines


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
        text = read_text(self.path / "INSTALLER", _MAX_SMALL)
        return (text.strip() or None) if text is not None else None

    def local_tag(self) -> str | None:
        return local_tag(self.version)


@dataclass(frozen=True, eq=False)  # one object per conda-meta record: identity
class CondaPackage:
    """One conda-meta record: the package's name, version, build and channel, the files it
    installed and what it depends on."""

    name: str
    version: str
    build: str
    channel: str
    meta: Path
    files: tuple[str, ...]
    depends: tuple[str, ...] = ()
    # prefix-relative path -> (sha256 hex, size) where conda-meta's paths_data says
    recorded: Mapping[str, tuple[str | None, int | None]] = field(default_factory=dict)

    @property
    def spec(self) -> str:
        """``name=version=build``, as ``conda install`` takes it."""
        return f"{self.name}={self.version}={self.build}" if self.build else self.name


@dataclass(frozen=True)
class TorchInfo:
    """What torch's ``version.py`` says, read without importing torch; for a torch
    package without one, what its distribution's metadata says (``version_file`` is
    then that ``.dist-info`` directory, ``package`` the ``torch`` folder)."""

    version: str
    cuda: CudaVersion | None
    hip: str | None
    version_file: Path
    package: Path | None = None

    @property
    def package_dir(self) -> Path:
        """The ``torch`` package folder import finds."""
        return self.package or self.version_file.parent

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
        return self.package_dir / "lib"


@dataclass(frozen=True)
class Environment:
    """``dists`` are the environment's own (its site-packages directories);
    ``path_dists`` every distribution on ``search_path``, in import order, so the first
    of a name is the one ``importlib.metadata`` and pip see."""

    prefix: Path
    kind: str  # "conda" | "venv" | "system"
    python: Path | None
    site_packages: tuple[Path, ...]
    dists: tuple[Dist, ...]
    conda_packages: tuple[CondaPackage, ...]
    torch: TorchInfo | None
    conda_base: bool
    search_path: tuple[PathEntry, ...] = ()
    path_dists: tuple[Dist, ...] = ()
    asked: bool = False  # search_path is the interpreter's own answer
    ask_problem: str | None = None  # why the interpreter could not be asked

    def dist(self, name: str) -> Dist | None:
        """The distribution of this name that wins (first on ``sys.path``)."""
        wanted = normalize_name(name)
        found = next((d for d in self.path_dists if d.name == wanted), None)
        return found or next((d for d in self.dists if d.name == wanted), None)

    def copies(self, name: str) -> list[Dist]:
        """Every distribution of this name on ``sys.path``, the winner first."""
        wanted = normalize_name(name)
        return [d for d in self.path_dists if d.name == wanted]

    def winners(self) -> dict[str, dict[str, str]]:
        """Where the torch family and each nvidia-* distribution come from: the copy
        that is first on ``sys.path``, and why its directory is there."""
        names = list(TORCH_IMPORTS)
        names += sorted({d.name for d in self.path_dists if d.name.startswith("nvidia-")})
        out = {}
        for name in names:
            dist = self.dist(name)
            if dist is None:
                continue
            entry = self.entry(dist.site_packages)
            out[name] = {
                "version": dist.version,
                "location": str(dist.site_packages),
                "on_sys_path_because": entry.detail if entry else "the environment's site-packages",
            }
        return out

    def entry(self, directory: Path) -> PathEntry | None:
        """The ``sys.path`` entry ``directory`` is."""
        return next((e for e in self.search_path if e.path == directory), None)

    def conda(self, name: str) -> CondaPackage | None:
        return next((p for p in self.conda_packages if p.name == name), None)

    def summary(self) -> dict[str, Any]:
        torch = self.torch
        return {
            "prefix": str(self.prefix),
            "kind": self.kind,
            "python": str(self.python) if self.python else None,
            "site_packages": [str(p) for p in self.site_packages],
            "sys_path": [e.to_json() for e in self.search_path],
            "winners": self.winners(),
            "sys_path_from": "the interpreter" if self.asked else "modelled from the files",
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
    """The environment to examine: its prefix, interpreter and site-packages, and its
    ``sys.path`` (``asked``: as the interpreter gave it; else modelled from the files,
    ``ask_problem`` saying why the interpreter was not asked)."""

    prefix: Path
    python: Path | None
    site_packages: tuple[Path, ...]
    search_path: tuple[PathEntry, ...] = ()
    asked: bool = False
    ask_problem: str | None = None


def locate(
    *,
    prefix: Path | None,
    python: Path | None,
    environ: Mapping[str, str],
    default_prefix: Path | None,
    cwd: Path | None = None,
) -> Location:
    """The environment named by ``--prefix`` or ``--python``, else the active one, with
    its ``sys.path`` as its interpreter computes it under ``environ`` in ``cwd``."""
    here = cwd or Path.cwd()
    if python is not None:
        return _from_python(python, environ, here)
    if prefix is None:
        # A venv made from a conda Python and activated inside it sets both; the venv's
        # interpreter is the one that runs, so VIRTUAL_ENV wins.
        active = environ.get("VIRTUAL_ENV") or environ.get("CONDA_PREFIX")
        prefix = Path(active) if active else (default_prefix or Path(sys.prefix))
    if not is_dir(prefix):
        raise UsageError(f"no environment at {prefix}: not a directory")
    interpreter = _prefix_python(prefix)
    problem = None
    cfg = prefix / "pyvenv.cfg"
    if exists(cfg) and not is_file(cfg):
        # Python reads pyvenv.cfg before anything else: a FIFO there blocks it, a link
        # to /dev/zero fills its memory. Asking it would only wait for the timeout.
        problem = f"{cfg} is not a regular file, so the interpreter cannot start"
    elif interpreter is not None and executable(interpreter):
        try:
            return _from_python(interpreter, environ, here, prefix=prefix)
        except (ExternalToolError, UsageError) as exc:
            problem = exc.message
    elif interpreter is not None:
        problem = f"{interpreter} is not executable"
    site = _prefix_site_packages(prefix)
    search, _user = _syspath.modelled(
        site, environ, here, version=_site_version(site), venv_isolated=_venv_isolated(prefix)
    )
    return Location(prefix, interpreter, site, search, False, problem)


def _site_version(site: tuple[Path, ...]) -> str | None:
    for path in site:
        match = re.match(r"^python(\d+\.\d+)", path.parent.name)
        if match:
            return match[1]
    return None


def _venv_isolated(prefix: Path) -> bool:
    """A venv without system site-packages: its user site is off."""
    text = read_text(prefix / "pyvenv.cfg", _MAX_SMALL)
    if text is None:
        return False
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "include-system-site-packages":
            return value.strip().lower() != "true"
    return True


def _from_python(
    python: Path, environ: Mapping[str, str], cwd: Path, *, prefix: Path | None = None
) -> Location:
    from gpuenv import _proc

    python = _on_path(python, environ)
    try:
        found = python.exists()
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise UsageError(f"--python {python}: {exc.strerror}") from None
    if not found:
        raise UsageError(
            f"--python {python}: no such file"
            + ("" if os.sep in str(python) else " (and no such command on PATH)")
        )
    if python.is_dir():
        raise UsageError(f"--python {python}: a directory, not an interpreter")
    if not os.access(python, os.X_OK):  # /etc/passwd said "cannot write a file": EACCES
        raise UsageError(f"--python {python}: not executable")
    try:
        result = _proc.run(
            [python, "-c", _syspath.QUERY],
            timeout=_ASK_TIMEOUT,
            env=environ,
            cwd=cwd if cwd.is_dir() else None,
            what=f"{python}",
        )
    except OSError as exc:  # an executable that is no program (exec format error)
        raise UsageError(f"--python {python}: cannot run it: {exc.strerror or exc}") from None
    try:
        answer = _syspath.parse_answer(result.stdout)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--python {python}: not a Python interpreter we can ask") from exc
    search = _syspath.from_answer(answer, environ, cwd)
    return Location(prefix or answer.prefix, answer.executable, answer.site, search, True)


def _on_path(python: Path, environ: Mapping[str, str]) -> Path:
    """A bare name (``--python python3.12``) is a command, looked up on ``PATH`` as the
    shell would; a path is taken as it is."""
    import shutil

    text = str(python)
    if os.sep in text or not text:
        return python
    found = shutil.which(text, path=environ.get("PATH", os.defpath))
    if found:
        return Path(found)
    # Not a command but a file here (``./python``, which Path shortens to ``python``):
    # that file, by its full path, never a search of PATH for its name.
    return python.absolute() if python.exists() else python


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
            if not (entry.name.startswith("python") and entry.is_dir()):
                continue
            # Debian's interpreters use dist-packages (python3.X/ and python3/).
            for folder in ("site-packages", "dist-packages"):
                site = Path(entry.path) / folder
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
            yield Dist(normalize_name(match["name"]), match["version"], Path(entry.path))
        elif entry.is_dir():
            name, version = _metadata_name(Path(entry.path))
            if name:
                yield Dist(normalize_name(name), version or "", Path(entry.path))


def _metadata_name(path: Path) -> tuple[str | None, str | None]:
    name = version = None
    for filename in ("METADATA", "PKG-INFO"):
        text = read_text(path / filename)
        if text is None:
            continue
        for line in text.splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            if key == "Name":
                name = value.strip()
            elif key == "Version":
                version = value.strip()
        return name, version
    return None, None


def read_conda_meta(prefix: Path) -> tuple[CondaPackage, ...]:
    meta = prefix / "conda-meta"
    try:
        entries = sorted(e.path for e in os.scandir(meta) if e.name.endswith(".json"))
    except OSError:
        return ()
    packages = []
    for path in entries:
        raw = read_bytes(path, MAX_TEXT * 16)  # conda-meta of a big package is megabytes
        try:
            data = json.loads(raw) if raw else None
        except (ValueError, RecursionError):  # RecursionError: nested past the reader
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            continue
        files = data.get("files") or ()
        depends = data.get("depends") or ()
        packages.append(
            CondaPackage(
                name=data["name"],
                version=str(data.get("version", "")),
                build=str(data.get("build", "")),
                channel=str(data.get("channel", "")),
                meta=Path(path),
                files=tuple(f for f in files if isinstance(f, str)),
                depends=tuple(d for d in depends if isinstance(d, str)),
                recorded=_paths_data(data.get("paths_data")),
            )
        )
    return tuple(packages)


def _paths_data(raw: Any) -> dict[str, tuple[str | None, int | None]]:
    """conda-meta's ``paths_data.paths``: each file's sha256 and size, where given."""
    paths = raw.get("paths") if isinstance(raw, dict) else None
    out: dict[str, tuple[str | None, int | None]] = {}
    for item in paths if isinstance(paths, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("_path"), str):
            continue
        digest, size = item.get("sha256"), item.get("size_in_bytes")
        out[item["_path"]] = (
            digest if isinstance(digest, str) else None,
            size if isinstance(size, int) and not isinstance(size, bool) else None,
        )
    return out


def read_version_py(path: Path) -> dict[str, Any]:
    """The literal top-level assignments of a generated ``version.py``."""
    values: dict[str, Any] = {}
    text = read_text(path)
    if text is None:
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


def _scan_path(search: tuple[PathEntry, ...], own: tuple[Path, ...]) -> list[Dist]:
    """Every distribution on the search path, in import order (own site-packages
    directories included even when the path lacks them)."""
    dirs = [e.path for e in search if e.origin != _syspath.ORIGIN_STDLIB]
    dirs += [p for p in own if p not in dirs]
    return [d for directory in dirs for d in scan_dists(directory)]


def find_torch(search: tuple[PathEntry, ...], own: tuple[Path, ...]) -> TorchInfo | None:
    """The torch that ``import torch`` finds: the first regular package (one with an
    ``__init__.py``) along the path, else the first directory with a ``version.py``."""
    dirs = [e.path for e in search if e.origin != _syspath.ORIGIN_STDLIB]
    dirs += [p for p in own if p not in dirs]
    regular = [d for d in dirs if is_file(d / "torch" / "__init__.py")]
    return read_torch(tuple(regular)) or read_torch(tuple(dirs)) or _from_dist(regular[:1])


def _from_dist(sites: list[Path]) -> TorchInfo | None:
    """A torch package without ``version.py`` (a trimmed or hand-made build): the
    version its ``.dist-info`` beside it states, the build from its local tag
    (``+cu124``), rather than "no torch" for a torch that imports."""
    for site in sites:
        dist = next((d for d in scan_dists(site) if d.name == "torch" and d.version), None)
        if dist is None:
            continue
        tag = local_tag(dist.version) or ""
        try:
            cuda = CudaVersion.from_tag(tag) if tag.startswith("cu") else None
        except VersionFormatError:
            cuda = None
        return TorchInfo(dist.version, cuda, None, dist.path, package=site / "torch")
    return None


def inventory(location: Location) -> Environment:
    prefix = location.prefix
    conda = read_conda_meta(prefix)
    if (prefix / "conda-meta").is_dir():
        kind = "conda"
    elif (prefix / "pyvenv.cfg").is_file():
        kind = "venv"
    else:
        kind = "system"
    search = location.search_path or tuple(
        PathEntry(p, _syspath.ORIGIN_SITE, "the environment's site-packages", True)
        for p in location.site_packages
    )
    path_dists = _scan_path(search, location.site_packages)
    own = {_resolved(p) for p in location.site_packages}
    owned = {site: _resolved(site) in own for site in {d.site_packages for d in path_dists}}
    dists = tuple(d for d in path_dists if owned[d.site_packages])
    return Environment(
        prefix=prefix,
        kind=kind,
        python=location.python,
        site_packages=location.site_packages,
        dists=dists,
        conda_packages=conda,
        torch=find_torch(search, location.site_packages),
        conda_base=_is_conda_base(prefix),
        search_path=search,
        path_dists=tuple(path_dists),
        asked=location.asked,
        ask_problem=location.ask_problem,
    )


def _resolved(path: Path) -> Path:
    return resolved(path)
