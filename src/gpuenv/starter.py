"""A commented starter gpuenv.toml, built with tomlkit and validated before writing."""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import tomlkit
from tomlkit.items import Table

from gpuenv._fs import atomic_write_text, special_kind
from gpuenv.errors import UsageError
from gpuenv.knowledge import knowledge_base
from gpuenv.spec import parse_spec_text

if TYPE_CHECKING:
    from gpuenv.hardware import HardwareFacts


@dataclass(frozen=True)
class StarterOptions:
    """What the starter spec of ``gpuenv init`` says: the project's name, the stack, its
    target (a GPU, a compute capability or CPU only, with the driver), a second CPU target
    where asked, and the pip requirements."""

    name: str
    python: str = "3.11"
    torch: str = "*"
    cuda: str = "auto"
    target: str | None = None
    gpu: str | None = None
    driver: str | None = None
    cpu_target: bool = False
    cpu_build: str | None = None
    """``"pypi"``: the CPU target takes PyPI's default build (``gpuenv init --cpu pypi``)."""
    compute_capability: str | None = None
    """Instead of ``gpu``, for a GPU the knowledge base does not name."""
    pip: tuple[str, ...] = ()
    """PEP 508 requirements for ``[pip] dependencies`` (``gpuenv init --pip``)."""


def check_requirements(requirements: tuple[str, ...]) -> tuple[str, ...]:
    """Each requirement parsed by packaging, as written; a bad one is a usage error."""
    from packaging.requirements import InvalidRequirement, Requirement

    for text in requirements:
        try:
            Requirement(text)
        except InvalidRequirement as exc:
            raise UsageError(
                f"--pip {text!r} is not a pip requirement: {exc}",
                hint='write it as pip would, e.g. "transformers>=4.44" or "accelerate"',
            ) from None
    return tuple(dict.fromkeys(requirements))


def options_for_machine(options: StarterOptions, facts: HardwareFacts) -> StarterOptions:
    """``options`` with the target set to this machine (``gpuenv init --detect``): the
    GPU that constrains builds (the lowest compute capability, measured or known from
    its name) and the driver. With no GPU the target is CPU-only.
    """
    if not facts.gpus:
        return replace(options, gpu="none", driver=None)
    kb = knowledge_base()
    ranked = []
    for gpu in facts.gpus:
        model = kb.find_gpu(gpu.name)
        cc = gpu.compute_capability or (model.cc if model else None)
        if cc is not None:
            ranked.append((cc, gpu.name, model is not None))
    if not ranked or facts.driver_version is None:
        missing = "the driver's version" if ranked else "the GPUs' compute capability"
        raise UsageError(
            f"gpuenv found a GPU here but not {missing}",
            hint="describe it with --gpu NAME --driver VERSION ('gpuenv detect' shows why)",
        )
    cc, name, named = min(ranked)
    driver = str(facts.driver_version)
    if named:
        return replace(options, gpu=name, driver=driver)
    return replace(
        options,
        gpu=None,
        compute_capability=str(cc),
        driver=driver,
        target=options.target or "this-machine",
    )


def _torch_spec(text: str) -> str:
    # "2.4" on the command line means the 2.4 series, not exactly 2.4.0.
    return f"{text}.*" if re.fullmatch(r"\d+\.\d+", text.strip()) else text


def _target_name(options: StarterOptions) -> str:
    if options.target:
        return options.target
    if options.gpu is None or options.gpu.lower() == "none":
        return "cpu"
    model = knowledge_base().find_gpu(options.gpu)
    raw = model.name if model else options.gpu
    return re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-") or "gpu"


def _target_table(options: StarterOptions) -> Table:
    table = tomlkit.table()
    if options.gpu is None and options.compute_capability:
        table.add("compute-capability", options.compute_capability)
        table.add("driver", options.driver or "550.54.15")
        return table
    if options.gpu is None or options.gpu.lower() == "none":
        table.add("gpu", "none")
        table["gpu"].comment("CPU-only build")
        if options.cpu_build:
            table.add("build", options.cpu_build)
            table["build"].comment("PyPI's default torch (a CUDA build): no PyTorch index needed")
        return table
    table.add("gpu", options.gpu)
    table["gpu"].comment('a GPU name, or compute-capability = "X.Y"')
    table.add("driver", options.driver or "550.54.15")
    table["driver"].comment("the NVIDIA driver on those machines (nvidia-smi's first line)")
    return table


def starter_text(options: StarterOptions) -> tuple[str, list[str]]:
    doc = tomlkit.document()
    doc.add(tomlkit.comment(" gpuenv environment spec: 'gpuenv plan' shows what it resolves to."))
    doc.add(tomlkit.nl())
    project = tomlkit.table()
    project.add("name", options.name)
    doc.add("project", project)
    stack = tomlkit.table()
    stack.add("python", options.python)
    stack.add("torch", _torch_spec(options.torch))
    stack["torch"].comment('"2.4.*", "2.4.1", ">=2.4,<2.6" or "*" for the newest that fits')
    stack.add("torchvision", "*")
    stack["torchvision"].comment("the release paired with torch; false to leave it out")
    stack.add("cuda", options.cuda)
    stack["cuda"].comment('"auto": the newest CUDA build the driver and GPU allow')
    doc.add("stack", stack)
    targets = tomlkit.table(is_super_table=True)
    names = [_target_name(options)]
    targets.add(names[0], _target_table(options))
    if options.cpu_target and names[0] != "cpu":
        names.append("cpu")
        cpu = StarterOptions(name=options.name, gpu="none", cpu_build=options.cpu_build)
        targets.add("cpu", _target_table(cpu))
    doc.add("targets", targets)
    pip = tomlkit.table()
    dependencies = tomlkit.array()
    dependencies.extend(check_requirements(options.pip))
    pip.add("dependencies", dependencies)
    if not options.pip:
        pip["dependencies"].comment('e.g. ["transformers>=4.44"]')
    doc.add("pip", pip)
    return tomlkit.dumps(doc), names


def _refuse_what_is_not_a_file(path: Path) -> None:
    """--force replaces a spec file; a FIFO or a device there (``-f /dev/full``) would be
    replaced by the rename of the new file, so it is refused, and left as it is."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # nothing there (or the write says why)
    if stat.S_ISDIR(mode):  # it said "already exists, pass --force", which then failed
        raise UsageError(
            f"{path} is a directory, not a spec file",
            hint=f"pass -f with a file name: -f {path / 'gpuenv.toml'}",
        )
    kind = special_kind(mode)
    if kind is not None:
        raise UsageError(
            f"{path}: {kind}, not a spec file: refusing to replace it",
            hint="pass -f with the path of the gpuenv.toml to write",
        )


def write_starter(path: Path, options: StarterOptions, *, overwrite: bool) -> list[str]:
    """Write a starter spec to ``path``; returns the target names. Refuses to replace
    an existing file unless ``overwrite``; never writes a spec that does not validate."""
    _refuse_what_is_not_a_file(path)  # first: --force would not help
    if path.exists() and not overwrite:
        raise UsageError(f"{path} already exists", hint="pass --force to replace it")
    text, names = starter_text(options)
    parse_spec_text(text, file=str(path), kb=knowledge_base())
    atomic_write_text(path, text, what="the new spec")
    return names
