"""Load and validate the knowledge-base data files shipped in ``gpuenv/compat/data``.

The files are TOML, read with the standard library's parser (``tomllib``; ``tomli``
on Python 3.10): they are large enough that tomlkit's comment-preserving parser
would show in ``gpuenv plan``'s start-up. They are package data, not user input, so
their full schema (unknown keys forbidden, a ``source`` and ``checked`` date on
every entry) is enforced by pydantic models in the test suite
(``tests/unit/compat/test_data_schema.py``), not on every run: building those
models costs about 150 ms, more than the whole plan. At run time each entry is
converted into the frozen values of ``compat.model``, and any malformed entry
still fails loudly as a ``FileFormatError`` naming the file and the entry.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv.compat._data import DATA_FILES, data_digest, read_data
from gpuenv.compat.model import (
    Architecture,
    CudaFamily,
    CudaRelease,
    GpuModel,
    KnowledgeBase,
    TorchBuild,
    TorchRelease,
    sorted_releases,
)
from gpuenv.errors import FileFormatError
from gpuenv.versions import (
    ArchTarget,
    ComputeCapability,
    CudaVersion,
    DriverVersion,
)

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on Python 3.10 only
    pass


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
            label = entry.get("name") or entry.get("cuda") or entry.get("minor") or number
            raise FileFormatError(
                f"compat/data/{name}: {table}[{number}] ({label}): {type(exc).__name__}: {exc}",
                hint="the knowledge base shipped with gpuenv is damaged; reinstall gpuenv",
            ) from exc
    return tuple(out)


def _raw_files(cache_dir: Path | None) -> dict[str, dict[str, Any]]:
    """Every data file parsed. Parsing ~100 KB of TOML costs ~60 ms, so the result is
    kept in gpuenv's cache as JSON (several times faster to read), keyed by the
    digest of the files: a new gpuenv or edited data is a miss."""
    if cache_dir is None:
        return {name: read_data(name) for name in DATA_FILES}
    cached = cache_dir / "kb" / f"{data_digest()}.json"
    try:
        data: dict[str, dict[str, Any]] = json.loads(cached.read_text(encoding="utf-8"))
        if set(data) == set(DATA_FILES):
            return data
    except (OSError, ValueError):
        pass
    data = {name: read_data(name) for name in DATA_FILES}
    try:
        from gpuenv._fs import atomic_write_text

        text = json.dumps(data, default=str, separators=(",", ":"))
        atomic_write_text(cached, text, mode=0o600)  # cache files are private
    except OSError:
        pass  # the cache is a courtesy
    return data


def _cc(text: str | None) -> ComputeCapability | None:
    return ComputeCapability.parse(text) if text else None


def _cuda_release(raw: dict[str, Any]) -> CudaRelease:
    windows = raw.get("windows_driver_min")
    return CudaRelease(
        version=CudaVersion.parse(raw["cuda"]),
        linux_driver_min=DriverVersion.parse(raw["linux_driver_min"]),
        windows_driver_min=DriverVersion.parse(windows) if windows else None,
        arch_min=_cc(raw.get("arch_min")),
        arch_max=_cc(raw.get("arch_max")),
        source=raw["source"],
    )


def _family(raw: dict[str, Any]) -> CudaFamily:
    return CudaFamily(
        int(raw["major"]), DriverVersion.parse(raw["linux_driver_min"]), raw["source"]
    )


def _architecture(raw: dict[str, Any]) -> Architecture:
    ccs = tuple(ComputeCapability.parse(c) for c in raw["compute_capabilities"])
    return Architecture(raw["name"], ccs, raw["source"])


def _gpu(raw: dict[str, Any]) -> GpuModel:
    cc = ComputeCapability.parse(raw["cc"])
    return GpuModel(raw["name"], cc, raw["segment"], tuple(raw.get("aliases", ())), raw["source"])


def _build(raw: dict[str, Any]) -> TorchBuild:
    tag = raw["tag"]
    return TorchBuild(
        tag=tag,
        cuda=None if tag == "cpu" else CudaVersion.from_tag(tag),
        arch=tuple(ArchTarget.parse(a) for a in raw.get("arch", ())),
        cudnn=raw.get("cudnn"),
        nccl=raw.get("nccl"),
        source=raw["source"],
    )


def _optional_version(text: str | None) -> Version | None:
    return Version(text) if text else None


def _series(raw: dict[str, Any]) -> tuple[TorchRelease, ...]:
    builds = [(_build(b), b.get("only")) for b in raw["builds"]]
    releases = []
    for rel in raw["releases"]:
        version = Version(rel["torch"])
        releases.append(
            TorchRelease(
                version=version,
                torchvision=_optional_version(rel.get("torchvision")),
                torchaudio=_optional_version(rel.get("torchaudio")),
                python=SpecifierSet(rel.get("python") or raw["python"]),
                pypi_default=rel.get("pypi_default"),
                builds=tuple(b for b, only in builds if only is None or rel["torch"] in only),
                source=raw["source"],
            )
        )
    return tuple(releases)


def load_knowledge_base(cache_dir: Path | None = None) -> KnowledgeBase:
    raw = _raw_files(cache_dir)
    cuda_releases = _entries(raw, "cuda.toml", "release", _cuda_release)
    return KnowledgeBase(
        cuda_releases=tuple(sorted(cuda_releases, key=lambda c: c.version)),
        cuda_families=_entries(raw, "cuda.toml", "family", _family),
        architectures=_entries(raw, "gpus.toml", "architecture", _architecture),
        gpus=_entries(raw, "gpus.toml", "gpu", _gpu),
        torch_releases=sorted_releases(
            r for group in _entries(raw, "torch.toml", "series", _series) for r in group
        ),
    )
