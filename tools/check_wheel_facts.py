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

It prints every difference from ``src/gpuenv/knowledge/data/torch.toml``, naming the data
entry, and with ``--write`` writes the differences it can (python ranges, PyPI's builds,
companions, cuDNN/NCCL pins, measured arch lists) into the file, setting the entry's
``checked`` date; releases or builds the data lacks are reported for a person to add
(an arch list cannot be read from an index listing alone).

The default index is the one uv uses (``uv pip compile --emit-index-url``), unless
``--index-url`` or ``GPUENV_INDEX_URL`` names another; the torch index is gpuenv's
(``[pip] torch-index`` semantics: ``--torch-index`` or ``GPUENV_TORCH_INDEX``). Exit
status: 0 no difference, 1 differences found (after ``--write``: that remain) or no
wheels of the selected releases, 2 bad arguments or an unreadable ``--data``, 5 an
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
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urljoin

from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from gpuenv.knowledge.wheelfacts import (  # noqa: E402
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
# The first companion releases of torch 1.7, the oldest series the data covers.
COMPANIONS_SINCE = {"torchvision": Version("0.8"), "torchaudio": Version("0.7")}


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
    macos: str | None = None  # the oldest macOS of a macOS wheel ("11.0")


def wheel_platform(platform_tag: str) -> tuple[str, str | None] | None:
    """gpuenv's platform for a wheel platform tag, with the oldest macOS of a macOS one
    ("macosx_11_0_arm64" -> ("osx-arm64", "11.0")); None: a platform gpuenv does not plan."""
    if platform_tag.startswith(("manylinux", "linux")):
        machine = next((m for m in PLATFORMS if platform_tag.endswith(f"_{m}")), None)
        return (PLATFORMS[machine], None) if machine else None
    if platform_tag == "win_amd64":
        return ("win-64", None)
    match = re.fullmatch(r"macosx_(\d+)_(\d+)_arm64", platform_tag)
    return ("osx-arm64", f"{match.group(1)}.{match.group(2)}") if match else None


def platform_wheels(files: Iterable[IndexFile]) -> list[Wheel]:
    """Linux x86_64/aarch64, Windows x86_64 and macOS arm64 wheels, one entry per file,
    free-threaded builds left out."""
    out = []
    for f in files:
        try:
            _name, version, _build, tags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        for tag in tags:
            found = wheel_platform(tag.platform)
            if found is None:
                continue
            if tag.abi.endswith("t") and tag.abi.startswith("cp"):
                break  # cp313t: the free-threaded build
            python = None
            cpython = tag.interpreter.startswith("cp")
            # macOS torch wheels are cpXY-none: no ABI tag, still one CPython's
            if cpython and tag.abi in (tag.interpreter, f"{tag.interpreter}m", "none"):
                python = f"{tag.interpreter[2]}.{tag.interpreter[3:]}"
            out.append(Wheel(f, version, found[0], python, found[1]))
            break
    return out


linux_wheels = platform_wheels  # the name the tests and older callers use


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
    macos: str | None = None  # osx-arm64: the oldest macOS its wheels' tags allow


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
    linux = wheel.platform.startswith("linux-")
    # only Linux wheels ever bundled a CUDA runtime without a label (PyPI's before 1.13)
    tag = facts.tag if facts.tag != "cpu" or not linux else bundled_cuda(wheel)
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
        macos=min((w.macos for w in group if w.macos), key=_py_key, default=None),
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
    torch_groups = _grouped(platform_wheels(project_files(index, "torch")))
    for (version, _platform), group in sorted(torch_groups.items()):
        if selection.wants(version):
            jobs.append(lambda g=group: observe_torch_build(g, "default index", arch))
    for tag in tags if torch_index else ():
        assert torch_index is not None
        try:
            groups = _grouped(
                platform_wheels(project_files(f"{torch_index.rstrip('/')}/{tag}", "torch"))
            )
        except MetadataUnavailable as exc:
            # An unreachable torch index: say so, and still check the default index.
            found.errors.append(f"torch index not read: {exc}")
            break
        for (version, _platform), group in sorted(groups.items()):
            labelled = [w for w in group if w.version.local == tag]
            if labelled and selection.wants(version):
                jobs.append(lambda g=labelled: observe_torch_build(g, "torch index", arch))
    for package in ("torchvision", "torchaudio"):
        groups = _grouped(platform_wheels(project_files(index, package)))
        for (version, platform), group in sorted(groups.items()):
            if platform == "linux-64" and Version(version) >= COMPANIONS_SINCE[package]:
                jobs.append(lambda p=package, g=group: observe_companion(p, g))
    for result in _run_all(jobs, found.errors):
        if isinstance(result, BuildObservation):
            found.builds.append(result)
        else:
            found.companions.append(result)
    return found


# --- comparing with the data -------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One fact where the wheels and the data disagree."""

    entry: str  # the data entry, as gpuenv names it
    key: str
    data: str | None
    wheels: str | None
    evidence: str  # the wheel (or index) that says so
    # Where --write puts the wheels' value: ("release", minor, torch, key),
    # ("build", minor, tag, platform, key); None: a person must add it.
    locator: tuple[str, ...] | None = None

    def render(self) -> str:
        where = "" if self.locator else " (add by hand)"
        return (
            f"{self.entry}: {self.key}: data {self.data or '(none)'}, "
            f"wheels {self.wheels or '(none)'} [{self.evidence}]{where}"
        )


def python_range(pythons: Iterable[str]) -> str | None:
    minors = sorted(int(p.split(".")[1]) for p in pythons)
    return f">=3.{minors[0]},<3.{minors[-1] + 1}" if minors else None


def _pythons_of(spec: SpecifierSet) -> set[str]:
    return {f"3.{m}" for m in PYTHON_MINORS if spec.contains(f"3.{m}")}


def _minor(version: str) -> str:
    v = Version(version)
    return f"{v.major}.{v.minor}"


def _release_differences(b: BuildObservation, kb: Any) -> list[Difference]:
    release = kb.torch_release(b.version)
    if release is None:
        return [Difference("torch.toml", f"release {b.version}", None, "on the index", b.wheel)]
    on = release.on(b.platform)
    out = []
    key = {
        "linux-64": "pypi_default",
        "linux-aarch64": "pypi_default_aarch64",
        "win-64": "pypi_default_win",
        "osx-arm64": "pypi_default_osx",
    }[b.platform]
    if on.pypi_default != b.tag:
        out.append(
            Difference(
                on.provenance.where,
                key,
                on.pypi_default,
                b.tag,
                b.wheel,
                ("release", _minor(b.version), b.version, key),
            )
        )
    # PyPI's Pythons: the release's, or its pypi_python where the PyTorch index has more
    # (an experimental Python); that key is the series' and is left for a person to edit.
    pypi_python = on.pypi_python if on.pypi_python is not None else on.python
    if b.platform == "linux-64" and b.pythons and _pythons_of(pypi_python) != set(b.pythons):
        key = "python" if on.pypi_python is None else "pypi_python"
        out.append(
            Difference(
                on.provenance.where,
                key,
                str(pypi_python),
                python_range(b.pythons),
                b.wheel,
                ("release", _minor(b.version), b.version, key) if key == "python" else None,
            )
        )
    return out


def _build_differences(b: BuildObservation, kb: Any) -> list[Difference]:
    release = kb.torch_release(b.version)
    if release is None:
        return []
    on = release.on(b.platform)
    build = on.build(b.tag)
    if build is None:
        where = f"{on.provenance.where} ({b.platform})"
        return [Difference(where, f"build {b.tag}", None, "on the index", b.wheel)]
    found: list[tuple[str, str | None, str | None]] = [
        ("cudnn", build.cudnn, b.cudnn),
        ("nccl", build.nccl, b.nccl),
    ]
    if b.arch is not None:
        found.append(("arch", ", ".join(str(a) for a in build.arch), ", ".join(b.arch)))
    if b.platform == "osx-arm64":
        found.append(("macos", build.macos, b.macos))
    pythons = _pythons_of(on.python_of(build))
    if b.source == "default index" and on.pypi_python is not None:
        pythons &= _pythons_of(on.pypi_python)  # the experimental ones are not on PyPI
    is_main = b.platform == "linux-64" and on.pypi_default == b.tag
    if b.pythons and not is_main and pythons != set(b.pythons):
        found.append(("python", str(on.python_of(build)), python_range(b.pythons)))
    locate = ("build", _minor(b.version), b.tag, b.platform)
    return [
        Difference(build.provenance.where, key, data, wheels, b.wheel, (*locate, key))
        for key, data, wheels in found
        if wheels is not None and data != wheels
    ]


def _paired(
    release: Any, package: str, companions: list[CompanionObservation]
) -> CompanionObservation | None:
    """The companion a torch release pairs with, by what the companions require: one that
    pins it exactly, else the one released with it, else the newest that accepts it."""
    mine = [c for c in companions if c.package == package]
    torch = release.version

    def accepts(c: CompanionObservation) -> bool:
        return c.requires_torch is None or SpecifierSet(c.requires_torch).contains(
            torch, prereleases=True
        )

    exact = [
        c
        for c in mine
        if c.requires_torch
        and c.requires_torch.startswith("==")
        and Version(c.requires_torch[2:]).public == str(torch)
        and accepts(c)
    ]
    if exact:
        return max(exact, key=lambda c: Version(c.version))
    if package == "torchvision":
        native = f"0.{torch.minor + 15}.{torch.micro}"
    else:
        native = str(torch) if torch >= Version("2.0") else None
    named = [c for c in mine if c.version == native and accepts(c)]
    if named:
        return named[0]
    admitting = [c for c in mine if c.requires_torch is not None and accepts(c)]
    return max(admitting, key=lambda c: Version(c.version)) if admitting else None


def _companion_differences(obs: Observations, kb: Any) -> list[Difference]:
    on_index = {b.version for b in obs.builds}
    out = []
    for release in kb.torch_releases:
        if str(release.version) not in on_index:
            continue
        for package in ("torchvision", "torchaudio"):
            paired = _paired(release, package, obs.companions)
            data = getattr(release, package)
            wheels = paired.version if paired else None
            if wheels is not None and str(data) != wheels:
                out.append(
                    Difference(
                        release.provenance.where,
                        package,
                        str(data) if data else None,
                        wheels,
                        paired.wheel if paired else "",
                        ("release", _minor(str(release.version)), str(release.version), package),
                    )
                )
    return out


def compare(obs: Observations, kb: Any) -> list[Difference]:
    out: list[Difference] = []
    for b in sorted(obs.builds, key=lambda b: (Version(b.version), b.platform, b.tag)):
        if b.source == "default index":
            out += _release_differences(b, kb)
        out += _build_differences(b, kb)
    out += _companion_differences(obs, kb)
    unique: dict[tuple[str, str, str | None], Difference] = {}
    for d in out:
        unique.setdefault((d.entry, d.key, d.wheels), d)
    return list(unique.values())


# --- writing the data --------------------------------------------------------------------------


def _series_table(doc: Any, minor: str) -> Any:
    return next((s for s in doc["series"] if str(s["minor"]) == minor), None)


def _build_tables(series: Any, tag: str, platform: str, version: str) -> list[Any]:
    return [
        b
        for b in series["builds"]
        if str(b["tag"]) == tag
        and str(b.get("platform", "linux-64")) == platform
        and (b.get("only") is None or version in [str(v) for v in b["only"]])
    ]


def _value(key: str, text: str) -> Any:
    if key == "arch":
        return [a.strip() for a in text.split(",") if a.strip()]
    return text


def _write_one(doc: Any, d: Difference, today: Any) -> bool:
    """Put one difference's wheel value into the document; False when it cannot."""
    assert d.locator is not None and d.wheels is not None
    kind, minor, *rest = d.locator
    series = _series_table(doc, minor)
    if series is None:
        return False
    if kind == "release":
        version, key = rest
        release = next((r for r in series["releases"] if str(r["torch"]) == version), None)
        if release is None:
            return False
        if key == "python" and str(series["python"]) == d.wheels:
            release.pop("python", None)
        else:
            release[key] = d.wheels
        series["checked"] = today
        return True
    tag, platform, key = rest
    tables = [
        b for r in series["releases"] for b in _build_tables(series, tag, platform, str(r["torch"]))
    ]
    if not tables:
        return False
    for table in {id(t): t for t in tables}.values():
        table[key] = _value(key, d.wheels)
        table["checked"] = today
    return True


def write(differences: list[Difference], data_file: Path, today: Any) -> list[Difference]:
    """Write what can be written; returns the differences left for a person. A value that
    differs between releases sharing one build entry is left too (split the entry)."""
    import tomlkit

    doc = tomlkit.parse(data_file.read_text(encoding="utf-8"))
    left: list[Difference] = []
    by_slot: dict[tuple[str, ...], set[str | None]] = {}
    for d in differences:
        if d.locator and d.locator[0] == "build":
            by_slot.setdefault(d.locator, set()).add(d.wheels)
    for d in differences:
        ambiguous = d.locator and d.locator[0] == "build" and len(by_slot[d.locator]) > 1
        if d.locator is None or ambiguous or not _write_one(doc, d, today):
            left.append(d)
    data_file.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return left


# --- the command -------------------------------------------------------------------------------


def default_index() -> str:
    """The index to read: GPUENV_INDEX_URL, else the one uv uses by default (asked of uv
    itself, so no registry address is written here)."""
    explicit = os.environ.get("GPUENV_INDEX_URL", "").strip()
    if explicit:
        return explicit
    from gpuenv.lock.uv import UvResolver

    url = UvResolver().default_index_url()
    if not url:
        raise SystemExit("could not learn uv's default index; pass --index-url")
    return url


def candidate_tags(kb: Any) -> list[str]:
    """cu tags to look for on the torch index: every CUDA release the data knows."""
    return sorted({c.version.tag for c in kb.cuda_releases})


def _version(text: str) -> str:
    try:
        Version(text)
    except InvalidVersion:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a version (like 2.15 or 2.15.0)"
        ) from None
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--index-url", help="the default index (default: uv's)")
    parser.add_argument("--torch-index", help="base of the per-build torch indexes")
    parser.add_argument("--no-torch-index", action="store_true", help="read the default index only")
    parser.add_argument(
        "--since", default="1.7", type=_version, help="oldest torch release to check"
    )
    parser.add_argument(
        "--release", action="append", default=[], type=_version, help="only these (2.15 or 2.15.0)"
    )
    parser.add_argument("--arch", action="store_true", help="also read each CUDA build's arch list")
    parser.add_argument(
        "--write", action="store_true", help="write the differences into torch.toml"
    )
    parser.add_argument("--data", type=Path, help="the torch.toml to compare with and write")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser.parse_args(argv)


def _refuse(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _knowledge(data: Path | None) -> Any:
    """The knowledge base, with ``data`` (another torch.toml) merged over the shipped one;
    a ``data`` that cannot be read or is not valid is exit 2 naming it."""
    from gpuenv.errors import FileFormatError
    from gpuenv.knowledge._load import load_knowledge_base

    if data is None:
        return load_knowledge_base(None, None)
    try:
        text = data.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        _refuse(f"{data}: cannot read: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        facts = Path(tmp) / "facts.toml"
        facts.write_text(text, encoding="utf-8")
        try:
            return load_knowledge_base(None, facts)
        except FileFormatError as exc:
            _refuse(exc.message.replace(str(facts), str(data)))


def main(argv: list[str] | None = None) -> int:
    from datetime import date

    args = parse_args(argv)
    data = args.data or REPO / "src" / "gpuenv" / "knowledge" / "data" / "torch.toml"
    kb = _knowledge(args.data)
    torch_index = None
    if not args.no_torch_index:
        from gpuenv.plan import DEFAULT_TORCH_INDEX

        torch_index = (
            args.torch_index or os.environ.get("GPUENV_TORCH_INDEX") or DEFAULT_TORCH_INDEX
        )
    selection = Selection(Version(args.since), frozenset(args.release))
    try:
        index = args.index_url or default_index()
        obs = gather(index, torch_index, candidate_tags(kb), selection, args.arch)
    except MetadataUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 5
    differences = compare(obs, kb)
    if kb.facts_file:  # --data: name its entries without the temporary copy's path
        differences = [
            replace(d, entry=d.entry.removeprefix(f"{kb.facts_file}: ")) for d in differences
        ]
    left = write(differences, data, date.today()) if args.write and differences else differences
    report(obs, differences, left, selection, as_json=args.json, wrote=args.write)
    if obs.errors:
        return 5
    return 1 if left or not obs.builds else 0


def report(
    obs: Observations,
    differences: list[Difference],
    left: list[Difference],
    selection: Selection,
    *,
    as_json: bool,
    wrote: bool,
) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "observed": obs.to_json(),
                    "differences": [asdict(d) for d in differences],
                    "left": [asdict(d) for d in left],
                },
                indent=1,
            )
        )
        return
    releases = sorted({b.version for b in obs.builds}, key=Version)
    print(
        f"read {len(obs.builds)} torch builds of {len(releases)} releases and "
        f"{len(obs.companions)} torchvision/torchaudio releases"
    )
    for error in obs.errors:
        print(f"error: {error}")
    if not obs.builds and not obs.errors:
        wanted = ", ".join(sorted(selection.releases)) or f">= {selection.since}"
        print(f"no torch wheels of the selected releases ({wanted}) on the indexes")
        return
    if not differences:
        print("no difference from the data")
        return
    for d in differences:
        written = wrote and d not in left
        print(("wrote " if written else "") + d.render())
    if wrote:
        print(f"{len(differences) - len(left)} written, {len(left)} left")


if __name__ == "__main__":
    raise SystemExit(main())
