"""``pylock``: a PEP 751 ``pylock.toml``, built with ``packaging.pylock``'s own model and
validated by it, for ``uv pip install -r pylock.toml`` (or ``uv pip sync``)."""

from __future__ import annotations

from typing import Any

from gpuenv.export._common import (
    MACHINES,
    SYS_PLATFORMS,
    ExportContext,
    Exported,
    clean_url,
    conda_left_out,
    describe,
    is_sdist,
    locked_hash,
    origin,
    python_minor,
)


def _package(p: Any, pylock: Any) -> Any:
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    archive = {"name": p.filename, "url": clean_url(p.url), "hashes": {"sha256": p.sha256}}
    if p.size is not None:
        archive["size"] = p.size
    common: dict[str, Any] = {"name": canonicalize_name(p.name), "version": Version(p.version)}
    if p.index:
        common["index"] = clean_url(p.index)
    if is_sdist(p):
        return pylock.Package(**common, sdist=pylock.PackageSdist(**archive))
    return pylock.Package(**common, wheels=[pylock.PackageWheel(**archive)])


def render(context: ExportContext) -> Exported:
    import tomlkit
    from packaging import pylock
    from packaging.markers import Marker
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    target = context.target
    machine = MACHINES.get(target.platform, target.platform)
    system = SYS_PLATFORMS.get(target.platform, "linux")
    document = pylock.Pylock(
        lock_version=Version("1.0"),
        environments=[Marker(f'sys_platform == "{system}" and platform_machine == "{machine}"')],
        requires_python=SpecifierSet(f"=={python_minor(target)}.*"),
        created_by="gpuenv",
        packages=[_package(p, pylock) for p in sorted(target.pip, key=lambda p: p.name)],
        tool={"gpuenv": {"target": target.name, "content-hash": locked_hash(context)}},
    )
    document.validate()
    text = tomlkit.dumps(document.to_dict())
    head = f"# {origin(context, 'pylock')}\n# for {describe(target)}\n"
    return Exported(head + text, conda_left_out(target, "pylock.toml"))
