"""At lock time: read the resolved torch family's own metadata, record what it says, and
report where it contradicts gpuenv's knowledge base.

The resolver that served the wheels reads their metadata (``WheelMetadataSource``: the
uv backend through ``gpuenv.lock.wheelmeta``, PEP 658 first, then HTTP range requests;
test doubles from their own catalogue). What the wheels say is recorded in the lock
(``LockedTarget.wheel_facts``): torch's Requires-Python, its CUDA runtime, cuDNN and NCCL
pins, and what torchvision and torchaudio require of torch.

A contradiction is a warning, not a failure, naming the fact and the data entry. The
lock already holds the wheels' truth (``verify`` checks the installed cuDNN and NCCL
against it), and the facts that choose a build are enforced elsewhere: a wrong CUDA
build fails ``check_against_plan``, and a Python or a companion the wheels refuse makes
the resolution itself fail. What remains wrong is the data, which the warning points at
(``tools/check_wheel_facts.py`` rewrites it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv._redact import redact
from gpuenv.errors import ExternalToolError
from gpuenv.knowledge.wheelfacts import parse_metadata, torch_facts, torch_requirement
from gpuenv.lock.model import PipPackage, PipRequest, WheelFacts
from gpuenv.names import COMPANIONS, TRIO

if TYPE_CHECKING:
    from gpuenv.knowledge import KnowledgeBase
    from gpuenv.plan import TargetPlan

FAMILY = TRIO


@runtime_checkable
class WheelMetadataSource(Protocol):
    """A resolver that can also hand over the METADATA text of a wheel it resolved."""

    def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str: ...


def with_credentials(url: str, request: PipRequest) -> str:
    """``url`` with the ``user:password@`` of the request's index on the same host (the
    lock keeps URLs without credentials; the index may need them to serve the file)."""
    host = urlsplit(url).netloc.lower()
    for index in (request.torch_index, request.default_index, *request.extra_indexes):
        if index is None:
            continue
        parts = urlsplit(index)
        if "@" in parts.netloc and parts.netloc.rsplit("@", 1)[1].lower() == host:
            target = urlsplit(url)
            return urlunsplit(
                (target.scheme, parts.netloc, target.path, target.query, target.fragment)
            )
    return url


def metadata_source(url: str, request: PipRequest) -> tuple[str, str | None]:
    """Where the METADATA of the locked wheel ``url`` (canonical) is read, and the
    ``Authorization`` header to send there. Through the mirror that serves it, as uv
    resolved and install downloads (the canonical host may be unreachable, and on an
    open network that traffic went around the mirror), with the credentials uv was given
    for it (``_fetch.fetch_credentials``: the mirror's URL, either name's
    ``UV_INDEX_*`` variables, ``~/.netrc``). Not mirrored: ``url`` with the credentials
    of its index."""
    fetched = request.mirrors.fetch_url(url)
    if fetched == url:
        return with_credentials(url, request), None
    from gpuenv._fetch import authorization, fetch_credentials
    from gpuenv._network import pip_indexes, strip_userinfo

    indexes = pip_indexes(request.default_index, request.extra_indexes, request.torch_index)
    header = authorization(fetched, fetch_credentials(indexes, request.mirrors))
    return strip_userinfo(fetched), header


def http_metadata(package: PipPackage, request: PipRequest, timeout: float = 30.0) -> str:
    """METADATA of a resolved wheel over HTTP (PEP 658, else range requests), read where
    ``metadata_source`` says; a failure names that URL (without credentials)."""
    from gpuenv.lock.wheelmeta import read_metadata

    url, header = metadata_source(package.url, request)
    return read_metadata(url, timeout=timeout, authorization=header)


def _cached(request: PipRequest, package: PipPackage) -> Path | None:
    """Where the METADATA of this exact wheel (by its sha256) is kept in gpuenv's cache:
    a wheel's metadata never changes, so a relock reads no metadata over the network."""
    if request.cache_dir is None or len(package.sha256) != 64:
        return None
    return request.cache_dir / "wheel-metadata" / f"{package.sha256}.METADATA"


def _of(text: str, package: PipPackage) -> bool:
    """Whether ``text`` is the METADATA of ``package``: its Name and Version headers."""
    from packaging.utils import canonicalize_name

    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        name, colon, value = line.partition(":")
        if colon:
            headers.setdefault(name.strip().lower(), value.strip())
    try:
        same = Version(headers.get("version", "")) == Version(package.version)
    except InvalidVersion:
        return False
    return same and canonicalize_name(headers.get("name", "")) == package.name


# wheelmeta.MAX_METADATA, without importing the wheel reader (zipfile, its HTTP ranges):
# a lock whose torch METADATA is cached reads it from the cache only
CACHED_LIMIT = 8 * 1024 * 1024


def read_wheel_metadata(
    source: WheelMetadataSource, package: PipPackage, request: PipRequest
) -> str:
    """The wheel's METADATA: from gpuenv's cache when the file there is this wheel's (a
    FIFO, a huge file, another wheel's or a truncated one is read again), else read."""
    path = _cached(request, package)
    if path is not None:
        from gpuenv import _fsread
        from gpuenv.errors import InputFileError

        try:
            text = _fsread.read_text(path, limit=CACHED_LIMIT, what="cached METADATA")
            if _of(text, package):
                return text
        except (OSError, InputFileError):
            pass
    text = source.wheel_metadata(package, request)
    if path is not None:
        from gpuenv._fs import atomic_write_text

        with contextlib.suppress(OSError):  # the cache is a courtesy
            atomic_write_text(path, text)
    return text


def read_wheel_facts(
    plan: TargetPlan,
    pip: tuple[PipPackage, ...],
    request: PipRequest,
    source: WheelMetadataSource,
) -> tuple[WheelFacts | None, list[str]]:
    """The facts the resolved torch family states, and warnings for what could not be read."""
    family = {p.name: p for p in pip if p.name in FAMILY and p.url.endswith(".whl")}
    if "torch" not in family:
        return None, []
    texts: dict[str, str] = {}
    warnings: list[str] = []
    from gpuenv.lock._background import Background

    reads = {
        n: Background(partial(read_wheel_metadata, source, p, request), name=f"metadata-{n}")
        for n, p in family.items()
    }
    for name, read in reads.items():
        try:
            text = read.result()
            if text is not None:
                texts[name] = text
        except ExternalToolError as exc:
            warnings.append(
                f"target {plan.target}: could not read the metadata of "
                f"{family[name].filename}: {redact(exc.message)}"
            )
    if "torch" not in texts:
        return None, warnings
    platform, python = plan.hardware.platform, ".".join(request.python.split(".")[:2])
    requires_python, torch_requires = parse_metadata(texts["torch"])
    facts = torch_facts(requires_python, torch_requires, platform=platform, python=python)
    companions: dict[str, str | None] = {}
    for name in COMPANIONS:
        spec = (
            torch_requirement(parse_metadata(texts[name])[1], platform=platform, python=python)
            if name in texts
            else None
        )
        companions[name] = str(spec) if spec is not None else None
    return (
        WheelFacts(
            requires_python=requires_python,
            cuda_runtime=facts.cuda_runtime,
            cudnn=facts.cudnn,
            nccl=facts.nccl,
            torchvision_requires=companions["torchvision"],
            torchaudio_requires=companions["torchaudio"],
        ),
        warnings,
    )


def _where(plan: TargetPlan, kb: KnowledgeBase) -> tuple[str, str]:
    release = kb.torch_release(plan.torch)
    if release is None:
        return "torch.toml", "torch.toml"
    on = release.on(plan.hardware.platform)
    build = on.build(plan.cu_tag)
    return on.provenance.where, build.provenance.where if build else on.provenance.where


def _contains(spec_text: str | None, version: str | None) -> bool:
    if spec_text is None or version is None:
        return True
    try:
        return SpecifierSet(spec_text).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return True


def contradictions(plan: TargetPlan, facts: WheelFacts, kb: KnowledgeBase) -> list[str]:
    """Each fact where the wheels and the knowledge base disagree, naming the data entry."""
    release_where, build_where = _where(plan, kb)
    found = []
    wheel = f"torch {plan.torch} ({plan.cu_tag}, {plan.hardware.platform})"
    pins: Mapping[str, tuple[str | None, str | None]] = {
        "cuDNN": (plan.cudnn, facts.cudnn),
        "NCCL": (plan.nccl, facts.nccl),
    }
    for fact, (data, read) in pins.items():
        if read is not None and data != read:
            said = f"says {data}" if data else "has no value"
            found.append(
                f"{fact}: the {wheel} wheel pins {read}, the knowledge base {said} ({build_where})"
            )
    runtime = ".".join(facts.cuda_runtime.split(".")[:2]) if facts.cuda_runtime else None
    if runtime is not None and plan.cuda is not None and runtime != plan.cuda:
        found.append(
            f"CUDA: the {wheel} wheel pins the CUDA {facts.cuda_runtime} runtime, the knowledge "
            f"base says {plan.cuda} ({build_where})"
        )
    if not _contains(facts.requires_python, f"{plan.python}.0"):
        found.append(
            f"Python: the {wheel} wheel requires Python {facts.requires_python}, the knowledge "
            f"base lets it have {plan.python} ({release_where})"
        )
    for name, version, spec in (
        ("torchvision", plan.torchvision, facts.torchvision_requires),
        ("torchaudio", plan.torchaudio, facts.torchaudio_requires),
    ):
        if version is not None and not _contains(spec, plan.torch):
            found.append(
                f"pairing: {name} {version} requires torch {spec}, the knowledge base pairs it "
                f"with torch {plan.torch} ({release_where})"
            )
    return [f"target {plan.target}: {line}" for line in found]
