"""Whether a locked target came from the indexes the spec and the overrides name now.

A target's input hash covers the spec, not ``GPUENV_TORCH_INDEX`` or ``GPUENV_INDEX_URL``:
with another index in one of them, ``lock`` rewrote the lock's URLs while ``lock
--check`` (and ``install --frozen``) said "up to date", and the reverse once the variable
was unset. What the lock records of its indexes is compared instead, with no network:

- the torch index: ``[targets.X.stack] index`` is ``<base>/<cu tag>`` whenever a torch
  index is named (the override, else ``[pip] torch-index``); with neither, nothing is
  compared (see ``_torch_reason``);
- the default index: the ``index`` of every locked package outside the torch family
  that no extra index served.

Indexes are compared as places (``place``): the canonical URL (a mirror's mapped back,
as the lock keeps them), without credentials, query or trailing slash. A token or a
password that changed is the same index; messages show URLs redacted.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from gpuenv._network import Mirrors, join_index, strip_userinfo
from gpuenv._redact import redact_url
from gpuenv.lock.model import LockedTarget
from gpuenv.names import TORCH_FAMILY
from gpuenv.spec import Spec

TORCH_VARIABLE = "GPUENV_TORCH_INDEX"
INDEX_VARIABLE = "GPUENV_INDEX_URL"


def place(url: str, mirrors: Mirrors) -> str:
    """``url`` as an index is compared (see the module doc)."""
    canonical = mirrors.canonical_url(strip_userinfo(url))
    parts = urlsplit(canonical)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


def index_reasons(
    spec: Spec,
    locked: LockedTarget,
    *,
    torch_index: str | None,
    index_url: str | None,
    mirrors: Mirrors,
) -> list[str]:
    """Why ``locked`` is not from the indexes named now (``torch_index``/``index_url``:
    the overrides, None when unset); empty when it is."""
    found = []
    torch = _torch_reason(spec, locked, torch_index, mirrors)
    if torch is not None:
        found.append(torch)
    default = _default_reason(spec, locked, index_url, mirrors)
    if default is not None:
        found.append(default)
    return found


def _torch_reason(
    spec: Spec, locked: LockedTarget, override: str | None, mirrors: Mirrors
) -> str | None:
    base = override or spec.pip.torch_index
    if base is None:
        # The default torch index, or the default index for PyPI's own build: telling
        # them apart needs the planner (70 ms of every install's check), so a lock made
        # under an override since unset is not told here.
        return None
    recorded = locked.stack.index
    wanted = join_index(base, locked.stack.cu_tag)
    if place(wanted, mirrors) == place(recorded, mirrors):
        return None
    source = TORCH_VARIABLE if override else f"[pip] torch-index; {TORCH_VARIABLE} is not set"
    return (
        f"the torch index is now {redact_url(wanted)} ({source}), "
        f"the lock was made from {redact_url(recorded)}"
    )


def _default_reason(
    spec: Spec, locked: LockedTarget, override: str | None, mirrors: Mirrors
) -> str | None:
    named = override or spec.pip.index_url
    if named is None:
        return None  # uv's own default: nothing to compare without asking uv
    extras = {place(url, mirrors) for url in spec.pip.extra_index_urls}
    served = {
        p.index
        for p in locked.pip
        if p.index and p.name not in TORCH_FAMILY and place(p.index, mirrors) not in extras
    }
    wanted = place(named, mirrors)
    others = sorted(i for i in served if place(i, mirrors) != wanted)
    if not others:
        return None
    source = (
        INDEX_VARIABLE if override is not None else f"[pip] index-url; {INDEX_VARIABLE} is not set"
    )
    return (
        f"the default index is now {redact_url(named)} ({source}), "
        f"the lock's packages come from {', '.join(redact_url(i) for i in others)}"
    )
