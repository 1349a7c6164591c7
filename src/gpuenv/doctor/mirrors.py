"""A mirror of the PyTorch index, configured outside the project (``GPUENV_MIRRORS``, the
user's or the site's config file), must keep its layout: one index per build,
``<base>/<cu tag>/<package>/``. ``gpuenv lock`` finds out when a resolution answers
404; here two requests for the CPU build's torch page say it before any lock does.

Only a configured mirror of the PyTorch index is looked at (nothing is sent when none
is); any network failure here is no finding: ``lock`` names those with their fix.
"""

from __future__ import annotations

from gpuenv._docs import doc
from gpuenv._redact import redact, redact_url
from gpuenv.doctor._context import Context
from gpuenv.doctor.model import Finding, Severity
from gpuenv.errors import GpuenvError

_MIRRORS_DOC = doc("how-to/indexes-and-credentials.md", "mirrors")

BUILD = "cpu"  # every torch release has a CPU build: the page a mirror must have


def _covers(canonical: str, url: str) -> bool:
    base = canonical.rstrip("/")
    return url == base or url.startswith(base + "/")


def check(ctx: Context) -> list[Finding]:
    from gpuenv._network import Index, load_mirrors
    from gpuenv.plan import DEFAULT_TORCH_INDEX

    try:
        mirrors = load_mirrors(ctx.request.environ)
    except GpuenvError as exc:
        return [
            Finding(
                code="mirror-config",
                severity=Severity.WARNING,
                message=f"the mirror configuration cannot be used: {exc.message}",
                evidence={"error": exc.message},
                fix=exc.hint or f"fix it ({_MIRRORS_DOC})",
            )
        ]
    canonical = f"{DEFAULT_TORCH_INDEX}/{BUILD}"
    entry = next(
        (
            e
            for e in sorted(mirrors.entries, key=lambda e: -len(e.canonical))
            if _covers(e.canonical, canonical)
        ),
        None,
    )
    if entry is None:
        return []
    from gpuenv.lock._probe import layout_problem, page_status

    index = Index.parse("torch-mirror", mirrors.fetch_url(canonical))
    page = f"{index.url.rstrip('/')}/torch/"
    if page_status(page, index) != 404:
        return []
    problem = layout_problem(index, "torch") or f"{redact_url(page)} answers 404"
    return [
        Finding(
            code="mirror-layout",
            severity=Severity.WARNING,
            message=(
                f"the mirror {redact_url(entry.mirror)} of {redact(entry.canonical)} (from "
                f"{entry.source}) lacks the PyTorch index's layout: {problem}; 'gpuenv lock' "
                "through it fails"
            ),
            evidence={
                "mirror": redact_url(entry.mirror),
                "canonical": redact(entry.canonical),
                "source": entry.source,
                "page": redact_url(page),
            },
            fix=(
                "mirror the index as it is, one index per build: <base>/<cu tag>/<package>/ "
                f"({_MIRRORS_DOC})"
            ),
        )
    ]
