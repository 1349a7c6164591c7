"""The written ``gpuenv.toml``: built with tomlkit, a comment on every entry saying where
it came from ("environment.yaml:7 pytorch=1.12.1 → 2.0.1: ..."), validated by gpuenv's
own spec loader (with the knowledge-base checks) before one byte is written, and written
atomically. An existing file is replaced only when asked to."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import tomlkit
from tomlkit.items import Array, Table

from gpuenv._fs import atomic_write_text
from gpuenv.errors import UsageError
from gpuenv.importers.decide import Decision, Line
from gpuenv.importers.report import Report
from gpuenv.knowledge import KnowledgeBase
from gpuenv.spec import parse_spec_text

_MAX_COMMENT = 200


def _shown(char: str) -> str:
    return char if char.isprintable() else repr(char)[1:-1]


def _short(text: str) -> str:
    """One line of at most _MAX_COMMENT characters for a TOML comment, which may not hold a
    control character: those the input had (a name with an escape in it) are shown escaped."""
    one_line = "".join(map(_shown, " ".join(text.split())))
    return one_line if len(one_line) <= _MAX_COMMENT else one_line[: _MAX_COMMENT - 1] + "…"


def _add(table: Table, key: str, value: object, comment: str | None) -> None:
    item = tomlkit.item(value)
    if comment:
        item.comment(_short(comment))
    table.add(key, item)


def _array(lines: Sequence[Line]) -> Array:
    """A multi-line array with a comment on each element. tomlkit's ``Array.add_line``
    re-indexes the whole array on every call (quadratic: a 6,000-line pip freeze took 16 s
    in it); the array is written as TOML text, one element a line, and parsed once."""
    if not lines:
        return tomlkit.array()
    body = "".join(
        f"    {tomlkit.string(line.text).as_string()}, # {_short(line.comment)}\n"
        if line.comment
        else f"    {tomlkit.string(line.text).as_string()},\n"
        for line in lines
    )
    array = tomlkit.parse(f"a = [\n{body}]\n")["a"]
    assert isinstance(array, Array)
    return array


def _stack(decision: Decision) -> Table:
    table = tomlkit.table()
    for key in ("python", "torch", "torchvision", "torchaudio", "cuda", "toolkit"):
        if key not in decision.stack:
            continue
        _add(table, key, decision.stack[key], decision.stack_comments.get(key))
    return table


def _target(decision: Decision) -> Table:
    table = tomlkit.table()
    target = decision.target_spec
    if target.is_cpu:
        table.add("gpu", "none")
        table["gpu"].comment("a CPU-only build")
        return table
    if target.gpu:
        table.add("gpu", target.gpu)
    if target.compute_capability:
        table.add("compute-capability", target.compute_capability)
    table.add("driver", target.driver or "")
    table["driver"].comment("the driver on the machines this reproduction runs on")
    return table


def _pip(decision: Decision) -> Table:
    table = tomlkit.table()
    for line in decision.left_out:
        table.add(tomlkit.comment(_short(f"left out: {line.text} ({line.comment})")))
    table.add("dependencies", _array(decision.pip))
    if decision.as_of is not None:
        _add(
            table,
            "exclude-newer",
            decision.as_of.day.isoformat(),
            f"resolve as of {decision.as_of.says()}",
        )
    if decision.as_of_packages:
        own = tomlkit.table()
        own.add(tomlkit.comment("what the target's torch requires, as of that torch's day"))
        for name, day in sorted(decision.as_of_packages.items()):
            own.add(name, day.isoformat())
        table.add("exclude-newer-package", own)
    if decision.builds:
        builds = tomlkit.table(is_super_table=True)
        for build in decision.builds:
            sub = tomlkit.table()
            sub.add(tomlkit.comment(_short(build.comment)))
            for key, value in build.values.items():
                if isinstance(value, dict):
                    inline = tomlkit.inline_table()
                    inline.update(value)
                    sub.add(key, inline)
                else:
                    sub.add(key, value)
            builds.add(build.name, sub)
        table.add("build", builds)
    return table


def _conda(decision: Decision) -> Table | None:
    if not decision.conda:
        return None
    table = tomlkit.table()
    table.add(tomlkit.comment("tools the paper took from conda that have no pip form"))
    table.add("channels", ["conda-forge"])
    _add(table, "python", False, "the Python comes from [stack]; conda adds only these tools")
    table.add("dependencies", _array(decision.conda))
    return table


def spec_text(decision: Decision, report: Report) -> str:
    doc = tomlkit.document()
    sources = ", ".join(f for f, _ in report.inputs)
    doc.add(tomlkit.comment(_short(f" Written by `gpuenv import` from: {sources}")))
    doc.add(
        tomlkit.comment(
            _short(f" Reproduction on {report.target} ({report.hardware}): {report.summary}")
        )
    )
    doc.add(tomlkit.comment("The full reproduction report: `gpuenv import ... --json`."))
    doc.add(tomlkit.nl())
    project = tomlkit.table()
    project.add("name", decision.project)
    if decision.project_comment:
        project["name"].comment(_short(decision.project_comment))
    doc.add("project", project)
    doc.add("stack", _stack(decision))
    targets = tomlkit.table(is_super_table=True)
    targets.add(decision.target, _target(decision))
    doc.add("targets", targets)
    doc.add("pip", _pip(decision))
    conda = _conda(decision)
    if conda is not None:
        doc.add("conda", conda)
    return tomlkit.dumps(doc)


def write_spec(text: str, path: Path, kb: KnowledgeBase, *, force: bool) -> None:
    """Validate ``text`` as a spec, then write it to ``path`` atomically."""
    if path.is_dir():
        raise UsageError(f"{path} is a directory", hint="pass -o FILE")
    if path.exists() and not force:
        raise UsageError(f"{path} already exists", hint="pass --force to replace it")
    from gpuenv import _settings

    # Validated (and remembered in the spec cache, so the next `gpuenv plan` of these
    # exact bytes skips validation) before one byte is written.
    parse_spec_text(text, file=str(path), kb=kb, cache_dir=_settings.cache_dir)
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot write: {exc.strerror or exc}", hint="pass -o with a writable path"
        ) from None
