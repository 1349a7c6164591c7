"""``LD_LIBRARY_PATH`` and ``LD_PRELOAD`` as the invoking process has them.

Empty or relative entries make the current directory a library search path (any
directory you ``cd`` into can inject a library), missing directories are stale, entries
inside another environment or holding another CUDA version shadow this environment's
libraries, duplicates are noise. ``LD_PRELOAD`` loads libraries ahead of everything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpuenv.doctor._context import Context
from gpuenv.doctor._fsafe import is_dir, is_file, resolved
from gpuenv.doctor._libversion import matches
from gpuenv.doctor.model import Finding, Severity

_MAX_PARENTS = 8
_FIX_REMOVE = "remove the entry from LD_LIBRARY_PATH (in your shell profile or module setup)"


def _value(ctx: Context) -> dict[str, Any]:
    return {"LD_LIBRARY_PATH": ctx.request.environ.get("LD_LIBRARY_PATH", "")}


def _relative(ctx: Context) -> Finding | None:
    bad = [
        {"position": i, "entry": e, "resolves_to": str(ctx.resolve_entry(e))}
        for i, e in enumerate(ctx.ld_library_path)
        if not e.startswith("/")
    ]
    if not bad:
        return None
    shown = ", ".join(repr(b["entry"]) for b in bad)
    return Finding(
        code="ld-library-path-relative",
        severity=Severity.ERROR,
        message=(
            f"LD_LIBRARY_PATH={ctx.request.environ.get('LD_LIBRARY_PATH', '')!r} has empty or "
            f"relative entries ({shown}): the current "
            "directory becomes a library search path, so any directory can inject a library"
        ),
        evidence={**_value(ctx), "entries": bad},
        fix="remove empty entries (a leading, trailing or doubled ':') and relative paths "
        "from LD_LIBRARY_PATH; write it as ${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}",
    )


def _absolute(ctx: Context) -> list[tuple[int, str]]:
    return [(i, e) for i, e in enumerate(ctx.ld_library_path) if e.startswith("/")]


def _missing(ctx: Context) -> Finding | None:
    gone: list[dict[str, Any]] = [
        {"position": i, "entry": e} for i, e in _absolute(ctx) if not is_dir(Path(e))
    ]
    if not gone:
        return None
    return Finding(
        code="ld-library-path-missing-dir",
        severity=Severity.WARNING,
        message="LD_LIBRARY_PATH names directories that do not exist: "
        + ", ".join(g["entry"] for g in gone),
        evidence={**_value(ctx), "entries": gone},
        fix=_FIX_REMOVE,
    )


def _owning_prefix(path: Path) -> Path | None:
    """The conda environment or venv that ``path`` lies in, if any."""
    for parent in [path, *list(path.parents)[:_MAX_PARENTS]]:
        if is_dir(parent / "conda-meta") or is_file(parent / "pyvenv.cfg"):
            return parent
    return None


def _foreign(ctx: Context) -> Finding | None:
    own = resolved(ctx.env.prefix)
    hits = []
    for i, entry in _absolute(ctx):
        path = Path(entry)
        if not is_dir(path):
            continue
        other = _owning_prefix(resolved(path))
        if other is not None and other != own:
            hits.append({"position": i, "entry": entry, "environment": str(other)})
    if not hits:
        return None
    return Finding(
        code="ld-library-path-foreign-env",
        severity=Severity.WARNING,
        message="LD_LIBRARY_PATH points into other environments: "
        + ", ".join(f"{h['entry']} (in {h['environment']})" for h in hits),
        evidence={**_value(ctx), "environment": str(ctx.env.prefix), "entries": hits},
        fix=_FIX_REMOVE + "; another environment's libraries shadow this one's",
    )


def _cuda_version(ctx: Context) -> Finding | None:
    torch = ctx.env.torch
    if torch is None or torch.cuda is None:
        return None
    index = ctx.libraries
    hits = []
    seen: set[Path] = set()
    for i, entry in _absolute(ctx):
        path = Path(entry)
        if not is_dir(path):
            continue
        for name, copy in index.listing.get(resolved(path), {}).items():
            other = matches(copy.version, str(torch.cuda)) is False or (
                copy.cuda_major is not None and copy.cuda_major != torch.cuda.major
            )
            if copy.library.versioned == "cuda" and other and copy.path not in seen:
                seen.add(copy.path)
                hits.append(
                    {
                        "position": i,
                        "entry": entry,
                        "file": copy.name,
                        "version": copy.version,
                        "torch_loads_this_name": name in index.needed,
                    }
                )
    if not hits:
        return None
    found = sorted({f"{h['file']} {h['version']} in {h['entry']}" for h in hits})
    rival = any(h["torch_loads_this_name"] for h in hits)
    tail = (
        "; torch loads some of these names"
        if rival
        else "; torch needs other names (they cannot replace its libraries, but programs "
        "and extensions of that CUDA load them)"
    )
    return Finding(
        code="ld-library-path-cuda-version",
        severity=Severity.WARNING if rival else Severity.INFO,
        message=f"LD_LIBRARY_PATH holds CUDA libraries of another version than torch's "
        f"CUDA {torch.cuda}: " + "; ".join(found) + tail,
        evidence={**_value(ctx), "torch_cuda": str(torch.cuda), "entries": hits},
        fix=_FIX_REMOVE + "; torch brings its own CUDA libraries",
    )


def _duplicates(ctx: Context) -> Finding | None:
    seen: dict[str, int] = {}
    repeats: list[dict[str, Any]] = []
    for i, entry in enumerate(ctx.ld_library_path):
        key = os.path.normpath(entry) if entry else entry
        if key in seen:
            repeats.append({"entry": entry, "positions": [seen[key], i]})
        else:
            seen[key] = i
    if not repeats:
        return None
    return Finding(
        code="ld-library-path-duplicate",
        severity=Severity.INFO,
        message="LD_LIBRARY_PATH lists directories more than once: "
        + ", ".join(r["entry"] or "''" for r in repeats),
        evidence={**_value(ctx), "entries": repeats},
        fix="list each directory once (activation scripts that prepend unconditionally "
        "pile up entries)",
    )


def _preload(ctx: Context) -> Finding | None:
    value = ctx.request.environ.get("LD_PRELOAD", "").strip()
    if not value:
        return None
    entries = [e for e in value.replace(" ", ":").split(":") if e]
    return Finding(
        code="ld-preload-set",
        severity=Severity.WARNING,
        message=f"LD_PRELOAD is set ({value}): these libraries load before torch's own "
        "and can replace any symbol",
        evidence={"LD_PRELOAD": value, "entries": entries},
        fix="unset LD_PRELOAD unless you set it on purpose for this program",
    )


def check(ctx: Context) -> list[Finding]:
    checks = (_relative, _missing, _foreign, _cuda_version, _duplicates, _preload)
    return [f for f in (c(ctx) for c in checks) if f is not None]
