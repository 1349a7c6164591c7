"""What a locked target must be before anything trusts it: its content hash, and the
consistency of its entries with each other and with their artifacts' file names.

The content hash is sha256 over a canonical serialisation (sorted-key JSON) of the
target's name and its WHOLE table as parsed from the file, except ``content-hash``
itself. It is generic: any key or sub-table added to a target (build entries, facts
read from wheels) is covered without a change here. ``lock.format`` writes it and
checks it twice on reading: against the table in the file, and against the table
re-rendered from the values it built (so nothing the reader dropped or coerced can
slip between what was hashed and what gets installed).

The hash catches edits; the consistency checks catch what a hash recomputed by hand
(or a gpuenv bug) would let through: a torch family that is not the stack's build,
an entry whose name or version disagrees with its file name, two versions of one
package, control characters anywhere (a newline in a URL or a name would inject
lines into the requirements uv reads), source distributions without a declared
build, dependencies that point at nothing.

``value_problems`` checks every value that a tool consumes as what it is, before any
tool sees it: versions are PEP 440 (and short: a 5000-digit release number is refused
here, not by ``int()``'s limit deep in packaging), platforms and conda subdirs are known
names, Pythons and CUDA releases are dotted numbers, URLs are http(s)/file (a build's
git source ``git+https``/``git+ssh``/``git+file``, a host never starting with ``-``)
and hold no ``${`` (uv and pip expand
environment variables there, sending the installing machine's secrets to an index).
An edited lock, even with its hash recomputed, cannot make a Dockerfile ``RUN`` a
command, a pylock marker always true, or ``git fetch`` read a URL as an option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from gpuenv._marker import TARGET_NAME_RULE, valid_target_name
from gpuenv._network import is_fetchable_url
from gpuenv.lock._table import HASH_KEY, HEX, PIP_NAME, content_hash
from gpuenv.lock._tags import (
    ARCHES,
    FOREIGN,
    NEWEST_MACOS_MAJOR,
    NEWEST_PYTHON_MINOR,
    foreign_tags,
    linux_tags,
)
from gpuenv.lock.model import (
    CondaPackage,
    LockedTarget,
    PipPackage,
    StackSummary,
)
from gpuenv.names import normalize_name

if TYPE_CHECKING:
    from packaging.tags import Tag

CONDA_SUFFIXES = (".conda", ".tar.bz2")
SDIST_SUFFIXES = (".tar.gz", ".zip")
CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$")
MAX_SHOWN = 20  # problems listed per target; the rest are counted
# Platforms whose unlabelled torch wheels are all CUDA builds: PyPI's x86_64 torch has
# always carried CUDA, and PyTorch's CPU index labels its x86_64 wheels +cpu. (On
# aarch64, PyPI's and the CPU index's unlabelled wheels were CPU builds for years.)
UNLABELLED_TORCH_IS_CUDA = frozenset({"linux-64"})


# --- text -----------------------------------------------------------------------------------


def _show(text: str) -> str:
    return json.dumps(text[:80] + ("..." if len(text) > 80 else ""))


def unprintable(value: object, where: str) -> list[str]:
    """Every string (keys included) holding a control or other non-printable character."""
    found: list[str] = []
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            if not item.isprintable():
                bad = next(c for c in item if not c.isprintable())
                found.append(f"{at}: a control character (U+{ord(bad):04X}) in {_show(item)}")
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not key.isprintable():
                    found.append(f"{at}: a control character in the key {_show(key)}")
                stack.append((child, f"{at}.{key}"))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{at}[{i}]") for i, child in enumerate(item))
    return sorted(found)


MAX_VERSION = 64  # characters; the longest real version gpuenv locks is about 30


def _version(text: str) -> Version | None:
    """``text`` as a PEP 440 version, or None (also for one too long to be real: its
    digits would pass Python's integer-string limit and raise ValueError)."""
    if len(text) > MAX_VERSION:
        return None
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, and an int() limit that MAX_VERSION should prevent
        return None


def _filename(url: str) -> str:
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


# --- pip ------------------------------------------------------------------------------------


# Each wheel's name parsed once per process: the artifact and tag checks both read it,
# for each target as resolved and as written, and again as a lock is read.
_parsed_wheel = lru_cache(maxsize=4096)(parse_wheel_filename)


def _artifact_problems(p: PipPackage, where: str, builds: frozenset[str]) -> list[str]:
    """The URL's file is a wheel (or a declared build's sdist) of this name and version."""
    filename = p.filename
    try:
        if filename.endswith(".whl"):
            name, version, _build, _tags = _parsed_wheel(filename)
        elif filename.endswith(SDIST_SUFFIXES):
            if p.name not in builds:
                return [
                    f"{where}: {filename} is a source distribution, and the target declares "
                    f"no build for {p.name}: gpuenv installs wheels only (a build would run "
                    "its code at install time)"
                ]
            name, version = parse_sdist_filename(filename)
        else:
            return [f"{where}: {filename} is not a wheel"]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion) as exc:
        return [f"{where}: {filename} is not a valid wheel or sdist name ({exc})"]
    problems = []
    if name != p.name:
        problems.append(f"{where}: name {p.name!r}, but the artifact {filename} is {name}")
    if _version(p.version) != version:
        problems.append(f"{where}: version {p.version!r}, but the artifact {filename} is {version}")
    return problems


def pip_problems(pip: Iterable[PipPackage], builds: frozenset[str]) -> list[str]:
    problems: list[str] = []
    entries = list(pip)
    names = [p.name for p in entries]
    unique = set(names)
    present = unique | builds  # a build is a package too
    for i, p in enumerate(entries):
        where = f"pip[{i}] ({p.name})"
        if not PIP_NAME.match(p.name):
            problems.append(f"{where}: {_show(p.name)} is not a normalised package name")
        if _version(p.version) is None:
            problems.append(f"{where}: {_show(p.version)} is not a version")
        if not is_fetchable_url(p.url):
            problems.append(f"{where}: {_show(p.url)} is not an http(s):// or file:// URL")
        elif PIP_NAME.match(p.name):
            problems.extend(_artifact_problems(p, where, builds))
        if not HEX["sha256"].match(p.sha256):
            problems.append(f"{where}: sha256 {_show(p.sha256)} is not a sha256 digest")
        if p.index is not None and not is_fetchable_url(p.index):
            problems.append(f"{where}: index {_show(p.index)} is not an http(s):// or file:// URL")
        missing = sorted(set(p.requires) - present)
        if missing:
            problems.append(f"{where}: requires {', '.join(missing)}, which the target lacks")
    if len(unique) == len(names):
        return problems  # every name once (the usual case: no count of each)
    for name in sorted({n for n in names if names.count(n) > 1}):
        versions = sorted(p.version for p in entries if p.name == name)
        problems.append(f"pip: {name} is locked {names.count(name)} times ({', '.join(versions)})")
    return problems


# --- wheel tags -----------------------------------------------------------------------------


def _major_minor(text: str | None) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", text or "")
    return (int(match[1]), int(match[2])) if match else None


@lru_cache(maxsize=16)
def _installable(
    platform: str,
    python: tuple[int, int],
    glibc: tuple[int, int] | None,
    macos: tuple[int, int] | None,
) -> frozenset[Tag]:
    """The tags a wheel may carry to install on the target: hundreds of tags, built once
    per process for each kind of target (a lock checks each target as resolved, as
    written, and a relock as read, too)."""
    if platform in FOREIGN:
        return frozenset(foreign_tags(platform, python, macos))
    # no glibc locked: any manylinux level (2.99 is above every glibc there is)
    return frozenset(linux_tags(platform, python, glibc[1] if glibc else 99))


def wheel_tag_problems(target: LockedTarget) -> list[str]:
    """Each wheel installs on the target: one of its tags is for the stack's CPython and
    the target's platform (and locked glibc). Another wheel of the same name and version
    passes every other check, and uv only refuses it at install time."""
    python = _major_minor(target.stack.python)
    if target.platform not in (*ARCHES, *FOREIGN) or python is None:
        return []  # nothing gpuenv locks: the platform or Python check says so elsewhere
    glibc = _major_minor(target.virtual_packages.get("__glibc"))
    macos = _major_minor(target.virtual_packages.get("__osx"))
    if python[1] > NEWEST_PYTHON_MINOR:
        return []  # said by the stack.python check (two digits at most)
    if macos is not None and macos[0] > NEWEST_MACOS_MAJOR:
        return [f"virtual-packages.__osx: no macOS is {macos[0]}.{macos[1]}"]
    installs = _installable(target.platform, python, glibc, macos)
    problems = []
    for i, p in enumerate(target.pip):
        if not is_fetchable_url(p.url):
            continue  # said by pip_problems (and urlsplit would raise)
        filename = p.filename
        if not filename.endswith(".whl"):
            continue
        try:
            tags = _parsed_wheel(filename)[3]
        except (InvalidWheelFilename, InvalidVersion):
            continue  # said by the artifact check
        if installs.isdisjoint(tags):
            on = f"Python {python[0]}.{python[1]}, {target.platform}"
            on += f", glibc {glibc[0]}.{glibc[1]}" if glibc else ""
            problems.append(
                f"pip[{i}] ({p.name}): {filename} does not install on this target ({on})"
            )
    return problems


# --- conda ----------------------------------------------------------------------------------


def _conda_entry_problems(c: CondaPackage, where: str, names: set[str]) -> list[str]:
    problems = []
    if not is_fetchable_url(c.url):
        return [f"{where}: {_show(c.url)} is not an http(s):// or file:// URL"]
    path = urlsplit(c.url).path.split("/")
    filename, subdir = unquote(path[-1]), unquote(path[-2]) if len(path) > 1 else ""
    stem = next((filename[: -len(s)] for s in CONDA_SUFFIXES if filename.endswith(s)), None)
    expected = f"{c.name}-{c.version}-{c.build}"
    if stem is None:
        problems.append(f"{where}: {filename} is not a conda archive (.conda or .tar.bz2)")
    elif stem != expected:
        problems.append(f"{where}: the entry is {expected}, but its archive is {filename}")
    if subdir != c.subdir:
        problems.append(f"{where}: subdir {c.subdir!r}, but its URL is in {subdir!r}")
    for key in ("sha256", "md5"):
        if not HEX[key].match(getattr(c, key)):
            problems.append(f"{where}: {key} {_show(getattr(c, key))} is not a {key} digest")
    for dependency in c.depends:
        needed = re.split(r"[\s=<>!~\[]", dependency.strip(), maxsplit=1)[0]
        if needed and not needed.startswith("__") and needed not in names:
            problems.append(f"{where}: depends on {needed}, which the target lacks")
    return problems


def conda_problems(conda: Iterable[CondaPackage]) -> list[str]:
    entries = list(conda)
    names = [c.name for c in entries]
    problems: list[str] = []
    for i, c in enumerate(entries):
        problems.extend(_conda_entry_problems(c, f"conda[{i}] ({c.name})", set(names)))
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"conda: {name} is locked {names.count(name)} times")
    return problems


# --- the stack ------------------------------------------------------------------------------


def _public(version: str) -> str:
    parsed = _version(version)
    return parsed.public if parsed else version


def _local(version: str) -> str | None:
    parsed = _version(version)
    return parsed.local if parsed else None


def unlabelled_cpu_torch_problem(platform: str, version: str) -> str | None:
    """Why an unlabelled torch cannot be a CPU build on ``platform``, or None."""
    if platform not in UNLABELLED_TORCH_IS_CUDA:
        return None
    return (
        f"torch {version} has no +cpu label: on {platform} only PyTorch's CPU index has "
        "CPU builds, all labelled +cpu (an unlabelled torch is PyPI's, a CUDA build)"
    )


def family_problems(stack: StackSummary, pip: Iterable[PipPackage], platform: str) -> list[str]:
    """Why the torch family in ``pip`` is not the build ``stack`` names (empty: it is):
    the stack's versions, no other build's ``+label``, and for an unlabelled torch (PyPI's
    build) an ``nvidia-cuda-runtime`` of the stack's CUDA (none for a CPU build).

    The one rule for "the locked torch is the planned build": the locker applies it to
    a resolution against its plan (``lock.target.check_against_plan``), every reader of
    the lock to each target against its stack (``stack_problems``)."""
    pip = list(pip)
    by_name = {p.name: p for p in pip}
    problems = []
    family = (("torch", stack.torch), ("torchvision", stack.torchvision))
    for name, wanted in (*family, ("torchaudio", stack.torchaudio)):
        package = by_name.get(name)
        if wanted is None:
            continue
        if package is None:
            problems.append(f"{name} {wanted}, but no {name} is locked")
            continue
        if _public(package.version) != wanted:
            problems.append(f"{name} {wanted}, but {name} {package.version} is locked")
        label = _local(package.version)
        if label is not None and label != stack.cu_tag:
            problems.append(
                f"{name} {package.version} is a {label} build (planned {stack.cu_tag}), "
                f"from {package.url}"
            )
    torch = by_name.get("torch")
    if torch is not None and _local(torch.version) is None:
        problems.extend(_runtime_problems(stack, torch, pip, platform))
    return problems


def _pulls_nvidia(pip: list[PipPackage]) -> bool:
    return any(p.name.startswith("nvidia-") for p in pip)


def _runtime_problems(
    stack: StackSummary, torch: PipPackage, pip: list[PipPackage], platform: str
) -> list[str]:
    """An unlabelled torch (PyPI's build) shows its CUDA by the nvidia-cuda-runtime it pulls."""
    runtime = next((p for p in pip if CUDA_RUNTIME.match(p.name)), None)
    if stack.cuda is None:
        if runtime is not None:
            return [
                f"torch {torch.version} pulls {runtime.name} {runtime.version}: "
                "a CUDA build (planned cpu)"
            ]
        problem = unlabelled_cpu_torch_problem(platform, torch.version)
        return [f"{problem} (planned cpu)"] if problem else []
    found = ".".join(runtime.version.split(".")[:2]) if runtime else None
    if found == stack.cuda:
        return []
    if runtime is None and platform in UNLABELLED_TORCH_IS_CUDA and not _pulls_nvidia(pip):
        # PyPI's plain torch before 1.13 bundles its CUDA libraries (the cu102 build of
        # 1.7 .. 1.12): no nvidia-* wheel says which CUDA, and the plan sent torch to the
        # default index only because that build is PyPI's, so it stands as planned
        return []
    what = f"CUDA runtime {found}" if found else "no CUDA runtime"
    return [f"torch {torch.version} comes with {what} (planned CUDA {stack.cuda})"]


def stack_problems(target: LockedTarget) -> list[str]:
    """The stack summary is consistent, fits the target's hardware, and the torch family
    is its build (``family_problems``)."""
    stack = target.stack
    problems = []
    expected_tag = "cpu" if stack.cuda is None else "cu" + stack.cuda.replace(".", "")
    if stack.cu_tag != expected_tag:
        problems.append(f"stack: cu-tag {stack.cu_tag!r} is not the build of CUDA {stack.cuda}")
    if not is_fetchable_url(stack.index):
        problems.append(f"stack: index {_show(stack.index)} is not an http(s):// or file:// URL")
    torch = {p.name: p for p in target.pip}.get("torch")
    # A CPU target runs a CUDA build only as PyPI's own, unlabelled (build = "pypi").
    torch_label = _local(torch.version) if torch is not None else None
    if target.hardware.cpu and stack.cu_tag != "cpu" and torch_label is not None:
        problems.append(f"stack: a CPU-only target with a {stack.cu_tag} build")
    problems += [f"stack: {p}" for p in family_problems(stack, target.pip, target.platform)]
    return problems


# --- values tools consume -------------------------------------------------------------------

# conda's platform names: the ones gpuenv locks, and the others its targets may name.
PLATFORMS = frozenset(
    {"linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64"}
)
SUBDIRS = PLATFORMS | {"noarch"}
PYTHON = re.compile(r"^3\.\d{1,2}(?:\.\d{1,3})?$")
CUDA = re.compile(r"^\d{1,2}\.\d{1,2}(?:\.\d{1,3})?$")
ARCH = re.compile(r"^\d{1,2}\.\d{1,2}[a-z]?(?:\+PTX)?$")  # "8.0", "9.0a", "12.0+PTX"
ARCH_LIST = re.compile(
    r"^\d{1,2}\.\d{1,2}[a-z]?(?:\+PTX)?(?:[; ]\d{1,2}\.\d{1,2}[a-z]?(?:\+PTX)?)*$"
)
DRIVER = re.compile(r"^\d{1,4}(?:\.\d{1,4}){0,3}$")
VIRTUAL_NAME = re.compile(r"^__[a-z0-9_]{1,32}$")
CONDA_TOKEN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+!*-]{0,127}$")  # a conda name, version, build
COMPILER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$")  # "gcc-12"
# A local repository (git+file://) is as legitimate as a file:// wheel; git's other
# transports (ext::, fd::) run commands and are never locked.
GIT_SCHEMES = ("git+https://", "git+ssh://", "git+file://")
EXPANDED = "${"


def url_problem(url: str, *, git: bool = False) -> str | None:
    """Why ``url`` cannot be handed to uv, rattler or git (None: it can). ``git``: a
    build's git source, ``git+https://``, ``git+ssh://`` or ``git+file://`` only, whose
    host does not start with ``-`` (ssh would read ``-oProxyCommand=...`` as an option)."""
    if git:
        rest = url.split("://", 1)[-1]
        if not (url.startswith(GIT_SCHEMES) and is_fetchable_url("https://" + rest)):
            return f"{_show(url)} is not a git+https://, git+ssh:// or git+file:// URL"
        if urlsplit("https://" + rest).netloc.rpartition("@")[2].startswith("-"):
            return f"{_show(url)} names a host starting with '-', which ssh reads as an option"
    elif not is_fetchable_url(url):
        return f"{_show(url)} is not an http(s):// or file:// URL"
    return expansion_problem(url)


def expansion_problem(url: str) -> str | None:
    if EXPANDED not in url:
        return None
    return (
        f"{_show(url)} holds '${{', which uv and pip expand from the installing machine's "
        "environment (write it %24{ to mean the characters)"
    )


def _check(
    problems: list[str], where: str, value: str | None, rule: re.Pattern[str], what: str
) -> None:
    if value is not None and not rule.match(value):
        problems.append(f"{where}: {_show(value)} is not {what}")


def _check_version(problems: list[str], where: str, value: str | None) -> None:
    if value is not None and _version(value) is None:
        problems.append(
            f"{where}: {_show(value)} is not a version (PEP 440, at most {MAX_VERSION} characters)"
        )


def value_problems(target: LockedTarget) -> list[str]:
    """Each value a tool or an export consumes is what it says it is (see the module doc)."""
    problems: list[str] = []
    if target.platform not in PLATFORMS:
        problems.append(
            f"platform {_show(target.platform)} is not one of {', '.join(sorted(PLATFORMS))}"
        )
    hw, st = target.hardware, target.stack
    for cc in hw.compute_capabilities:
        _check(problems, "hardware.compute-capabilities", cc, ARCH, "a compute capability")
    _check(problems, "hardware.driver", hw.driver, DRIVER, "a driver version")
    _check(problems, "hardware.driver-cuda", hw.driver_cuda, CUDA, "a CUDA release")
    _check(problems, "stack.python", st.python, PYTHON, "a Python version (3.X or 3.X.Y)")
    _check(problems, "stack.cuda", st.cuda, CUDA, "a CUDA release")
    for key in ("torch", "torchvision", "torchaudio", "cudnn", "nccl"):
        _check_version(problems, f"stack.{key}", getattr(st, key))
    for arch in st.arch_list:
        _check(problems, "stack.arch-list", arch, ARCH, "a CUDA architecture")
    for key, value in target.virtual_packages.items():
        _check(problems, "virtual-packages", key, VIRTUAL_NAME, "a virtual package name")
        _check(problems, f"virtual-packages.{key}", value, CONDA_TOKEN, "a version")
    urls: list[tuple[str, str | None]] = [("stack.index", st.index)]
    for i, p in enumerate(target.pip):
        urls += [(f"pip[{i}] ({p.name}).url", p.url), (f"pip[{i}] ({p.name}).index", p.index)]
    for i, c in enumerate(target.conda):
        where = f"conda[{i}] ({c.name})"
        for key in ("name", "version", "build"):
            _check(problems, f"{where}.{key}", getattr(c, key), CONDA_TOKEN, f"a conda {key}")
        if c.subdir not in SUBDIRS:
            problems.append(f"{where}: subdir {_show(c.subdir)} is not a conda platform")
        urls += [(f"{where}.url", c.url), (f"{where}.channel", c.channel)]
    for where, url in urls:  # the other URL checks are the entries' own
        problem = expansion_problem(url) if url is not None else None
        if problem:
            problems.append(f"{where}: {problem}")
    problems.extend(build_value_problems(target))
    return problems


def build_value_problems(target: LockedTarget) -> list[str]:
    """A build's values reach git, uv and the compiler's environment: each checked."""
    problems: list[str] = []
    for b in target.builds:
        where = f"builds ({b.name})"
        i = b.inputs
        if not PIP_NAME.match(b.name):
            problems.append(f"{where}: {_show(b.name)} is not a normalised package name")
        _check_version(problems, f"{where}.version", b.version)
        problem = url_problem(b.source.url, git=b.source.kind == "git")
        if problem:
            problems.append(f"{where}.url: {problem}")
        _check(problems, f"{where}.python", i.python, PYTHON, "a Python version")
        if i.platform not in PLATFORMS:
            problems.append(f"{where}.platform: {_show(i.platform)} is not a known platform")
        _check_version(problems, f"{where}.torch", i.torch)
        _check(problems, f"{where}.cuda", i.cuda, CUDA, "a CUDA release")
        _check(problems, f"{where}.arch-list", i.arch_list, ARCH_LIST, "a CUDA architecture list")
        _check(problems, f"{where}.host-compiler", i.host_compiler, COMPILER, "a compiler name")
        for name in i.build_requires:
            if not PIP_NAME.match(name):
                problems.append(f"{where}.build-requires: {_show(name)} is not a package name")
    return problems


# --- a whole target -------------------------------------------------------------------------


def declared_builds(raw: Mapping[str, Any]) -> frozenset[str]:
    """Names the target's ``builds`` list declares (an sdist is allowed for those only)."""
    builds = raw.get("builds", [])
    if not isinstance(builds, list):
        return frozenset()
    return frozenset(
        normalize_name(str(entry["name"]))
        for entry in builds
        if isinstance(entry, dict) and "name" in entry
    )


# Targets whose entries were found consistent, by identity: the locker checks a target as
# it is resolved and again as the lock is written (a few ms for each), the same object.
# A frozen value; the last few kept, so that an object's id is never another's.
_consistent: list[tuple[LockedTarget, frozenset[str]]] = []
_CONSISTENT_KEPT = 8


def entry_problems(target: LockedTarget, builds: frozenset[str] | None = None) -> list[str]:
    """The consistency checks alone (the locker runs them on what it resolved).
    ``builds``: the names the target builds (default: its build entries')."""
    if builds is None:
        builds = frozenset(normalize_name(b.name) for b in target.builds)
    if any(seen is target and seen_builds == builds for seen, seen_builds in _consistent):
        return []
    problems = [
        *value_problems(target),
        *stack_problems(target),
        *pip_problems(target.pip, builds),
        *wheel_tag_problems(target),
        *conda_problems(target.conda),
    ]
    if not problems:
        _consistent[:] = [*_consistent[-(_CONSISTENT_KEPT - 1) :], (target, builds)]
    return problems


def target_problems(name: str, raw: Mapping[str, Any], target: LockedTarget) -> list[str]:
    """Everything wrong with one parsed target (empty: it can be trusted).

    ``raw`` is the target's table as in the file, ``target`` the values built from it;
    ``target.content_hash`` is the hash of the table re-rendered from those values."""
    problems = []
    if not valid_target_name(name):
        problems.append(f"target name {_show(name)}: use {TARGET_NAME_RULE} characters")
    problems.extend(unprintable(raw, "targets." + name))
    stored = raw.get(HASH_KEY)
    try:
        actual = content_hash(name, raw)
    except (TypeError, ValueError):  # a TOML date or time: not something gpuenv writes
        actual = None
    if stored != actual:
        problems.append(
            f"content-hash {stored!r} is not the hash of the target's entries: the lock was "
            "edited (or damaged) after gpuenv wrote it"
        )
    elif target.content_hash != actual:
        problems.append("the target holds values gpuenv does not write (an edited lock)")
    problems.extend(entry_problems(target, declared_builds(raw)))
    if len(problems) > MAX_SHOWN:
        problems = [*problems[:MAX_SHOWN], f"... and {len(problems) - MAX_SHOWN} more"]
    return problems
