"""The pip half of a lock: resolve with the real ``uv`` binary, for the TARGET.

How one resolution runs (in a temporary folder, which an interrupted lock removes
even where the resolution ran in a thread of its own; uv isolated from the user's
configuration by ``--no-config`` and an environment without uv's and pip's resolution
settings, but with the network ones: proxies, certificates, timeouts):

1. A throw-away ``pyproject.toml`` lists the requirements as its dependencies. When the
   request names a torch index, that index is declared ``explicit`` and every torch-family
   name among the dependencies is pinned to it in ``[tool.uv.sources]``: uv then takes
   those packages from that index only, and nothing else from it. Index credentials go
   to uv through ``UV_INDEX_<NAME>_USERNAME/_PASSWORD``, never on the command line;
   uv's environment comes from ``gpuenv._network.uv_environment``, as install's does.
   Through a mirror (``PipRequest.mirrors``), uv is given the mirror's URLs and what it
   returns is mapped back to the canonical URLs before anything is returned.
2. ``uv pip compile`` resolves it for the target (``--python-version`` and
   ``--python-platform``, e.g. ``x86_64-manylinux_2_28``), never for this machine. The
   same resolution is read twice, by two uv runs one after the other: the annotated
   requirements format (``--emit-index-annotation``) gives each package's version, its
   index and who required it (the dependency edges); then ``--format pylock.toml``
   gives the target-compatible wheel URLs with their sha256, run ``--offline`` on what
   the first run left in uv's cache (online again only if the cache cannot answer), so
   each page and metadata file is fetched once. A request resolved before with the same
   cache minutes ago (``<cache>/uv-resolved``) finds every page there already: its offline
   read runs beside the annotated one instead of after it. Preferences (existing pins)
   are seeded in both output files, which uv reads back and keeps where they still fit.
   Should the two reads ever disagree (the index moved on since the cache was filled),
   the artifacts are read again with every version pinned. A lock of bytes locked
   before may find its online run begun as the command started (``lock.headstart``):
   taken only where it is the very same run, its output then in this folder.
   A failure to reach an index (name resolution, refused, timeout, TLS, 401/403, 404)
   is a ``NetworkError`` naming the index and URL with the fix that fits, never exit 3.
3. uv applies sources to direct dependencies only, so a torch-family package pulled in
   transitively (triton, by torch) can come from another index. Such a package is added
   as a direct dependency pinned to the torch index and the resolution runs again;
   adding a package the resolution already holds changes nothing else. Family packages
   the previous lock held are added from the start, and dropped again (another attempt)
   if nothing requires them any more.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import parse_wheel_filename

from gpuenv import _proc, _toml
from gpuenv._fs import writing
from gpuenv._network import (
    DEFAULT_INDEX_NAME,
    TORCH_INDEX_NAME,
    Failure,
    Index,
    index_of,
    network_error,
    uv_environment,
)
from gpuenv._redact import redact, redact_url
from gpuenv.errors import ExternalToolError, NetworkError, NoCompatiblePlan, UsageError
from gpuenv.lock import headstart
from gpuenv.lock._background import Background
from gpuenv.lock._tags import ARCHES, FOREIGN, foreign_tags, linux_tags, macos_of
from gpuenv.lock._uv_output import PROJECT_NAME, classify, error_tail, explain_unsatisfiable
from gpuenv.lock.model import PipPackage, PipRequest
from gpuenv.names import normalize_name

# One package's artifact in uv's pylock.toml: (version, url, sha256, size or None).
PylockArtifact = tuple[str, str, str, int | None]

DEFAULT_TIMEOUT = 600.0
_MAX_PASSES = 4
# How long after a resolution the same request's artifacts are read beside it (seconds).
RESOLVED_FRESH = 600.0
# How long an interrupted lock waits for the read beside before it leaves (seconds).
INTERRUPTED_WAIT = 3.0
# The manylinux levels uv's --python-platform accepts, newest first.
_UV_GLIBC_LEVELS = (40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 28, 17)


def find_uv() -> str:
    """The uv binary shipped by the ``uv`` package (``gpuenv._uvbin``)."""
    from gpuenv._uvbin import find_uv as look_up

    return look_up()


@dataclass(frozen=True)
class _Resolved:
    """One line of uv's annotated output."""

    version: str
    index: str | None
    parents: tuple[str, ...]


@dataclass(frozen=True)
class _Run:
    """What every uv call of one resolution shares: the target, the indexes, a folder."""

    request: PipRequest
    workdir: Path
    platform: str
    default: Index | None
    extras: tuple[Index, ...]
    torch: Index | None

    @property
    def direct(self) -> frozenset[str]:
        return frozenset(_req_name(r) for r in self.request.requirements)

    @property
    def family(self) -> frozenset[str]:
        return frozenset(normalize_name(n) for n in self.request.torch_family)

    @property
    def indexes(self) -> tuple[Index, ...]:
        named = (self.default, *self.extras, self.torch)
        return tuple(i for i in named if i is not None)

    def env(self) -> dict[str, str]:
        extra = {"UV_PYTHON_DOWNLOADS": "never"}
        if self.request.platform == "osx-arm64":  # uv's macOS target for --python-platform
            extra["MACOSX_DEPLOYMENT_TARGET"] = self.request.macos or "11.0"
        return uv_environment(os.environ, self.indexes, mirrors=self.request.mirrors, **extra)


def target_platform(request: PipRequest) -> str:
    """uv's ``--python-platform`` for the target: the arch and the newest manylinux
    level not above the target's glibc (macOS and Windows: ``_tags.FOREIGN``)."""
    if request.platform in FOREIGN:
        return FOREIGN[request.platform]
    arch = ARCHES.get(request.platform)
    if arch is None:
        raise NoCompatiblePlan(
            f"pip resolution supports platforms {', '.join(sorted(ARCHES))}, "
            f"not {request.platform!r}"
        )
    major, _, minor = request.glibc.partition(".")
    level = int(minor) if major == "2" and minor.isdigit() else -1
    for candidate in _UV_GLIBC_LEVELS:
        if candidate <= level:
            return f"{arch}-manylinux_2_{candidate}"
    raise NoCompatiblePlan(
        f"glibc {request.glibc} is older than manylinux2014 (glibc 2.17), "
        "the oldest platform wheels are resolved for"
    )


def target_tags(request: PipRequest) -> list[Tag]:
    """The target's wheel tags, most preferred first (what an installer would rank)."""
    version = tuple(int(p) for p in request.python.split(".")[:2])
    if request.platform in FOREIGN:
        return foreign_tags(request.platform, (version[0], version[1]), macos_of(request.macos))
    level = int(target_platform(request).rsplit("_", 1)[-1])
    return linux_tags(request.platform, (version[0], version[1]), level)


class UvResolver:
    """``PipResolver`` backed by uv. uv is looked up when the resolver is made, on the
    thread that makes it: ``lock`` makes it on the main thread before any background
    work starts (``gpuenv._uvbin`` says why that matters)."""

    def __init__(self, uv_bin: str | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._uv = uv_bin if uv_bin is not None else find_uv()
        self.timeout = timeout
        self._version: str | None = None
        # uv's own default index, as its first resolution without one stated it.
        self._default_index: str | None = None
        self._settled = threading.Event()

    @property
    def uv_bin(self) -> str:
        return self._uv

    def describe(self) -> str:
        if self._version is None:
            result = _proc.run([self.uv_bin, "--version"], timeout=30, what="uv --version")
            self._version = result.stdout.strip() or "uv"
        return self._version

    def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
        """The METADATA of a wheel this resolver returned (``lock.wheelcheck``)."""
        from gpuenv.lock.wheelcheck import http_metadata

        return http_metadata(package, request)

    def default_index_url(self, timeout: float | None = None) -> str | None:
        """The index uv uses when none is configured, as uv stated it in this resolver's
        first resolution without one (``--emit-index-url``: no uv run of its own). Waits
        (up to ``timeout``) until a resolution has stated it (before its artifacts' pass)
        or finished, or ``settle`` was called; None when none said it."""
        self._settled.wait(timeout)
        return self._default_index

    def stated_default_index(self) -> str | None:
        """The index uv uses when none is configured, as uv states it for an empty
        request (a run of its own, no network: for callers that resolve nothing, such as
        ``gpuenv import``; ``default_index_url`` would wait for a resolution that never
        comes). None when uv says none."""
        with tempfile.TemporaryDirectory(prefix="gpuenv-uv-") as tmp:
            empty = Path(tmp) / "empty.in"
            empty.write_text("", encoding="utf-8")
            argv = [self.uv_bin, "--no-config", "pip", "compile", str(empty)]
            # --python: without it uv searches the PATH for an interpreter first (130 ms
            # of its 140 through pyenv's shims; it reads none of it for an empty request)
            argv += ["--emit-index-url", "--no-header", "--quiet", "--offline"]
            result = _proc.run(
                [*argv, "--python", sys.executable],
                timeout=30,
                check=False,
                what="uv pip compile --emit-index-url",
            )
        for line in result.stdout.splitlines():
            if line.startswith("--index-url "):
                return line.split(None, 1)[1].strip()
        return None

    def settle(self) -> None:
        """No more resolutions: ``default_index_url`` stops waiting for one."""
        self._settled.set()

    def resolve(self, request: PipRequest) -> tuple[PipPackage, ...]:
        try:
            return self._resolve_request(request)
        finally:
            self._settled.set()

    def _resolve_request(self, request: PipRequest) -> tuple[PipPackage, ...]:
        platform = target_platform(request)
        fetch = request.mirrors.fetch_url  # resolution goes through the mirrors, if any
        scratch = tempfile.gettempdir()
        hint = "free space there, or point TMPDIR at a file system with room"
        with writing(scratch, "uv's scratch files", hint=hint), _scratch_folder(scratch) as tmp:
            run = _Run(
                request=request,
                workdir=tmp,
                platform=platform,
                default=Index.parse(DEFAULT_INDEX_NAME, fetch(request.default_index))
                if request.default_index
                else None,
                extras=tuple(
                    Index.parse(f"gpuenv-extra-{i}", fetch(url))
                    for i, url in enumerate(request.extra_indexes, 1)
                ),
                torch=Index.parse(TORCH_INDEX_NAME, fetch(request.torch_index))
                if request.torch_index
                else None,
            )
            resolved = self._resolve(run)
        canonical = request.mirrors.canonical_url  # the lock keeps the canonical URLs
        kept = []
        for p in resolved:
            url = redact_url(canonical(p.url))
            index = redact_url(canonical(p.index)) if p.index else None
            # a new value only where a URL changed (no mirror, no credentials: none did)
            same = url == p.url and index == p.index
            kept.append(p if same else dataclasses.replace(p, url=url, index=index))
        return tuple(kept)

    def _resolve(self, run: _Run) -> tuple[PipPackage, ...]:
        """Steps 2-4: attempts until the torch family all comes from its index."""
        guessed = promoted = _first_promotion(run)
        for attempt in range(_MAX_PASSES):
            folder = run.workdir / f"attempt-{attempt}"
            try:
                resolved, locked = self._attempt(run, folder, promoted)
            except (NoCompatiblePlan, NetworkError) as exc:
                # A wrong guess shows as "triton was not found" (404) or no solution.
                missing = isinstance(exc, NoCompatiblePlan) or exc.cause == "not-found"
                if not missing or not promoted & guessed:
                    raise
                promoted, guessed = promoted - guessed, frozenset()  # a wrong guess
                continue
            strays = set(_family_strays(run, resolved))
            unneeded = promoted - _reachable(run.direct, resolved)
            if not strays and not unneeded:
                if not _agree(resolved, locked):
                    locked = self._pinned_artifacts(run, folder, promoted, resolved)
                return _packages(resolved, locked)
            if strays & promoted:
                where = ", ".join(f"{n} from {resolved[n].index}" for n in sorted(strays))
                raise ExternalToolError(f"uv took torch-family packages elsewhere: {where}")
            promoted = (promoted - unneeded) | strays
        raise ExternalToolError("uv's resolution of the torch family did not settle")

    def _attempt(
        self, run: _Run, folder: Path, promoted: frozenset[str]
    ) -> tuple[dict[str, _Resolved], dict[str, PylockArtifact]]:
        """One resolution, read twice: annotated (versions, indexes, edges), then
        pylock.toml (URLs, hashes) from what the first run left in uv's cache, offline.
        Same inputs, preferences and index pages give the same answer."""
        folder.mkdir()
        project = _write_project(folder, run, promoted)
        annotated, pylock = folder / "resolved.txt", folder / "pylock.toml"
        _seed_preferences(annotated, pylock, run.request.preferences)
        base = self._base_argv(run, project)
        annotation = [*base, "--emit-index-annotation", "--emit-index-url", "-o", annotated]
        artifacts = [*base, "--format", "pylock.toml", "-o", pylock]
        marker = _resolved_marker(run, promoted)
        beside = self._offline_beside(run, artifacts, marker, pylock)
        try:
            self._run_uv(run, annotation)
        except Exception:
            _read_beside(beside)  # never left running
            raise
        except BaseException:
            # Ctrl-C or SIGTERM: the interrupt may have landed inside a lock this thread
            # held (logging's, which every fork takes; an import's), so the thread beside
            # can wait on it for ever: waited for a while, then left. The process ends
            # next; its uv, if one started, dies with it (PR_SET_PDEATHSIG, _proc).
            if beside is not None:
                with contextlib.suppress(Exception):  # its failure is not the news
                    beside.result(timeout=INTERRUPTED_WAIT)
            raise
        text = annotated.read_text(encoding="utf-8")
        if run.default is None and self._default_index is None:
            # Stated now, before the artifacts' pass: the look at the newest torch on this
            # index (``default_index_url``) runs while that pass does, not after it.
            self._default_index = emitted_index_url(text)
            if self._default_index is not None:
                self._settled.set()
        locked = _read_beside(beside)  # never left running
        if locked is None:
            self._cached_then_online(run, artifacts)
            locked = _read_pylock(run, pylock)
        _remember_resolved(marker)
        return parse_annotated(text), locked

    def _pinned_artifacts(
        self,
        run: _Run,
        folder: Path,
        promoted: frozenset[str],
        resolved: Mapping[str, _Resolved],
    ) -> dict[str, PylockArtifact]:
        """The artifacts of exactly ``resolved``, when the two reads disagreed."""
        project = _write_project(folder, run, promoted)
        pins = folder / "pins.txt"
        pins.write_text(
            # A git requirement has no version here: its commit is in the project.
            "".join(f"{name}=={r.version}\n" for name, r in sorted(resolved.items()) if r.version),
            encoding="utf-8",
        )
        output = folder / "pinned" / "pylock.toml"
        output.parent.mkdir()
        argv = [*self._base_argv(run, project), "-c", pins, "--format", "pylock.toml"]
        self._cached_then_online(run, [*argv, "-o", output])
        locked = _read_pylock(run, output)
        if not _agree(resolved, locked):
            raise ExternalToolError(
                "uv gave different results for the same pinned request: "
                f"{sorted(set(locked) ^ set(resolved))}"
            )
        return locked

    # -- running uv ---------------------------------------------------------------------

    def _base_argv(self, run: _Run, project: Path) -> list[str | os.PathLike[str]]:
        request = run.request
        argv: list[str | os.PathLike[str]] = [
            self.uv_bin,
            "--no-config",
            "pip",
            "compile",
            project,
            "--python-version",
            request.python,
            "--python-platform",
            run.platform,
            "--no-header",
            "--quiet",
            # uv needs an interpreter only to build sdists; naming one skips a slow search.
            "--python",
            sys.executable,
        ]
        if request.cache_dir is not None:
            argv += ["--cache-dir", _private_dir(request.cache_dir / "uv")]
        for name in request.no_binary:  # builds: their sdist, even where wheels exist
            argv += ["--no-binary", name]
        if request.exclude_newer is not None or request.exclude_newer_packages:
            argv += exclude_newer_argv(
                request.exclude_newer,
                request.requirements,
                run.family,
                dict(request.exclude_newer_packages),
            )
        if request.dependency_metadata:
            argv += ["--config-file", _write_dependency_metadata(run)]
        if run.default is not None:
            argv += ["--default-index", f"{run.default.name}={run.default.url}"]
        for extra in run.extras:
            argv += ["--index", f"{extra.name}={extra.url}"]
        return argv

    def _offline_beside(
        self, run: _Run, argv: list[str | os.PathLike[str]], marker: Path | None, output: Path
    ) -> Background[dict[str, PylockArtifact]] | None:
        """The artifacts read ``--offline`` in a thread beside the annotated run, when this
        very request was resolved with this cache within ``RESOLVED_FRESH`` seconds
        (``marker``): uv's cache then holds every page and metadata file the annotated
        run reads, still fresh for it (an index's pages are cached for minutes: PyPI's
        for 600 s), so both read the same pages and the two runs overlap instead of
        following each other. None otherwise (a first resolution: the offline read waits
        for what the annotated run fetches). Should the two still disagree, ``_resolve``
        reads the artifacts again, pinned. The thread parses ``output`` too: the annotated
        run takes longer, and the parse is then off the lock's path."""
        if marker is None or not _recent(marker):
            return None

        def read() -> dict[str, PylockArtifact]:
            self._run_uv(run, [*argv, "--offline"])
            return _read_pylock(run, output)

        return Background(read, name="gpuenv-uv")

    def _cached_then_online(self, run: _Run, argv: list[str | os.PathLike[str]]) -> None:
        """``argv`` with ``--offline``: the run before it fetched every page and metadata
        file this one reads, so it needs no network (an index that sends no caching
        headers would otherwise be asked for each page again). Whatever the cache
        cannot answer, the same run online answers."""
        try:
            self._run_uv(run, [*argv, "--offline"])
        except (ExternalToolError, NoCompatiblePlan, NetworkError):
            self._run_uv(run, argv)

    def _run_uv(self, run: _Run, argv: list[str | os.PathLike[str]]) -> None:
        env = run.env()
        # The same run begun as the command started, when the last lock of these bytes
        # ran it (lock.headstart): its output is then where argv names it.
        result = headstart.take(argv, env, run.workdir, self.timeout) or _proc.run(
            argv,
            timeout=self.timeout,
            env=env,
            cwd=run.workdir,
            check=False,
            what="uv pip compile",
        )
        if result.returncode == 0:
            return
        text = (result.stderr or result.stdout).strip()
        tail = error_tail(redact(text))
        shown_argv = [redact(str(a)) for a in argv]
        failure = classify(text)
        if failure is not None:
            raise _git_failure(text, failure.cause, tail) or _network_failure(
                run, failure, tail, shown_argv
            )
        if "No solution found" in text:
            message, hint = explain_unsatisfiable(text)
            if run.request.exclude_newer is not None:
                hint = _exclude_newer_hint(hint)
            raise NoCompatiblePlan(
                f"no set of pip packages fits Python {run.request.python} on "
                f"{run.platform}: {message}",
                hint=hint,
            )
        raise ExternalToolError(
            f"uv pip compile failed (exit {result.returncode})" + (f":\n{tail}" if tail else ""),
            argv=shown_argv,
            returncode=result.returncode,
            stderr_tail=tail,
        )


# uv's hint for a release its --exclude-newer hid, one sentence pair per package.
_HIDDEN = re.compile(
    r"`(?P<name>[^`\s]+)` was filtered by `exclude-newer` to only include packages uploaded "
    r"before \S+? The latest version satisfying the requirement is v(?P<version>[^\s,]+?)"
    r"(?:, published at (?P<published>\d{4}-\d{2}-\d{2})[0-9T:.+Z-]*?)?\.(?=\s|$)"
)


def _exclude_newer_hint(hint: str | None) -> str | None:
    """uv's hint about releases ``--exclude-newer`` hid, in the spec's words: which
    release would fit, and when it was published (or that its index gives no upload
    time, so that no day lets it in)."""
    hidden = list(_HIDDEN.finditer(hint or ""))
    if not hidden:
        return hint
    dated = [m for m in hidden if m["published"]]
    undated = [m for m in hidden if not m["published"]]
    said = []
    if dated:
        newest = max(m["published"] for m in dated)
        releases = ", ".join(f"{m['name']} {m['version']} ({m['published']})" for m in dated)
        said.append(f"{releases} would fit: move the day to {newest} or later")
    if undated:
        names = ", ".join(f"{m['name']} {m['version']}" for m in undated)
        said.append(
            f"{names} would fit, but its index gives no upload time, so no day lets it in: "
            "remove exclude-newer, or take it from an index that gives upload times"
        )
    return (
        "[pip] exclude-newer in gpuenv.toml hides every release uploaded after its day; "
        + "; ".join(said)
    )


_HOST_FAILURES = frozenset({"dns", "refused", "timeout", "tls", "connection"})
_GIT_BUILD = re.compile(r"Failed to download and build `(?P<name>[^\s`]+) @ (?P<url>git\+[^\s`]+)`")
_GIT_FATAL = re.compile(r"fatal: (.+)")


def _git_failure(text: str, cause: str, tail: str) -> NetworkError | None:
    """A git requirement git could not fetch (DETR's panopticapi on a machine that
    reaches the package index only): named as that, not as an index, with git's own
    words and what would work instead."""
    if "Git operation failed" not in text:
        return None
    found = _GIT_BUILD.search(text)
    if found is None:
        return None
    url = redact_url(found["url"])
    fatal = _GIT_FATAL.search(text)
    said = f": {redact(fatal[1].strip())}" if fatal else ""
    return NetworkError(
        f"{found['name']} comes from git ({url}), and git could not fetch it{said}",
        cause=cause,
        url=url,
        hint=(
            "reach that host from this machine (a proxy: HTTPS_PROXY), or, where the "
            "package index serves this same project, depend on a release of it instead of "
            f"the git URL ({found['name']}==VERSION; a project of that name there may be "
            "another one)"
        ),
        stderr_tail=tail,
    )


def _network_failure(run: _Run, failure: Failure, tail: str, argv: list[str]) -> NetworkError:
    """The index that failed, named, with its URL and the fix that fits. A package an
    index has no page for (404) is named with the page's URL: the torch index's for the
    torch family, the default index's for the rest."""
    index = index_of(failure.url, run.indexes)
    url = failure.url
    if failure.cause in _HOST_FAILURES and index is not None:
        # The host failed, not a page: whichever of uv's parallel requests failed first
        # was named (torchvision's page, triton's, torch's: another in each run).
        url = index.shown if "?" in index.shown else index.shown.rstrip("/") + "/"
    if failure.cause == "not-found" and failure.packages:
        name = normalize_name(failure.packages[0])
        index = run.torch if name in run.family and run.torch else run.default
        url = f"{index.shown.split('?', 1)[0].rstrip('/')}/{name}/" if index else None
    layout = None
    if failure.cause == "not-found" and index is not None and url is not None:
        from gpuenv.lock import _probe

        status = _probe.page_status(url, index)
        if status in (401, 403):  # uv reports an explicit index's 401/403 as "not found"
            failure = dataclasses.replace(failure, cause="auth", detail=f"HTTP {status}")
        elif index is run.torch:
            layout = _probe.layout_problem(
                index, failure.packages[0] if failure.packages else "torch"
            )
    return network_error(
        failure,
        index=index,
        url=url,
        mirrors=run.request.mirrors,
        extra_hint=layout,
        stderr_tail=tail,
        argv=argv,
    )


@contextlib.contextmanager
def _scratch_folder(root: str) -> Iterator[Path]:
    """A folder of this resolution's own in ``root``, removed after it; one the lock
    removes itself should it end first (``headstart.scratch_folder``)."""
    import shutil

    folder = headstart.scratch_folder(root)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        headstart.scratch_done(folder)


def _resolved_marker(run: _Run, promoted: frozenset[str]) -> Path | None:
    """Where a resolution of exactly this request (and promoted names) is noted once it
    succeeded with this cache (None without a cache of gpuenv's own)."""
    cache = run.request.cache_dir
    if cache is None:
        return None
    from gpuenv import _sha256

    key = _sha256.hexdigest(repr((run.request, sorted(promoted))).encode())
    return cache / "uv-resolved" / key


def _recent(marker: Path) -> bool:
    import time

    try:
        info = marker.lstat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and 0 <= time.time() - info.st_mtime < RESOLVED_FRESH


def _remember_resolved(marker: Path | None) -> None:
    """Note the marker, or renew its time; a new one first removes the notes too old to
    be believed, so the folder holds only the last minutes' requests (the cache is a
    courtesy: a failure to write or remove is ignored)."""
    if marker is None:
        return
    import contextlib
    import time

    try:
        marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not marker.exists():
            now = time.time()
            for old in marker.parent.iterdir():
                with contextlib.suppress(OSError):
                    if not 0 <= now - old.lstat().st_mtime < RESOLVED_FRESH:
                        old.unlink()
        marker.touch(mode=0o600)  # cache files are private; touch renews the time
    except OSError:
        pass


def _read_beside(
    beside: Background[dict[str, PylockArtifact]] | None,
) -> dict[str, PylockArtifact] | None:
    """What the read beside found, when it finished well (it is waited for either way);
    None otherwise."""
    if beside is None:
        return None
    try:
        return beside.result()
    except Exception:  # noqa: BLE001 - any failure: the artifacts are read again after
        return None


def _read_pylock(run: _Run, path: Path) -> dict[str, PylockArtifact]:
    return parse_pylock(
        path.read_text(encoding="utf-8"),
        target_tags(run.request),
        sdists=frozenset(normalize_name(n) for n in run.request.no_binary),
    )


def _private_dir(path: Path) -> Path:
    """uv's cache of index pages holds what the indexes served, file links' query tokens
    included: a directory only its owner can read (gpuenv's own cache files are 0600).
    One that cannot be made is named, not blamed on the scratch files around it."""
    hint = (
        f"make {path.parent} writable, point GPUENV_CACHE_DIR at a directory you can "
        "write, or GPUENV_NO_CACHE=1 to cache nothing"
    )
    with writing(path, "uv's cache", hint=hint):
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o700)
    return path


# -- files uv reads ---------------------------------------------------------------------


def project_lines(requirements: Iterable[str]) -> list[str]:
    """The ``[project]`` table of a throw-away project whose dependencies are
    ``requirements``, each a TOML string (never a command-line argument: a requirement
    that reads like an option cannot become one). ``import --check-resolves`` uses it too."""
    return [
        "[project]",
        f'name = "{PROJECT_NAME}"',
        'version = "0"',
        "dependencies = [",
        *(f"    {json.dumps(req)}," for req in requirements),
        "]",
    ]


def exclude_newer_argv(
    cutoff: str | None,
    requirements: Iterable[str],
    family: Iterable[str],
    own: Mapping[str, str] | None = None,
) -> list[str | os.PathLike[str]]:
    """uv's arguments for ``[pip] exclude-newer``: releases uploaded from ``cutoff`` on
    are hidden (``own``: packages with an instant of their own, ``exclude-newer-package``),
    but not the torch family's (the plan chose its release, which the GPU may need newer,
    and a torch index may give no upload times) nor a package pinned exactly
    (``name==1.2``: the spec's own choice, often one the import moved to the nearest
    release with a wheel)."""
    from gpuenv.spec._values import pinned_exactly

    exempt = {normalize_name(name) for name in family}
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if pinned_exactly(requirement):
            exempt.add(normalize_name(requirement.name))
    days = {**(own or {}), **dict.fromkeys(exempt, "false")}  # an exemption wins
    argv: list[str | os.PathLike[str]] = ["--exclude-newer", cutoff] if cutoff else []
    for name, day in sorted(days.items()):
        argv += ["--exclude-newer-package", f"{name}={day}"]
    return argv


def _write_project(folder: Path, run: _Run, promoted: frozenset[str]) -> Path:
    """The throw-away project: the requirements (and the promoted torch-family names) as
    its dependencies, every torch-family name among them pinned to the torch index."""
    lines = project_lines([*run.request.requirements, *sorted(promoted)])
    if run.torch is not None:
        pinned = sorted((run.direct | promoted) & run.family)
        lines += [
            "",
            "[[tool.uv.index]]",
            f'name = "{run.torch.name}"',
            f"url = {json.dumps(run.torch.url)}",
            "explicit = true",
            "",
            "[tool.uv.sources]",
            *(f'{name} = {{ index = "{run.torch.name}" }}' for name in pinned),
        ]
    path = folder / "pyproject.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_dependency_metadata(run: _Run) -> Path:
    return write_dependency_metadata(run.workdir, run.request.dependency_metadata)


def write_dependency_metadata(folder: Path, entries: Iterable[tuple[str, tuple[str, ...]]]) -> Path:
    """uv's ``dependency-metadata`` (a ``--config-file`` in ``folder``): the declared
    dependencies of packages whose metadata cannot be read without building them (their
    setup.py imports torch). ``import --check-resolves`` gives uv the same."""
    lines = []
    for name, requires in entries:
        lines += [
            "[[dependency-metadata]]",
            f"name = {json.dumps(name)}",
            f"requires-dist = {json.dumps(list(requires))}",
            "",
        ]
    path = folder / "uv-dependency-metadata.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _seed_preferences(annotated: Path, pylock: Path, preferences: Iterable[PipPackage]) -> None:
    """uv prefers the versions already in its output file: seed both formats alike."""
    pins = sorted({(normalize_name(p.name), p.version) for p in preferences})
    if not pins:
        return  # pylock.toml without packages is not valid
    annotated.write_text("".join(f"{n}=={v}\n" for n, v in pins), encoding="utf-8")
    lines = ['lock-version = "1.0"', 'created-by = "gpuenv"']
    for name, version in pins:
        lines += [
            "",
            "[[packages]]",
            f"name = {json.dumps(name)}",
            f"version = {json.dumps(version)}",
        ]
    pylock.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _first_promotion(run: _Run) -> frozenset[str]:
    """Torch-family packages to pin to the torch index from the first attempt, though
    not requested directly: those the previous lock held (triton, pulled in by torch),
    or with no previous lock, triton for a CUDA build on Linux x86_64 (every CUDA torch
    since 2.0 needs it there). Promoting at once saves a whole second resolution. It is
    a guess: when it makes the request unresolvable (the build's index has no triton)
    or nothing requires the package, the attempt is redone without it."""
    if run.torch is None:
        return frozenset()
    held = frozenset(normalize_name(p.name) for p in run.request.preferences)
    if not run.request.preferences and _cuda_build_on_x86(run.request):
        held = frozenset({"triton"})
    return held & (run.family - run.direct)


def _cuda_build_on_x86(request: PipRequest) -> bool:
    index = (request.torch_index or "").rstrip("/").rsplit("/", 1)[-1]
    return request.platform == "linux-64" and index.startswith("cu") and index[2:].isdigit()


def _reachable(roots: Iterable[str], resolved: Mapping[str, _Resolved]) -> set[str]:
    """Packages some requirement needs, following the edges of this resolution."""
    children: dict[str, set[str]] = {}
    for name, r in resolved.items():
        for parent in r.parents:
            children.setdefault(parent, set()).add(name)
    seen: set[str] = set()
    todo = [name for name in roots if name in resolved]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(children.get(name, ()))
    return seen


def _agree(resolved: Mapping[str, _Resolved], locked: Mapping[str, PylockArtifact]) -> bool:
    return set(resolved) == set(locked) and all(
        not r.version or locked[n][0] == r.version
        for n, r in resolved.items()  # "": git
    )


def _req_name(requirement: str) -> str:
    try:
        return normalize_name(Requirement(requirement).name)
    except InvalidRequirement as exc:
        raise NoCompatiblePlan(f"not a valid requirement: {requirement!r} ({exc})") from exc


def _family_strays(run: _Run, resolved: Mapping[str, _Resolved]) -> list[str]:
    """Torch-family packages that did not come from the torch index."""
    if run.torch is None:
        return []
    want = _same_index_key(run.torch.url)
    return sorted(
        name
        for name, r in resolved.items()
        if name in run.family and (r.index is None or _same_index_key(r.index) != want)
    )


def _same_index_key(url: str) -> str:
    parts = urlsplit(redact_url(url))
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


# -- parsing uv's output ------------------------------------------------------------------

_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)\s*$")


def parse_annotated(text: str) -> dict[str, _Resolved]:
    """Read ``uv pip compile --emit-index-annotation`` output (annotation style split).

    ``name==version`` lines, each followed by ``# via`` (one parent inline, or one per
    line below) and ``# from INDEX``. Parents that are input files or our throw-away
    project are not packages and are left out.
    """
    out: dict[str, _Resolved] = {}
    current: str | None = None
    version = ""
    parents: list[str] = []
    index: str | None = None

    def flush() -> None:
        if current is not None:
            out[current] = _Resolved(version, index, tuple(sorted(set(parents))))

    in_via = False
    # Blank lines, and --index-url / --extra-index-url (emitted_index_url reads those).
    lines = (raw.strip() for raw in text.splitlines() if raw.strip() and raw[:2] != "--")
    for line in lines:
        match = _PIN.match(line)
        if match:
            flush()
            current, version = normalize_name(match["name"]), match["version"]
            parents, index, in_via = [], None, False
        elif line.startswith("# from "):
            index, in_via = redact_url(line[len("# from ") :].strip()), False
        elif line.startswith("# via"):
            rest = line[len("# via") :].strip()
            in_via = not rest
            parents.extend(_parent(rest))
        elif in_via and line.startswith("#   "):
            parents.extend(_parent(line[1:].strip()))
        elif " @ " in line and line.split(" @ ", 1)[1].startswith("git+"):
            # A git requirement (a build): its version and commit come from pylock.toml.
            flush()
            current, version = normalize_name(line.split(" @ ", 1)[0].strip()), ""
            parents, index, in_via = [], None, False
        elif " @ " in line:
            name = line.split(" @ ", 1)[0].strip()
            raise UsageError(
                f"{redact(line)}: gpuenv locks a package from an index or a git repository, "
                "not from a file's URL",
                hint=f"name it from an index in gpuenv.toml ('{name}==VERSION'; a company "
                f"index goes in [pip] extra-index-urls), or as '{name} @ git+https://...' "
                "of its repository",
            )
        elif not line.startswith("#"):
            raise ExternalToolError(f"unexpected line in uv's output: {line!r}")
    flush()
    return out


def emitted_index_url(text: str) -> str | None:
    """The ``--index-url`` line of uv's output (``--emit-index-url``), redacted."""
    for line in text.splitlines():
        if line.startswith("--index-url "):
            return redact_url(line.split(None, 1)[1].strip())
    return None


def _parent(text: str) -> list[str]:
    text = text.strip()
    if not text or text.startswith("-") or "(" in text:
        return []  # "-r file", "-c file", "gpuenv-lock-request (pyproject.toml)"
    name = normalize_name(text.split("[", 1)[0].strip())
    return [] if name == PROJECT_NAME else [name]


def parse_pylock(
    text: str, tags: Iterable[Tag], sdists: frozenset[str] = frozenset()
) -> dict[str, PylockArtifact]:
    """``name -> (version, url, sha256, size)`` from uv's ``pylock.toml``: per package,
    the wheel whose tags rank best for the target, or the sdist when it has no wheel (or
    is named in ``sdists``: packages gpuenv builds from source). The size is None where
    the index gave none (an HTML page) or gave something that is not a byte count."""
    rank: dict[Tag, int] = {}
    for i, tag in enumerate(tags):
        rank.setdefault(tag, i)
    out: dict[str, PylockArtifact] = {}
    for package in _toml.loads(text).get("packages", []):
        name = normalize_name(package["name"])
        version = str(package.get("version", ""))
        best: tuple[int, str, str, int | None] | None = None
        for wheel in package.get("wheels", []) if name not in sdists else []:
            url = wheel["url"]
            filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
            wheel_rank = min((rank.get(t, len(rank)) for t in _wheel_tags(filename)), default=0)
            candidate = (wheel_rank, url, wheel["hashes"]["sha256"], _size(wheel))
            if best is None or candidate[:3] < best[:3]:
                best = candidate
        if best is None and "sdist" in package:
            sdist = package["sdist"]
            best = (0, sdist["url"], sdist["hashes"]["sha256"], _size(sdist))
        vcs = package.get("vcs")
        if best is None and isinstance(vcs, dict) and vcs.get("type") == "git":
            # A git source, at the commit uv resolved its ref to: built, never downloaded.
            best = (0, f"git+{vcs['url']}@{vcs['commit-id']}", "", None)
        if best is None:
            raise ExternalToolError(f"uv returned no artifact for {name} {version}")
        out[name] = (version, redact_url(best[1]), best[2], best[3])
    return out


def _size(file: Mapping[str, Any]) -> int | None:
    size = file.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None


def _wheel_tags(filename: str) -> frozenset[Tag]:
    try:
        return parse_wheel_filename(filename)[3]
    except ValueError:
        return frozenset()


def _packages(
    resolved: Mapping[str, _Resolved], artifacts: Mapping[str, PylockArtifact]
) -> tuple[PipPackage, ...]:
    children: dict[str, set[str]] = {name: set() for name in resolved}
    for name, r in resolved.items():
        for parent in r.parents:
            if parent in children:
                children[parent].add(name)
    return tuple(
        PipPackage(
            name=name,
            version=r.version or artifacts[name][0],
            url=artifacts[name][1],
            sha256=artifacts[name][2],
            index=r.index,
            requires=tuple(sorted(children[name])),
            size=artifacts[name][3],
        )
        for name, r in sorted(resolved.items())
    )


# -- errors in plain words ------------------------------------------------------------------
