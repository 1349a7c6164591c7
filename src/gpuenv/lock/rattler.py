"""The conda half of a lock: solve with py-rattler for the TARGET's virtual packages.

rattler never inspects the host when it is given ``virtual_packages`` explicitly, and
this backend always gives the request's complete list (``__cuda``, ``__cuda_arch``,
``__glibc``, ``__linux``, ``__unix``); a name missing from that list is absent on the
target (a CPU target has no ``__cuda``). Repodata comes from the request's channels for
its platform and ``noarch``. Locked records that are still in the channels are passed to
the solver as preferences, so existing pins stay while they fit.

rattler is imported inside the functions that use it: importing it is slow, and
``gpuenv --help`` and ``gpuenv run`` must not pay for it. Its API is async; each solve
runs in its own ``asyncio.run``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from gpuenv._network import Mirrors, network_error, strip_userinfo
from gpuenv._redact import redact, redact_url, remember_secret
from gpuenv.errors import ExternalToolError, NoCompatiblePlan, UsageError
from gpuenv.lock._uv_output import classify
from gpuenv.lock.model import CondaPackage, CondaRequest

DEFAULT_TIMEOUT = 600.0
_VIRTUAL = re.compile(r"__[a-z0-9_]+")
_TREE = re.compile("^[\\s\u2502\u251c\u2514\u2500]+")  # │ ├ └ ─


def _split_virtual(value: str) -> tuple[str, str]:
    """``"12.4"`` -> ``("12.4", "0")``; ``"2.28=0"`` -> ``("2.28", "0")``."""
    version, _, build = value.partition("=")
    return (version.strip() or "0"), (build.strip() or "0")


class RattlerSolver:
    """``CondaSolver`` backed by py-rattler."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout

    def describe(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"py-rattler {version('py-rattler')}"
        except PackageNotFoundError:  # pragma: no cover - a dependency
            return "py-rattler"

    def resolve(self, request: CondaRequest) -> tuple[CondaPackage, ...]:
        import asyncio  # here, not at import: it costs ~20 ms and only solves need it

        urls = [*request.channels, *(m.mirror for m in request.mirrors.entries)]
        try:
            with authenticated_client(urls) as client:
                solve = self._solve(request, client)
                records = asyncio.run(asyncio.wait_for(solve, self.timeout))
        except (asyncio.TimeoutError, TimeoutError) as exc:  # distinct types before 3.11
            raise ExternalToolError(
                f"the conda solve did not finish within {self.timeout:g} s"
            ) from exc
        return tuple(sorted((_package(r) for r in records), key=lambda p: (p.name, p.subdir)))

    async def _solve(self, request: CondaRequest, client: Any) -> list[Any]:
        import rattler
        from rattler import exceptions as rx

        channels = [_channel(c, request.mirrors) for c in request.channels]
        specs = _match_specs(request.specs)
        virtual = _virtual_packages(request.virtual_packages)
        platforms = [_subdir(request.platform), rattler.Subdir("noarch")]
        gateway = rattler.Gateway(
            cache_dir=request.cache_dir / "rattler" if request.cache_dir else None,
            client=client,
        )
        try:
            locked = await _locked_records(gateway, channels, platforms, request)
            solved: list[Any] = await rattler.solve(
                channels,
                specs,
                gateway=gateway,
                platforms=platforms,
                locked_packages=locked,
                virtual_packages=virtual,
                timeout=timedelta(seconds=self.timeout),
            )
        except rx.SolverError as exc:
            raise NoCompatiblePlan(
                explain_unsolvable(str(exc), request.virtual_packages, request.platform)
            ) from exc
        except BaseException as exc:  # rattler's fetch/gateway/IO errors have no common base
            # ... and a Rust panic is pyo3's PanicException, a BaseException
            if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                raise
            text = redact(str(exc).strip())
            failure = classify(text)
            if failure is not None:
                raise network_error(
                    failure,
                    index=None,
                    role="the conda channel",
                    mirrors=request.mirrors,
                    stderr_tail=text,
                ) from None
            raise ExternalToolError(
                f"conda solve failed ({type(exc).__name__}): {text}",
                stderr_tail=text,
            ) from None
        return [_canonical(r, request.mirrors) for r in solved]


def _channel(name_or_url: str, mirrors: Mirrors) -> Any:
    """The channel, through its mirror when one is configured (a name such as
    ``conda-forge`` is mirrored by its URL, ``https://conda.anaconda.org/conda-forge``)."""
    from rattler import Channel
    from rattler import exceptions as rx

    try:
        channel = Channel(strip_userinfo(name_or_url))  # credentials: authenticated_client
        if mirrors.entries:
            mirrored = mirrors.fetch_url(str(channel.base_url).rstrip("/"))
            if mirrored != str(channel.base_url).rstrip("/"):
                channel = Channel(strip_userinfo(mirrored))
        return channel
    except (rx.InvalidChannelError, rx.InvalidUrlError) as exc:
        raise UsageError(f"not a conda channel: {redact(name_or_url)!r} ({exc})") from exc


@contextmanager
def authenticated_client(urls: Iterable[str]) -> Iterator[Any]:
    """A rattler ``Client`` that authenticates, for a solve and for an install alike:
    rattler's own stores (``RATTLER_AUTH_FILE``, keyring, netrc) and the credentials in
    ``urls`` (channel and mirror URLs with ``user:password@``). Those go to rattler in a
    temporary auth file (0600, merged with the user's own, removed afterwards), never in
    a URL: rattler keeps URLs in its caches and in the prefix's conda-meta."""
    from rattler.networking import AuthenticationMiddleware, Client

    entries: dict[str, Any] = {}
    for url in urls:
        parts = urlsplit(url)
        if parts.username and parts.hostname:
            password = unquote(parts.password or "")
            remember_secret(password)
            entries[parts.hostname] = {
                "BasicHTTP": {"username": unquote(parts.username), "password": password}
            }
    if not entries:
        yield Client([AuthenticationMiddleware()])
        return
    own = os.environ.get("RATTLER_AUTH_FILE")
    merged: dict[str, Any] = {}
    if own:
        try:
            loaded = json.loads(Path(own).read_text(encoding="utf-8"))
            merged = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError, RecursionError):
            merged = {}
    merged.update(entries)
    with tempfile.TemporaryDirectory(prefix="gpuenv-auth-") as tmp:
        path = Path(tmp) / "credentials.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(merged, handle)
        os.environ["RATTLER_AUTH_FILE"] = str(path)
        try:
            yield Client([AuthenticationMiddleware()])
        finally:
            if own is None:
                os.environ.pop("RATTLER_AUTH_FILE", None)
            else:
                os.environ["RATTLER_AUTH_FILE"] = own


class _Canonical:
    """A solved record as the lock keeps it: its URL and channel mapped back from the
    mirror to the canonical channel (every other attribute the record's own)."""

    def __init__(self, record: Any, mirrors: Mirrors) -> None:
        self._record = record
        self.url = mirrors.canonical_url(str(record.url))
        self.channel = mirrors.canonical_url(str(record.channel))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._record, name)


def _canonical(record: Any, mirrors: Mirrors) -> Any:
    return _Canonical(record, mirrors) if mirrors.entries else record


def _subdir(platform: str) -> Any:
    from rattler import Subdir
    from rattler import exceptions as rx

    try:
        return Subdir(platform)
    except rx.ParseSubdirError as exc:
        raise UsageError(f"not a conda platform: {platform!r} ({exc})") from exc


def _match_specs(specs: Sequence[str]) -> list[Any]:
    """Parse leniently, as conda does (``"cuda-nvcc 12.4"`` means ``==12.4``)."""
    from rattler import MatchSpec
    from rattler import exceptions as rx

    out = []
    for spec in specs:
        try:
            out.append(MatchSpec(spec, strict=False))
        except rx.InvalidMatchSpecError as exc:
            raise UsageError(f"not a conda match spec: {spec!r} ({exc})") from exc
    return out


def _virtual_packages(virtual: Mapping[str, str]) -> list[Any]:
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version
    from rattler import exceptions as rx

    out = []
    for name, value in sorted(virtual.items()):
        version, build = _split_virtual(value)
        try:
            out.append(
                GenericVirtualPackage(PackageName(name), Version(version), BuildString(build))
            )
        except (rx.InvalidPackageNameError, rx.InvalidVersionError) as exc:
            raise UsageError(f"not a virtual package: {name}={value!r} ({exc})") from exc
    return out


async def _locked_records(
    gateway: Any, channels: list[Any], platforms: list[Any], request: CondaRequest
) -> list[Any]:
    """The channel's own records for the locked packages that are still there."""
    preferences: Sequence[CondaPackage] = request.preferences
    if not preferences:
        return []
    wanted = {redact_url(p.url) for p in preferences}
    names = sorted({p.name for p in preferences})
    found = await gateway.query(channels, platforms, names, recursive=False)
    canonical = request.mirrors.canonical_url
    return [
        record
        for per_channel in found
        for record in per_channel
        if redact_url(canonical(str(record.url))) in wanted
    ]


def _hex(value: bytes | None, what: str, record: Any) -> str:
    if not value:
        raise ExternalToolError(
            f"the channel gives no {what} for {record.name.normalized} {record.version} "
            f"({record.file_name}): a lock needs it"
        )
    return value.hex()


def _package(record: Any) -> CondaPackage:
    return CondaPackage(
        name=record.name.normalized,
        version=str(record.version),
        build=str(record.build),
        build_number=int(record.build_number),
        channel=redact_url(str(record.channel)),
        subdir=str(record.subdir),
        url=redact_url(str(record.url)),
        sha256=_hex(record.sha256, "sha256", record),
        md5=_hex(record.md5, "md5", record),
        depends=tuple(record.depends),
        constrains=tuple(record.constrains),
        size=record.size,
    )


def explain_unsolvable(text: str, virtual: Mapping[str, str], platform: str) -> str:
    """rattler's tree of reasons as one paragraph, plus what the target provides for
    each virtual package the reasons name."""
    lines = [_TREE.sub("", line).strip() for line in text.strip().splitlines()]
    body = " ".join(line for line in lines if line)
    body = body.replace("Cannot solve the request because of: ", "", 1)
    body = " ".join(body.split()) or "the solver found no solution"
    notes = []
    for name in sorted(set(_VIRTUAL.findall(body))):
        if name in virtual:
            notes.append(f"the target has {name} {_split_virtual(virtual[name])[0]}")
        else:
            notes.append(f"the target has no {name}")
    message = f"no set of conda packages fits the target ({platform}): {body}"
    if notes:
        message += " (" + "; ".join(notes) + ")"
    return redact(message)
