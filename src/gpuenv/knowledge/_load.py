"""Load and validate the knowledge-base data files shipped in ``gpuenv/knowledge/data``.

The files are TOML, read with the standard library's parser (``tomllib``; ``tomli``
on Python 3.10): they are large enough that tomlkit's comment-preserving parser
would show in ``gpuenv plan``'s start-up. They are package data, not user input, so
their full schema (unknown keys forbidden, a ``source`` and ``checked`` date on
every entry) is enforced by pydantic models in the test suite
(``tests/knowledge/test_data_schema.py``), not on every run: building those
models costs about 150 ms, more than the whole plan. At run time each entry is
converted into the frozen values of ``knowledge.model``, and any malformed entry
still fails loudly as a ``FileFormatError`` naming the file and the entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv import _toml
from gpuenv._docs import doc
from gpuenv.errors import FileFormatError
from gpuenv.knowledge._data import (
    DATA_FILES,
    SCHEMA_VERSION,
    data_digest,
    facts_file_bytes,
    read_data,
)
from gpuenv.knowledge.model import (
    Architecture,
    CudaFamily,
    CudaRelease,
    GpuModel,
    JetPack,
    KnowledgeBase,
    Provenance,
    TorchBuild,
    TorchRelease,
    gpu_tokens,
    sorted_releases,
)
from gpuenv.versions import (
    ArchTarget,
    ComputeCapability,
    CudaVersion,
    DriverVersion,
)

T = TypeVar("T")


def _entries(
    raw: Mapping[str, dict[str, Any]], name: str, table: str, convert: Callable[[dict[str, Any]], T]
) -> tuple[T, ...]:
    """Convert every ``[[table]]`` of a data file, naming the entry that fails."""
    out: list[T] = []
    for number, entry in enumerate(raw[name].get(table, [])):
        try:
            out.append(convert(entry))
        except (KeyError, TypeError, ValueError, InvalidVersion, InvalidSpecifier) as exc:
            label = (
                entry.get("name")
                or entry.get("jetpack")
                or entry.get("cuda")
                or entry.get("minor")
                or number
            )
            user = entry.get("_user")
            where = user or f"knowledge/data/{name}"
            raise FileFormatError(
                f"{where}: {table} ({label}): {type(exc).__name__}: {exc}",
                hint="fix that entry of your facts file"
                if user
                else "the knowledge base shipped with gpuenv is damaged; reinstall gpuenv",
            ) from exc
    return tuple(out)


def _raw_files(cache_dir: Path | None, facts_file: Path | None) -> dict[str, dict[str, Any]]:
    """Every data file parsed (and the user's facts file, checked, under ``"facts"``).
    Parsing ~100 KB of TOML costs ~60 ms, so the result is kept in gpuenv's cache as
    JSON (several times faster to read), keyed by the digest of the files: a new gpuenv,
    edited data or an edited facts file is a miss."""
    if cache_dir is None:
        return _parse_files(facts_file)
    cached = cache_dir / "kb" / f"{data_digest(facts_file)}.json"
    from gpuenv import _fs
    from gpuenv.errors import InputFileError

    try:  # bounded: a FIFO or /dev/zero planted in the cache is a miss, not a hang
        data: dict[str, dict[str, Any]] = _fs.load_json(  # type: ignore[assignment]
            cached, limit=_fs.LOCK_LIMIT, depth=_fs.JSON_DEPTH, what="knowledge-base cache"
        )
        if isinstance(data, dict) and set(DATA_FILES) <= set(data):
            return data
    except (OSError, InputFileError):
        pass
    data = _parse_files(facts_file)
    try:
        from gpuenv._fs import atomic_write_text

        text = json.dumps(data, default=str, separators=(",", ":"))
        atomic_write_text(cached, text, mode=0o600)  # cache files are private
    except OSError:
        pass  # the cache is a courtesy
    return data


def _parse_files(facts_file: Path | None) -> dict[str, dict[str, Any]]:
    data = {name: read_data(name) for name in DATA_FILES}
    user = read_facts_file(facts_file) if facts_file is not None else None
    if user is not None:
        data["facts"] = user
    return data


def read_facts_file(path: Path) -> dict[str, Any] | None:
    """The user's facts file, parsed and checked against the data files' schema; None
    when it does not exist. Every problem is reported with its line and key."""
    raw_bytes = facts_file_bytes(path)
    if raw_bytes is None:
        return None
    try:
        text = raw_bytes.decode("utf-8")
        raw = _toml.loads(text)
    except UnicodeDecodeError as exc:
        raise FileFormatError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except _toml.TomlError as exc:
        raise FileFormatError(
            f"{path}: not valid TOML: {exc}", hint=f"fix it, or remove it; see {FACTS_DOC}"
        ) from None
    except RecursionError:
        raise FileFormatError(
            f"{path}: not valid TOML: nested too deeply", hint=f"see {FACTS_DOC}"
        ) from None
    from gpuenv._tomlpos import key_lines, line_of
    from gpuenv.knowledge._schema import validate_facts_file

    problems = validate_facts_file(raw)
    if raw.get("schema") != SCHEMA_VERSION:
        problems.insert(0, (("schema",), f"must be {SCHEMA_VERSION}"))
    elif not problems:
        problems = _dangling(raw)
    if problems:
        lines = key_lines(text)
        shown = [
            f"{path}:{line_of(lines, loc) or '?'}: {'.'.join(str(p) for p in loc)}: {message}"
            for loc, message in problems
        ]
        raise FileFormatError(
            "the facts file is invalid:\n" + "\n".join(shown),
            hint=f"it takes the shape of gpuenv's own data files; see {FACTS_DOC}",
        )
    return raw


FACTS_DOC = doc("how-to/own-facts.md")

Problem = tuple[tuple[str | int, ...], str]


def _dangling(raw: dict[str, Any]) -> list[Problem]:
    """What the schema cannot see in a user's (schema-valid) facts file: two entries with
    one key (the merge would keep only one), a build whose CUDA release neither the
    shipped data nor the file knows (it has no driver minimum: the plan could only say
    "needs driver >= None"), a PyPI default that names no build of its release."""
    problems: list[Problem] = []
    for key, (_, _, identity) in _IDENTITY.items():
        first: dict[str, int] = {}
        for number, entry in enumerate(raw.get(key, [])):
            name = identity(entry)
            if name in first:
                field = {"family": "major", "release": "cuda", "series": "minor"}.get(key, "name")
                problems.append(
                    (
                        (key, number, field),
                        f"{entry[field]} is already an entry of this file ({key}.{first[name]})",
                    )
                )
            first.setdefault(name, number)
    known = {
        CudaVersion.parse(str(r["cuda"]))
        for r in [*read_data("cuda.toml").get("release", []), *raw.get("release", [])]
    }
    for s, series in enumerate(raw.get("series", [])):
        builds = series.get("builds", [])
        for b, build in enumerate(builds):
            tag = build["tag"]
            if tag != "cpu" and (cuda := CudaVersion.from_tag(tag)) not in known:
                problems.append(
                    (
                        ("series", s, "builds", b, "tag"),
                        f"{tag} names CUDA {cuda.major}.{cuda.minor}, which neither the "
                        "shipped data nor this file knows (add a [[release]] for it)",
                    )
                )
        for r, release in enumerate(series.get("releases", [])):
            for platform, field in _PYPI_KEYS:
                tag = release.get(field)
                tags = sorted(
                    {
                        b["tag"]
                        for b in builds
                        if b.get("platform", "linux-64") == platform
                        and (b.get("only") is None or release["torch"] in b["only"])
                    }
                )
                if tag is not None and tag not in tags:
                    problems.append(
                        (
                            ("series", s, "releases", r, field),
                            f"{tag} is not a {platform} build of torch {release['torch']} here "
                            f"(builds: {', '.join(tags) or 'none'})",
                        )
                    )
    return problems


# How entries are identified when the user's file is merged over the shipped data: an
# entry with the same key replaces the shipped one; any other is added.
_IDENTITY: dict[str, tuple[str, str, Callable[[dict[str, Any]], str]]] = {
    "family": ("cuda.toml", "family", lambda e: str(e["major"])),
    "release": ("cuda.toml", "release", lambda e: str(e["cuda"])),
    "architecture": ("gpus.toml", "architecture", lambda e: str(e["name"])),
    "gpu": ("gpus.toml", "gpu", lambda e: " ".join(gpu_tokens(str(e["name"])))),
    "series": ("torch.toml", "series", lambda e: str(e["minor"])),
}


def merge_facts(raw: dict[str, dict[str, Any]], facts_file: Path | None) -> None:
    """Merge ``raw["facts"]`` (the user's file) into the shipped tables, in place; each
    user entry is marked with ``_user`` (its file) for the provenance of its facts."""
    user = raw.pop("facts", None)
    if not user:
        return
    for key, (name, table, identity) in _IDENTITY.items():
        mine = [dict(e, _user=str(facts_file)) for e in user.get(key, [])]
        if not mine:
            continue
        replaced = {identity(e) for e in mine}
        shipped = [e for e in raw[name].get(table, []) if identity(e) not in replaced]
        raw[name] = dict(raw[name], **{table: shipped + mine})


def _cc(text: str | None) -> ComputeCapability | None:
    return ComputeCapability.parse(text) if text else None


def _provenance(raw: dict[str, Any], where: str) -> Provenance:
    user = raw.get("_user")
    return Provenance(
        where=f"{user}: {where}" if user else where,
        unverified=raw.get("unverified"),
        user_file=user,
    )


def _cuda_release(raw: dict[str, Any]) -> CudaRelease:
    windows = raw.get("windows_driver_min")
    return CudaRelease(
        version=CudaVersion.parse(raw["cuda"]),
        linux_driver_min=DriverVersion.parse(raw["linux_driver_min"]),
        windows_driver_min=DriverVersion.parse(windows) if windows else None,
        arch_min=_cc(raw.get("arch_min")),
        arch_max=_cc(raw.get("arch_max")),
        source=raw["source"],
        provenance=_provenance(raw, f"cuda.toml: release {raw['cuda']}"),
    )


def _family(raw: dict[str, Any]) -> CudaFamily:
    windows, first = raw.get("windows_driver_min"), raw.get("nvcc_wheel_from")
    return CudaFamily(
        int(raw["major"]),
        DriverVersion.parse(raw["linux_driver_min"]),
        raw["source"],
        windows_driver_min=DriverVersion.parse(windows) if windows else None,
        nvcc_wheel=raw.get("nvcc_wheel"),
        nvcc_wheel_from=CudaVersion.parse(first) if first else None,
    )


def _branch(text: str | None) -> int | None:
    return int(text) if text else None


def _architecture(raw: dict[str, Any]) -> Architecture:
    ccs = tuple(ComputeCapability.parse(c) for c in raw["compute_capabilities"])
    by_cc = tuple(
        (ComputeCapability.parse(cc), int(branch))
        for cc, branch in raw.get("driver_first_by_cc", {}).items()
    )
    return Architecture(
        raw["name"],
        ccs,
        raw["source"],
        driver_first=_branch(raw.get("driver_first")),
        driver_last=_branch(raw.get("driver_last")),
        driver_first_by_cc=by_cc,
        driver_source=raw.get("driver_source"),
        provenance=_provenance(raw, f"gpus.toml: architecture {raw['name']}"),
    )


def _gpu(raw: dict[str, Any]) -> GpuModel:
    cc = ComputeCapability.parse(raw["cc"])
    return GpuModel(
        raw["name"],
        cc,
        raw["segment"],
        tuple(raw.get("aliases", ())),
        raw["source"],
        platform=raw.get("platform"),
        l4t=raw.get("l4t"),
        provenance=_provenance(raw, f"gpus.toml: gpu {raw['name']}"),
    )


def _jetpack(raw: dict[str, Any]) -> JetPack:
    driver = raw.get("driver")
    return JetPack(
        version=str(raw["jetpack"]),
        l4t=str(raw["l4t"]),
        cuda=CudaVersion.parse(raw["cuda"]),
        driver=DriverVersion.parse(driver) if driver else None,
        gpus=tuple(str(g) for g in raw["gpus"]),
        source=raw["source"],
        provenance=_provenance(raw, f"gpus.toml: jetpack {raw['jetpack']}"),
    )


def _build(raw: dict[str, Any], series: dict[str, Any]) -> TorchBuild:
    tag = raw["tag"]
    platform = raw.get("platform", "linux-64")
    where = f"torch.toml: series {series['minor']}, build {tag} ({platform})"
    python = raw.get("python")
    return TorchBuild(
        tag=tag,
        cuda=None if tag == "cpu" else CudaVersion.from_tag(tag),
        arch=tuple(ArchTarget.parse(a) for a in raw.get("arch", ())),
        cudnn=raw.get("cudnn"),
        nccl=raw.get("nccl"),
        source=raw["source"],
        platform=platform,
        python=SpecifierSet(python) if python else None,
        off_matrix=bool(raw.get("off_matrix", False)),
        macos=raw.get("macos"),
        provenance=_provenance(
            dict(raw, _user=series.get("_user"), unverified=_unverified(raw, series)), where
        ),
    )


def _unverified(*entries: dict[str, Any]) -> str | None:
    return next((e["unverified"] for e in entries if e.get("unverified")), None)


def _optional_version(text: str | None) -> Version | None:
    return Version(text) if text else None


def _release(
    rel: dict[str, Any], raw: dict[str, Any], builds: list[tuple[TorchBuild, list[str] | None]]
) -> TorchRelease:
    mine = tuple(b for b, only in builds if only is None or rel["torch"] in only)
    defaults = tuple((platform, rel[key]) for platform, key in _PYPI_KEYS if rel.get(key))
    where = f"torch.toml: series {raw['minor']}, release {rel['torch']}"
    return TorchRelease(
        version=Version(rel["torch"]),
        torchvision=_optional_version(rel.get("torchvision")),
        torchvision_also=tuple(Version(v) for v in rel.get("torchvision_also") or ()),
        torchaudio=_optional_version(rel.get("torchaudio")),
        python=SpecifierSet(rel.get("python") or raw["python"]),
        pypi_default=rel.get("pypi_default"),
        builds=tuple(b for b in mine if b.platform == "linux-64"),
        source=raw["source"],
        all_builds=mine,
        pypi_defaults=defaults,
        pypi_python=SpecifierSet(raw["pypi_python"]) if raw.get("pypi_python") else None,
        provenance=_provenance(
            dict(rel, _user=raw.get("_user"), unverified=_unverified(rel, raw)), where
        ),
    )


_PYPI_KEYS = (
    ("linux-64", "pypi_default"),
    ("linux-aarch64", "pypi_default_aarch64"),
    ("win-64", "pypi_default_win"),
    ("osx-arm64", "pypi_default_osx"),
)


def _series(raw: dict[str, Any]) -> tuple[TorchRelease, ...]:
    builds = sorted(
        ((_build(b, raw), b.get("only")) for b in raw["builds"]),
        key=lambda pair: pair[0].cuda or CudaVersion(0, 0),
    )
    return tuple(_release(rel, raw, builds) for rel in raw["releases"])


def load_knowledge_base(
    cache_dir: Path | None = None, facts_file: Path | None = None
) -> KnowledgeBase:
    raw = _raw_files(cache_dir, facts_file)
    has_facts = "facts" in raw
    merge_facts(raw, facts_file)
    cuda_releases = _entries(raw, "cuda.toml", "release", _cuda_release)
    return KnowledgeBase(
        cuda_releases=tuple(sorted(cuda_releases, key=lambda c: c.version)),
        cuda_families=_entries(raw, "cuda.toml", "family", _family),
        architectures=_entries(raw, "gpus.toml", "architecture", _architecture),
        gpus=_entries(raw, "gpus.toml", "gpu", _gpu),
        torch_releases=sorted_releases(
            r for group in _entries(raw, "torch.toml", "series", _series) for r in group
        ),
        facts_file=str(facts_file) if has_facts else None,
        jetpacks=_entries(raw, "gpus.toml", "jetpack", _jetpack),
    )
