"""The checks of gpuenv.toml's values, each raising ``ValueError`` with the message a user
sees: shared by the pydantic models (``_models``, which also explain every error) and
the plain reading of a valid spec (``_fast``), which needs no pydantic."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpuenv._network import is_fetchable_url
from gpuenv.names import ENV_NAME, MANAGED_ENV, TORCH_FAMILY, normalize_name
from gpuenv.spec import parse_version_spec
from gpuenv.versions import ComputeCapability, CudaVersion, DriverVersion, VersionFormatError

if TYPE_CHECKING:  # the caller parsed it: the spec's own reading needs no requirement parser
    from packaging.requirements import Requirement


def show(value: Any) -> str:
    """A value as the user wrote it, quoted like JSON: a newline shows as ``\\n``."""
    return json.dumps(value, default=str, ensure_ascii=False)


def plain(text: str, what: str) -> None:
    """Refuse what no version or name can be: empty, blank around, control characters."""
    if not text.strip():
        raise ValueError(f"{show(text)}: {what} cannot be empty")
    if any(ch < " " or "\x7f" <= ch < "\xa0" for ch in text):
        raise ValueError(f"{show(text)}: {what} cannot contain control characters (a newline?)")
    if text != text.strip():
        raise ValueError(f"{show(text)}: {what} cannot start or end with spaces")


MAX_VERSION_TEXT = 200  # a version or range; a number of 4300+ digits is past int()'s limit


def version_spec(text: str) -> str:
    if len(text) > MAX_VERSION_TEXT:
        raise ValueError(f"{show(text[:40])}... is {len(text)} characters: not a version")
    if not text.strip():
        raise ValueError(f'{show(text)} is empty: use "*" for any version')
    parse_version_spec(text)
    return text


def python_version(text: str) -> str:
    plain(text, "a Python version")
    if re.fullmatch(r"3\.[0-9]{1,2}", text):
        return text
    try:
        if not text.isascii():
            raise InvalidSpecifier(text)
        SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(
            f'{show(text)} is not a Python version ("3.11") or range (">=3.10,<3.13")'
        ) from None
    return text


def cuda(text: str) -> str:
    if text == "auto":
        return text
    try:
        plain(text, "a CUDA version")
        CudaVersion.parse(text)
    except (VersionFormatError, ValueError):
        raise ValueError(
            f'{show(text)} is not a CUDA version: use "auto" or one like "12.4"'
        ) from None
    return text


def driver(text: str) -> str:
    if text == "detect":
        return text
    plain(text, "a driver version")
    try:
        DriverVersion.parse(text)
    except VersionFormatError:
        ascii_only = "" if text.isascii() else " (ASCII digits only)"
        raise ValueError(
            f'{show(text)} is not a driver version (like "550.54.15") or "detect"{ascii_only}'
        ) from None
    return text


def gpu(text: str) -> str:
    plain(text, "a GPU name")
    return text


def compute_capability(text: str) -> str:
    plain(text, "a compute capability")
    try:
        cc = ComputeCapability.parse(text)
    except VersionFormatError as exc:
        raise ValueError(str(exc)) from None
    if not 1 <= cc.major <= 15:
        raise ValueError(f"{show(text)} is not a plausible compute capability")
    return text


def toolkit(text: str) -> str:
    if text.startswith("system:"):
        path = text.removeprefix("system:")
        if not path.startswith("/"):
            raise ValueError(
                f'"{text}": a system toolkit needs an absolute path ("system:/usr/local/cuda-12.4")'
            )
        return text
    return cuda(text) if text != "auto" else text


def glibc(text: str) -> str:
    if not re.fullmatch(r"2\.[0-9]{1,2}", text):
        raise ValueError(f'{show(text)} is not a glibc version (like "2.28")')
    return text


def not_a_requirement(text: str, exc: Exception) -> str:
    return f"{show(text)} is not a valid requirement: {exc}"


def url(text: str) -> str:
    if not is_fetchable_url(text):
        raise ValueError(f"{show(text)} is not an http(s):// or file:// URL")
    return text


# [pip] exclude-newer: a day, or an RFC 3339 time with its offset (uv's own forms, less the
# local day that uv reads in the machine's time zone: the same spec would lock
# differently in Tokyo and in Lisbon).
_DAY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_INSTANT = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def exclude_newer(text: str) -> str:
    """``[pip] exclude-newer``: "2023-04-15" (releases uploaded on that day, UTC, or
    before) or "2023-04-15T12:00:00Z" (uploaded before that instant), from 2000 to 2999:
    no package index is older, and uv reads no year near 9999."""
    plain(text, "a date")
    # The year as written first: "9999-12-31" has no next day, "1999-12-31" ends in 2000.
    if not "2000" <= text[:4] <= "2999" or not "2000" <= exclude_newer_cutoff(text)[:4] <= "2999":
        raise ValueError(f"{show(text)}: the day must fall in the years 2000 to 2999")
    return text


def days_by_package(table: dict[str, str]) -> dict[str, str]:
    """``[pip] exclude-newer-package``: distinct names, none of the torch family, whose
    release the plan chooses (uv is told to exempt it: a day here would be ignored)."""
    distinct_names(table)
    for name in table:
        if normalize_name(name) in TORCH_FAMILY:
            raise ValueError(
                f"{show(name)}: the torch family takes the release the plan chose ([stack] "
                "torch, or the newest that fits the targets), never a day: remove this entry"
            )
    return table


def distinct_names(table: dict[str, Any]) -> dict[str, Any]:
    """A table by package or group name whose keys name different things: "Foo" and
    "foo" (or "foo_bar" and "foo-bar") are one name, and one entry would silently take
    the other's place."""
    seen: dict[str, str] = {}
    for key in table:
        other = seen.setdefault(normalize_name(key), key)
        if other != key:
            raise ValueError(
                f"{show(other)} and {show(key)} are one name (case, '-', '_' and '.' do not "
                "count): write it once"
            )
    return table


def pinned_exactly(requirement: Requirement) -> bool:
    """Whether ``requirement`` names one release (``==1.2``, ``===1.2``; not ``==1.*``):
    [pip] exclude-newer leaves such a pin alone, as the spec's own choice (the lock
    exempts it; the import does not date by it)."""
    specs = list(requirement.specifier)
    return len(specs) == 1 and (
        specs[0].operator == "===" or (specs[0].operator == "==" and "*" not in specs[0].version)
    )


def exclude_newer_cutoff(text: str) -> str:
    """The instant uv excludes from (``--exclude-newer``), in UTC: a day's is the next
    day's midnight, so that day's uploads count. ``ValueError`` for anything else."""
    from datetime import date, datetime, timedelta, timezone

    problem = f'{show(text)} is not a date ("2023-04-15") or a UTC time ("2023-04-15T12:00:00Z")'
    day = _DAY.fullmatch(text)
    try:
        if day is not None:
            end = date(*(int(part) for part in day.groups())) + timedelta(days=1)
            return f"{end.isoformat()}T00:00:00Z"
        if _INSTANT.fullmatch(text) is None:
            raise ValueError(problem)
        instant = datetime.fromisoformat(text.upper().replace("Z", "+00:00").replace(" ", "T"))
        # in UTC: "0001-01-01T00:00:00+01:00" is a year 0, which no datetime holds
        return instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError):
        raise ValueError(problem) from None


_MANAGED_HINTS = {
    "TORCH_CUDA_ARCH_LIST": "it comes from the target's GPUs: add entries with extra-archs",
    "MAX_JOBS": "use max-jobs",
    "CUDA_HOME": "use [stack] toolkit",
    "CUDA_PATH": "use [stack] toolkit",
    "CC": "use host-compiler",
    "CXX": "use host-compiler",
    "NVCC_CCBIN": "use host-compiler",
}


def env_name(text: str) -> str:
    if not ENV_NAME.match(text):
        raise ValueError(f'"{text}" is not an environment variable name (letters, digits, _)')
    if text in MANAGED_ENV:
        why = _MANAGED_HINTS.get(text, "gpuenv sets it")
        raise ValueError(f"{text} is set by gpuenv for every build: {why}")
    return text


def env_value(text: str) -> str:
    if "\0" in text:
        raise ValueError("a NUL byte cannot be passed in the environment")
    if not text.isprintable():
        bad = next(c for c in text if not c.isprintable())
        raise ValueError(
            f"a control character (U+{ord(bad):04X}) in a build variable: the lock holds "
            "printable text only (shell metacharacters are fine: no shell ever sees the value)"
        )
    return text


def arch_entry(text: str) -> str:
    if not re.fullmatch(r"\d{1,2}\.\d(\+PTX)?", text.strip()):
        raise ValueError(f'"{text}" is not an arch entry like "8.0" or "9.0+PTX"')
    return text


def project_path(text: str) -> str:
    plain(text, "a project path")
    if text.startswith("/") or "\\" in text:
        raise ValueError(f'{show(text)}: the project\'s path is relative to gpuenv.toml (".")')
    return text


def channel(text: str) -> str:
    """A channel name, or a URL that parses (``http://[::1`` crashed the solver)."""
    plain(text, "a channel")
    if "://" in text and not is_fetchable_url(text):
        raise ValueError(f"{show(text)} is not a channel name or an http(s):// or file:// URL")
    return text


def without_unset(normalised: dict[str, Any]) -> dict[str, Any]:
    """Keys added after the first release are left out while unset, so that a spec that
    does not use them keeps its content hash (and its lock stays fresh)."""
    if normalised["project"].get("path") is None:
        normalised["project"].pop("path", None)
    for target in normalised["targets"].values():
        if target.get("pip") is None:
            target.pop("pip", None)
    if not normalised["pip"].get("groups"):
        normalised["pip"].pop("groups", None)
    return normalised
