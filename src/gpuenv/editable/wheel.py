"""An editable wheel composed from the project's built wheel.

The built wheel (from ``gpuenv.builds``: the target's archs, toolkit and compiler) holds
the project's compiled modules for *this* target. The editable wheel installed into the
prefix takes from it:

- the ``.dist-info`` (metadata, entry points: installers make the console scripts);
- every file the source tree does not have (the compiled modules, generated files),
  under ``__gpuenv_editable__/<dist>/`` in the prefix's site-packages: each prefix has
  its own, so two targets of one checkout never overwrite each other's ``.so`` (an
  in-place ``build_ext`` would);

and adds a ``.pth`` file and a finder module that map the project's top-level packages
to the source tree (an edit of a ``.py`` file is seen at the next import) with the
prefix's compiled files beside them in each package's ``__path__``; the compiled
modules are mapped by name first, so a stale ``.so`` left in the tree is never loaded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zipfile
from pathlib import Path

from gpuenv.errors import BuildError

OVERLAY = "__gpuenv_editable__"
_DATE = (1980, 1, 1, 0, 0, 0)
_EXTENSION = re.compile(r"(\.cpython-[^./]+|\.abi3)?\.so\Z")

FINDER = '''"""gpuenv's editable install of a project: its packages from its source tree
(ROOT), its compiled modules from this prefix. Written by gpuenv; `gpuenv install`
rewrites it."""
import importlib.machinery
import importlib.util
import os
import sys

ROOT = {root!r}
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), *{overlay!r}.split("/"))
PACKAGES = {packages!r}
EXTENSIONS = {extensions!r}


class GpuenvEditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        relative = EXTENSIONS.get(fullname)
        if relative is not None:
            location = os.path.join(HERE, relative)
            loader = importlib.machinery.ExtensionFileLoader(fullname, location)
            return importlib.util.spec_from_file_location(fullname, location, loader=loader)
        source = PACKAGES.get(fullname)
        if source is None:
            return None
        if os.path.isdir(source):
            overlay = os.path.join(HERE, fullname)
            init = os.path.join(source, "__init__.py")
            if not os.path.exists(init):
                return None
            return importlib.util.spec_from_file_location(
                fullname, init, submodule_search_locations=[source, overlay]
            )
        return importlib.util.spec_from_file_location(fullname, source)


def install():
    if GpuenvEditableFinder not in sys.meta_path:
        sys.meta_path.insert(0, GpuenvEditableFinder)
'''


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def _top_levels(names: list[str]) -> set[str]:
    out = set()
    for name in names:
        first = name.split("/", 1)[0]
        if first.endswith((".dist-info", ".data")):
            continue
        out.add(first.removesuffix(".py") if "/" not in name else first)
    return out


def _source_of(top: str, root: Path) -> Path | None:
    """Where a top-level package (or module) of the wheel lives in the tree."""
    for base in (root, root / "src"):
        if (base / top / "__init__.py").is_file():
            return base / top
        if (base / f"{top}.py").is_file():
            return base / f"{top}.py"
    return None


def _module(path: str) -> str | None:
    if not _EXTENSION.search(path):
        return None
    parts = _EXTENSION.sub("", path).split("/")
    return ".".join(parts) if all(p.isidentifier() for p in parts) else None


def _dist_of(built: Path, names: list[str]) -> tuple[str, str]:
    infos = sorted({n.split("/", 1)[0] for n in names if ".dist-info/" in n})
    if len(infos) != 1:
        raise BuildError(f"{built.name}: {len(infos)} .dist-info folders, not one")
    dist = infos[0].removesuffix(".dist-info").split("-", 1)[0]
    if not re.fullmatch(r"[A-Za-z0-9_.]+", dist):
        raise BuildError(f"{built.name}: {infos[0]!r} is not a distribution's name")
    return infos[0], dist


def _place(name: str, info: str, packages: dict[str, str], root: Path) -> str | None:
    """Where a file of the built wheel goes in the editable one (None: left out, the
    tree's own file is the one imported)."""
    top = name.split("/", 1)[0]
    if name == f"{info}/RECORD":
        return None
    if top == info or top.endswith(".data") or top.removesuffix(".py") not in packages:
        return name  # metadata, scripts, a module the tree does not have: as they are
    in_tree = (root / name).is_file() or (root / "src" / name).is_file()
    if in_tree and not _EXTENSION.search(name):
        return None
    overlay = f"{OVERLAY}/{info.removesuffix('.dist-info').split('-', 1)[0]}"
    return f"{overlay}/{name}"


def compose(built: Path, root: Path, out_dir: Path) -> tuple[Path, list[str]]:
    """The editable wheel (in ``out_dir``) and the compiled modules it maps."""
    files: list[tuple[str, bytes]] = []
    extensions: dict[str, str] = {}
    try:
        with zipfile.ZipFile(built) as source:
            names = [n for n in source.namelist() if not n.endswith("/")]
            info, dist = _dist_of(built, names)
            packages: dict[str, str] = {}
            for top in sorted(_top_levels(names)):
                found = _source_of(top, root)
                if found is not None:
                    packages[top] = str(found)
            for name in names:
                place = _place(name, info, packages, root)
                if place is None:
                    continue
                files.append((place, source.read(name)))
                module = _module(name) if place.startswith(OVERLAY + "/") else None
                if module is not None:
                    extensions[module] = name
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise BuildError(f"the project's built wheel {built.name} cannot be read: {exc}") from None
    finder = f"__editable___gpuenv_{dist.replace('.', '_')}_finder"
    code = FINDER.format(
        root=str(root), overlay=f"{OVERLAY}/{dist}", packages=packages, extensions=extensions
    )
    pth = f"import {finder}; {finder}.install()\n"
    direct = {"url": root.as_uri(), "dir_info": {"editable": True}}
    files += [
        (f"{finder}.py", code.encode()),
        (f"__editable__.gpuenv_{dist}.pth", pth.encode()),
        (f"{info}/direct_url.json", json.dumps(direct).encode()),
    ]
    out = out_dir / built.name
    record = "".join(_record_line(n, d) for n, d in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for name, data in [*files, (f"{info}/RECORD", record.encode())]:
            target.writestr(zipfile.ZipInfo(name, date_time=_DATE), data)
    return out, sorted(extensions)
