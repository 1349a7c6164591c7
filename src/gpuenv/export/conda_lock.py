"""``conda-lock``: a ``conda-lock.yml`` written with conda-lock's own models and writer
(imported here only: conda-lock is slow to import), conda records and pip artifacts
both, for ``conda-lock install`` and micromamba."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from gpuenv._extras import missing_extra
from gpuenv.errors import UsageError
from gpuenv.export._common import (
    ExportContext,
    Exported,
    channels,
    clean_url,
    conda_python,
    locked_hash,
)
from gpuenv.lock.model import CondaPackage, LockedTarget, PipPackage


def _dependencies(depends: tuple[str, ...]) -> dict[str, str]:
    """conda match specs ("cuda-version >=12.4,<12.5.0a0") as conda-lock keeps them."""
    found: dict[str, str] = {}
    for spec in depends:
        name, _, rest = spec.strip().partition(" ")
        found[name] = rest.strip() or "*"
    return found


def _conda(c: CondaPackage, platform: str, models: Any) -> Any:
    hashes = models.HashModel(md5=c.md5, sha256=c.sha256)
    return _locked(models, c, "conda", platform, _dependencies(c.depends), hashes, build=c.build)


def _pip(p: PipPackage, platform: str, models: Any) -> Any:
    requires = dict.fromkeys(sorted(p.requires), "*")
    return _locked(models, p, "pip", platform, requires, models.HashModel(sha256=p.sha256))


def _locked(
    models: Any,
    package: CondaPackage | PipPackage,
    manager: str,
    platform: str,
    dependencies: dict[str, str],
    hashes: Any,
    **more: Any,
) -> Any:
    """conda-lock's entry for a conda record or a pip artifact (every one in "main")."""
    return models.LockedDependency(
        name=package.name,
        version=package.version,
        manager=manager,
        platform=platform,
        dependencies=dependencies,
        url=clean_url(package.url),
        hash=hashes,
        categories={"main"},
        **more,
    )


def _refuse_without_python(target: LockedTarget) -> None:
    if target.pip and not conda_python(target):
        raise UsageError(
            f"target {target.name} has pip packages but no conda Python: conda-lock and "
            "micromamba would have no interpreter to install them into",
            hint="export pylock or requirements for this target, or let [conda] supply "
            "the Python (python = true) and lock again",
        )


def render(context: ExportContext) -> Exported:
    try:
        from conda_lock.lockfile import write_conda_lock_file
        from conda_lock.lockfile.v2prelim import models
    except ImportError as exc:
        raise missing_extra(exc, "conda-lock", "gpuenv export conda-lock") from None

    target = context.target
    _refuse_without_python(target)
    platform = target.platform
    lockfile = models.Lockfile(
        package=[_conda(c, platform, models) for c in target.conda]
        + [_pip(p, platform, models) for p in target.pip],
        metadata=models.LockMeta(
            content_hash={platform: locked_hash(context).removeprefix("sha256:")},
            channels=channels(target),
            platforms=[platform],
            sources=["gpuenv.lock"],
            custom_metadata={"gpuenv-target": target.name, "gpuenv-project": context.project},
        ),
    )
    with tempfile.TemporaryDirectory(prefix="gpuenv-export-") as directory:
        path = Path(directory) / "conda-lock.yml"
        write_conda_lock_file(lockfile, path, metadata_choices=None)
        text = path.read_text(encoding="utf-8")
    return Exported(text)
