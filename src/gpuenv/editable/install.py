"""Building the project for a target and installing it editable into its prefix (see
``gpuenv.editable``)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuenv import _proc
from gpuenv._fs import atomic_write_text
from gpuenv._srctree import tree_key
from gpuenv.builds import compiler
from gpuenv.builds.install import Tools
from gpuenv.builds.model import (
    BuildEntry,
    BuildInputs,
    BuildOutcome,
    BuildSource,
    arch_list,
    compute_identity,
)
from gpuenv.editable.state import RECORD, RECORD_FORMAT, read_record
from gpuenv.errors import ExternalToolError, InstallError
from gpuenv.lock.model import LockedTarget
from gpuenv.spec import BuildOptions, LocalProject
from gpuenv.store import BUILDS_RECORD, Store

INSTALL_TIMEOUT = 1800.0


@dataclass(frozen=True)
class ProjectResult:
    """The project's editable install in one prefix: its distribution name and folder, whether
    it was built now (and that build's outcome), and the compiled modules the install maps."""

    name: str
    root: str
    built: bool  # False: the prefix already held this tree's build
    outcome: BuildOutcome | None
    modules: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "root": self.root,
            "installed": self.built,
            "build": self.outcome.to_json() if self.outcome else None,
            "modules": list(self.modules),
        }


def _toolkit(target: LockedTarget, toolkit: str | None) -> str | None:
    """The nvcc version the lock holds, as ``lock.builds.toolkit_version`` names it."""
    major = (target.stack.cuda or "").split(".")[0]
    for package in target.pip:
        if package.name in (f"nvidia-cuda-nvcc-cu{major}", "nvidia-cuda-nvcc"):  # 13: no suffix
            return package.version
    for record in target.conda:
        if record.name == "cuda-nvcc":
            return record.version
    if toolkit is not None and toolkit.startswith("system:"):
        return f"{target.stack.cuda} ({toolkit})"
    return None


def entry_for(
    local: LocalProject,
    options: BuildOptions | None,
    target: LockedTarget,
    *,
    toolkit: str | None,
    environ: Mapping[str, str],
    key: str,
) -> BuildEntry:
    """The project's build for ``target``, its identity from the tree key and the same
    inputs any other build of the target has."""
    opts = options or BuildOptions()
    isolated_off = (
        opts.no_build_isolation if opts.no_build_isolation is not None else (local.uses_torch)
    )
    against = opts.against_torch if opts.against_torch is not None else isolated_off
    wants_nvcc = opts.toolkit if opts.toolkit is not None else local.cuda
    nvcc = _toolkit(target, toolkit) if wants_nvcc and target.stack.cuda else None
    uses_nvcc = nvcc is not None
    torch = target.pip_package("torch") if against else None
    archs = None
    if uses_nvcc:
        from gpuenv.knowledge import nvcc_arch_max

        archs = arch_list(
            target.hardware.compute_capabilities,
            opts.extra_archs,
            nvcc_max=nvcc_arch_max(target.stack.cuda),
            torch_archs=target.stack.arch_list,
        )
    compiled = local.compiled or against or uses_nvcc
    host = opts.host_compiler or (
        compiler.for_lock(environ, target.stack.cuda if uses_nvcc else None) if compiled else None
    )
    from packaging.requirements import InvalidRequirement, Requirement

    from gpuenv.names import normalize_name

    requires = []
    for line in local.build_requires if isolated_off else ():
        try:
            name = normalize_name(Requirement(line).name)
        except InvalidRequirement:
            continue
        if target.pip_package(name) is not None and name not in ("torch",):
            requires.append(name)
    inputs = BuildInputs(
        python=".".join(target.stack.python.split(".")[:2]),
        platform=target.platform,
        against_torch=against,
        no_build_isolation=isolated_off,
        torch=torch.version if torch else None,
        torch_sha256=torch.sha256 if torch else None,
        cuda=target.stack.cuda if uses_nvcc else None,
        toolkit=nvcc,
        arch_list=archs,
        host_compiler=host,
        env=opts.env,
        build_requires=tuple(sorted(requires)),
    )
    name = local.name or local.root.name
    source = BuildSource("project", local.root.as_uri(), sha256=key.removeprefix("sha256:"))
    hashes = {p.name: p.sha256 for p in target.pip}
    # Its version is what its build says ("editable" in messages): the tree key decides.
    identity = compute_identity(name, "editable", source, inputs, hashes)
    return BuildEntry(name, "editable", source, inputs, identity, (), opts.max_jobs)


def is_current(prefix: Path, local: LocalProject, key: str | None = None) -> bool:
    """The prefix holds this checkout's project, built from its current tree."""
    record = read_record(prefix)
    if record is None or record.get("root") != str(local.root):
        return False
    return record.get("key") == (key or tree_key(local.root, local.backend_path))


def _uv(argv: list[str | Path], env: Mapping[str, str], what: str) -> None:
    try:
        _proc.run(argv, timeout=INSTALL_TIMEOUT, env=env, what=what)
    except ExternalToolError as exc:
        raise InstallError(f"the project could not be installed: {exc.message}") from None


def _record_build(prefix: Path, entry: BuildEntry, wheel: Path, modules: list[str]) -> None:
    """List the project's build in the prefix's ``builds.json`` (replacing the one before)."""
    from gpuenv.builds.install import read_record as read_builds

    try:
        builds = [b for b in read_builds(prefix) if not b.get("project")]
    except InstallError:
        builds = []
    site = next(iter(sorted(prefix.glob("lib/python3*/site-packages"))), None)
    from gpuenv.editable.wheel import OVERLAY

    dist = wheel.name.split("-", 1)[0]
    files = []
    for module in modules:
        found = (
            sorted((site / OVERLAY / dist).glob(module.replace(".", "/") + ".*so")) if site else []
        )
        files += [str(f.relative_to(prefix)) for f in found]
    builds.append(
        {
            "name": entry.name,
            "version": "editable",
            "identity": entry.identity,
            "project": True,
            "wheel": wheel.name,
            "extensions": files,
            "modules": modules if files else [],
            "torch": entry.inputs.torch,
            "cuda": entry.inputs.cuda,
            "arch_list": entry.inputs.arch_list,
            "host_compiler": entry.inputs.host_compiler,
        }
    )
    body = {"format": 1, "builds": builds}
    atomic_write_text(prefix / BUILDS_RECORD, json.dumps(body, indent=2) + "\n", durable=False)


def install_project(
    prefix: Path,
    store: Store,
    local: LocalProject,
    options: BuildOptions | None,
    target: LockedTarget,
    tools: Tools,
    *,
    toolkit: str | None,
    progress: Callable[[str], None],
) -> ProjectResult:
    """Install the project editable into ``prefix`` (the caller holds the prefix's lock),
    unless the prefix holds this tree's build already."""
    key = tree_key(local.root, local.backend_path)
    if not local.package:
        return ProjectResult(local.name, str(local.root), False, None)
    if is_current(prefix, local, key):
        record = read_record(prefix) or {}
        modules = record.get("modules")
        held = tuple(m for m in modules if isinstance(m, str)) if isinstance(modules, list) else ()
        name = record.get("name")
        name = name if isinstance(name, str) else local.name
        return ProjectResult(name, str(local.root), False, None, held)
    from gpuenv.builds.cache import BuildCache
    from gpuenv.builds.runner import wheel_for
    from gpuenv.editable.wheel import compose

    uv, uv_env = tools.uv, tools.uv_env
    entry = entry_for(local, options, target, toolkit=toolkit, environ=os.environ, key=key)
    ctx = tools.context(prefix, progress)
    previous = read_record(prefix)
    with wheel_for(BuildCache(store), entry, ctx) as (built, outcome):
        for note in outcome.notes:
            progress(note)
        how = "from the build cache" if outcome.cached else f"built in {outcome.seconds:.1f} s"
        progress(f"installing the project {entry.name}, editable ({how})")
        with tempfile.TemporaryDirectory(prefix="gpuenv-editable-") as tmp:
            wheel, modules = compose(built.wheel, local.root, Path(tmp))
            python = prefix / "bin" / "python"
            old = previous.get("name") if previous else None
            if isinstance(old, str) and old and old != wheel.name.split("-", 1)[0]:
                _uv(
                    [uv, "pip", "uninstall", "--no-config", "--quiet", "--python", python, old],
                    uv_env,
                    "uv pip uninstall (the project's previous name)",
                )
            dist = wheel.name.split("-", 1)[0]
            argv: list[str | Path] = [uv, "pip", "install", "--no-config", "--quiet", "--no-deps"]
            argv += ["--reinstall-package", dist, "--python", python, wheel]
            _uv(argv, uv_env, "uv pip install (the project, editable)")
        _record_build(prefix, entry, wheel, modules)
    body = {
        "format": RECORD_FORMAT,
        "name": dist,
        "root": str(local.root),
        "key": key,
        "identity": entry.identity,
        "compiled": bool(modules),
        "modules": modules,
        "arch_list": entry.inputs.arch_list,
        "backend_path": list(local.backend_path),
    }
    atomic_write_text(prefix / RECORD, json.dumps(body, indent=2) + "\n", durable=False)
    return ProjectResult(dist, str(local.root), True, outcome, tuple(modules))


def record_checkout(prefix: Path, checkout: Path) -> None:
    """Note in the prefix's project record the folder whose pointer leads to it (the
    caller holds the prefix's lock): ``gpuenv run`` from a checkout moved or copied
    since says the editable install maps the old one (``state.stale_note``)."""
    record = read_record(prefix)
    if record is None or record.get("checkout") == str(checkout):
        return
    body = {**record, "checkout": str(checkout)}
    atomic_write_text(prefix / RECORD, json.dumps(body, indent=2) + "\n", durable=False)
