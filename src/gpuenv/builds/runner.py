"""Running one build: from a locked ``BuildEntry`` to a wheel in the build cache.

Before anything compiles, the build's preconditions are checked, each failure saying
what to do: the toolkit is there and its nvcc has torch's CUDA (major.minor); a host
compiler of the locked major is here and this nvcc accepts it; torch is installed in
the prefix when the build runs there. Then:

1. the source: the sdist (from the store, or downloaded and hash-checked) or a git
   checkout of the locked commit;
2. ``uv build --wheel`` with the prefix's interpreter, without build isolation where the
   build needs torch (``--no-build-isolation``: the backend runs in the prefix, against
   its torch), in an environment with ``CUDA_HOME`` = the prefix's toolkit,
   ``TORCH_CUDA_ARCH_LIST`` from the lock, ``MAX_JOBS`` from cores and free memory,
   ``CC``/``CXX``/``NVCC_CCBIN`` = the checked compiler, and the spec's variables;
   it runs under ``_supervise.py`` in its own process group, so no compile job outlives
   gpuenv, whatever ends it;
3. every output line goes to the log in the store and through the progress tracker;
4. on failure: ``BuildError`` with the log's last lines and the diagnosis of the known
   causes; on success the wheel, annotated with gpuenv's build record, becomes a cache
   entry (completion marker last, renamed into place).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from gpuenv import __version__, _proc
from gpuenv._artifacts import ArtifactSources
from gpuenv._network import is_network_setting
from gpuenv.builds import diagnose, fetch, knowledge, localsrc, wheelfile
from gpuenv.builds._shaping import shapes_build
from gpuenv.builds.cache import BuildCache, CachedWheel
from gpuenv.builds.compiler import HostCompiler, select
from gpuenv.builds.jobs import Jobs, max_jobs
from gpuenv.builds.model import BuildEntry, BuildOutcome, arch_numbers
from gpuenv.builds.progress import ProgressCallback, Tracker
from gpuenv.errors import BuildError, ExternalToolError
from gpuenv.names import MANAGED_ENV

DEFAULT_TIMEOUT = 6 * 3600.0
SUPERVISOR = Path(__file__).with_name("_supervise.py")
# The build sees the prefix, not the caller's Python setup or another toolkit.
_DROPPED = frozenset({"PYTHONHOME", "PYTHONSTARTUP", "TORCH_EXTENSIONS_DIR", "CUDA_ROOT"})
# The caller's uv settings that only say how to reach an index (an isolated build fetches
# its build-system requirements): which indexes, and uv's network settings as lock and
# install keep them (gpuenv._network). Every other UV_* (caches, config, Python) is not.
_UV_INDEXES = re.compile(r"^UV_(INDEX(_.*)?|DEFAULT_INDEX|INDEX_URL|EXTRA_INDEX_URL|FIND_LINKS)$")
_REPRODUCIBLE_EPOCH = "315532800"  # 1980-01-01: zip's earliest date, for stable wheels


@dataclass(frozen=True)
class BuildContext:
    """Where and how a build runs: the prefix whose interpreter and toolkit it uses, uv, the
    caller's environment, the progress callback, the time limit, the store's uv cache
    settings and where locked URLs are fetched from."""

    prefix: Path
    uv: Path
    cuda_home: Path | None
    environ: Mapping[str, str]
    progress: ProgressCallback | None = None
    timeout: float = DEFAULT_TIMEOUT
    cache_env: Mapping[str, str] | None = None  # uv's cache settings (the store's)
    sources: ArtifactSources = field(default_factory=ArtifactSources)  # install --from

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python"


@contextlib.contextmanager
def wheel_for(
    cache: BuildCache, entry: BuildEntry, ctx: BuildContext
) -> Iterator[tuple[CachedWheel, BuildOutcome]]:
    """The built wheel of ``entry``, from the cache or built now, held under the
    identity's lock for the duration of the ``with`` block (the caller installs it)."""
    started = time.monotonic()
    with cache.locked(entry.identity):
        notes_before = len(cache.notes)
        hit = cache.lookup(entry)
        wheel = hit if hit is not None else build(cache, entry, ctx)
        outcome = BuildOutcome(
            name=entry.name,
            version=entry.version,
            identity=entry.identity,
            cached=hit is not None,
            seconds=time.monotonic() - started,
            wheel=str(wheel.wheel),
            log=str(wheel.log),
            notes=tuple(cache.notes[notes_before:]),
        )
        yield wheel, outcome


# --- preconditions ------------------------------------------------------------------------


def nvcc_release(cuda_home: Path) -> str | None:
    nvcc = cuda_home / "bin" / "nvcc"
    if not nvcc.exists():
        return None
    try:
        result = _proc.run([nvcc, "--version"], timeout=60, check=False, what="nvcc --version")
    except ExternalToolError:
        return None
    match = re.search(r"release (\d+\.\d+)", result.stdout)
    return match.group(1) if match else None


def _check_toolkit(entry: BuildEntry, cuda_home: Path | None) -> None:
    cuda = entry.inputs.cuda
    if cuda_home is None:
        raise BuildError(
            f"{entry.label()} needs nvcc, but the prefix has no CUDA toolkit",
            package=entry.name,
            hint="relock ('gpuenv lock'): a toolkit is added for builds that need one",
        )
    found = nvcc_release(cuda_home)
    if found is None or (cuda is not None and found != ".".join(cuda.split(".")[:2])):
        raise BuildError(
            f"{entry.label()}: nvcc in {cuda_home} is CUDA {found or 'missing'}, torch is "
            f"built for CUDA {cuda}: torch's cpp_extension refuses the mismatch (\"The detected "
            'CUDA version mismatches the version that was used to compile PyTorch")',
            package=entry.name,
            diagnosis=[
                {
                    "code": "cuda-mismatch",
                    "title": "nvcc's CUDA differs from the CUDA torch was built with",
                    "fix": f'use a CUDA {cuda} toolkit: [stack] toolkit = "auto" (or pin one)',
                    "evidence": f"nvcc release {found}",
                }
            ],
        )


def _check_torch(entry: BuildEntry, prefix: Path) -> None:
    if not any(prefix.glob("lib/python3*/site-packages/torch/__init__.py")):
        raise BuildError(
            f"{entry.label()} is built against the prefix's torch, but {prefix} has none",
            package=entry.name,
            hint="torch must be in the lock's pip list of this target: run 'gpuenv lock'",
        )


def preflight(entry: BuildEntry, ctx: BuildContext) -> HostCompiler | None:
    """Check what a build needs before it starts; the host compiler to use."""
    inputs = entry.inputs
    if entry.needs_toolkit:
        _check_toolkit(entry, ctx.cuda_home)
    if inputs.against_torch and inputs.no_build_isolation:
        _check_torch(entry, ctx.prefix)
    cuda = inputs.cuda if entry.needs_toolkit else None
    try:
        return select(ctx.environ, inputs.host_compiler, cuda, ctx.cuda_home)
    except BuildError as exc:
        message = f"{entry.label()}: {exc.message}"
        raise BuildError(message, package=entry.name, hint=exc.hint) from None


# --- the environment ------------------------------------------------------------------------


def build_env(
    entry: BuildEntry, ctx: BuildContext, compiler: HostCompiler | None, jobs: Jobs
) -> dict[str, str]:
    """The build's environment: the caller's, minus what would point it elsewhere or
    shape its output (``_shaping``: not part of the build identity), plus what the lock
    decides. The spec's variables are passed as they are (never through a
    shell), after gpuenv's own, which they cannot replace."""
    env = {
        k: v
        for k, v in ctx.environ.items()
        if k not in MANAGED_ENV
        and k not in _DROPPED
        and not shapes_build(k, entry.name)  # only the lock's variables shape a build
        and not k.startswith("PIP_")
        and (not k.startswith("UV_") or _UV_INDEXES.match(k) or is_network_setting(k))
    }
    path = [str(ctx.prefix / "bin")]
    if ctx.cuda_home is not None:
        path.append(str(ctx.cuda_home / "bin"))
        env["CUDA_HOME"] = env["CUDA_PATH"] = str(ctx.cuda_home)
    path.append(ctx.environ.get("PATH", os.defpath))
    env["PATH"] = os.pathsep.join(path)
    env["VIRTUAL_ENV"] = str(ctx.prefix)
    if entry.inputs.arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = entry.inputs.arch_list
        defaults = knowledge.defaults_for(entry.name)
        if defaults is not None and defaults.arch_env:
            env[defaults.arch_env] = arch_numbers(entry.inputs.arch_list)
    env["MAX_JOBS"] = str(jobs.count)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(jobs.count))
    if compiler is not None:
        env["CC"] = str(compiler.cc)
        if compiler.cxx is not None:
            env["CXX"] = str(compiler.cxx)
        env["NVCC_CCBIN"] = str(compiler.cxx or compiler.cc)
    env.setdefault("SOURCE_DATE_EPOCH", _REPRODUCIBLE_EPOCH)
    env.update(dict(ctx.cache_env or {}))
    env.update(UV_NO_CONFIG="1", UV_NO_PROGRESS="1", UV_PYTHON_DOWNLOADS="never")
    env.update(dict(entry.inputs.env))
    return env


def _jobs(entry: BuildEntry) -> Jobs:
    defaults = knowledge.defaults_for(entry.name)
    memory = defaults.job_memory_gb if defaults else knowledge.DEFAULT_JOB_MEMORY_GB
    return max_jobs(memory, limit=entry.max_jobs)


# --- running ----------------------------------------------------------------------------------


def _argv(entry: BuildEntry, ctx: BuildContext, source: Path, out: Path) -> list[str | Path]:
    argv: list[str | Path] = [sys.executable, "-I", SUPERVISOR, str(os.getpid()), "--"]
    argv += [ctx.uv, "--no-config", "build", "--wheel", "--out-dir", out, "--python", ctx.python]
    if entry.inputs.no_build_isolation:
        argv.append("--no-build-isolation")
    return [*argv, "--", source]  # the source is an operand, whatever its name


def _source(cache: BuildCache, entry: BuildEntry, ctx: BuildContext, workdir: Path) -> Path:
    if entry.source.kind == "project":  # a copy: two targets' builds never share objects
        return localsrc.copy_tree(entry.source, workdir)
    if entry.source.kind == "git":
        return fetch.git_checkout(entry.source, workdir)
    return fetch.sdist(entry.source, cache.artifacts, ctx.sources)


def _run(
    entry: BuildEntry, ctx: BuildContext, argv: list[str | Path], env: dict[str, str], log: Path
) -> int:
    tracker = Tracker(entry.label(), ctx.progress)
    tracker.start()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)  # a link planted at the log's path is not written through
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(log, flags, 0o600), "w", encoding="utf-8") as handle:
        handle.write(f"# gpuenv {__version__}: building {entry.label()} ({entry.identity})\n")
        for key in ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "MAX_JOBS", "CC", "CXX"):
            handle.write(f"# {key}={env.get(key, '')}\n")

        def on_line(line: str) -> None:
            handle.write(line + "\n")
            handle.flush()
            tracker.feed(line)

        result = _proc.stream(
            argv, timeout=ctx.timeout, on_line=on_line, env=env, what=f"building {entry.label()}"
        )
    if result.returncode == 0:
        tracker.finish()
    return result.returncode


def _failure(entry: BuildEntry, log: Path, returncode: int, seconds: float) -> BuildError:
    text = log.read_text(encoding="utf-8", errors="replace")
    found = diagnose.diagnose(text, returncode)
    status = f"exit {returncode}" if returncode >= 0 else f"killed by signal {-returncode}"
    lines = [f"{entry.label()} failed to build after {seconds:.0f} s ({status}); full log: {log}"]
    lines += ["--- last lines of the log ---", diagnose.tail(text), "---"]
    if found:
        lines.append("diagnosis:")
        lines += [f"  {d.render()}" for d in found]
    return BuildError(
        "\n".join(lines),
        package=entry.name,
        log=str(log),
        tail=diagnose.tail(text),
        diagnosis=[d.to_json() for d in found],
        hint=None if found else "read the log above; nothing was marked installed",
    )


def _one_wheel(entry: BuildEntry, out: Path) -> Path:
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"{entry.label()}: the build produced {len(wheels)} wheels, not one")
    try:
        name, version, _build, _tags = parse_wheel_filename(wheels[0].name)
    except InvalidWheelFilename as exc:
        raise BuildError(f"{entry.label()}: the build produced {wheels[0].name}: {exc}") from None
    if entry.source.kind == "project":  # its name and version are what its build says
        return wheels[0]
    if canonicalize_name(name) != entry.name or version != Version(entry.version):
        raise BuildError(
            f"{entry.label()}: the build produced {wheels[0].name}, another package or version"
        )
    return wheels[0]


def build(cache: BuildCache, entry: BuildEntry, ctx: BuildContext) -> CachedWheel:
    """Build ``entry`` now (the caller holds its lock) and add it to the cache."""
    compiler = preflight(entry, ctx)
    jobs = _jobs(entry)
    incoming = cache.incoming(entry.identity)
    try:
        source = _source(cache, entry, ctx, incoming)
        out = incoming / "out"
        env = build_env(entry, ctx, compiler, jobs)
        log = cache.log_path(entry.identity)
        started = time.monotonic()
        returncode = _run(entry, ctx, _argv(entry, ctx, source, out), env, log)
        seconds = time.monotonic() - started
        if returncode != 0:
            raise _failure(entry, log, returncode, seconds)
        built = _one_wheel(entry, out)
        record = _record(entry, ctx, compiler)
        wheel = wheelfile.annotate(built, record, incoming / built.name)
        shutil.copyfile(log, incoming / "build.log")
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(incoming / "src", ignore_errors=True)
        timing = {
            "seconds": round(seconds, 3),
            "max_jobs": jobs.count,
            "max_jobs_reason": jobs.reason,
        }
        return cache.commit(incoming, entry, wheel, {"built_with": record, **timing})
    except BaseException:
        cache.abandon(incoming)
        raise


def _record(entry: BuildEntry, ctx: BuildContext, compiler: HostCompiler | None) -> dict[str, Any]:
    """gpuenv's build record: what the wheel was built against (``gpuenv-build.json``);
    no times, so that the same inputs can give the same bytes."""
    inputs = entry.inputs
    return {
        "format": 1,
        "identity": entry.identity,
        "name": entry.name,
        "version": entry.version,
        "source": entry.source.to_json(),
        "torch": inputs.torch,
        "torch_sha256": inputs.torch_sha256,
        "cuda": inputs.cuda,
        "toolkit": inputs.toolkit,
        "nvcc": nvcc_release(ctx.cuda_home) if ctx.cuda_home else None,
        "arch_list": inputs.arch_list,
        "python": inputs.python,
        "platform": inputs.platform,
        "host_compiler": f"gcc {compiler.version}" if compiler else None,
        "no_build_isolation": inputs.no_build_isolation,
        "env": dict(inputs.env),
        "gpuenv": __version__,
    }
