"""conda ``environment.yml`` files and ``conda env export`` output.

Match specs (``pytorch=1.12.1=py3.8_cuda11.3_cudnn8.3.2_0``, ``pytorch::pytorch>=2``,
``numpy 1.21.*``) are parsed by rattler's ``MatchSpec``. Each conda package becomes
what it means for a pip-based environment (``knowledge/data/conda_cuda.toml`` and
``conda_names.toml``): the Python, the CUDA build of torch (cudatoolkit, pytorch-cuda,
cuda-version, a build string), a toolkit, a pip requirement under its PyPI name, a
conda-only tool, or one of conda's runtime libraries (not carried over). The ``pip:``
subsection is read like a requirements file, with its YAML lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._text import fail, line_not_read
from gpuenv.importers._yaml import YNode, load
from gpuenv.importers.model import (
    CHANNELS,
    CUDA_MAJOR,
    DROPPED,
    NAME,
    PYTHON,
    TOOLKIT,
    TORCH_BUILD,
    UNREADABLE,
    Ask,
    Authority,
    Origin,
    ReadingBuilder,
)


def conda_version_to_pep440(version: str | None) -> str | None:
    """A conda version spec as a PEP 440 specifier ("" for any; None: not expressible).

    ``1.12.1.*`` (conda's ``=1.12.1``) means that release: ``==1.12.1``; ``1.12.*``
    (``=1.12``) stays a wildcard; ranges are kept; ``|`` alternatives are not PEP 440."""
    if not version or version == "*":
        return ""
    text = version.strip()
    if "|" in text:
        return None
    if re.fullmatch(r"[0-9][0-9a-zA-Z.]*\.\*", text):
        stem = text[:-2]
        text = f"=={stem}" if stem.count(".") >= 2 else f"=={text}"
    elif re.fullmatch(r"[0-9][0-9a-zA-Z.]*", text):
        text = f"=={text}"
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return None
    return text


def release_of(specifier: str) -> str | None:
    """``==11.3`` / ``==11.3.*`` / ``==11.3.1`` -> "11.3" (a CUDA or Python major.minor)."""
    match = re.fullmatch(r"==\s*(\d+)\.(\d+)(\.[\d*]+)*(\.\*)?", specifier.strip())
    return f"{match.group(1)}.{match.group(2)}" if match else None


BUILD_TOOLS = frozenset({"setuptools", "wheel"})


# conda's command-line tools, and the options of their install/create that take a value.
CONDA_TOOLS = ("conda", "mamba", "micromamba")
_CONDA_VALUE_OPTIONS = frozenset({"-c", "--channel", "-n", "--name", "-p", "--prefix", "--file"})


@dataclass
class CondaSink:
    """Turns conda packages into asks and facts of one reading."""

    ctx: Context
    builder: ReadingBuilder
    runtime: list[str] = field(default_factory=list)
    runtime_origin: Origin | None = None
    elsewhere: list[str] = field(default_factory=list)  # packages of another platform only
    elsewhere_origin: Origin | None = None

    def package(self, name: str, version: str | None, build: str | None, origin: Origin) -> None:
        knowledge = self.ctx.knowledge
        specifier = conda_version_to_pep440(version)
        if specifier is None:
            self.builder.note(
                UNREADABLE, f"{origin.text}: version {version!r} has no PEP 440 form", origin
            )
            specifier = ""
        if name == "python":
            self.builder.fact(PYTHON, specifier.removeprefix("==").removesuffix(".*"), origin)
            return
        cuda = knowledge.conda_cuda.get(name)
        if cuda is not None:
            self._cuda_package(cuda.means, specifier, origin)
            return
        platform = knowledge.only_on(name)
        if platform is not None:
            # exported on another platform (the MSVC runtime of a Windows export): the
            # file is that platform's, and the package has no form on Linux at all
            self.builder.platform = self.builder.platform or platform
            self.elsewhere.append(name)
            self.elsewhere_origin = self.elsewhere_origin or origin
            return
        if name in BUILD_TOOLS and specifier.startswith("=="):
            # The repository's own setuptools/wheel pin: old sdists built in the prefix
            # (mmcv-full, an own CUDA extension) need the pkg_resources and distutils of
            # their era; it is kept as the pip requirement it also is.
            self.builder.asks.append(Ask(name=name, specifier=specifier, origin=origin))
            return
        if knowledge.is_conda_runtime(name):
            self.runtime.append(name)
            self.runtime_origin = self.runtime_origin or origin
            return
        torch_build = knowledge.build_cuda(build) if build else None
        pip_name = knowledge.pypi_name(name)
        self.builder.asks.append(
            Ask(
                name=pip_name,
                specifier=specifier,
                origin=origin,
                manager="conda",
                build=torch_build if pip_name == "torch" else None,
                conda_only=name in knowledge.conda_only,
            )
        )

    def _cuda_package(self, means: str, specifier: str, origin: Origin) -> None:
        cuda = release_of(specifier)
        if means == "build":
            family = re.fullmatch(r"==\s*(\d+)(\.\*)?", specifier)
            major = family.group(1) if family is not None else _one_major(specifier)
            if cuda is None and major is not None:
                # pixi-pytorch-onnx's cuda-version = "12.*": any 12.x build, not "no pin"
                # (it got cu118 on an H100, cu130 elsewhere); ">=12,<13" alike
                self.builder.fact(CUDA_MAJOR, major, origin, "conda CUDA package")
                return
            if cuda is None:
                self.builder.note(UNREADABLE, f"{origin.text}: no CUDA version pinned", origin)
                return
            major, minor = cuda.split(".")
            self.builder.fact(TORCH_BUILD, f"cu{major}{minor}", origin, "conda CUDA package")
        elif means == "cpu":
            self.builder.fact(TORCH_BUILD, "cpu", origin, "conda cpuonly")
        elif means == "toolkit":
            self.builder.fact(TOOLKIT, cuda or "", origin)
        else:
            self.builder.note(
                DROPPED, f"{origin.text}: CUDA libraries come with torch's wheels", origin
            )

    def spec(self, text: str, origin: Origin) -> None:
        import rattler

        try:
            match = rattler.MatchSpec(text)
        except Exception as exc:  # noqa: BLE001 - rattler raises its own exception types
            fail(origin.file, origin.line, f"not a conda package spec: {text!r} ({exc})")
        if match.name is None:
            fail(origin.file, origin.line, f"not a conda package spec: {text!r}")
        version = str(match.version) if match.version else None
        self.package(match.name.normalized, version, match.build, origin)

    def finish(self) -> None:
        if self.elsewhere and self.elsewhere_origin is not None:
            shown = ", ".join(sorted(self.elsewhere)[:6])
            more = ", ..." if len(self.elsewhere) > 6 else ""
            self.builder.note(
                DROPPED,
                f"{self.builder.file} was exported on {self.builder.platform}: "
                f"{len(self.elsewhere)} package{'s' if len(self.elsewhere) > 1 else ''} "
                f"built only for it ({shown}{more}) not carried over",
                self.elsewhere_origin,
            )
        if self.runtime and self.runtime_origin is not None:
            shown = ", ".join(sorted(self.runtime)[:6]) + (", ..." if len(self.runtime) > 6 else "")
            self.builder.note(
                DROPPED,
                f"{len(self.runtime)} conda runtime and packaging package"
                f"{'s' if len(self.runtime) > 1 else ''} not carried over ({shown}): "
                "the Python gpuenv installs and the pip wheels bring their own",
                self.runtime_origin,
            )


def _is_export(root: YNode, deps: list[YNode]) -> bool:
    """``conda env export`` writes ``prefix:`` and a build string on every package."""
    if root.get("prefix") is not None:
        return True
    specs = [d.text() or "" for d in deps if d.kind == "scalar"]
    with_build = [s for s in specs if s.count("=") >= 2 and "==" not in s]
    return bool(specs) and len(with_build) >= 0.8 * len(specs)


def _pip_section(ctx: Context, builder: ReadingBuilder, node: YNode, base: Path) -> None:
    feeder = requirements.PipLines(ctx, builder, base)
    for item in node.children():
        line = item.text()
        if line is None:
            builder.note(
                UNREADABLE,
                "not read: a pip: entry must be a requirement string",
                Origin(builder.file, item.line, "pip:"),
            )
            continue
        feeder.line(item.line, line.strip())


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    root = load(text, display)
    if root.kind != "map":
        fail(display, root.line, "an environment file is a mapping (name, channels, dependencies)")
    deps_node = root.get("dependencies")
    if deps_node is None or deps_node.kind != "seq":
        fail(display, root.line, "no 'dependencies:' list: not a conda environment file")
    deps = deps_node.children()
    export = _is_export(root, deps)
    builder = ReadingBuilder(
        display,
        "conda-export" if export else "conda-env",
        Authority.RECORD if export else Authority.DEFINITION,
    )
    name = root.get("name")
    if name is not None and name.text():
        builder.fact(NAME, str(name.text()), Origin(display, name.line, f"name: {name.text()}"))
    channels = root.get("channels")
    if channels is not None:
        names = [c.text() or "" for c in channels.children()]
        builder.fact(CHANNELS, ",".join(names), Origin(display, channels.line, "channels"))
    sink = CondaSink(ctx, builder)
    for item in deps:
        if item.kind == "map" and item.get("pip") is not None:
            _pip_section(ctx, builder, item.value["pip"], path.parent)
            continue
        spec = item.text()
        origin = Origin(display, item.line, (spec or "").strip())
        with line_not_read(builder, origin):
            if spec is None:
                fail(display, item.line, "a dependency must be a conda package spec or 'pip:'")
            sink.spec(spec.strip(), origin)
    sink.finish()
    ctx.readings.append(builder.build())


def read_install_args(
    ctx: Context, builder: ReadingBuilder, args: list[str], origin: Origin
) -> None:
    """The packages of a ``conda install``/``create`` command line (a Dockerfile's RUN,
    a README's shell block): every word that is neither an option nor its value."""
    sink = CondaSink(ctx, builder)
    skip = False
    for token in args:
        if skip:
            skip = False
        elif token in _CONDA_VALUE_OPTIONS or _bundled_value_option(token):
            skip = True
        elif not token.startswith("-"):
            sink.spec(token, origin)
    sink.finish()


def _bundled_value_option(token: str) -> bool:
    """Short flags written together whose last one takes the next word (``-yn streaming``:
    ``-y -n streaming``; mit-han-lab/streaming-llm's README, whose environment name became
    a pip dependency)."""
    return (
        len(token) > 2
        and token[0] == "-"
        and token[1:].isalpha()
        and f"-{token[-1]}" in _CONDA_VALUE_OPTIONS
    )


def _one_major(specifier: str) -> str | None:
    """The one CUDA major a range admits (">=12,<13", ">=12.1,<13.0"), else None."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        accepted = SpecifierSet(specifier.replace(" ", ""))
    except InvalidSpecifier:
        return None
    if not str(accepted):  # no constraint at all: not a major
        return None
    majors = {m for m in range(9, 20) if any(f"{m}.{n}" in accepted for n in range(10))}
    return str(majors.pop()) if len(majors) == 1 else None
