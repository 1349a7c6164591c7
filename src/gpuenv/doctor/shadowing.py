"""Another copy of torch, its companions or an nvidia-* wheel earlier on ``sys.path``
than the environment's own: what ``import torch`` (and torch's library preload, which
walks ``sys.path`` too) really gets, and which variable or file put it first.

Only copies that win from outside the environment's site-packages are findings: the
environment's own copy winning over a later one changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from gpuenv.doctor import _syspath
from gpuenv.doctor._context import Context
from gpuenv.doctor._fixes import entry_fix
from gpuenv.doctor._fsafe import is_file
from gpuenv.doctor._syspath import PathEntry
from gpuenv.doctor.environment import Dist
from gpuenv.doctor.model import Finding, Severity
from gpuenv.names import TORCH_IMPORTS

PACKAGES = TORCH_IMPORTS


def _watched(ctx: Context) -> list[str]:
    names = [*PACKAGES]
    names += sorted({d.name for d in ctx.env.path_dists if d.name.startswith("nvidia-")})
    return names


def _package_entries(ctx: Context, name: str) -> list[PathEntry]:
    """sys.path entries holding an importable ``name`` package, in import order."""
    return [
        e
        for e in ctx.env.search_path
        if e.origin != _syspath.ORIGIN_STDLIB and is_file(e.path / name / "__init__.py")
    ]


def _copies(ctx: Context, name: str) -> list[tuple[PathEntry, Dist | None]]:
    """(entry, its dist-info) for each copy of ``name``, the winner first."""
    out: list[tuple[PathEntry, Dist | None]] = []
    dists = ctx.env.copies(name)
    entries = _package_entries(ctx, name) if name in PACKAGES else []
    if not entries:
        entries = [e for d in dists for e in ctx.env.search_path if e.path == d.site_packages]
    for entry in entries:
        dist = next((d for d in dists if d.site_packages == entry.path), None)
        if all(entry.path != e.path for e, _d in out):
            out.append((entry, dist))
    return out


def _row(name: str, entry: PathEntry, dist: Dist | None) -> dict[str, Any]:
    return {
        "distribution": name,
        "version": dist.version if dist else None,
        "location": str(entry.path),
        "on_sys_path_because": entry.detail,
    }


def _shadowing(ctx: Context, entry: PathEntry, rows: list[dict[str, Any]]) -> Finding:
    names = sorted({r["imported"]["distribution"] for r in rows})
    torch_family = [r for r in rows if r["imported"]["distribution"] in PACKAGES]
    differs = any(
        r["imported"]["version"] != s["version"] for r in torch_family for s in r["shadowed"]
    )
    shown = "; ".join(
        f"{r['imported']['distribution']} {r['imported']['version'] or ''} there hides "
        + ", ".join(f"{s['version'] or 'a copy'} in {s['location']}" for s in r["shadowed"])
        for r in rows
    )
    return Finding(
        code="python-path-shadowing",
        severity=Severity.ERROR if differs else Severity.WARNING,
        message=f"{entry.path} comes first on sys.path ({entry.detail}): {shown}",
        evidence={
            "entry": entry.to_json(),
            "distributions": rows,
            "sys_path_from": "the interpreter" if ctx.env.asked else "modelled from the files",
        },
        fix=entry_fix(ctx, entry, names),
    )


def _outside(ctx: Context, name: str, entry: PathEntry, dist: Dist | None) -> Finding:
    return Finding(
        code="package-outside-environment",
        severity=Severity.WARNING,
        message=f"{name} {dist.version if dist else ''} is imported from {entry.path}, "
        f"outside {ctx.env.prefix} ({entry.detail}); the environment has no {name} of its own",
        evidence={"imported": _row(name, entry, dist), "environment": str(ctx.env.prefix)},
        fix=entry_fix(ctx, entry, [name]) + f" Then install {name} into {ctx.env.prefix}.",
    )


def _not_asked(ctx: Context) -> Finding | None:
    problem = ctx.env.ask_problem
    if problem is None:
        return None
    return Finding(
        code="interpreter-not-asked",
        severity=Severity.INFO,
        message=f"{ctx.env.python} could not be asked for its sys.path ({problem}); the "
        "doctor modelled it from the files (PYTHONPATH, the user site, .pth files)",
        evidence={"python": str(ctx.env.python), "problem": problem},
        fix=f"check that {ctx.env.python} runs ('{ctx.env.python} -c pass'); a broken "
        "interpreter is worth fixing before anything else here",
    )


def check(ctx: Context) -> list[Finding]:
    note = _not_asked(ctx)
    return ([note] if note else []) + _shadow_findings(ctx)


def _shadow_findings(ctx: Context) -> list[Finding]:
    grouped: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    entries: dict[Path, PathEntry] = {}
    findings = []
    for name in _watched(ctx):
        copies = _copies(ctx, name)
        if not copies or copies[0][0].own:
            continue
        winner, dist = copies[0]
        losers = [(e, d) for e, d in copies[1:] if e.own]
        if not losers:
            if name in PACKAGES and winner.origin != _syspath.ORIGIN_OTHER:
                findings.append(_outside(ctx, name, winner, dist))
            continue
        entries[winner.path] = winner
        grouped[winner.path].append(
            {
                "imported": _row(name, winner, dist),
                "shadowed": [_row(name, e, d) for e, d in losers],
            }
        )
    findings += [_shadowing(ctx, entries[path], rows) for path, rows in grouped.items()]
    return findings
