"""conda and pip in one environment: the same software from both, two ``*.dist-info``
of one distribution, and pip's files written over files a conda package owns.

A distribution counts as conda's when its ``INSTALLER`` says ``conda``, or when it has no
``INSTALLER`` and a conda package lists its metadata. Renamed pairs (conda ``pytorch``
and pip ``torch``, ``cudatoolkit``/``cuda-*`` and ``nvidia-*-cu1x``) come from
``data/pairs.toml``. RECORD files are read only in conda environments, only for
distributions pip installed, and only when their top-level names meet a conda package's.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from gpuenv.doctor._context import Context
from gpuenv.doctor.environment import Dist
from gpuenv.doctor.model import Finding, Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_MAX_LISTED = 20


@dataclass(frozen=True)
class Pair:
    pip: tuple[str, ...]
    conda: tuple[str, ...]
    severity: Severity


@cache
def pairs() -> tuple[Pair, ...]:
    text = (
        resources.files("gpuenv.doctor").joinpath("data").joinpath("pairs.toml").read_text("utf-8")
    )
    data = tomllib.loads(text)
    return tuple(
        Pair(tuple(p["pip"]), tuple(p["conda"]), Severity(p.get("severity", "warning")))
        for p in data["pair"]
    )


@cache
def _pair_patterns() -> tuple[tuple[re.Pattern[str], Pair], ...]:
    return tuple(
        (re.compile("|".join(fnmatch.translate(g) for g in pair.pip)), pair) for pair in pairs()
    )


@cache
def counterparts(pip_name: str) -> tuple[frozenset[str], Severity]:
    """conda names that hold the same software as the pip distribution ``pip_name``."""
    names = {pip_name}
    severity = Severity.WARNING
    for pattern, pair in _pair_patterns():
        if pattern.match(pip_name):
            names.update(pair.conda)
            if pair.severity is Severity.ERROR:
                severity = Severity.ERROR
    return frozenset(names), severity


class _Ownership:
    """Which files conda owns (prefix-relative paths) and which dists pip installed."""

    def __init__(self, ctx: Context) -> None:
        self.prefix = ctx.env.prefix
        self._prefix_text = str(ctx.env.prefix).rstrip("/") + "/"
        self.owner: dict[str, str] = {}
        for package in ctx.env.conda_packages:
            for rel in package.files:
                self.owner[rel] = package.name
        self._pip: dict[Path, str | None] = {}

    def site_packages_tops(self) -> set[str]:
        """Top-level names conda packages own in any site-packages directory."""
        marker = "/site-packages/"
        return {rel.split(marker, 1)[1].split("/", 1)[0] for rel in self.owner if marker in rel}

    def rel(self, path: Path) -> str:
        text = str(path)
        if text.startswith(self._prefix_text):  # the usual case, without relpath's cost
            return text[len(self._prefix_text) :]
        return Path(os.path.relpath(path, self.prefix)).as_posix()

    def listed(self, dist: Dist) -> bool:
        """Whether a conda package lists this distribution's metadata."""
        return self.rel(dist.path / "METADATA") in self.owner

    def pip_installer(self, dist: Dist) -> str | None:
        """The installer's name when not conda ("pip", "uv"), else None."""
        if dist.path not in self._pip:
            installer = dist.installer()
            if installer == "conda" or (installer is None and self.listed(dist)):
                self._pip[dist.path] = None
            else:
                self._pip[dist.path] = installer or "unknown"
        return self._pip[dist.path]


def _mixed(ctx: Context, own: _Ownership) -> tuple[list[Finding], set[tuple[str, str]]]:
    conda = {p.name: p for p in ctx.env.conda_packages}
    groups: dict[Severity, list[dict[str, Any]]] = defaultdict(list)
    reported: set[tuple[str, str]] = set()
    for dist in ctx.env.dists:
        names, severity = counterparts(dist.name)
        hits = sorted(names & conda.keys())
        if not hits:
            continue
        installer = own.pip_installer(dist)
        if installer is None:
            continue
        for name in hits:
            reported.add((dist.name, name))
            package = conda[name]
            groups[severity].append(
                {
                    "pip": f"{dist.name} {dist.version}",
                    "pip_dist_info": str(dist.path),
                    "installer": installer,
                    "conda": f"{package.name} {package.version} ({package.build})",
                    "conda_meta": str(package.meta),
                }
            )
    ordered = sorted(groups.items(), key=lambda item: item[0].rank)
    findings = [_mixed_finding(severity, rows) for severity, rows in ordered]
    return findings, reported


def _mixed_finding(severity: Severity, rows: list[dict[str, Any]]) -> Finding:
    shown = "; ".join(f"{r['pip']} ({r['installer']}) and conda {r['conda']}" for r in rows)
    return Finding(
        code="mixed-managers",
        severity=severity,
        message=f"installed by both pip and conda: {shown}; which copy loads depends on path order",
        evidence={"pairs": rows[:_MAX_LISTED], "count": len(rows)},
        fix="remove one copy: 'pip uninstall' the pip one and keep conda's, or rebuild the "
        "environment with one manager for these packages",
    )


def _duplicates(ctx: Context) -> list[Finding]:
    by_name: dict[str, list[Dist]] = defaultdict(list)
    for dist in ctx.env.dists:
        by_name[dist.name].append(dist)
    findings = []
    for name, dists in sorted(by_name.items()):
        if len(dists) < 2:
            continue
        copies = [
            {"path": str(d.path), "version": d.version, "installer": d.installer()} for d in dists
        ]
        findings.append(
            Finding(
                code="duplicate-dist-info",
                severity=Severity.ERROR,
                message=f"{name} is installed {len(dists)} times: "
                + ", ".join(f"{d.version} at {d.path}" for d in dists),
                evidence={"distribution": name, "copies": copies},
                fix=f"uninstall {name} until none is left ('pip uninstall {name}' repeatedly, "
                "or delete the stale *.dist-info), then install it once",
            )
        )
    return findings


def _record_paths(dist: Dist) -> list[Path]:
    try:
        lines = (dist.path / "RECORD").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    site = dist.site_packages
    return [Path(os.path.normpath(site / line.split(",", 1)[0])) for line in lines if line]


def _top_levels(dist: Dist) -> set[str] | None:
    try:
        text = (dist.path / "top_level.txt").read_text(encoding="utf-8")
    except OSError:
        return None
    return {line.strip() for line in text.splitlines() if line.strip()}


def _overwritten(ctx: Context, own: _Ownership, reported: set[tuple[str, str]]) -> list[Finding]:
    conda_tops = own.site_packages_tops()
    findings = []
    for dist in ctx.env.dists:
        if own.listed(dist):
            # conda's own metadata (a pip reinstall of the same version over it is a
            # same-name pair, reported by mixed-managers): no file read needed
            continue
        tops = _top_levels(dist)
        if tops is not None and not tops & conda_tops:
            continue
        if own.pip_installer(dist) is None:
            continue
        clashes: dict[str, list[str]] = defaultdict(list)
        for path in _record_paths(dist):
            rel = own.rel(path)
            package = own.owner.get(rel)
            if package is not None and (dist.name, package) not in reported:
                clashes[package].append(rel)
        for package, files in sorted(clashes.items()):
            findings.append(_overwrite_finding(ctx, dist, package, files))
    return findings


def _overwrite_finding(ctx: Context, dist: Dist, package: str, files: list[str]) -> Finding:
    meta = ctx.env.conda(package)
    return Finding(
        code="pip-overwrote-conda-files",
        severity=Severity.ERROR,
        message=f"pip's {dist.name} {dist.version} wrote {len(files)} file(s) that conda's "
        f"{package} owns, e.g. {files[0]}",
        evidence={
            "pip": f"{dist.name} {dist.version}",
            "pip_dist_info": str(dist.path),
            "conda": package,
            "conda_meta": str(meta.meta) if meta else None,
            "files": files[:_MAX_LISTED],
            "count": len(files),
        },
        fix=f"'pip uninstall {dist.name}', then 'conda install --force-reinstall {package}' "
        "to restore conda's files",
    )


def check(ctx: Context) -> list[Finding]:
    findings = _duplicates(ctx)
    if not ctx.env.conda_packages:
        return findings
    own = _Ownership(ctx)
    mixed, reported = _mixed(ctx, own)
    return findings + mixed + _overwritten(ctx, own, reported)
