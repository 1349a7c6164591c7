"""The artifacts a lock's targets name, as the store keeps them (``gpuenv._fetch``):
every pip wheel or sdist, every conda archive, every sdist a build compiles. Install
fetches them into the store, ``pack`` writes them into an archive, ``install --from``
checks an archive against them."""

from __future__ import annotations

from collections.abc import Iterable

from gpuenv._fetch import Artifact, filename_of
from gpuenv.errors import InstallError, UsageError
from gpuenv.lock.model import Lock, LockedTarget


def build_sources(target: LockedTarget, *, strict: bool) -> list[tuple[str, str]]:
    """(url, sha256) of the sdists the target's builds compile. A git source has no
    artifact: ``strict`` refuses it (an archive cannot hold a checkout), else skips it."""
    out = []
    for build in target.builds:
        if build.source.kind != "sdist" or build.source.sha256 is None:
            if not strict:
                continue
            raise UsageError(
                f"target {target.name} builds {build.name} from {build.source.url}: an archive "
                "cannot hold a git checkout yet",
                hint=f"depend on an sdist of {build.name} (a version on the index) to pack it",
            )
        out.append((build.source.url, build.source.sha256))
    return out


def target_artifacts(target: LockedTarget, *, strict: bool = False) -> list[Artifact]:
    """Every artifact ``target`` names, in the lock's order."""
    found = [Artifact((p.url,), p.filename, p.sha256, "pip", size=p.size) for p in target.pip]
    found += [
        Artifact((url,), filename_of(url), sha, "pip")
        for url, sha in build_sources(target, strict=strict)
    ]
    found += [
        Artifact(
            (c.url,),
            filename_of(c.url),
            c.sha256,
            "conda",
            c.md5,
            size=c.size,
            label=f"conda package {c.name} {c.version} ({c.build})",
        )
        for c in target.conda
    ]
    return found


def merged(artifacts: Iterable[Artifact], *, ordered: bool = True) -> list[Artifact]:
    """Once per (sha256, file name), every URL kept; sorted, or (``ordered=False``) in
    the order first named."""
    out: dict[tuple[str, str], Artifact] = {}
    for item in artifacts:
        key = (item.sha256, item.filename)
        known = out.get(key)
        if known is not None and (known.kind, known.md5) != (item.kind, item.md5):
            raise InstallError(f"the lock names {item.filename} twice with other hashes")
        size = item.size if known is None or known.size is None else known.size
        if known is not None and None not in (known.size, item.size) and known.size != item.size:
            raise InstallError(f"the lock names {item.filename} twice with other sizes")
        urls = tuple(sorted({*(known.urls if known else ()), *item.urls}))
        out[key] = Artifact(
            urls, item.filename, item.sha256, item.kind, item.md5, size=size, label=item.label
        )
    return [out[key] for key in (sorted(out) if ordered else out)]


def lock_artifacts(lock: Lock, targets: Iterable[str]) -> list[Artifact]:
    """Every artifact the named targets of ``lock`` name, once each, sorted."""
    found: list[Artifact] = []
    for name in targets:
        target = lock.target(name)
        if target is None:
            raise UsageError(f"gpuenv.lock has no target {name!r}", hint="run 'gpuenv lock' first")
        found += target_artifacts(target, strict=True)
    return merged(found)
