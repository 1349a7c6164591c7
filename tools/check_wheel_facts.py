"""Check gpuenv's torch facts against what the wheels on the indexes say about themselves.

Usage:
    python tools/check_wheel_facts.py [--index-url URL] [--torch-index URL | --no-torch-index]
        [--since 2.4] [--release 2.15.0 ...] [--arch] [--write] [--json]

For every torch, torchvision and torchaudio release on the default index (and, for
torch, every build on the PyTorch index: ``<torch-index>/<cu tag>/torch/``), it reads
each wheel's own metadata (the PEP 658 ``.metadata`` file where the index serves one,
else the ``METADATA`` entry through HTTP range requests, never the whole wheel) and
derives:

- the Pythons a release has wheels for (its ``cpXY`` tags) and its Requires-Python;
- which build PyPI's plain torch is, per platform (its ``nvidia-cuda-runtime`` or
  ``cuda-toolkit`` pin; none: a CPU build);
- the cuDNN and NCCL each build pins;
- the torch that each torchvision and torchaudio release requires (the pairing);
- with ``--arch``, each CUDA build's compiled arch list: the string
  ``torch.cuda.get_arch_list()`` returns, read from ``torch/lib/libtorch_python.so``
  inside the wheel (about 10 MB of range requests per wheel, no GPU needed).

It prints every difference from ``src/gpuenv/compat/data/torch.toml``, naming the data
entry, and with ``--write`` writes the differences it can (python ranges, PyPI's builds,
companions, cuDNN/NCCL pins, measured arch lists) into the file, setting the entry's
``checked`` date; releases or builds the data lacks are reported for a person to add
(an arch list cannot be read from an index listing alone).

The default index is the one uv uses (``uv pip compile --emit-index-url``), unless
``--index-url`` or ``GPUENV_INDEX_URL`` names another; the torch index is gpuenv's
(``[pip] torch-index`` semantics: ``--torch-index`` or ``GPUENV_TORCH_INDEX``). Exit
status: 0 no difference, 1 differences found (after ``--write``: that remain), 5 an
index could not be read.
"""

from __future__ import annotations

import argparse
import html.parser
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from gpuenv.compat.wheelfacts import (  # noqa: E402
    arch_flags_in_binary,
    arch_list_from_flags,
    torch_facts,
    torch_requirement,
)
from gpuenv.lock.wheelmeta import (  # noqa: E402
    MetadataUnavailable,
    fetch,
    parse_metadata,
    read_member,
    read_metadata,
    read_names,
)

PLATFORMS = {"x86_64": "linux-64", "aarch64": "linux-aarch64"}
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{SIMPLE_JSON}, text/html;q=0.1"
PYTHON_MINORS = range(6, 20)
WORKERS = 8
# The first companion releases of torch 1.12, the oldest series the data covers.
COMPANIONS_SINCE = {"torchvision": Version("0.13"), "torchaudio": Version("0.12")}


# --- the indexes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    requires_python: str | None
    metadata: bool  # the index advertises a PEP 658 .metadata file


class _Links(html.parser.HTMLParser):
    """The ``<a>`` elements of a PEP 503 project page."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def parse_project_page(body: bytes, page_url: str) -> list[IndexFile]:
    """A PEP 691 JSON or PEP 503 HTML project page as files."""
    text = body.decode("utf-8")
    if text.lstrip().startswith("{"):
        data = json.loads(text)
        return [
            IndexFile(
                f["filename"],
                urljoin(page_url, f["url"]),
                f.get("requires-python"),
                bool(f.get("core-metadata") or f.get("dist-info-metadata")),
            )
            for f in data.get("files", [])
        ]
    links = _Links()
    links.feed(text)
    out = []
    for a in links.anchors:
        href = a.get("href")
        if not href:
            continue
        url = urljoin(page_url, href).split("#", 1)[0]
        meta = a.get("data-core-metadata") or a.get("data-dist-info-metadata")
        name = url.rsplit("/", 1)[-1]
        from urllib.parse import unquote

        out.append(IndexFile(unquote(name), url, a.get("data-requires-python"), bool(meta)))
    return out


def project_files(base: str, project: str) -> list[IndexFile]:
    """Every file of ``project`` on the simple index at ``base``; [] when it has none."""
    page = f"{base.rstrip('/')}/{project}/"
    try:
        return parse_project_page(fetch(page, accept=ACCEPT), page)
    except MetadataUnavailable as exc:
        if "HTTP 404" in str(exc):
            return []
        raise


@dataclass(frozen=True)
class Wheel:
    file: IndexFile
    version: Version
    platform: str
    python: str | None  # "3.11" for cp311-cp311; None for abi3/py3 wheels


def linux_wheels(files: Iterable[IndexFile]) -> list[Wheel]:
    """Linux x86_64/aarch64 wheels, one entry per file, free-threaded builds left out."""
    out = []
    for f in files:
        try:
            _name, version, _build, tags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        for tag in tags:
            machine = next((m for m in PLATFORMS if tag.platform.endswith(m)), None)
            if machine is None or not tag.platform.startswith(("manylinux", "linux")):
                continue
            if tag.abi.endswith("t") and tag.abi.startswith("cp"):
                break  # cp313t: the free-threaded build
            python = None
            if tag.interpreter.startswith("cp") and tag.abi in (tag.interpreter, f"{tag.interpreter}m"):
                python = f"{tag.interpreter[2]}.{tag.interpreter[3:]}"
            out.append(Wheel(f, version, PLATFORMS[machine], python))
            break
    return out


# --- what the wheels say -------------------------------------------------------------------


@dataclass
class BuildObservation:
    """One (torch release, build, platform) as its wheels state it."""

    version: str
    tag: str
    platform: str
    pythons: list[str]
    requires_python: str | None
    cuda_runtime: str | None
    cudnn: str | None
    nccl: str | None
    wheel: str
    arch: list[str] | None = None
    source: str = "default index"  # or "torch index"


@dataclass
class CompanionObservation:
    package: str
    version: str
    requires_torch: str | None  # the specifier, "==2.4.1", ">=2.11"
    pythons: list[str]
    wheel: str


@dataclass
class Observations:
    builds: list[BuildObservation] = field(default_factory=list)
    companions: list[CompanionObservation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pick(wheels: list[Wheel]) -> Wheel:
    """The wheel to read: the newest CPython one (its markers evaluate for that Python)."""
    return max(wheels, key=lambda w: (w.python is not None, _py_key(w.python), w.file.filename))


def _py_key(python: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in python.split(".")) if python else ()


def _metadata(wheel: Wheel) -> tuple[str | None, tuple[str, ...]]:
    return parse_metadata(read_metadata(wheel.file.url, pep658=wheel.file.metadata))


def _grouped(wheels: list[Wheel]) -> dict[tuple[str, str], list[Wheel]]:
    groups: dict[tuple[str, str], list[Wheel]] = {}
    for wheel in wheels:
        if wheel.version.is_prerelease or wheel.version.is_devrelease:
            continue
        groups.setdefault((str(wheel.version), wheel.platform), []).append(wheel)
    return groups


_BUNDLED_CUDART = re.compile(r"^torch/lib/libcudart(-[0-9a-f]+)?\.so\.(\d+)\.(\d+)$")


def bundled_cuda(wheel: Wheel) -> str:
    """A torch wheel that requires no CUDA wheel is a CPU build, or a CUDA build with its
    runtime bundled (PyPI's plain torch before 1.13): ``torch/lib/libcudart*.so.X.Y``."""
    for name in read_names(wheel.file.url):
        match = _BUNDLED_CUDART.match(name)
        if match:
            return f"cu{match.group(2)}{match.group(3)}"
    return "cpu"


def observe_torch_build(group: list[Wheel], source: str, arch: bool) -> BuildObservation:
    wheel = _pick(group)
    requires_python, requires = _metadata(wheel)
    python = wheel.python or "3.12"
    facts = torch_facts(requires_python, requires, platform=wheel.platform, python=python)
    tag = facts.tag if facts.tag != "cpu" else bundled_cuda(wheel)
    measured = None
    if arch and tag != "cpu":
        binary = read_member(wheel.file.url, "torch/lib/libtorch_python.so", timeout=120)
        flags = arch_flags_in_binary(binary)
        measured = list(arch_list_from_flags(flags)) if flags else []
    pythons = sorted({w.python for w in group if w.python}, key=_py_key)
    return BuildObservation(
        version=wheel.version.public,
        tag=wheel.version.local or tag,
        platform=wheel.platform,
        pythons=pythons,
        requires_python=requires_python,
        cuda_runtime=facts.cuda_runtime,
        cudnn=facts.cudnn,
        nccl=facts.nccl,
        wheel=wheel.file.filename,
        arch=measured,
        source=source,
    )


def observe_companion(package: str, group: list[Wheel]) -> CompanionObservation:
    wheel = _pick(group)
    _rp, requires = _metadata(wheel)
    python = wheel.python or "3.12"
    spec = torch_requirement(requires, platform=wheel.platform, python=python)
    return CompanionObservation(
        package=package,
        version=str(wheel.version.public),
        requires_torch=str(spec) if spec is not None else None,
        pythons=sorted({w.python for w in group if w.python}, key=_py_key),
        wheel=wheel.file.filename,
    )


@dataclass(frozen=True)
class Selection:
    since: Version
    releases: frozenset[str]  # empty: all

    def wants(self, version: str) -> bool:
        v = Version(version)
        if self.releases:
            return v.public in self.releases or f"{v.major}.{v.minor}" in self.releases
        return v >= self.since


def _run_all(jobs: list[Callable[[], Any]], errors: list[str]) -> list[Any]:
    out = []
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = [pool.submit(job) for job in jobs]
        for future in futures:
            try:
                out.append(future.result())
            except MetadataUnavailable as exc:
                errors.append(str(exc))
    return out


def gather(
    index: str, torch_index: str | None, tags: Iterable[str], selection: Selection, arch: bool
) -> Observations:
    """Everything the indexes say about the selected releases."""
    found = Observations()
    jobs: list[Callable[[], Any]] = []
    torch_groups = _grouped(linux_wheels(project_files(index, "torch")))
    for (version, _platform), group in sorted(torch_groups.items()):
        if selection.wants(version):
            jobs.append(lambda g=group: observe_torch_build(g, "default index", arch))
    for tag in tags if torch_index else ():
        assert torch_index is not None
        base = f"{torch_index.rstrip('/')}/{tag}"
        for (version, _platform), group in sorted(_grouped(linux_wheels(project_files(base, "torch"))).items()):
            labelled = [w for w in group if w.version.local == tag]
            if labelled and selection.wants(version):
                jobs.append(lambda g=labelled: observe_torch_build(g, "torch index", arch))
    for package in ("torchvision", "torchaudio"):
        groups = _grouped(linux_wheels(project_files(index, package)))
        for (version, platform), group in sorted(groups.items()):
            if platform == "linux-64" and Version(version) >= COMPANIONS_SINCE[package]:
                jobs.append(lambda p=package, g=group: observe_companion(p, g))
    for result in _run_all(jobs, found.errors):
        if isinstance(result, BuildObservation):
            found.builds.append(result)
        else:
            found.companions.append(result)
    return found
