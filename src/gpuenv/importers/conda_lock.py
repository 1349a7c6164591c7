"""``conda-lock.yml`` files, validated by conda-lock's own models.

conda-lock is imported here only, when such a file is read (its import costs about a
second). The YAML is first read by ``_yaml`` (limits, lines), then handed as plain data
to conda-lock's versioned models (``version: 1`` files through ``lockfile_v1_to_v2``).
The linux-64 packages are taken (the platform gpuenv targets); conda packages go
through the same meanings as an environment file's, pip packages become exact pins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuenv._extras import missing_extra
from gpuenv.importers._context import Context
from gpuenv.importers._text import fail
from gpuenv.importers._yaml import YNode, load
from gpuenv.importers.conda_env import CondaSink
from gpuenv.importers.model import (
    CHANNELS,
    UNMANAGED,
    Ask,
    Authority,
    Origin,
    ReadingBuilder,
)

PLATFORM = "linux-64"


def _model(data: dict[str, Any], display: str, packages: YNode | None) -> Any:
    """The file as conda-lock's ``Lockfile`` (v2 in memory)."""
    import warnings

    from pydantic import ValidationError

    with warnings.catch_warnings():  # conda-lock's vendored conda warns about itself
        warnings.simplefilter("ignore")
        try:
            from conda_lock.lockfile.v1.models import Lockfile as LockfileV1
            from conda_lock.lockfile.v2prelim.models import Lockfile, lockfile_v1_to_v2
        except ImportError as exc:
            raise missing_extra(exc, "conda-lock", "reading a conda-lock.yml") from None

    version = data.pop("version", None)
    try:
        if version == 1:
            return lockfile_v1_to_v2(LockfileV1.model_validate(data))
        if version == 2:
            return Lockfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = list(first["loc"])
        line = None
        if (
            packages is not None
            and len(loc) >= 2
            and loc[0] == "package"
            and isinstance(loc[1], int)
        ):
            items = packages.children()
            line = items[loc[1]].line if loc[1] < len(items) else None
        where = ".".join(str(p) for p in loc)
        fail(display, line, f"not a valid conda-lock file: {where}: {first['msg']}")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # conda-lock's own validators raise plain exceptions on some malformed entries
        # (a package without 'manager' is a KeyError inside its hash validator).
        fail(display, None, f"not a valid conda-lock file: {type(exc).__name__}: {exc}")
    fail(display, 1, f"conda-lock file version {version!r} is not one conda-lock reads (1, 2)")


def _field(item: YNode, key: str) -> str:
    node = item.get(key)
    return (node.text() if node is not None else None) or ""


def _lines(packages: YNode | None) -> dict[tuple[str, str, str], int]:
    """(manager, name, platform) -> the line of its entry."""
    out: dict[tuple[str, str, str], int] = {}
    for item in packages.children() if packages else []:
        key = (_field(item, "manager"), _field(item, "name"), _field(item, "platform"))
        out.setdefault(key, item.line)
    return out


def _build_of(url: str) -> str | None:
    """The build string in a conda package's file name (name-version-build.conda)."""
    filename = url.rsplit("/", 1)[-1]
    for suffix in (".tar.bz2", ".conda"):
        if filename.endswith(suffix):
            parts = filename.removesuffix(suffix).rsplit("-", 2)
            return parts[2] if len(parts) == 3 else None
    return None


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    root = load(text, display)
    data = root.plain()
    if not isinstance(data, dict):
        fail(display, root.line, "a conda-lock file is a mapping (version, metadata, package)")
    packages_node = root.get("package")
    lock = _model(dict(data), display, packages_node)
    lines = _lines(packages_node)
    builder = ReadingBuilder(display, "conda-lock", Authority.RECORD)
    platforms = sorted({p.platform for p in lock.package})
    platform = PLATFORM if PLATFORM in platforms else (platforms[0] if platforms else PLATFORM)
    head = Origin(display, 1, "conda-lock.yml")
    if platform != PLATFORM:
        builder.platform = platform
        builder.note(UNMANAGED, f"no {PLATFORM} packages: read {platform}'s instead", head)
    channels = [getattr(c, "url", str(c)) for c in lock.metadata.channels]
    builder.fact(CHANNELS, ",".join(channels), head)
    sink = CondaSink(ctx, builder)
    for package in lock.package:
        if package.platform != platform:
            continue
        line = lines.get((package.manager, package.name, package.platform))
        group = None if "main" in package.categories else ",".join(sorted(package.categories))
        origin = Origin(display, line, f"{package.name}={package.version}")
        if package.manager == "pip":
            from packaging.utils import canonicalize_name

            builder.asks.append(
                Ask(canonicalize_name(package.name), f"=={package.version}", origin, group=group)
            )
        else:
            sink.package(
                package.name, package.version, package.build or _build_of(package.url), origin
            )
    sink.finish()
    ctx.readings.append(builder.build())
