"""conda and pip in one environment: the same software from both, two ``*.dist-info``
of one distribution, and pip's files written over files a conda package owns.

A distribution counts as conda's when its ``INSTALLER`` says ``conda``, or when it has no
``INSTALLER`` and a conda package lists its metadata. Renamed pairs (conda ``pytorch``
and pip ``torch``, ``cudatoolkit``/``cuda-*`` and ``nvidia-*-cu1x``) come from
``knowledge/data/pairs.toml``. RECORD files are read only in conda environments, only for
distributions pip installed, and only when their top-level names meet a conda package's.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpuenv.doctor._context import Context
from gpuenv.doctor._fixes import numbered, pip_command
from gpuenv.doctor._osowned import externally_managed, os_package
from gpuenv.doctor._records import Claim, Owner
from gpuenv.doctor.environment import CondaPackage, Dist
from gpuenv.doctor.model import Finding, Severity
from gpuenv.knowledge._data import data_toml

_MAX_LISTED = 20


@dataclass(frozen=True)
class Pair:
    """One entry of ``pairs.toml``: pip names (globs) and the conda names of the same
    software, and how serious having both is."""

    pip: tuple[str, ...]
    conda: tuple[str, ...]
    severity: Severity


@cache
def pairs() -> tuple[Pair, ...]:
    data = data_toml("pairs.toml")
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


def _mixed(ctx: Context, own: _Ownership, precise: set[tuple[str, str]]) -> list[Finding]:
    """Pairs of the same software from both managers, except those a more precise
    ``pip-overwrote-conda-files`` already reports."""
    conda = {p.name: p for p in ctx.env.conda_packages}
    groups: dict[Severity, list[dict[str, Any]]] = defaultdict(list)
    for dist in ctx.env.dists:
        names, severity = counterparts(dist.name)
        hits = sorted(names & conda.keys())
        if not hits:
            continue
        installer = own.pip_installer(dist)
        if installer is None:
            continue
        for name in hits:
            if (dist.name, name) in precise:
                continue
            package = conda[name]
            state = conda_state(ctx, package)
            groups[severity].append(
                {
                    "pip": f"{dist.name} {dist.version}",
                    "pip_dist_info": str(dist.path),
                    "installer": installer,
                    "conda": f"{package.name} {package.version} ({package.build})",
                    "conda_meta": str(package.meta),
                    "conda_files": state.files,
                    "conda_files_missing": state.missing,
                    "_fix": _mixed_fix(ctx, dist, package, state),
                }
            )
    ordered = sorted(groups.items(), key=lambda item: item[0].rank)
    return [_mixed_finding(severity, rows) for severity, rows in ordered]


@dataclass(frozen=True)
class CondaState:
    """How much of a conda package is still on disk."""

    files: int  # files conda-meta lists
    missing: int  # of those, not on disk


def conda_state(ctx: Context, package: CondaPackage) -> CondaState:
    prefix = ctx.env.prefix
    missing = sum(1 for rel in package.files if not os.path.lexists(prefix / rel))
    return CondaState(len(package.files), missing)


def _pip_cmd(ctx: Context, dist: Dist, action: str, *args: str) -> str:
    owner = Owner("pip", dist.name, dist.version, dist.path, dist=dist)
    return pip_command(ctx, owner, action, *args)


def _keep_pip(ctx: Context, dist: Dist, package: CondaPackage, overwritten: int) -> list[str]:
    steps = [
        f"'conda remove --force {package.name}'"
        + (
            f" (it deletes the {overwritten} file(s) pip wrote over conda's)"
            if overwritten
            else " (only conda's record and its own files go)"
        )
    ]
    if overwritten:
        pin = f"{dist.name}=={dist.version}"
        steps.append(f"'{_pip_cmd(ctx, dist, 'install', '--force-reinstall', '--no-deps', pin)}'")
    return steps


def _back_to_conda(ctx: Context, dist: Dist, package: CondaPackage, why: str) -> list[str]:
    return [
        f"'{_pip_cmd(ctx, dist, 'uninstall', dist.name)}'",
        f"'conda install --force-reinstall {package.spec}' ({why})",
    ]


def _either(first: tuple[str, list[str]], second: tuple[str, list[str]]) -> str:
    (label, steps), (other, other_steps) = first, second
    return f"{label[:1].upper()}{label[1:]}: {numbered(steps)} Or {other}: {numbered(other_steps)}"


def _mixed_fix(ctx: Context, dist: Dist, package: CondaPackage, state: CondaState) -> str:
    keep_pip = (f"keep pip's {dist.name}", _keep_pip(ctx, dist, package, 0))
    if state.files in (0, state.missing):
        gone = f"conda's {package.name} is only a record now: its files are gone"
        conda = (
            f"go back to conda's {package.name}",
            _back_to_conda(ctx, dist, package, "reinstalls its files"),
        )
        return f"{gone}. " + _either(keep_pip, conda)
    if state.missing:
        conda = (
            f"go back to conda's {package.name}",
            _back_to_conda(ctx, dist, package, f"restores its {state.missing} missing file(s)"),
        )
        return _either(conda, keep_pip)
    keep_conda = (
        f"keep conda's {package.name}",
        [f"'{_pip_cmd(ctx, dist, 'uninstall', dist.name)}'"],
    )
    return _either(keep_conda, keep_pip)


def _mixed_finding(severity: Severity, rows: list[dict[str, Any]]) -> Finding:
    shown = "; ".join(f"{r['pip']} ({r['installer']}) and conda {r['conda']}" for r in rows)
    fixes = [r.pop("_fix") for r in rows]
    if len(rows) == 1:
        fix = fixes[0]
    else:
        fix = " | ".join(
            f"for {r['pip']} and conda {r['conda']}: {f}" for r, f in zip(rows, fixes, strict=True)
        )
    return Finding(
        code="mixed-managers",
        severity=severity,
        message=f"installed by both pip and conda: {shown}; which copy loads depends on path order",
        evidence={"pairs": rows[:_MAX_LISTED], "count": len(rows)},
        fix=fix,
    )


def _duplicates(ctx: Context) -> list[Finding]:
    by_name: dict[str, list[Dist]] = defaultdict(list)
    for dist in ctx.env.dists:
        by_name[dist.name].append(dist)
    findings = []
    for name, dists in sorted(by_name.items()):
        if len(dists) < 2:
            continue
        owners = [os_package(ctx, d.path) for d in dists]
        if len(set(owners)) == 1 and owners[0] and len({d.version for d in dists}) == 1:
            continue  # one OS package ships both metadata (Debian: dist-info and egg-info)
        copies = [
            {"path": str(d.path), "version": d.version, "installer": d.installer()}
            | ({"os_package": owner} if owner else {})
            for d, owner in zip(dists, owners, strict=True)
        ]
        findings.append(
            Finding(
                code="duplicate-dist-info",
                severity=Severity.ERROR,
                message=f"{name} is installed {len(dists)} times: "
                + ", ".join(f"{d.version} at {d.path}" for d in dists),
                evidence={"distribution": name, "copies": copies},
                fix=_duplicate_fix(ctx, name, dists, owners),
            )
        )
    return findings


def _duplicate_fix(ctx: Context, name: str, dists: list[Dist], owners: list[str | None]) -> str:
    marker = externally_managed(ctx)
    if marker is None and not any(owners):
        return (
            f"uninstall {name} until none is left ('pip uninstall {name}' repeatedly, "
            "or delete the stale *.dist-info), then install it once"
        )
    strays = [d for d, owner in zip(dists, owners, strict=True) if owner is None]
    packages = sorted({owner for owner in owners if owner})
    steps = [
        f"delete the copy no OS package owns: {d.path} and the files its RECORD lists"
        for d in strays
    ]
    if packages:
        steps.append(
            f"if {name} still fails to import, reinstall it with the OS package manager "
            f"('apt-get install --reinstall {' '.join(packages)}')"
        )
    else:
        steps.append(f"reinstall {name} with the OS package manager")
    why = f" ({marker} marks this interpreter as the OS's: pip refuses to change it)"
    steps.append(
        "install your own packages in a venv (python3 -m venv) or a gpuenv project, not "
        "into the system Python" + (why if marker else "")
    )
    return numbered(steps)


def _overwrites(ctx: Context, own: _Ownership) -> dict[tuple[Dist, CondaPackage], list[str]]:
    """(pip's distribution, conda's package) -> the paths both claim."""
    found: dict[tuple[Dist, CondaPackage], list[str]] = defaultdict(list)
    for path, rows in ctx.records.multi.items():
        claims = [Claim(*row) for row in rows]
        packages = [c for c in claims if c.owner.package is not None]
        dists = [c for c in claims if c.owner.dist is not None]
        for pip_claim in dists:
            dist = pip_claim.owner.dist
            assert dist is not None
            if own.pip_installer(dist) is None:
                continue
            for conda_claim in packages:
                package = conda_claim.owner.package
                assert package is not None
                same = pip_claim.digest and pip_claim.digest == conda_claim.digest
                if not same:
                    found[(dist, package)].append(path)
    return found


def _overwrite_finding(
    ctx: Context, own: _Ownership, dist: Dist, package: CondaPackage, paths: list[str]
) -> Finding:
    files = sorted(own.rel(Path(p)) for p in paths)
    state = conda_state(ctx, package)
    conda = (
        f"go back to conda's {package.name}",
        _back_to_conda(ctx, dist, package, "restores conda's files"),
    )
    keep = (f"keep pip's {dist.name}", _keep_pip(ctx, dist, package, len(files)))
    return Finding(
        code="pip-overwrote-conda-files",
        severity=Severity.ERROR,
        message=f"pip's {dist.name} {dist.version} wrote {len(files)} file(s) that conda's "
        f"{package.name} owns, e.g. {files[0]}",
        evidence={
            "pip": f"{dist.name} {dist.version}",
            "pip_dist_info": str(dist.path),
            "conda": package.name,
            "conda_meta": str(package.meta),
            "files": files[:_MAX_LISTED],
            "count": len(files),
            "conda_files": state.files,
            "conda_files_missing": state.missing,
        },
        fix=_either(conda, keep),
    )


def check(ctx: Context) -> list[Finding]:
    findings = _duplicates(ctx)
    if not ctx.env.conda_packages:
        return findings
    own = _Ownership(ctx)
    overwrites = _overwrites(ctx, own)
    precise = {(dist.name, package.name) for dist, package in overwrites}
    over = [
        _overwrite_finding(ctx, own, dist, package, paths)
        for (dist, package), paths in sorted(overwrites.items(), key=lambda i: i[1][0])
    ]
    return findings + _mixed(ctx, own, precise) + over
