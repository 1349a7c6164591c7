"""``gpuenv import --check-resolves``: the real resolution of the written pip dependencies.

``gpuenv.importers`` decides the Python, torch and every pin from the index's pages
(which Pythons each direct pin has wheels for); it starts no processes. What those
pages cannot show, a transitive conflict (``transformers==4.44.2`` needs
``tokenizers<0.20``, the files pin ``tokenizers==0.20.0``) or a dependency with no
wheel for the chosen Python, only a resolver finds. This module runs one
``uv pip compile`` of the written non-torch pip dependencies for the target, before
the spec is written, and says whether they resolve, and if not, what uv said.

How it runs (the lock's own way, ``gpuenv.lock.uv``: ``find_uv``, ``_proc``, the uv
environment of ``gpuenv._network``, uv's prose read by ``gpuenv.lock._uv_output``):

- the requirements are the dependencies of a throw-away ``pyproject.toml``, each a TOML
  string, never a command-line argument: a pin that reads like an option
  (``--index-url=...``, ``-e .``) or holds a newline cannot become one; a line that is
  not PEP 508 is left out and named;
- the target's ``--python-version`` and ``--python-platform`` (``target_platform``),
  never this machine's;
- the index import asked for wheels (``--default-index``; its credentials go to uv
  through ``UV_INDEX_GPUENV_DEFAULT_*``, never on the command line, and every text
  shown is redacted);
- the torch family is constrained (``-c``) to the planned versions without their local
  label (``torch==2.4.1``, not ``+cu121``): a dependency that needs another torch is a
  conflict, as at lock time. The family itself is not a requirement: the lock takes it
  from the build's own index, and a failure that names only the family (the checked
  index has no such torch for the target) is "not checked", not a conflict;
- where the planned torch is not the checked index's build of its release (the plan is
  not PyPI's default build: ``torch 2.11.0+cu128`` while PyPI's 2.11.0 is the CUDA 13
  one, which needs ``cuda-bindings>=13``), uv is given torch's metadata with no
  dependencies (``dependency-metadata``): the checked index shows another build's, and
  the planned build's are on its own index, which ``gpuenv lock`` resolves from. Those
  dependencies are named as not checked, rather than judged by another build's;
- wheels only (``--only-binary :all:``), except for the pins the import marks as
  builds (``--no-binary NAME``: their sdist, as the lock builds them). A dependency uv
  finds no usable wheel of (omegaconf 2.1.1's antlr4-python3-runtime 4.8, wandb
  0.15's pathtools: published as source archives only) is what ``gpuenv lock`` locks
  as a source build: the check runs once more as the lock resolves (any sdist allowed)
  and, where that resolves, says so and names the packages it takes from a source
  archive (read from uv's pylock.toml), instead of a conflict that is none;
- direct URL and git requirements are left out (a clone per import is not a check) and
  named.

Never fatal: no uv, an unreachable index, a timeout (``TIMEOUT``), a build uv could
not run: the answer is "not checked" with the reason. Ctrl-C ends it at once (the
child dies with ``_proc``) and nothing has been written.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv._network import DEFAULT_INDEX_NAME, Index, uv_environment
from gpuenv._redact import redact, redact_url
from gpuenv.errors import ExternalToolError, GpuenvError
from gpuenv.names import TORCH_FAMILY, normalize_name
from gpuenv.spec._values import exclude_newer_cutoff

if TYPE_CHECKING:
    from gpuenv.importers import ImportRequest, Reproduction
    from gpuenv.importers.torch_choice import TorchBound
    from gpuenv.knowledge import KnowledgeBase

__all__ = [
    "TIMEOUT",
    "CheckRequest",
    "ResolveCheck",
    "check_reproduction",
    "check_resolves",
    "render_markdown",
    "settle",
]

TIMEOUT = 90.0  # seconds for the one uv run (the index pages had 30)
_MAX_SHOWN = 600  # characters of uv's explanation shown
_MAX_REQUIREMENT = 1000  # characters: a longer requirement is no package's
_FAMILY = frozenset(TORCH_FAMILY)


@dataclass(frozen=True)
class CheckRequest:
    """What to resolve: the written pip dependencies, for one target, on one index."""

    requirements: tuple[str, ...]  # the spec's [pip] dependencies, as written
    python: str  # "3.11"
    index: str  # the index import asked for wheels (may carry credentials)
    platform: str = "linux-64"
    glibc: str = "2.28"
    macos: str | None = None
    torch: tuple[str, ...] = ()  # the planned family: "torch==2.4.1+cu121", ...
    # the planned torch is not the checked index's build of its release (the plan's
    # pypi_default is false): its dependencies there are another build's
    torch_elsewhere: bool = False
    builds: tuple[str, ...] = ()  # names the import marks as builds (sdists allowed)
    # (name, requirements): a build's declared dependencies, as the lock gives them to uv
    # (its metadata cannot be read without building it: a setup.py that imports torch)
    dependency_metadata: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cache_dir: Path | None = None
    timeout: float = TIMEOUT
    # [pip] exclude-newer as written, as uv's cutoff instant ("2023-04-15T00:00:00Z")
    exclude_newer: str | None = None
    # [pip] exclude-newer-package as written: (name, cutoff instant)
    exclude_newer_packages: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ResolveCheck:
    """The answer. ``resolves``: True, False, or None (not checked: ``reason`` says why)."""

    resolves: bool | None
    reason: str  # uv's explanation (a failure) or why nothing was checked
    index: str  # redacted
    python: str
    platform: str  # uv's --python-platform
    packages: tuple[str, ...] = ()  # the packages uv's explanation names
    instead: str | None = None  # what would work instead, where uv's message says it
    left_out: tuple[str, ...] = ()  # requirements not checked, with why
    checked: int = 0  # how many requirements went to uv
    seconds: float = 0.0
    resolved: tuple[str, ...] = field(default=(), repr=False)  # "name==version" found
    built: tuple[str, ...] = ()  # dependencies with no usable wheel: built from source
    # what requires each resolved package (uv's "# via" lines), where uv said
    via: tuple[tuple[str, tuple[str, ...]], ...] = field(default=(), repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.resolves is not None,
            "resolves": self.resolves,
            "reason": self.reason,
            "packages": list(self.packages),
            "instead": self.instead,
            "index": self.index,
            "python": self.python,
            "platform": self.platform,
            "requirements": self.checked,
            "left_out": list(self.left_out),
            "built_from_source": list(self.built),
            "seconds": round(self.seconds, 3),
        }


def not_checked(reason: str, request: CheckRequest, platform: str = "") -> ResolveCheck:
    return ResolveCheck(
        None,
        redact(reason),
        redact_url(request.index),
        request.python,
        platform or request.platform,
    )


# -- what goes to uv ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Inputs:
    """What one check gives uv: the requirements it resolves, the torch family's
    constraints, the builds (``--no-binary``), what is left out (with why), and the family
    members whose dependencies are not read."""

    requirements: tuple[str, ...]
    constraints: tuple[str, ...]
    no_binary: tuple[str, ...]
    left_out: tuple[str, ...]
    unread: tuple[str, ...] = ()  # family members given uv with no dependencies


def _inputs(request: CheckRequest) -> _Inputs:
    """The requirements uv resolves, the torch family's constraints, the builds' names,
    and what is left out (with why)."""
    keep: list[str] = []
    left_out: list[str] = []
    for text in request.requirements:
        shown = _shown(text)
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            left_out.append(f"{shown}: not a PEP 508 requirement")
            continue
        if len(text) > _MAX_REQUIREMENT:
            left_out.append(f"{shown}: longer than {_MAX_REQUIREMENT} characters")
        elif requirement.url:
            left_out.append(f"{shown}: a direct URL or git requirement (fetched by the lock)")
        elif normalize_name(requirement.name) in _FAMILY:
            left_out.append(f"{shown}: the torch family comes from its build's index")
        else:
            keep.append(str(requirement))
    constraints = []
    unread: list[str] = []
    for text in request.torch:
        try:
            requirement = Requirement(text)
            pins = [s for s in requirement.specifier if s.operator in ("==", "===")]
            planned = Version(pins[0].version) if len(pins) == 1 else None
        except (InvalidRequirement, InvalidVersion):
            continue
        if planned is None:
            continue
        name = normalize_name(requirement.name)
        constraints.append(f"{name}=={planned.public}")
        if name == "torch" and request.torch_elsewhere:
            unread.append(name)
            left_out.append(
                f"the dependencies of torch {planned} itself: this index's torch "
                f"{planned.public} is another build, whose dependencies need not be this "
                "one's (`gpuenv lock` resolves them from the build's own index)"
            )
    names = {normalize_name(Requirement(r).name) for r in keep}
    builds = tuple(sorted(n for n in {normalize_name(b) for b in request.builds} if n in names))
    return _Inputs(tuple(keep), tuple(constraints), builds, tuple(left_out), tuple(unread))


def _shown(text: str) -> str:
    """A requirement as a report may quote it: one line, control characters escaped,
    credentials redacted, bounded."""
    one = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    one = redact(one)
    return one if len(one) <= 120 else one[:119] + "…"


def _project(folder: Path, requirements: tuple[str, ...]) -> Path:
    from gpuenv.lock.uv import project_lines

    path = folder / "pyproject.toml"
    path.write_text("\n".join(project_lines(requirements)) + "\n", encoding="utf-8")
    return path


def _argv(
    uv: str,
    folder: Path,
    inputs: _Inputs,
    request: CheckRequest,
    index: Index,
    platform: str,
) -> list[str | os.PathLike[str]]:
    argv: list[str | os.PathLike[str]] = [
        uv,
        "--no-config",
        "pip",
        "compile",
        _project(folder, inputs.requirements),
        "--python-version",
        request.python,
        "--python-platform",
        platform,
        "--no-header",
        "--quiet",
        "--python",
        sys.executable,  # uv needs one only to read a build's metadata
        "--default-index",
        f"{index.name}={index.url}",
        "--only-binary",
        ":all:",
    ]
    for name in inputs.no_binary:
        argv += ["--no-binary", name]
    if request.exclude_newer is not None or request.exclude_newer_packages:  # as the lock runs it
        from gpuenv.lock.uv import exclude_newer_argv

        family = (normalize_name(name) for name in TORCH_FAMILY)
        own = dict(request.exclude_newer_packages)
        argv += exclude_newer_argv(request.exclude_newer, request.requirements, family, own)
    if inputs.constraints:
        constraints = folder / "torch-family.txt"
        constraints.write_text("".join(f"{c}\n" for c in inputs.constraints), encoding="utf-8")
        argv += ["-c", constraints]
    # a build's declared dependencies; a torch of another build than the index's: none
    declared = (*request.dependency_metadata, *((name, ()) for name in inputs.unread))
    if declared:
        from gpuenv.lock.uv import write_dependency_metadata

        argv += ["--config-file", write_dependency_metadata(folder, declared)]
    if request.cache_dir is not None:
        from gpuenv.lock.uv import _private_dir

        argv += ["--cache-dir", _private_dir(request.cache_dir / "uv")]
    return argv


# -- running it ---------------------------------------------------------------------------


def check_resolves(request: CheckRequest) -> ResolveCheck:
    """Resolve the written pip dependencies with uv for the target; never raises but for
    an interrupt (the answer says "not checked", and why, where nothing could be said)."""
    from gpuenv.lock.model import PipRequest
    from gpuenv.lock.uv import target_platform

    started = time.monotonic()
    try:
        platform = target_platform(
            PipRequest((), request.python, request.platform, request.glibc, macos=request.macos)
        )
    except GpuenvError as exc:
        return not_checked(f"no pip platform for this target: {exc.message}", request)
    inputs = _inputs(request)
    if not inputs.requirements:
        found = not_checked("no pip dependency to resolve besides the torch family", request)
        return _with(found, inputs, platform, started)
    try:
        answer = _run(request, inputs, platform)
    except GpuenvError as exc:  # no uv, a cache that cannot be made, a timeout
        answer = not_checked(exc.message, request, platform)
    except OSError as exc:  # the scratch folder
        answer = not_checked(f"uv's scratch files: {exc.strerror or exc}", request, platform)
    return _with(answer, inputs, platform, started)


def _with(answer: ResolveCheck, inputs: _Inputs, platform: str, started: float) -> ResolveCheck:
    return replace(
        answer,
        platform=platform,
        left_out=inputs.left_out,
        checked=len(inputs.requirements),
        seconds=time.monotonic() - started,
    )


def _run(request: CheckRequest, inputs: _Inputs, platform: str) -> ResolveCheck:
    """Wheels only first (but for the builds); where uv says some package has no usable
    wheel, once more as ``gpuenv lock`` resolves (any sdist allowed), reading uv's
    pylock.toml to name what that run takes from a source archive."""
    from gpuenv.lock.uv import find_uv

    uv = find_uv()
    index = Index.parse(DEFAULT_INDEX_NAME, request.index)
    env = uv_environment(os.environ, (index,), UV_PYTHON_DOWNLOADS="never")
    deadline = time.monotonic() + request.timeout
    with tempfile.TemporaryDirectory(prefix="gpuenv-import-check-") as tmp:
        argv = _argv(uv, Path(tmp), inputs, request, index, platform)
        code, text = _compile(argv, env, tmp, deadline, request.timeout)
        if code == 0:
            pins = tuple(line for line in text.splitlines() if "==" in line[:200])
            return replace(_resolved(request, index, platform, pins, ()), via=_via(text))
        if "No solution found" not in text or not _without_wheels(text):
            return _failure(request, inputs, index, platform, text)
        # As the lock resolves: sdists allowed wherever no wheel fits.
        output = Path(tmp) / "pylock.toml"
        argv = [a for a in argv if a not in ("--only-binary", ":all:")]
        argv += ["--format", "pylock.toml", "-o", output]
        code, text = _compile(argv, env, tmp, deadline, request.timeout)
        if code != 0:
            return _failure(request, inputs, index, platform, text)
        pins, built = _from_sources(output, inputs.no_binary)
    return _resolved(request, index, platform, pins, built)


def _via(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """uv's annotations of a resolution: for each package, the packages that require it
    (``# via tensorflowjs``; several on the lines below a bare ``# via``)."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if line[:1].isalnum() and "==" in line:
            current = normalize_name(line.split("==", 1)[0].split("[", 1)[0].strip())
            found[current] = []
        elif current is not None and stripped.startswith("#"):
            words = stripped.lstrip("#").strip().removeprefix("via").strip()
            if words and not words.startswith("-r "):
                found[current].append(normalize_name(words.split()[0]))
    return tuple((name, tuple(who)) for name, who in found.items())


def _compile(
    argv: list[str | os.PathLike[str]],
    env: dict[str, str],
    cwd: str,
    deadline: float,
    limit: float,
) -> tuple[int, str]:
    """One uv run within what is left of the check's time: (exit status, its output:
    stdout on success, else what it said)."""
    from gpuenv import _proc

    left = deadline - time.monotonic()
    if left <= 0:
        raise ExternalToolError(f"uv pip compile took over {limit:.0f} s")
    result = _proc.run(
        argv,
        timeout=round(left, 1),  # said in seconds ("did not finish within 90 s")
        env=env,
        cwd=cwd,
        check=False,
        what="uv pip compile (import --check-resolves)",
    )
    if result.returncode == 0:
        return 0, result.stdout
    return result.returncode, (result.stderr or result.stdout).strip()


def _from_sources(pylock: Path, builds: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The pins of uv's pylock.toml, and the packages it takes from a source archive
    with no wheel beside it (the import's own builds left out: they are named already)."""
    from gpuenv import _toml

    data = _toml.loads(pylock.read_text(encoding="utf-8"))
    pins: list[str] = []
    built: list[str] = []
    for package in data.get("packages", []):
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            continue
        name = normalize_name(package["name"])
        pins.append(f"{name}=={package.get('version', '')}")
        if package.get("sdist") and not package.get("wheels") and name not in builds:
            built.append(name)
    return tuple(pins), tuple(built)


def _resolved(
    request: CheckRequest,
    index: Index,
    platform: str,
    pins: tuple[str, ...],
    built: tuple[str, ...],
) -> ResolveCheck:
    return ResolveCheck(
        True,
        f"uv resolved them for Python {request.python} on {platform}",
        index.shown,
        request.python,
        platform,
        resolved=tuple(redact(p.strip()) for p in pins if not p.startswith("#")),
        built=built,
    )


_MARKER = re.compile(r"\{[^{}]*\}")  # uv's "evdev{'linux' in sys_platform}>=1.3.0"
_WHEELLESS = re.compile(r"ha(?:s|ve) no usable wheels")
_CLAUSE_START = ("Because ", "because ", " and ", "all of:", "all versions of ")


def _without_wheels(text: str) -> tuple[str, ...]:
    """The packages uv's explanation says have no usable wheel ("Because
    antlr4-python3-runtime==4.8 has no usable wheels", "all versions of pathtools have
    no usable wheels", "all of: pudb>=2022.1.3,<=2024.1 pudb==2025.1.2 have no usable
    wheels"), normalized, in order."""
    from gpuenv.lock._uv_output import PROJECT_NAME

    found: list[str] = []
    for match in _WHEELLESS.finditer(text):
        before = text[max(0, match.start() - 400) : match.start()]
        start = max((before.rfind(s) + len(s) for s in _CLAUSE_START if s in before), default=0)
        # a marker uv writes in braces ("evdev{'linux' in sys_platform}>=1.3.0") names
        # no package
        for word in _MARKER.sub("", before[start:]).split():
            head = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", word)
            if head is None:
                continue
            name = normalize_name(head.group(0))
            if name not in found and name != PROJECT_NAME and not name[0].isdigit():
                found.append(name)
    return tuple(found)


def _failure(
    request: CheckRequest, inputs: _Inputs, index: Index, platform: str, text: str
) -> ResolveCheck:
    """uv's non-zero exit, read: an index that failed (not checked), no solution (does
    not resolve: the names and uv's words), anything else (not checked, uv's last line)."""
    from gpuenv.lock._uv_output import build_needing_torch, classify, explain_unsatisfiable

    failure = classify(text)
    unsatisfiable = "No solution found" in text  # else uv never got to resolving
    if failure is not None and (failure.cause != "not-found" or not unsatisfiable):
        where = redact_url(failure.url or index.url)
        return not_checked(
            f"the index could not be used ({failure.cause}: {failure.detail}) at {where}",
            request,
            platform,
        )
    built = build_needing_torch(text)
    if built is not None:
        return not_checked(
            f"{built} is a build whose metadata needs torch to be read: its dependencies "
            "are resolved by `gpuenv lock`",
            request,
            platform,
        )
    if not unsatisfiable:
        broken = _build_failure(request, index, platform, text)
        if broken is not None:
            return broken
        last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
        return not_checked(f"uv pip compile failed: {last.strip()[:300]}", request, platform)
    message, hint = explain_unsatisfiable(text)
    names = _named(message + " " + (hint or ""), inputs, failure)
    missing = _family_missing(message)
    if missing:
        return not_checked(
            f"the index has no {missing} for this target, which a dependency needs "
            "(the torch family comes from its build's index; `gpuenv lock` resolves it)",
            request,
            platform,
        )
    return ResolveCheck(
        False,
        _short(message),
        index.shown,
        request.python,
        platform,
        packages=names,
        instead=_instead(message, hint, inputs),
    )


_FAILED_BUILD = re.compile(
    r"Failed to build `(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==(?P<version>[^`]+))?`"
)
_CAUSE = re.compile(r"^\s*(?:cause:|Caused by:)\s*(?P<cause>.+)$", re.MULTILINE)
_EXTRA_INDEX = re.compile(r"--extra-index-url[= ]+(?P<url>https?://[^\s`'\"]+)")


def _build_failure(
    request: CheckRequest, index: Index, platform: str, text: str
) -> ResolveCheck | None:
    """A package uv must build to read its metadata, and whose build fails (cuml-cu11's
    placeholder sdist, which downloads the real wheel from NVIDIA's index and raises
    without it): that package does not install, said by name, with the index its own
    message names. It was "not checked", with uv's closing hint as the only reason."""
    found = _FAILED_BUILD.search(text)
    if found is None:
        return None
    name = normalize_name(found.group("name"))
    what = f"{name} {found.group('version')}" if found.group("version") else name
    causes = [c.group("cause").strip() for c in _CAUSE.finditer(text)]
    detail = f" ({causes[-1][:200]})" if causes else ""
    elsewhere = _EXTRA_INDEX.search(text)
    instead = (
        f"its wheels are on {redact_url(elsewhere.group('url'))}: add that index to [pip] "
        "extra-index-urls"
        if elsewhere
        else None
    )
    return ResolveCheck(
        False,
        f"{what} fails to build from its source archive, which uv must do to read its "
        f"dependencies{detail}",
        index.shown,
        request.python,
        platform,
        packages=(name,),
        instead=instead,
    )


_UNAVAILABLE = re.compile(
    r"no version of (?P<a>[A-Za-z0-9._-]+[<>=!~]=?\S+)"
    r"|(?P<b>[A-Za-z0-9._-]+(?:[<>=!~]=?[^\s,]+)?) (?:has no (?:usable )?wheels|was not found)"
)


def _family_missing(message: str) -> str | None:
    """The torch-family requirement uv found no release of (its build's index has it)."""
    for found in _UNAVAILABLE.finditer(message):
        text = (found["a"] or found["b"]).rstrip(".,")
        name = re.split(r"[<>=!~]", text, maxsplit=1)[0]
        if normalize_name(name) in _FAMILY:
            return text
    return None


_NO_WHEELS = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==\S+)? has no usable wheels")
_PLATFORM_HINT = re.compile(
    r"Wheels are available for `(?P<name>[^`]+)` \((?P<version>v[^)]+)\) on the following "
    r"platforms: (?P<tags>(?:`[^`]+`(?:, )?)+)"
)
_ABI_HINT = re.compile(
    r"only found wheels for `(?P<name>[^`]+)` \((?P<version>v[^)]+)\) with the following "
    r"Python ABI tags: (?P<tags>(?:`cp\d+`(?:, )?)+)"
)
_DEPENDS = re.compile(
    r"(?P<parent>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<which>[<>=!~]=?[^ ]+)? depends on "
    r"(?P<child>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<spec>[<>=!~]\S*)"
)


def _instead(message: str, hint: str | None, inputs: _Inputs) -> str | None:
    """What would work instead, where uv's words make it plain: the Pythons a package
    has wheels for (uv's hint), or the range a dependency's pin must move into (a
    direct pin a package the request requires rules out); else uv's hint as it is."""
    if hint:
        abi = _ABI_HINT.search(hint)
        if abi:
            pythons = [f"3.{t[3:]}" for t in re.findall(r"cp3\d+", abi["tags"])]
            return _short(
                f"a Python {' or '.join(pythons)}: {abi['name']} {abi['version']} has wheels "
                f"for those ({hint})"
            )
    platforms = _PLATFORM_HINT.search(hint or "")
    if platforms:
        tags = re.findall(r"`([^`]+)`", platforms["tags"])
        glibc = sorted({int(t.split("_")[2]) for t in tags if re.match(r"manylinux_2_\d+_", t)})
        floor = f"; on Linux, glibc 2.{glibc[0]} or newer" if glibc else ""
        return _short(
            f"another {platforms['name']} release, or a target its {platforms['version']} "
            f"wheels fit ({', '.join(tags)}{floor})"
        )
    no_wheels = _NO_WHEELS.search(message)
    if no_wheels:
        name = normalize_name(no_wheels["name"])
        return _short(
            f"a {name} release with a wheel for this target, or a source build of it "
            f"(a [pip.build.{name}] table in the spec: `gpuenv lock` builds it)"
        )
    absent = re.search(
        r"([A-Za-z0-9][A-Za-z0-9._-]*) was not found in the package registry", message
    )
    if absent:
        return _short(
            f"{normalize_name(absent[1])} is not on this index: check its name, or name the "
            "index that serves it ([pip] extra-index-urls in the spec)"
        )
    pins = {}
    for text in inputs.requirements:
        requirement = Requirement(text)
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if len(exact) == 1:
            pins[normalize_name(requirement.name)] = exact[0]
    for found in _DEPENDS.finditer(message):
        child = normalize_name(found["child"])
        parent = normalize_name(found["parent"])
        spec = found["spec"].rstrip(".,;")
        if child in pins and parent in pins and not _allows(spec, pins[child]):
            return _short(
                f"{child}{spec}, which {parent}=={pins[parent]} accepts "
                f"(not {child}=={pins[child]}); or a release of {parent} that accepts "
                f"{child}=={pins[child]}"
            )
    return _short(hint) if hint else None


def _allows(specifier: str, version: str) -> bool:
    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return True  # nothing to say


def _short(text: str) -> str:
    text = redact(" ".join(text.split()))
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


# uv names packages as `name`, name==1.0, name>=1,<2, name<=1.0 ("transformers<=4.44.2
# depends on tokenizers>=0.19,<0.20"), "all versions of name", "name was not found".
_NAMED = re.compile(
    r"`([A-Za-z0-9][A-Za-z0-9._-]*)`"
    r"|\b([A-Za-z0-9][A-Za-z0-9._-]*)(?=\s*(?:[<>=!~]=?|\s+was not found|\s+has no))"
    r"|all versions of ([A-Za-z0-9][A-Za-z0-9._-]*)"
    r"|depends on ([A-Za-z0-9][A-Za-z0-9._-]*)"
)


_TAG = re.compile(r"(cp|py)\d+.*|v\d.*|(many|musl)linux.*|macosx.*|win.*|linux-.*|any|abi3|none")


def _named(text: str, inputs: _Inputs, failure: Any) -> tuple[str, ...]:
    """The packages uv's explanation names (the request itself and Pythons left out)."""
    from gpuenv.lock._uv_output import PROJECT_NAME

    found: list[str] = []
    # uv writes a dependency's marker in braces (huggingface/lerobot: "torch==2.11.0
    # depends on cuda-bindings{sys_platform == 'linux'}>=13.0.3"): its words name no package
    text = re.sub(r"\{[^{}]*\}", "", text)
    for match in _NAMED.finditer(text):
        raw = next(g for g in match.groups() if g)
        name = normalize_name(raw)
        if name in (PROJECT_NAME, "python", "cpython") or name[0].isdigit() or name in found:
            continue
        if _TAG.fullmatch(name):
            continue  # a wheel tag or a version (`cp312`, `manylinux_2_17_x86_64`, `v2.1.1`)
        found.append(name)
    if failure is not None:
        found += [normalize_name(p) for p in failure.packages if normalize_name(p) not in found]
    return tuple(found)


# -- the report ---------------------------------------------------------------------------


def _dependencies(count: int) -> str:
    """``1 pip dependency``, ``3 pip dependencies`` (LoRA's report said "The 1 pip
    dependencies resolve")."""
    return f"{count} pip dependenc{'y' if count == 1 else 'ies'}"


def render_markdown(check: ResolveCheck) -> str:
    """The report's section for the check (Markdown, as the import report)."""
    target = f"Python {check.python} on {check.platform}"
    lines: list[str] = []
    if check.resolves is None:
        lines += ["### Resolution not checked", "", f"{check.reason}."]
    elif check.resolves:
        lines += [
            "### Resolves",
            "",
            f"The {_dependencies(check.checked)} {'resolves' if check.checked == 1 else 'resolve'}"
            f" for {target} from {check.index} (wheels only, but for the builds).",
        ]
        if check.built:
            lines += [
                "",
                "Published as source archives only, with no wheel for this target, and built "
                "from them when installed (`gpuenv lock` locks each sdist by its hash): "
                + ", ".join(f"`{n}`" for n in check.built)
                + ".",
            ]
    else:
        lines += [
            "### Does not resolve",
            "",
            f"uv found no set of the {_dependencies(check.checked)} for {target} from "
            f"{check.index}: {check.reason}",
        ]
        if check.packages:
            lines += ["", "Packages named: " + ", ".join(f"`{p}`" for p in check.packages) + "."]
        if check.instead:
            lines += ["", f"Instead: {check.instead}"]
        lines += [
            "",
            "The spec is written as a starting point; `gpuenv lock` fails on it until "
            "the pins above are changed.",
        ]
    if check.left_out:
        lines += ["", "Not part of the check:", *(f"- {r}" for r in check.left_out)]
    return "\n".join(lines) + "\n"


# -- from an import ---------------------------------------------------------------------


def check_reproduction(
    reproduction: Reproduction, index: str, failure: str | None, cache_dir: Path | None
) -> ResolveCheck:
    """The check of what ``reproduction`` writes, on ``index`` (the one import asked for
    wheels; ``failure``: why it could not be read, and then nothing is run)."""
    from gpuenv.importers.report import NEEDS_BUILD

    decision = reproduction.decision
    plan = decision.plan
    # the build's label where it is not the default index's build: "torch==2.11.0+cu128"
    label = "" if plan.pypi_default or "+" in plan.torch else f"+{plan.cu_tag}"
    family = [f"torch=={plan.torch}{label}"]
    family += [f"torchvision=={plan.torchvision}"] if plan.torchvision else []
    family += [f"torchaudio=={plan.torchaudio}"] if plan.torchaudio else []
    builds = {e.package for e in decision.entries if e.kind == NEEDS_BUILD and e.package}
    builds |= {b.name for b in decision.builds}
    declared = _lock_builds(reproduction.spec_text, cache_dir)
    builds |= {name for name, _ in declared}
    request = CheckRequest(
        requirements=tuple(line.text for line in decision.pip),
        python=plan.python,
        index=index,
        platform=plan.hardware.platform,
        glibc=plan.hardware.glibc,
        macos=plan.virtual_packages.get("__osx"),
        torch=tuple(family),
        # the lock takes torch from the default index only where the plan is its
        # default build (lock.target's use_default_for_torch)
        torch_elsewhere=not plan.pypi_default,
        builds=tuple(sorted(builds)),
        dependency_metadata=tuple((n, r) for n, r in declared if r is not None),
        cache_dir=cache_dir,
        exclude_newer=exclude_newer_cutoff(decision.as_of.day.isoformat())
        if decision.as_of is not None
        else None,
        exclude_newer_packages=tuple(
            (name, exclude_newer_cutoff(day.isoformat()))
            for name, day in decision.as_of_packages.items()
        ),
    )
    if failure is not None:
        return not_checked(f"the index could not be read: {failure}", request)
    return check_resolves(request)


def _lock_builds(
    spec_text: str, cache_dir: Path | None = None
) -> list[tuple[str, tuple[str, ...] | None]]:
    """The builds ``gpuenv lock`` knows before resolving the written spec (its
    ``[pip.build]`` tables, and the pins the knowledge base says are always compiled
    against torch), each with the dependencies it declares (None: uv reads them). The
    validated-spec cache spares a repeated import the validation."""
    from gpuenv.lock import builds as lock_builds
    from gpuenv.spec import parse_spec_text

    try:
        spec = parse_spec_text(spec_text, file="gpuenv.toml", cache_dir=cache_dir).spec
    except GpuenvError:  # write_spec refuses it next, naming the problem
        return []
    return [(name, wanted.requires_dist) for name, wanted in lock_builds.declared(spec).items()]


# -- a move for wheels undone -------------------------------------------------------------


def settle(
    request: ImportRequest,
    result: Reproduction,
    check: ResolveCheck,
    index: str,
    cache_dir: Path | None,
) -> tuple[Reproduction, ResolveCheck]:
    """Where the pins do not resolve and uv names a pin the import moved to the nearest
    release with a wheel (Real-ESRGAN's basicsr 1.4.2, an sdist, moved to 1.3.3.3 while
    its gfpgan>=1.3.5 needs basicsr>=1.4.2), the move is undone: the paper's pin is kept
    as a source build, as pip built it, and the import and its check run once more. The
    second answer is taken where it resolves; else the first stands. Where a torch no
    file pins is what breaks it, the import runs once more within the range the
    requirement needs (``_within_torch_bound``)."""
    result, check = _undo_wheel_moves(request, result, check, index, cache_dir)
    result, check = _within_torch_bound(request, result, check, index, cache_dir)
    result, check = _undated(request, result, check, index, cache_dir)
    result, check = _split_day(request, result, check, index, cache_dir)
    result, check = _fewer_builds(request, result, check, index, cache_dir)
    return _pulled_back(result, check), check


def _fewer_builds(
    request: ImportRequest,
    result: Reproduction,
    check: ResolveCheck,
    index: str,
    cache_dir: Path | None,
) -> tuple[Reproduction, ResolveCheck]:
    """Where the files name no Python and the resolution builds dependencies from source
    on the planner's (the newest the torch supports), the next older Pythons the torch
    supports are tried, at most ``_PYTHON_TRIES``: the first on which less is built is
    taken (guoyww/AnimateDiff: transformers==4.25.1 needs tokenizers<0.14, which has no
    wheel for Python 3.12, and its source build needs Rust; 3.11 has its wheel)."""
    from gpuenv.plan import KNOWN_PYTHONS

    decision = result.decision
    # a Python the files name exactly is theirs; a range (whisper's requires-python
    # >=3.8) or none leaves the choice to gpuenv
    asked = decision.python_asked or ""
    if check.resolves is not True or not check.built or asked[:1].isdigit():
        return result, check
    if request.python_for_builds:
        return result, check
    release = request.kb.torch_release(decision.plan.torch)
    current = decision.plan.python
    try:
        allowed = SpecifierSet(asked)
    except InvalidSpecifier:
        allowed = SpecifierSet()
    older = [
        p
        for p in sorted(KNOWN_PYTHONS, key=lambda p: -int(p.split(".")[1]))
        if int(p.split(".")[1]) < int(current.split(".")[1])
        and (release is None or release.python.contains(p))
        and allowed.contains(p)  # within the files' range (requires-python >=3.8)
    ]
    for python in older[:_PYTHON_TRIES]:
        answer = _again(request, index, cache_dir, python_for_builds=(python, "?"))
        if answer is None or answer[1].resolves is not True:
            continue
        spared = sorted(set(check.built) - set(answer[1].built))
        if len(answer[1].built) >= len(check.built) or not spared:
            continue
        # said as the report says it: once more with the reason (the same resolution)
        shown = ", ".join(spared[:3]) + (f" and {len(spared) - 3} more" if len(spared) > 3 else "")
        have = "has" if len(spared) == 1 else "have"
        why = (
            f"fewer dependencies are built from source ({shown} {have} no wheel for Python "
            f"{current})"
        )
        return _again(request, index, cache_dir, python_for_builds=(python, why)) or answer
    return result, check


_PYTHON_TRIES = 2


def _again(
    request: ImportRequest, index: str, cache_dir: Path | None, **changes: Any
) -> tuple[Reproduction, ResolveCheck] | None:
    """The import once more with ``changes`` to its request, and its check; None where
    the import itself refuses (no torch in a range fits the target)."""
    from gpuenv.importers import reproduce

    try:
        again = reproduce(replace(request, **changes))
    except GpuenvError:
        return None
    return again, check_reproduction(again, index, None, cache_dir)


def _split_day(
    request: ImportRequest,
    result: Reproduction,
    check: ResolveCheck,
    index: str,
    cache_dir: Path | None,
) -> tuple[Reproduction, ResolveCheck]:
    """Where the target's torch moved the day past the files' own (ControlNet, early
    2023, on an H100: torch 2.1.2 of December 2023, whose day brought pydantic 2, gradio
    4 and openai 1), the files' day for everything but what that torch requires, which
    takes torch's day ([pip] exclude-newer-package): read from uv's resolution of the
    torch family alone on this index, where the plan's torch is this index's own build.
    The import runs once more so; its answer is taken where it resolves and builds
    nothing more from source than the first. A package it would build from an older
    source archive (ControlNet's python-multipart and validators as of January 2023)
    takes torch's day too, and the import runs again, at most ``_SPLIT_TRIES`` times."""
    as_of = result.decision.as_of
    if not check.resolves or as_of is None or as_of.files is None or request.split is not None:
        return result, check
    requires = torch_requires(result, index, cache_dir)
    if not requires:
        return result, check
    built: set[str] = set()
    for _ in range(_SPLIT_TRIES):
        answer = _again(request, index, cache_dir, split=requires, split_built=tuple(sorted(built)))
        if answer is None:
            return result, check
        again, second = answer
        more = set(second.built) - set(check.built)
        if not second.resolves:
            break
        if not more:
            return again, second
        built |= {normalize_name(n) for n in more}
        requires = tuple(sorted({*requires, *built}))
    return result, check


_SPLIT_TRIES = 3


def torch_requires(
    reproduction: Reproduction, index: str, cache_dir: Path | None
) -> tuple[str, ...] | None:
    """What the plan's torch family requires, all the way down (sympy, mpmath, the
    nvidia-* wheels...), as uv resolves the family alone for the target on ``index``,
    and numpy, which torch's wheels do not require but were built against: a numpy of
    the files' day beside a torch years newer (stylegan2-ada: 1.19.5 beside 2.1.2) is
    older than the one its numpy interop was compiled for. None where the plan's torch
    is not this index's own build (another build's dependencies need not be these), or
    uv cannot say."""
    from gpuenv.lock.model import PipRequest
    from gpuenv.lock.uv import find_uv, target_platform

    plan = reproduction.decision.plan
    if not plan.pypi_default:
        return None
    family = [f"torch=={Version(plan.torch).public}"]
    family += [f"torchvision=={plan.torchvision}"] if plan.torchvision else []
    family += [f"torchaudio=={plan.torchaudio}"] if plan.torchaudio else []
    try:
        platform = target_platform(
            PipRequest((), plan.python, plan.hardware.platform, plan.hardware.glibc)
        )
        found = Index.parse(DEFAULT_INDEX_NAME, index)
        env = uv_environment(os.environ, (found,), UV_PYTHON_DOWNLOADS="never")
        with tempfile.TemporaryDirectory(prefix="gpuenv-import-check-") as tmp:
            argv: list[str | os.PathLike[str]] = [find_uv(), "--no-config", "pip", "compile"]
            argv += [_project(Path(tmp), tuple(family)), "--python-version", plan.python]
            argv += ["--python-platform", platform, "--no-header", "--quiet"]
            argv += ["--python", sys.executable, "--only-binary", ":all:"]
            argv += ["--default-index", f"{found.name}={found.url}"]
            if cache_dir is not None:
                from gpuenv.lock.uv import _private_dir

                argv += ["--cache-dir", _private_dir(cache_dir / "uv")]
            code, text = _compile(argv, env, tmp, time.monotonic() + TIMEOUT, TIMEOUT)
    except (GpuenvError, OSError):
        return None
    if code != 0:
        return None
    names = {
        normalize_name(line.split("==", 1)[0].split("[", 1)[0].strip())
        for line in text.splitlines()
        if line[:1].isalnum() and "==" in line
    }
    return tuple(sorted((names | {"numpy"}) - _FAMILY))


def _undated(
    request: ImportRequest,
    result: Reproduction,
    check: ResolveCheck,
    index: str,
    cache_dir: Path | None,
) -> tuple[Reproduction, ResolveCheck]:
    """Where the written dependencies do not resolve as of the files' day (``[pip]
    exclude-newer``: a wheel uploaded after its release's first file, a dependency on a
    release that came later), the import runs once more without the day; its answer is
    taken where it resolves, the report saying why nothing is dated."""
    if check.resolves is not False or result.decision.as_of is None:
        return result, check
    why = check.reason.rstrip(".") or "uv gives no reason"
    answer = _again(request, index, cache_dir, undated=why)
    return answer if answer is not None and answer[1].resolves else (result, check)


def _pulled_back(result: Reproduction, check: ResolveCheck) -> Reproduction:
    """A package the report leaves out (an unmanaged framework) that a written
    requirement brings back: yolov5's tensorflowjs requires tensorflow, which the report
    said was left out and the lock installed (2.21.0, outside yolov5's own <=2.19.0)."""
    from gpuenv.importers.report import ASSUMPTION, MEDIUM, UNMANAGED, Entry

    if not check.resolves or not check.via:
        return result
    via = dict(check.via)
    versions = {
        normalize_name(p.split("==", 1)[0].split("[", 1)[0]): p.split("==", 1)[1].split()[0]
        for p in check.resolved
        if "==" in p
    }
    added = []
    for entry in result.report.entries:
        name = normalize_name(entry.package) if entry.package else None
        if entry.kind != UNMANAGED or name is None or name not in versions:
            continue
        who = [w for w in via.get(name, ()) if w != name]
        if not who:
            continue
        added.append(
            Entry(
                ASSUMPTION,
                entry.package,
                f"{entry.package} is left out of the spec, but {', '.join(who)} "
                f"{'requires' if len(who) == 1 else 'require'} it: the lock installs "
                f"{entry.package} {versions[name]} all the same (leave those out too to keep "
                "it out)",
                origin=entry.origin,
                risk=MEDIUM,
            )
        )
    if not added:
        return result
    report = replace(result.report, entries=(*result.report.entries, *added))
    return replace(result, report=report)


def _undo_wheel_moves(
    request: ImportRequest,
    result: Reproduction,
    check: ResolveCheck,
    index: str,
    cache_dir: Path | None,
) -> tuple[Reproduction, ResolveCheck]:
    if check.resolves is not False:
        return result, check
    from gpuenv.importers import reproduce
    from gpuenv.importers.decide import WHEEL_MOVE

    moved = {
        e.package: e for e in result.decision.entries if e.package and e.why.endswith(WHEEL_MOVE)
    }
    named = [n for n in check.packages if n in moved]
    if not named:
        return result, check
    cause = check.reason.split(", we can conclude", 1)[0].removeprefix("Because ")
    kept = tuple(
        (name, f"{moved[name].now}, the nearest release with a wheel, does not resolve with "
         f"the other pins ({_short(cause)[:240]})")
        for name in named
    )  # fmt: skip
    again = reproduce(replace(request, kept_as_builds=(*request.kept_as_builds, *kept)))
    second = check_reproduction(again, index, None, cache_dir)
    return (again, second) if second.resolves else (result, check)


# -- a torch the pins dated, which a requirement's range rules out -------------------------

# "stable-baselines3==2.9.0a2 depends on torch>=2.3,<3.0": uv's words for the range
_NEEDS_TORCH = re.compile(r"(?P<who>[A-Za-z0-9][^\s]*) depends on torch(?P<spec>[<>=!~][^\s]*)")


def torch_bound(reason: str, first: str, kb: KnowledgeBase) -> TorchBound | None:
    """The torch range uv says a requirement needs, which ``first`` (the torch chosen)
    is outside of; of several (each release of the requirement its own), the one that
    accepts the most releases gpuenv knows. None when uv names none."""
    from gpuenv.importers.torch_choice import TorchBound

    found: list[tuple[int, TorchBound]] = []
    known = [r.version for r in kb.torch_releases]
    for match in _NEEDS_TORCH.finditer(reason):
        spec = match["spec"].rstrip(".,;")
        try:
            accepted = SpecifierSet(spec)
        except InvalidSpecifier:
            continue  # cut short by _short
        if accepted.contains(first, prereleases=True):
            continue  # the constraint itself ("depends on torch==2.0.1")
        releases = sum(1 for v in known if v in accepted)
        if releases:
            found.append((releases, TorchBound(spec, match["who"], first)))
    return max(found, key=lambda f: f[0])[1] if found else None


def _within_torch_bound(
    request: ImportRequest,
    result: Reproduction,
    check: ResolveCheck,
    index: str,
    cache_dir: Path | None,
) -> tuple[Reproduction, ResolveCheck]:
    """rl-baselines3-zoo: no file pins torch, ``gym==0.26.2`` dated the files to torch
    2.0.1, and ``stable-baselines3>=2.9.0a2`` needs torch>=2.3. The import runs once more
    with torch within the range uv names, the newest there that fits the target; its
    answer is taken where it resolves."""
    torch = result.merged.packages.get("torch")
    if check.resolves is not False or request.torch_bound is not None:
        return result, check
    if torch is not None and torch.exact is not None:
        return result, check  # the paper's own pin: its conflict is the paper's
    bound = torch_bound(check.reason, result.decision.plan.torch, request.kb)
    if bound is None:
        return result, check
    answer = _again(request, index, cache_dir, torch_bound=bound)  # None: no torch there fits
    return answer if answer is not None and answer[1].resolves else (result, check)
