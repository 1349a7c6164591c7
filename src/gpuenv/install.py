"""Materialise one target of the lock into a store prefix, from the lock only.

Order of a build, under the prefix's file lock:

1. an existing prefix without a matching completion marker is an interrupted build:
   it is moved to the trash;
2. conda records (Python among them, when the lock has it) are linked in by rattler
   from the exact URLs, hash-checked, through the shared package cache; otherwise a
   virtual environment is made by uv from an interpreter of the locked Python;
3. pip artifacts are installed by uv from their exact URLs with ``--require-hashes``
   and ``--no-deps`` (the lock is complete), through uv's shared cache (hard links):
   from the cache alone first (offline), online only when it lacks an artifact;
4. the CUDA toolkit, when the spec asks for one (or a build needs one), is located (the
   prefix's own, or a pinned system toolkit whose ``nvcc --version`` must match the
   locked CUDA);
5. the lock's builds (``gpuenv.builds``): each wheel from the build cache, or built now
   against the prefix's torch and cached by its identity, then installed by uv; a
   failing build fails the install (nothing is marked installed);
6. activation scripts and the run-time environment delta are written;
7. the completion marker is written, last; then the project's pointer moves (under
   the store's roots lock, the prefix lock still held, so gc never sees it unreferenced).

Every artifact is fetched from ``InstallRequest.sources.url_for(locked URL)``
(``gpuenv._artifacts``): the one place a locked, canonical URL becomes the URL fetched
(a file unpacked from an archive, a mirror). uv gets the same network settings and
index credentials as when the lock was made (``gpuenv._network.uv_environment``;
``InstallRequest.indexes``, by lock's names), rattler the same credentials as its
solve, so an authenticated index installs as it locked; a failure to reach an index
is a ``NetworkError`` naming it (exit 5).

Nothing outside the store, the caches in it and the project's ``.gpuenv/`` is written.
A write that fails for the machine's reasons (a full disk, a read-only store) is a
``StorageError`` naming the path, uv's and rattler's included: a full disk is never
reported as "no Python 3.11". Whatever stops a build (an error, Ctrl-C, SIGTERM)
removes the unmarked prefix before gpuenv exits; a SIGKILL leaves it for the next
install to remove.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv import _proc
from gpuenv._artifacts import ArtifactSources
from gpuenv._fs import atomic_write_text, is_read_only, os_error_in, storage_error, writing
from gpuenv._network import (
    Index,
    index_of,
    is_fetchable_url,
    literal_url,
    network_error,
    pip_indexes,
    uv_environment,
)
from gpuenv._progress import Prefixed
from gpuenv._redact import redact
from gpuenv.builds.model import BuildOutcome, arch_list, nvcc_arch_max
from gpuenv.errors import ExternalToolError, InstallError, NetworkError, StorageError
from gpuenv.lock._uv_output import classify
from gpuenv.lock.model import CondaPackage, Lock, LockedTarget, PipPackage
from gpuenv.store import Store, point_project

if TYPE_CHECKING:
    from gpuenv._fetch import Artifact
    from gpuenv.editable.install import ProjectResult
    from gpuenv.lock.options import LockOptions
    from gpuenv.spec import BuildOptions, LoadedSpec, LocalProject, Spec

Progress = Callable[[str], None]

MACHINES = {"linux-64": ("x86_64", "amd64"), "linux-aarch64": ("aarch64", "arm64")}
INSTALL_TIMEOUT = 3600.0


@dataclass(frozen=True)
class InstallRequest:
    target: LockedTarget
    project: Path  # the directory holding gpuenv.toml (its .gpuenv/ gets the pointers)
    env_name: str  # shown in the shell prompt
    toolkit: str | None = None  # [stack] toolkit: None, "auto", "12.4" or "system:/path"
    uv: Path | None = None  # the uv binary (default: the one the uv package ships)
    # Where each locked URL is fetched from (install --from: files unpacked from an archive).
    sources: ArtifactSources = field(default_factory=ArtifactSources)
    offline: bool = False  # uv may not reach the network (install --from)
    # The indexes the lock was made from, with credentials (``request_for``).
    indexes: tuple[Index, ...] = ()
    channels: tuple[str, ...] = ()  # the spec's conda channels, for their credentials
    # The project installed editable after the locked packages ([project] path), and its
    # [pip.build.<name>] options; the dependency groups installed (gpuenv.lock.extras).
    local: LocalProject | None = None
    local_build: BuildOptions | None = None
    groups: tuple[str, ...] = ()

    @property
    def all_indexes(self) -> tuple[Index, ...]:
        """The lock's indexes and the mirrors, each with its credentials."""
        return self.indexes + self.sources.mirrors.indexes()


@dataclass(frozen=True)
class InstallResult:
    target: str
    prefix: Path
    built: bool  # False: it was already installed (maybe by a concurrent gpuenv)
    previous: Path | None  # the generation this install replaced, if any
    seconds: float
    builds: tuple[BuildOutcome, ...] = ()  # the compiled extensions, built or from the cache
    project: ProjectResult | None = None  # the project, installed editable


def request_for(
    loaded: LoadedSpec,
    locked: LockedTarget,
    options: LockOptions | None,
    sources: ArtifactSources,
    *,
    groups: tuple[str, ...] = (),
) -> InstallRequest:
    """What installing ``locked`` of the project ``loaded`` asks: the indexes (with their
    credentials, by the names lock gave uv) and the channels it was locked from, the
    project itself and ``groups``. ``options`` None: from ``sources`` alone, offline
    (``install --from``: the archive's artifacts, nothing else)."""
    spec = loaded.spec
    base = InstallRequest(
        target=locked,
        project=loaded.path.parent.absolute(),
        env_name=spec.project.name,
        toolkit=spec.stack.toolkit,
        sources=sources,
        offline=options is None,
    )
    if options is None:
        return base
    local = spec.local
    return replace(
        base,
        indexes=_locked_indexes(spec, locked, options),
        channels=spec.conda.channels if spec.conda else (),
        local=local,
        local_build=spec.pip.build.get(local.name) if local is not None else None,
        groups=groups,
    )


def _locked_indexes(spec: Spec, target: LockedTarget, options: LockOptions) -> tuple[Index, ...]:
    """The indexes (and their credentials) ``target`` was locked from, by the names lock
    gave uv: install declares the same (and the mirrors), so it authenticates exactly
    as lock did (URL credentials, ``UV_INDEX_<NAME>_*``, netrc, keyring)."""
    base = options.torch_index or spec.pip.torch_index
    torch = f"{base.rstrip('/')}/{target.stack.cu_tag}" if base else target.stack.index
    return pip_indexes(options.index_url or spec.pip.index_url, spec.pip.extra_index_urls, torch)


def _uv_binary(request: InstallRequest) -> Path:
    if request.uv is not None:
        return request.uv
    from gpuenv._uvbin import find_uv

    return Path(find_uv())


def _uv_env(store: Store, request: InstallRequest) -> dict[str, str]:
    """uv isolated from the user's configuration but with its network settings (the
    same function lock uses), the lock's index credentials, every cache in the store."""
    env = uv_environment(
        os.environ,
        request.all_indexes,
        UV_CACHE_DIR=str(store.cache("uv")),
        UV_PYTHON_INSTALL_DIR=str(store.root / "python"),
        UV_LINK_MODE="hardlink",
    )
    if request.offline:
        env["UV_OFFLINE"] = "1"
    return env


def _storage_failure(text: str, path: Path, what: str) -> StorageError | None:
    """A tool's failure that was a full disk, a read-only store, a permission: the
    typed error naming ``path``, instead of the tool's own (misleading) summary."""
    found = os_error_in(text)
    return storage_error(found, path, what) if found is not None else None


def _network_failure(what: str, text: str, request: InstallRequest) -> NetworkError | None:
    """``text`` (a tool's error output) as a NetworkError naming the index, if it is one."""
    failure = classify(text)
    if failure is None:
        return None
    error = network_error(
        failure,
        index=index_of(failure.url, request.all_indexes),
        mirrors=request.sources.mirrors,
        stderr_tail=redact(text),
    )
    error.message = f"target {request.target.name}: {what}: {error.message}"
    error.target = request.target.name
    return error


def check_platform(target: LockedTarget) -> None:
    from gpuenv import _foreign

    _foreign.refuse(target.name, target.platform, "install")  # macOS/Windows: exit 2
    machine = platform.machine().lower()
    if platform.system() != "Linux" or machine not in MACHINES.get(target.platform, ()):
        raise InstallError(
            f"target {target.name} is locked for {target.platform}; this machine is "
            f"{platform.system()} {machine}",
            hint="install the target that describes this machine (gpuenv install --target ...)",
        )


# --- conda ---------------------------------------------------------------------------------


def _conda_records(
    packages: tuple[CondaPackage, ...], sources: ArtifactSources | None = None
) -> list[object]:
    """Rebuild rattler records from the lock: no solve, no repodata."""
    fetch = sources or ArtifactSources()
    from rattler import BuildString, NoArchType, PackageRecord, RepoDataRecord

    records: list[object] = []
    for c in packages:
        kinds = {"python": "python", "generic": "generic"}
        noarch = NoArchType(kinds[c.noarch]) if c.noarch in kinds else None  # type: ignore[arg-type]
        record = PackageRecord(
            name=c.name,
            version=c.version,
            build=BuildString(c.build),
            build_number=c.build_number,
            subdir=c.subdir,
            depends=list(c.depends),
            constrains=list(c.constrains),
            sha256=bytes.fromhex(c.sha256),
            md5=bytes.fromhex(c.md5),
            size=c.size,
            noarch=noarch,
        )
        file_name = c.url.rsplit("/", 1)[-1]
        records.append(RepoDataRecord(record, file_name, fetch.url_for(c.url), c.channel))
    return records


def _rattler_errors() -> tuple[type[BaseException], ...]:
    from rattler import exceptions as rattler_errors

    return tuple(
        value
        for value in vars(rattler_errors).values()
        if isinstance(value, type) and issubclass(value, Exception)
    )


def check_local_archives(
    packages: tuple[CondaPackage, ...], sources: ArtifactSources | None = None
) -> None:
    """rattler checks the hashes of what it downloads, but not of ``file://`` archives
    (it links whatever the file holds, and its conda-meta then claims the locked
    hash): those are checked here, sha256 and md5, before rattler sees any record. The
    URL checked is the one fetched (a local copy from ``install --from`` included)."""
    from urllib.parse import unquote, urlsplit

    from gpuenv._fetch import hash_file

    fetch = sources or ArtifactSources()
    for c in packages:
        if c.url in fetch.files:
            continue  # the store's copy: checked when it was stored (gpuenv._fetch)
        parts = urlsplit(fetch.url_for(c.url))
        if parts.scheme != "file":
            continue
        path = unquote(parts.path)
        try:
            digests = hash_file(path, md5=True)
            sha256, md5 = digests.sha256, digests.md5
        except OSError as exc:
            raise InstallError(
                f"conda package {c.name} {c.version}: cannot read {path}: {exc.strerror or exc}",
                hint="the channel has changed since gpuenv.lock was written: run 'gpuenv lock'",
            ) from None
        if (sha256, md5) != (c.sha256, c.md5):
            which = "sha256" if sha256 != c.sha256 else "md5"
            raise InstallError(
                f"refused: conda package {c.name} {c.version} ({c.build}) at {path} does not "
                f"match the {which} in gpuenv.lock (tampered with or corrupted); nothing "
                "was installed",
                hint="check the channel; if the change is legitimate, run 'gpuenv lock'",
            )


def install_conda(
    prefix: Path,
    packages: tuple[CondaPackage, ...],
    cache: Path,
    request: InstallRequest | None = None,
) -> None:
    import asyncio  # here: ~40 ms to import, and only conda installs need it

    import rattler
    from rattler import exceptions as rattler_errors

    failures = (
        rattler_errors.InstallerError,
        rattler_errors.TransactionError,
        rattler_errors.LinkError,
        rattler_errors.IoError,
        rattler_errors.ExtractError,
        rattler_errors.CacheDirError,
        rattler_errors.ValidatePackageRecordsError,
    )
    check_local_archives(packages, request.sources if request else None)
    malformed: tuple[type[BaseException], ...] = (ValueError, TypeError, *_rattler_errors())
    from gpuenv.lock.rattler import authenticated_client

    try:
        records = _conda_records(packages, request.sources if request else None)
    except malformed as exc:
        raise InstallError(
            f"the lock's conda records are malformed ({type(exc).__name__}: {exc})",
            hint="run 'gpuenv lock' to rewrite the lock",
        ) from None
    mirrors = request.sources.mirrors.entries if request else ()
    urls = [*request.channels, *(m.mirror for m in mirrors)] if request else []
    try:
        with authenticated_client(urls) as client:  # as the lock's solve authenticated
            asyncio.run(
                rattler.install(
                    records,  # type: ignore[arg-type]
                    target_prefix=prefix,
                    cache_dir=cache,
                    show_progress=False,
                    execute_link_scripts=False,
                    client=client,
                )
            )
    except failures as exc:
        text = redact(str(exc))
        if "hash mismatch" in text:
            raise InstallError(
                "refused: a downloaded conda package does not match the sha256 in gpuenv.lock "
                f"(tampered with or corrupted); nothing was installed:\n{text}",
                hint="check the channel or mirror serving it",
            ) from None
        storage = _storage_failure(text, prefix, f"target prefix {prefix.name} (conda)")
        if storage is not None:
            raise storage from None
        network = _network_failure("conda packages", text, request) if request else None
        if network is not None:
            raise network from None
        raise InstallError(f"conda packages could not be installed: {text}") from None
    except BaseException as exc:
        # A Rust panic inside rattler (a malformed URL in a hand-edited lock, say) is
        # pyo3's PanicException, a BaseException: a typed error, not a crash.
        if type(exc).__name__ != "PanicException":
            raise
        raise InstallError(
            f"rattler could not install the locked conda packages: {redact(str(exc)).strip()}",
            hint="the lock's conda records are malformed: run 'gpuenv lock' to rewrite it",
        ) from None


# --- artifacts ----------------------------------------------------------------------------------

FETCH_WORKERS = 8


def fetch_artifacts(
    store: Store, request: InstallRequest, progress: Progress, target: LockedTarget | None = None
) -> ArtifactSources:
    """Every artifact the target names, checked, in the store's artifacts (``gpuenv._fetch``:
    fetched only when missing, several at a time); the sources that hand uv and rattler
    those local files. A pack after this install downloads nothing."""
    import threading
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    from gpuenv._fetch import (
        budget,
        credentials_from,
        credentials_of,
        disk_needed,
        human_size,
        require_space,
    )
    from gpuenv.errors import DownloadError
    from gpuenv.lock.artifacts import merged, target_artifacts

    target = target or request.target  # without the dependency groups left out
    artifacts = merged(target_artifacts(target), ordered=False)  # the lock's order
    if not artifacts:
        return request.sources
    stored = store.artifacts()
    missing = stored.missing(artifacts)
    credentials = {**credentials_from(request.channels), **credentials_of(request.all_indexes)}
    if missing:  # said, and the disk checked, before anything is downloaded
        cost = budget(missing, request.sources, credentials)
        needed = disk_needed(cost.download, cost.count)
        progress(
            f"{target.name}: fetching {cost.count} of {len(artifacts)} artifacts into the "
            f"store: {cost.shown}, about {human_size(needed)} of disk with the environment"
        )
        require_space(store.root, needed, f"target {target.name}")
    if not missing:  # all stored: a stat and a stamp each, no threads
        found = {a: stored.find(a) for a in artifacts}
        files = {url: path for a, path in found.items() if path is not None for url in a.urls}
        if len(files) == sum(len(a.urls) for a in artifacts):
            return ArtifactSources(files=files, mirrors=request.sources.mirrors)
    stop = threading.Event()

    def advance(_done: int, _total: int | None) -> None:
        if stop.is_set():
            raise _Stopped("stopped: another download failed")

    def one(artifact: Artifact) -> Path:
        return stored.ensure(artifact, request.sources, credentials=credentials, advance=advance)

    pool = ThreadPoolExecutor(max_workers=min(FETCH_WORKERS, len(artifacts)))
    try:
        futures = [pool.submit(one, a) for a in artifacts]
        wait(futures, return_when=FIRST_EXCEPTION)
        if any(f.done() and f.exception() for f in futures):
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            # The first failure in the lock's order (not the first to finish): one message.
            errors = [f.exception() for f in futures if not f.cancelled()]
            raise next(e for e in errors if e is not None and not isinstance(e, _Stopped))
        paths = [f.result() for f in futures]
    except BaseException as exc:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(exc, DownloadError):
            network = _network_failure(_artifact_kind(exc, artifacts), exc.message, request)
            if network is not None:
                raise network from None
        raise
    pool.shutdown()
    files = {url: path for a, path in zip(artifacts, paths, strict=True) for url in a.urls}
    return ArtifactSources(files=files, mirrors=request.sources.mirrors)


def _record_artifacts(prefix: Path, sources: ArtifactSources) -> None:
    """``etc/gpuenv/artifacts.json``: the sha256 of every artifact the prefix is built
    from, so that gc keeps them while the prefix is kept (and a later pack finds them)."""
    import json

    from gpuenv.store import ARTIFACTS_RECORD

    digests = sorted({path.parent.name for path in sources.files.values()})
    atomic_write_text(
        prefix / ARTIFACTS_RECORD,
        json.dumps({"sha256": digests}, indent=1) + "\n",
        durable=False,
        what="the prefix's artifacts record",
    )


class _Stopped(InstallError):
    """A download given up because another one failed."""


def _artifact_kind(error: Exception, artifacts: list[Artifact]) -> str:
    """ "conda packages" or "pip packages": what the failed download was."""
    text = str(error)
    conda = any(a.kind == "conda" and a.filename in text for a in artifacts)
    return "conda packages" if conda else "pip packages"


# --- python and pip -------------------------------------------------------------------------


def make_venv(
    prefix: Path, python: str, uv: Path, env: Mapping[str, str], *, allow_existing: bool = False
) -> None:
    """A virtual environment at ``prefix`` from an interpreter of the locked Python:
    the one running gpuenv when it is that version, else one uv finds on this machine
    or (where it can) downloads into the store."""
    minor = ".".join(python.split(".")[:2])
    own = Path(sys.base_prefix) / "bin" / f"python{minor}"
    interpreter = (
        str(own)
        if f"{sys.version_info[0]}.{sys.version_info[1]}" == minor and own.exists()
        else minor
    )
    try:
        extra = ["--allow-existing"] if allow_existing else []
        _proc.run(
            [uv, "venv", "--no-config", "--quiet", *extra, "--python", interpreter, "--", prefix],
            timeout=600,
            env=env,
            what="uv venv",
        )
    except ExternalToolError as exc:
        text = exc.stderr_tail or exc.message
        storage = _storage_failure(text, prefix, f"target prefix {prefix.name} (uv venv)")
        if storage is not None:
            raise storage from None
        if isinstance(exc.__cause__, FileNotFoundError) or exc.returncode is None:
            raise
        raise InstallError(
            f"no Python {minor} for target prefix {prefix.name}: {text}",
            hint=f"install Python {minor} here, or let uv manage one: uv python install {minor}",
        ) from None


def requirement_line(p: PipPackage, url: str | None = None) -> str:
    """``name @ url --hash=sha256:...``, after checking each part is one plain token:
    a newline or a space in a name or URL would let the lock add lines or options
    (``--extra-index-url``, ``-r other-file``) to what uv reads. The lock reader refuses
    such entries already; this is the last check before the text exists."""
    from gpuenv.lock import _integrity

    fetched = url or p.url  # where it is fetched from (a rewrite of the locked URL)
    name_ok = bool(_integrity.PIP_NAME.match(p.name))
    url_ok = all(is_fetchable_url(u) and u.isprintable() for u in (p.url, fetched))
    if not (name_ok and url_ok and _integrity.HEX["sha256"].match(p.sha256)):
        raise InstallError(
            f"refused: the locked pip entry {p.name!r} ({p.url!r}) is not a plain name, URL "
            "and sha256",
            hint="run 'gpuenv lock' to rewrite gpuenv.lock",
        )
    return f"{p.name} @ {literal_url(fetched)} --hash=sha256:{p.sha256}"


def requirements_text(target: LockedTarget, sources: ArtifactSources | None = None) -> str:
    fetch = sources or ArtifactSources()
    lines = ["# generated by gpuenv from gpuenv.lock: exact artifacts, hashes required"]
    lines.extend(requirement_line(p, fetch.url_for(p.url)) for p in target.pip)
    return "\n".join(lines) + "\n"


def build_options(target: LockedTarget) -> list[str]:
    """Wheels only: an sdist would run its build backend at install time. A lock may
    hold an sdist only for a declared build (``lock._integrity``); then every other
    package is still held to its wheel."""
    sdists = {p.name for p in target.pip if not p.filename.endswith(".whl")}
    if not sdists:
        return ["--no-build"]
    return [arg for p in target.pip if p.name not in sdists for arg in ("--only-binary", p.name)]


def install_pip(
    prefix: Path,
    target: LockedTarget,
    uv: Path,
    env: Mapping[str, str],
    request: InstallRequest | None = None,
) -> None:
    if not target.pip:
        return
    requirements = prefix / "etc" / "gpuenv" / "requirements.txt"
    sources = request.sources if request else None
    atomic_write_text(
        requirements,
        requirements_text(target, sources),
        durable=False,
        what="the prefix's requirements.txt",
    )
    argv: list[str | Path] = ["pip", "install", "--no-config", "--quiet"]
    argv += ["--python", prefix / "bin" / "python", "--no-deps", "--require-hashes"]
    argv += build_options(target)
    argv += ["--link-mode", "hardlink", "-r", requirements]
    for index in request.all_indexes if request else ():
        argv += ["--index", f"{index.name}={index.url}"]  # declared for its credentials only
    try:
        _cached_then_online([uv, *argv], env)
    except ExternalToolError as exc:
        tail = redact(exc.stderr_tail)
        storage = _storage_failure(tail, prefix, f"target prefix {prefix.name} (uv pip install)")
        if storage is not None:
            raise storage from None
        if "Hash mismatch" in tail:
            raise InstallError(
                "refused: a downloaded artifact does not match the sha256 in gpuenv.lock "
                f"(tampered with or corrupted):\n{tail}",
                hint="nothing was marked installed; check the index or mirror serving it",
            ) from None
        network = _network_failure("pip packages", tail, request) if request else None
        if network is not None:
            raise network from None
        raise


def _cached_then_online(argv: list[str | Path], env: Mapping[str, str]) -> None:
    """``uv pip install`` from uv's cache alone first: every locked artifact is pinned by
    URL and sha256, so a cached copy is the artifact, and an index that sends no caching
    headers is not asked about each file again. When the cache lacks one (uv resolves
    before it installs anything, so nothing was installed), the same install online."""
    if env.get("UV_OFFLINE") != "1":  # install --from: offline only, whatever the cache
        offline = {**env, "UV_OFFLINE": "1"}
        tried = _proc.run(
            argv, timeout=INSTALL_TIMEOUT, env=offline, check=False, what="uv pip install"
        )
        if tried.returncode == 0:
            return
    _proc.run(argv, timeout=INSTALL_TIMEOUT, env=env, what="uv pip install")


def python_version(prefix: Path) -> str:
    """The prefix's Python version: from pyvenv.cfg (a venv) or conda-meta (conda's
    python), else by asking the interpreter."""
    for line in _read_lines(prefix / "pyvenv.cfg"):
        key, _, value = line.partition("=")
        if key.strip() in ("version_info", "version"):
            return ".".join(value.strip().split(".")[:3])
    for record in sorted((prefix / "conda-meta").glob("python-3*.json")):
        return record.name.split("-")[1]
    result = _proc.run(
        [
            prefix / "bin" / "python",
            "-I",
            "-c",
            "import platform; print(platform.python_version())",
        ],
        timeout=60,
        what="the prefix's python",
    )
    return result.stdout.strip()


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []


# --- toolkit and activation -------------------------------------------------------------------


def _nvcc_version(nvcc: Path) -> str | None:
    result = _proc.run([nvcc, "--version"], timeout=60, check=False, what="nvcc --version")
    match = re.search(r"release (\d+\.\d+)", result.stdout)
    return match.group(1) if match else None


def cuda_home(prefix: Path, target: LockedTarget, toolkit: str | None) -> Path | None:
    """Where CUDA_HOME points: a pinned system toolkit (checked), the prefix's own
    toolkit (conda's nvcc in <prefix>/bin), or nothing."""
    if toolkit is None:
        return None
    if toolkit.startswith("system:"):
        home = Path(toolkit.removeprefix("system:"))
        found = _nvcc_version(home / "bin" / "nvcc") if (home / "bin" / "nvcc").exists() else None
        if found != target.stack.cuda:
            raise InstallError(
                f"the pinned toolkit {home} has CUDA {found or 'no nvcc'}; "
                f"the lock's torch is built for CUDA {target.stack.cuda}",
                hint=f'pin a CUDA {target.stack.cuda} toolkit, or use toolkit = "auto"',
            )
        return home
    if (prefix / "bin" / "nvcc").exists():
        return prefix
    wheel_home = _assemble_wheel_toolkit(prefix)
    if wheel_home is None:
        raise InstallError(
            f"toolkit = {toolkit!r}, but the lock for {target.name} holds no nvcc",
            hint="run 'gpuenv lock' so the toolkit packages are locked",
        )
    return wheel_home


def _nvidia_dirs(prefix: Path) -> list[Path]:
    return sorted(prefix.glob("lib/python3*/site-packages/nvidia/*"))


def _assemble_wheel_toolkit(prefix: Path) -> Path | None:
    """NVIDIA's toolkit wheels spread bin/, include/ and lib/ over site-packages/nvidia/*:
    gather them under <prefix>/cuda with symlinks so CUDA_HOME has the usual layout."""
    nvcc = next(
        (d / "bin" / "nvcc" for d in _nvidia_dirs(prefix) if (d / "bin" / "nvcc").exists()), None
    )
    if nvcc is None:
        return None
    home = prefix / "cuda"
    with writing(home, "the prefix's CUDA toolkit links"):
        for part, alias in (("bin", "bin"), ("include", "include"), ("lib", "lib64")):
            (home / alias).mkdir(parents=True, exist_ok=True)
            for source in _nvidia_dirs(prefix):
                for entry in sorted((source / part).glob("*")) if (source / part).is_dir() else []:
                    link = home / alias / entry.name
                    if not link.exists():
                        link.symlink_to(entry)
    return home


def library_dirs(prefix: Path) -> tuple[Path, ...]:
    dirs = [prefix / "lib"] if (prefix / "conda-meta").is_dir() else []
    dirs.extend(d / "lib" for d in _nvidia_dirs(prefix) if (d / "lib").is_dir())
    return tuple(dirs)


def jit_arch_list(target: LockedTarget) -> str | None:
    """``TORCH_CUDA_ARCH_LIST`` for ``torch.utils.cpp_extension.load`` in the prefix: the
    target's archs, kept within what the toolkit of torch's CUDA compiles for (torch 1.12's
    own cpp_extension refuses 8.9: "Unknown CUDA arch"). None for a CPU build."""
    if target.stack.cuda is None:
        return None
    from gpuenv.knowledge import knowledge_base

    return arch_list(
        target.hardware.compute_capabilities,
        nvcc_max=nvcc_arch_max(knowledge_base(), target.stack.cuda),
        torch_archs=target.stack.arch_list,
    )


def write_activation(
    prefix: Path, store: Store, request: InstallRequest, home: Path | None
) -> None:
    # imported here: an install that finds its prefix current writes no scripts
    from gpuenv.activation import ActivationInputs, write_activation_files
    from gpuenv.shells import write_shell_entrypoints

    target = request.target
    jit_archs = jit_arch_list(target)
    inputs = ActivationInputs(
        prefix=prefix,
        name=f"{request.env_name}:{target.name}",
        store_root=store.prefixes,
        bin_dirs=(prefix / "bin",),
        lib_dirs=library_dirs(prefix),
        cuda_home=home,
        cuda_version=target.stack.cuda,
        torch_arch_list=jit_archs,
        torch_extensions_dir=store.torch_extensions_dir(prefix),
    )
    write_activation_files(prefix, inputs)
    write_shell_entrypoints(prefix)


# --- the whole install ------------------------------------------------------------------------


def _toolkit_of(request: InstallRequest) -> str | None:
    """The spec's toolkit; "auto" when a build needs nvcc and the spec names none."""
    builds = any(b.needs_toolkit for b in request.target.builds)
    project = request.local is not None and request.local.cuda and request.target.stack.cuda
    if request.toolkit is None and (builds or project):
        return "auto"
    return request.toolkit


def _build(
    prefix: Path, store: Store, request: InstallRequest, progress: Progress
) -> tuple[str, tuple[BuildOutcome, ...]]:
    _make_prefixes_dir(store, prefix)
    with store.using_artifacts():  # gc prunes no artifact or tool-cache entry meanwhile
        return _build_prefix(prefix, store, request, progress)


def _build_prefix(
    prefix: Path, store: Store, request: InstallRequest, progress: Progress
) -> tuple[str, tuple[BuildOutcome, ...]]:
    target = request.target
    left_out = _left_out(request)
    if left_out:  # the dependency groups not asked for
        target = replace(target, pip=tuple(p for p in target.pip if p.name not in left_out))
    request = replace(request, sources=fetch_artifacts(store, request, progress, target))
    uv = _uv_binary(request)
    env = _uv_env(store, request)
    if target.conda:
        progress(f"{target.name}: linking {len(target.conda)} conda packages")
        install_conda(prefix, target.conda, store.cache("rattler"), request)
        if any(c.name == "python" for c in target.conda):
            if not (prefix / "bin" / "python").exists():
                raise InstallError(f"conda's python package left no bin/python in {prefix}")
        else:  # conda tools beside a virtual environment ([conda] python = false)
            make_venv(prefix, target.stack.python, uv, env, allow_existing=True)
    else:
        progress(f"{target.name}: creating the Python {target.stack.python} environment")
        make_venv(prefix, target.stack.python, uv, env)
    _record_artifacts(prefix, request.sources)
    progress(f"{target.name}: installing {len(target.pip)} pip packages")
    install_pip(prefix, target, uv, env, request)
    from gpuenv.editable.shims import write_pip_shims

    write_pip_shims(prefix)  # pip here refuses instead of reaching another environment
    python = python_version(prefix)
    locked = target.stack.python
    if not (python == locked or python.startswith(locked + ".")):
        raise InstallError(f"the prefix's Python is {python}, the lock says {locked}")
    home = cuda_home(prefix, target, _toolkit_of(request))
    outcomes: tuple[BuildOutcome, ...] = ()
    if target.builds:
        from gpuenv.builds.install import Tools, install_builds

        hashes = {p.name: p.sha256 for p in target.pip}
        outcomes = install_builds(
            prefix,
            store,
            target.builds,
            hashes,
            Tools(uv, env, home, request.sources),
            Prefixed(progress, f"{target.name}: "),
        )
    write_activation(prefix, store, request, home)
    return python, outcomes


def _left_out(request: InstallRequest) -> set[str]:
    from gpuenv.lock.extras import left_out

    return left_out(request.target.groups, request.groups) if request.target.groups else set()


def _chosen_groups(request: InstallRequest) -> tuple[str, ...]:
    return tuple(sorted(g for g in set(request.groups) if g in request.target.groups))


def _install_project(
    prefix: Path, store: Store, request: InstallRequest, progress: Progress
) -> ProjectResult | None:
    """The project, editable, over the installed prefix (rebuilt when its tree changed)."""
    if request.local is None:
        return None
    from gpuenv.builds.install import Tools
    from gpuenv.editable.install import install_project

    toolkit = _toolkit_of(request)
    home = cuda_home(prefix, request.target, toolkit)
    return install_project(
        prefix,
        store,
        request.local,
        request.local_build,
        request.target,
        Tools(_uv_binary(request), _uv_env(store, request), home, request.sources),
        toolkit=toolkit,
        progress=Prefixed(progress, f"{request.target.name}: "),
    )


def _make_prefixes_dir(store: Store, prefix: Path) -> None:
    try:
        with writing(prefix.parent, "the store's prefixes directory"):
            prefix.parent.mkdir(parents=True, exist_ok=True)
            probe = prefix.parent / f".{prefix.name}.write-test"
            probe.mkdir(exist_ok=True)
            probe.rmdir()
    except StorageError as exc:
        if not is_read_only(exc):
            raise
        raise StorageError(
            f"the store {store.root} is read-only here: target {prefix.name} cannot be "
            "built on this machine",
            path=str(prefix.parent),
            errno_name=exc.errno_name,
            hint="install it where the store is mounted read-write; this machine can then "
            "attach and verify it (gpuenv install, gpuenv verify)",
        ) from None


def _runnable(prefix: Path) -> bool:
    """The environment delta ``gpuenv run`` applies is there and well formed (a marked
    prefix whose delta was damaged later is rebuilt, as its refusal says)."""
    from gpuenv import _envdelta, _fs
    from gpuenv.errors import FileFormatError

    try:
        delta = _fs.load_json(prefix / "etc" / "gpuenv" / "env-delta.json")
        _envdelta.checked_ops(delta)  # type: ignore[arg-type]
    except (OSError, FileFormatError):
        return False
    return True


def is_current(store: Store, target: LockedTarget) -> bool:
    """Whether ``target`` is installed as locked in ``store`` (checked as install
    checks it: the marker names its content hash and its run-time delta is sound)."""
    prefix = store.prefix_for(target.name, target.content_hash)
    return store.is_installed(prefix, target.content_hash) and _runnable(prefix)


def install_target(
    store: Store, request: InstallRequest, progress: Progress | None = None
) -> InstallResult:
    """Install ``request.target`` (or reuse it when already installed) and point the
    project at it."""
    report = progress or (lambda _message: None)
    started = time.perf_counter()
    target = request.target
    check_platform(target)
    lock_hash = target.content_hash
    from gpuenv.editable.state import prefix_key

    prefix = store.prefix_for(
        target.name, prefix_key(lock_hash, request.local, _chosen_groups(request))
    )
    with store.locked(prefix):
        built = not store.is_installed(prefix, lock_hash) or not _runnable(prefix)
        outcomes: tuple[BuildOutcome, ...] = ()
        if built:
            store.discard(prefix)  # an interrupted build, if anything is there
            try:
                python, outcomes = _build(prefix, store, request, report)
            except BaseException:
                store.discard_quietly(prefix)  # never leave a half-built prefix behind
                raise
            try:
                store.mark_installed(
                    prefix,
                    lock_hash=lock_hash,
                    target=target.name,
                    python=python,
                    cuda=target.stack.cuda,
                )
            except BaseException:
                store.discard_quietly(prefix)
                raise
        project = _install_project(prefix, store, request, report)
        previous = point_project(store, request.project, target.name, prefix)
    seconds = time.perf_counter() - started
    return InstallResult(target.name, prefix, built, previous, seconds, outcomes, project)


def record_lock_state(project: Path, lock: Lock, installed: tuple[str, ...]) -> None:
    """Tell ``gpuenv run`` which content hash each target has in this lock (keyed by
    the sha256 of the lock's bytes, so it can compare without parsing the lock), and
    drop the rollback of each target just installed: it follows the lock again."""
    import hashlib

    from gpuenv import _marker
    from gpuenv.lock.format import render_lock

    digest = hashlib.sha256(render_lock(lock).encode()).hexdigest()
    _marker.write_lock_state(
        str(project),
        digest=digest,
        targets={name: t.content_hash for name, t in lock.targets.items()},
        rollback=dict.fromkeys(installed),
    )
