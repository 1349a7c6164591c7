"""Installing a target's builds into its prefix: after its wheels, before its marker.

For each build, in dependency order: the lock entry is checked again (its identity
against its inputs), its wheel comes from the build cache or is built now
(``runner.wheel_for``, under the identity's lock), and uv installs it into the prefix
(``--no-deps``: the lock is complete). The prefix then records what was built in
``etc/gpuenv/builds.json`` (identities, which ``gpuenv gc`` keeps alive; each wheel's
extension modules, which ``gpuenv verify`` imports and inspects).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuenv import _proc
from gpuenv._artifacts import ArtifactSources
from gpuenv._fs import atomic_write_text
from gpuenv._progress import detail
from gpuenv.builds import wheelfile
from gpuenv.builds.cache import BuildCache, CachedWheel
from gpuenv.builds.model import BuildEntry, BuildOutcome, check_entry
from gpuenv.builds.progress import BuildProgress
from gpuenv.builds.runner import BuildContext, wheel_for
from gpuenv.errors import ExternalToolError, InstallError
from gpuenv.store import BUILDS_RECORD, Store

RECORD_FORMAT = 1
INSTALL_TIMEOUT = 3600.0
_UV_CACHE_KEYS = ("UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR", "UV_LINK_MODE", "UV_OFFLINE")


def ordered(builds: tuple[BuildEntry, ...]) -> list[BuildEntry]:
    """Builds that need other builds come after them (name order otherwise)."""
    names = {b.name for b in builds}
    done: set[str] = set()
    out: list[BuildEntry] = []
    pending = sorted(builds, key=lambda b: b.name)
    while pending:
        ready = [b for b in pending if not (set(b.requires) & names) - done - {b.name}]
        if not ready:  # a cycle: build in name order and let the builds say what is missing
            ready = pending[:1]
        for entry in ready:
            out.append(entry)
            done.add(entry.name)
        pending = [b for b in pending if b.name not in done]
    return out


def _site_packages(prefix: Path) -> Path | None:
    return next(iter(sorted(prefix.glob("lib/python3*/site-packages"))), None)


def _install_wheel(prefix: Path, wheel: CachedWheel, uv: Path, env: Mapping[str, str]) -> None:
    argv: list[str | Path] = [uv, "pip", "install", "--no-config", "--quiet", "--no-deps"]
    argv += ["--python", prefix / "bin" / "python", "--link-mode", "hardlink", wheel.wheel]
    try:
        _proc.run(argv, timeout=INSTALL_TIMEOUT, env=env, what="uv pip install (built wheel)")
    except ExternalToolError as exc:
        raise InstallError(
            f"the built wheel {wheel.wheel.name} did not install: {exc.message}"
        ) from None


def _described(
    entry: BuildEntry, wheel: CachedWheel, outcome: BuildOutcome, prefix: Path
) -> dict[str, Any]:
    site = _site_packages(prefix)
    inside = [p for p in wheelfile.extensions(wheel.wheel) if ".data/" not in p]
    where = [str((site / p).relative_to(prefix)) for p in inside] if site else []
    built_with = wheel.record.get("built_with", {})
    return {
        "name": entry.name,
        "version": entry.version,
        "identity": entry.identity,
        "wheel": wheel.wheel.name,
        "sha256": wheel.sha256,
        "cached": outcome.cached,
        "extensions": where,
        "modules": [m for m in (wheelfile.module_name(p) for p in inside) if m],
        "torch": entry.inputs.torch,
        "cuda": entry.inputs.cuda,
        "arch_list": entry.inputs.arch_list,
        "host_compiler": built_with.get("host_compiler") if isinstance(built_with, dict) else None,
    }


@dataclass(frozen=True)
class Tools:
    """What the install step hands its builds: uv and its environment, the prefix's
    toolkit, and where locked URLs are fetched from."""

    uv: Path
    uv_env: Mapping[str, str]
    cuda_home: Path | None
    sources: ArtifactSources = field(default_factory=ArtifactSources)

    def context(self, prefix: Path, progress: Callable[[str], None]) -> BuildContext:
        """How a build of this install runs: in ``prefix``, with uv's cache settings."""
        started: set[str] = set()
        return BuildContext(
            prefix=prefix,
            uv=self.uv,
            cuda_home=self.cuda_home,
            environ=dict(os.environ),
            progress=lambda p: report_progress(progress, p, started),
            cache_env={k: self.uv_env[k] for k in _UV_CACHE_KEYS if k in self.uv_env},
            sources=self.sources,
        )


def install_builds(
    prefix: Path,
    store: Store,
    builds: tuple[BuildEntry, ...],
    pip_hashes: Mapping[str, str],
    tools: Tools,
    progress: Callable[[str], None],
) -> tuple[BuildOutcome, ...]:
    """Build (or reuse) and install every build of a target; write the prefix's record."""
    cache = BuildCache(store)
    ctx = tools.context(prefix, progress)
    outcomes = []
    described = []
    for entry in ordered(builds):
        check_entry(entry, pip_hashes, where=f"gpuenv.lock: {prefix.name}")
        with wheel_for(cache, entry, ctx) as (wheel, outcome):
            for note in outcome.notes:
                progress(note)
            how = "from the build cache" if outcome.cached else f"built in {outcome.seconds:.1f} s"
            progress(f"installing {entry.label()} ({how})")
            _install_wheel(prefix, wheel, tools.uv, tools.uv_env)
            described.append(_described(entry, wheel, outcome, prefix))
        outcomes.append(outcome)
    body = {"format": RECORD_FORMAT, "builds": described}
    atomic_write_text(prefix / BUILDS_RECORD, json.dumps(body, indent=2) + "\n", durable=False)
    return tuple(outcomes)


def report_progress(
    progress: Callable[[str], None], report: BuildProgress, started: set[str]
) -> None:
    """A build's start is a phase (a line in a log); its compile steps and heartbeats are
    details, drawn live on a terminal only (a log would get hundreds of lines)."""
    if report.package not in started:
        started.add(report.package)
        progress(f"building {report.package}")
    detail(progress, report.render())


def read_record(prefix: Path) -> list[dict[str, Any]]:
    """The builds a prefix records (``etc/gpuenv/builds.json``); [] when it has none.
    A record that is there but damaged is an error: verification must not skip them."""
    path = prefix / BUILDS_RECORD
    try:
        if path.stat().st_size > 1 << 22:
            raise InstallError(f"{path}: too large to be gpuenv's build record")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: deep nesting
        raise InstallError(f"{path}: unreadable ({exc})", hint="reinstall the prefix") from None
    builds = data.get("builds") if isinstance(data, dict) else None
    if not isinstance(builds, list) or not all(isinstance(b, dict) for b in builds):
        raise InstallError(f"{path}: not gpuenv's build record", hint="reinstall the prefix")
    return builds


def extensions_of(prefix: Path) -> tuple[dict[str, Any], ...]:
    """What verification checks of each build: its modules, and its shared objects."""
    out = []
    for build in read_record(prefix):
        paths = [f for f in build.get("extensions", []) if isinstance(f, str)]
        if any(Path(f).is_absolute() or ".." in Path(f).parts for f in paths):
            raise InstallError(f"{prefix / BUILDS_RECORD}: a path leaves the prefix")
        files = [str(prefix / f) for f in paths]
        modules = [m for m in build.get("modules", []) if isinstance(m, str)]
        out.append(
            {
                "name": build.get("name"),
                "version": build.get("version"),
                "modules": modules,
                "files": files,
            }
        )
    return tuple(out)
