"""``sys.path`` as the environment's Python computes it for its user, and why each
entry is there (``PYTHONPATH``, the user site, a ``.pth`` file, the environment's own
site-packages, the standard library).

The interpreter is asked when it can run (without ``-I``, under the user's variables
and in the user's directory, so ``PYTHONPATH``, ``PYTHONUSERBASE``, ``PYTHONNOUSERSITE``,
the user site and every ``.pth`` file count; torch is never imported). Otherwise the
path is modelled from the files the way ``site.py`` builds it: ``PYTHONPATH`` (relative
and empty entries taken from the current directory), the user site unless a venv
without system site-packages or ``PYTHONNOUSERSITE`` turns it off, each site-packages
directory followed by the directories its ``.pth`` files add.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuenv.doctor._fsafe import is_dir, read_text, resolved

ORIGIN_PYTHONPATH = "PYTHONPATH"
ORIGIN_USER_SITE = "user site-packages"
ORIGIN_SITE = "site-packages"
ORIGIN_PTH = ".pth file"
ORIGIN_STDLIB = "standard library"
ORIGIN_OTHER = "interpreter"

# Printed by the interpreter under test; runs on any Python 3 (the environments can be
# old). sys.path[0] is the script's directory ('' for -c): it depends on how a program
# is started, so it is left out, unless PYTHONSAFEPATH (3.11+) kept it off.
QUERY = (
    "import json, site, sys, sysconfig\n"
    "p = sysconfig.get_paths()\n"
    "path = list(sys.path)\n"
    "if path and not getattr(sys.flags, 'safe_path', False): path = path[1:]\n"
    "user = site.ENABLE_USER_SITE\n"
    "print(json.dumps({'prefix': sys.prefix, 'base_prefix': getattr(sys, 'base_prefix', "
    "sys.prefix), 'executable': sys.executable, 'version': '%d.%d' % sys.version_info[:2], "
    "'site': sorted({p['purelib'], p['platlib']}), "
    "'site_packages': list(getattr(site, 'getsitepackages', lambda: [])()), "
    "'user_site': site.getusersitepackages() if user else None, "
    "'stdlib': sorted({p['stdlib'], p['platstdlib']}), 'path': path}))\n"
)


@dataclass(frozen=True)
class PathEntry:
    """One ``sys.path`` entry: where imports (and torch's preload) look, in order."""

    path: Path
    origin: str  # one of the ORIGIN_* values
    detail: str  # in words, naming the variable, file and line responsible
    own: bool  # one of the environment's own site-packages directories

    def to_json(self) -> dict[str, str | bool]:
        return {"path": str(self.path), "origin": self.origin, "detail": self.detail}


@dataclass(frozen=True)
class Answer:
    """What the interpreter said about itself (see ``QUERY``)."""

    prefix: Path
    executable: Path
    version: str
    site: tuple[Path, ...]
    user_site: Path | None
    stdlib: tuple[Path, ...]
    path: tuple[str, ...]


def parse_answer(stdout: str) -> Answer:
    """Raises ValueError (or KeyError, TypeError) on anything but the expected object."""
    data = json.loads(stdout)
    site = [*data["site"], *data.get("site_packages", [])]
    unique = tuple(dict.fromkeys(Path(p) for p in site if isinstance(p, str)))
    user = data.get("user_site")
    return Answer(
        prefix=Path(data["prefix"]),
        executable=Path(data["executable"]),
        version=str(data["version"]),
        site=tuple(p for p in unique if is_dir(p)),
        user_site=Path(user) if isinstance(user, str) else None,
        stdlib=tuple(Path(p) for p in data.get("stdlib", []) if isinstance(p, str)),
        path=tuple(str(p) for p in data["path"]),
    )


def pythonpath_entries(environ: Mapping[str, str], cwd: Path) -> list[Path]:
    """``PYTHONPATH`` as Python reads it: empty entries are the current directory,
    relative ones are taken from it."""
    value = environ.get("PYTHONPATH")
    if not value:
        return []
    return [Path(os.path.normpath(cwd / entry)) if entry else cwd for entry in value.split(":")]


def pth_entries(site: Path) -> list[tuple[Path, Path, int]]:
    """(directory, .pth file, line number) for each existing directory the ``.pth``
    files of ``site`` add, in the order ``site.py`` adds them (``import`` lines run
    code and are not followed)."""
    try:
        names = sorted(e.name for e in os.scandir(site) if e.name.endswith(".pth"))
    except OSError:
        return []
    found = []
    for name in names:
        if name.startswith("."):
            continue
        pth = site / name
        text = read_text(pth)
        if text is None:
            continue
        lines = text.splitlines()
        for number, line in enumerate(lines, 1):
            text = line.rstrip()
            if not text or text.startswith("#") or text.startswith(("import ", "import\t")):
                continue
            directory = Path(os.path.normpath(site / text))
            if is_dir(directory):
                found.append((directory, pth, number))
    return found


def user_site(
    environ: Mapping[str, str], version: str | None, *, venv_isolated: bool
) -> Path | None:
    """Where the user site would be, when it is enabled (``site.py``'s rules)."""
    if venv_isolated or environ.get("PYTHONNOUSERSITE") or version is None:
        return None
    base = environ.get("PYTHONUSERBASE")
    if not base:
        home = environ.get("HOME")
        if not home:
            return None
        base = str(Path(home) / ".local")
    return Path(base) / "lib" / f"python{version}" / "site-packages"


class _Attribution:
    """Why a directory is on ``sys.path``."""

    def __init__(
        self,
        environ: Mapping[str, str],
        cwd: Path,
        own: Sequence[Path],
        user: Path | None,
        stdlib: Sequence[Path],
    ) -> None:
        self.pythonpath = {
            p: i for i, p in reversed(list(enumerate(pythonpath_entries(environ, cwd))))
        }
        self.own = {_key(p) for p in own}
        self.user = _key(user) if user else None
        self.stdlib = [_key(p) for p in stdlib]
        self.pth: dict[Path, tuple[Path, int]] = {}
        for site in [*([user] if user else []), *own]:
            for directory, pth, number in pth_entries(site):
                self.pth.setdefault(_key(directory), (pth, number))
        self.environ = environ

    def entry(self, path: Path) -> PathEntry:
        key = _key(path)
        if path in self.pythonpath:
            index = self.pythonpath[path]
            detail = f"PYTHONPATH entry {index + 1} ({self.environ.get('PYTHONPATH', '')!r})"
            return PathEntry(path, ORIGIN_PYTHONPATH, detail, key in self.own)
        if key in self.own:
            return PathEntry(path, ORIGIN_SITE, "the environment's site-packages", True)
        if self.user is not None and key == self.user:
            detail = "the user site (PYTHONNOUSERSITE=1 turns it off)"
            return PathEntry(path, ORIGIN_USER_SITE, detail, False)
        if key in self.pth:
            pth, number = self.pth[key]
            return PathEntry(path, ORIGIN_PTH, f"{pth} line {number}", False)
        if any(key == s or s in key.parents for s in self.stdlib) or path.suffix == ".zip":
            return PathEntry(path, ORIGIN_STDLIB, "the standard library", False)
        detail = "added at start-up (sitecustomize, a .pth import line or the base Python)"
        return PathEntry(path, ORIGIN_OTHER, detail, False)


def _key(path: Path) -> Path:
    return resolved(path)


def from_answer(answer: Answer, environ: Mapping[str, str], cwd: Path) -> tuple[PathEntry, ...]:
    """The interpreter's own ``sys.path``, each entry attributed."""
    why = _Attribution(environ, cwd, answer.site, answer.user_site, answer.stdlib)
    entries = []
    for text in answer.path:
        path = Path(os.path.normpath(cwd / text)) if text else cwd
        entries.append(why.entry(path))
    return tuple(_unique(entries))


def modelled(
    site_packages: Sequence[Path],
    environ: Mapping[str, str],
    cwd: Path,
    *,
    version: str | None,
    venv_isolated: bool,
) -> tuple[tuple[PathEntry, ...], Path | None]:
    """``sys.path`` (without the standard library) as ``site.py`` would build it, and
    the user site when it is enabled."""
    user = user_site(environ, version, venv_isolated=venv_isolated)
    why = _Attribution(environ, cwd, site_packages, user, ())
    paths: list[Path] = [*pythonpath_entries(environ, cwd)]
    for site in [*([user] if user and is_dir(user) else []), *site_packages]:
        paths.append(site)
        paths.extend(directory for directory, _pth, _n in pth_entries(site))
    return tuple(_unique(why.entry(p) for p in paths)), user


def _unique(entries: Iterable[PathEntry]) -> list[PathEntry]:
    seen: set[Path] = set()
    out = []
    for entry in entries:
        if entry.path not in seen:
            seen.add(entry.path)
            out.append(entry)
    return out
