"""Reading and annotating a built wheel: its extension modules, and gpuenv's build record
added to its ``.dist-info`` (``gpuenv-build.json``, listed in ``RECORD``), so that any
environment the wheel is installed in says what it was built against."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuenv.errors import BuildError

RECORD_NAME = "gpuenv-build.json"
_MODULE_SUFFIX = re.compile(r"(\.cpython-[^.]+|\.abi3)?\.so\Z")


def _dist_info(names: list[str]) -> str:
    found = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if len(found) != 1:
        raise BuildError(f"the built wheel has {len(found)} .dist-info folders, not one")
    return found[0]


def extensions(wheel: Path) -> list[str]:
    """The shared objects in the wheel (paths inside it), sorted."""
    with zipfile.ZipFile(wheel) as archive:
        return sorted(n for n in archive.namelist() if n.endswith(".so") or ".so." in n)


def module_name(path: str) -> str | None:
    """``pkg/_C.cpython-311-x86_64-linux-gnu.so`` -> ``pkg._C``; None for a shared object
    that is not an importable module (``libfoo.so.1``)."""
    if not _MODULE_SUFFIX.search(path):
        return None
    stem = _MODULE_SUFFIX.sub("", path)
    parts = stem.split("/")
    if any(not p.isidentifier() for p in parts) or parts[0].endswith((".data", ".dist-info")):
        return None
    return ".".join(parts)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def annotate(wheel: Path, record: Mapping[str, Any], out: Path) -> Path:
    """Write ``wheel`` again at ``out`` with ``record`` as ``<dist-info>/gpuenv-build.json``."""
    text = (json.dumps(dict(record), indent=2, sort_keys=True) + "\n").encode()
    try:
        with (
            zipfile.ZipFile(wheel) as source,
            zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as target,
        ):
            names = source.namelist()
            info_dir = _dist_info(names)
            added = f"{info_dir}/{RECORD_NAME}"
            for item in source.infolist():
                if item.filename == added:
                    continue
                data = source.read(item.filename)
                if item.filename == f"{info_dir}/RECORD":
                    lines = [
                        line + "\n"
                        for line in data.decode().splitlines()
                        if line and not line.startswith(f"{added},")
                    ]
                    data = "".join([*lines, _record_line(added, text)]).encode()
                target.writestr(item, data)
            target.writestr(zipfile.ZipInfo(added, date_time=(1980, 1, 1, 0, 0, 0)), text)
    except (OSError, zipfile.BadZipFile, KeyError, UnicodeDecodeError) as exc:
        raise BuildError(f"the built wheel {wheel.name} is not a valid wheel: {exc}") from None
    return out
