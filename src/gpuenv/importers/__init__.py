"""``gpuenv import``: reproduce a published environment on the hardware you have.

The package is shaped like ``doctor/``: one module per foreign format (each turns its
file into one shared model, ``model.Reading``: what the environment asked for and from
which file and line), then ``merge`` (one environment, which file won each disagreement
and why), ``decide`` (per target, through gpuenv's own planner: ``torch_choice`` and the
companion data), ``report`` (kept / changed / needs_build / unreproducible / unmanaged /
assumptions, ordered by risk) and ``write`` (a commented, validated ``gpuenv.toml``).

``reproduce(request)`` runs all of it and writes nothing; ``write.write_spec`` writes.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from gpuenv.errors import Alternative, ForeignFileError, NoCompatiblePlan
from gpuenv.importers import frameworks
from gpuenv.importers._context import Context
from gpuenv.importers._text import fail
from gpuenv.importers.decide import Decision, TargetRequest, decide
from gpuenv.importers.discover import NOT_LISTED, SUBFOLDER, discover
from gpuenv.importers.era import Dating
from gpuenv.importers.formats import READERS, detect
from gpuenv.importers.merge import Merged, merge
from gpuenv.importers.model import ASKED_AS_MODULE, NAME, Ask, Note, Origin, Reading
from gpuenv.importers.report import ASSUMPTION, Entry, Report
from gpuenv.importers.torch_choice import Planning, TorchBound
from gpuenv.importers.wheels import WheelIndex
from gpuenv.knowledge import KnowledgeBase
from gpuenv.knowledge.foreign import ForeignKnowledge
from gpuenv.names import TRIO

__all__ = [
    "ImportRequest",
    "Reproduction",
    "TargetRequest",
    "WheelIndex",
    "read_inputs",
    "reproduce",
]


@dataclass(frozen=True)
class ImportRequest:
    """One ``gpuenv import``: the files and folders to read, the target to reproduce on, the
    knowledge it decides with, and what a resolve check has fed back."""

    paths: tuple[Path, ...]
    target: TargetRequest
    kb: KnowledgeBase
    knowledge: ForeignKnowledge
    wheels: WheelIndex | None = None  # --check-resolves: the index asked for wheels
    prefer: tuple[Path, ...] = ()  # --prefer: files that win every disagreement
    # A file's last commit time in its git checkout (root, path relative to it), or None.
    recency: Callable[[Path, str], float | None] | None = None
    # Pins built from source rather than moved to the nearest release with a wheel, with
    # why (gpuenv.import_check: the move left the pins unresolvable).
    kept_as_builds: tuple[tuple[str, str], ...] = ()
    # A torch range a requirement needs, which the first choice broke (gpuenv.import_check:
    # the resolve check named it): torch is chosen within it.
    torch_bound: TorchBound | None = None
    # Why a GPU target's torch is chosen among PyPI's own builds, which the lock takes
    # from the default index alone ("the PyTorch index (...) cannot be reached from
    # here"); None: any build.
    pypi_only: str | None = None
    # The written dependencies do not resolve as of the files' day (gpuenv.import_check:
    # uv's reason): no [pip] exclude-newer is written, and the report says why.
    undated: str | None = None
    # What the target's torch requires (gpuenv.import_check: uv's resolution of the family
    # alone): those take torch's day, the rest the files' own ([pip] exclude-newer-package).
    split: tuple[str, ...] | None = None
    # Of those, the ones added because the files' day has only a source archive of them
    # to build (alpaca-lora's ffmpy, which gradio requires): said apart from torch's own.
    split_built: tuple[str, ...] = ()
    # A Python the files do not name on which the written dependencies build less from
    # source (gpuenv.import_check), and why: the planner's newest is not taken.
    python_for_builds: tuple[str, str] | None = None


@dataclass(frozen=True)
class Reproduction:
    """What ``reproduce`` made, nothing written yet: the readings, the one environment
    merged from them, the target's decision, the report and the text of ``gpuenv.toml``."""

    readings: tuple[Reading, ...]
    merged: Merged
    decision: Decision
    report: Report
    spec_text: str


def _read_one(ctx: Context, path: Path, fmt: str | None) -> None:
    display = ctx.display(path)
    text = ctx.text(path)
    kind = fmt or detect(path, text, display)
    READERS[kind](ctx, path, text, kind)


def _root(paths: tuple[Path, ...]) -> Path:
    first = paths[0]
    return first if first.is_dir() else first.parent


def _preferred(prefer: tuple[Path, ...], readings: list[Reading], root: Path) -> list[str]:
    """The display paths ``--prefer`` names; exit 2 when one names no file read."""
    from gpuenv.errors import UsageError

    read = {r.file for r in readings}
    out = []
    for path in prefer:
        candidates = {str(path), path.name}
        with contextlib.suppress(ValueError):
            candidates.add(str(path.absolute().relative_to(root.absolute())))
        found = sorted(read & candidates) or sorted(f for f in read if Path(f).name == str(path))
        if not found:
            raise UsageError(
                f"--prefer {path}: no such file was imported",
                hint=f"the files read: {', '.join(sorted(read))}",
            )
        out.extend(found)
    return out


def _roots(paths: tuple[Path, ...]) -> tuple[Path, ...]:
    """The folders an import may read in: each folder named, each named file's folder."""
    out = []
    for path in paths:
        folder = path if path.is_dir() else path.parent
        try:
            out.append(folder.resolve())
        except (OSError, RuntimeError):
            out.append(folder.absolute())
    return tuple(dict.fromkeys(out))


def _read_found(ctx: Context, path: Path, skipped: list[Entry]) -> None:
    """A file discovery found: one that cannot be read at all is listed as not read
    (naming the problem and its line) and the others are used; a file named on the
    command line is read or refused (exit 2)."""
    readings = len(ctx.readings)
    try:
        _read_one(ctx, path, None)
    except ForeignFileError as exc:
        del ctx.readings[readings:]
        for found in exc.problems:
            where = f"{found.file}:{found.line}" if found.line else found.file
            text = (
                f"{found.message}: {where}"
                if found.message.startswith("not read")
                else f"not read: {where}: {found.message}"
            )
            skipped.append(Entry(ASSUMPTION, None, text, risk=1))


def _folder_name(ctx: Context, folder: Path) -> str:
    """A folder as an error names it: the imported folder itself displays as ".", which
    names nothing to the reader of the error (``gpuenv import scratch/odd/bin`` said
    ".: no environment file found here could be read"), so it is named as given."""
    shown = ctx.display(folder)
    return str(folder) if shown == "." else shown


_BELOW_SHOWN = 8  # files found in subfolders that a "nothing here" error names


def _readme_files(
    ctx: Context,
    folder: Path,
    skipped: list[Entry],
    below: tuple[Path, ...] = (),
    *,
    uncounted: bool = False,
) -> list[Path]:
    """A folder with no environment file: its README's install commands, when it has
    any (nanoGPT, ConvNeXt's INSTALL.md); else exit 2, naming the files found in
    subfolders (``below``) that are not used (``uncounted``: discovery stopped listing
    them, so how many more is not known)."""
    return _readme_docs(ctx, folder, skipped, beside="", below=below, uncounted=uncounted)


def _readme_docs(
    ctx: Context,
    folder: Path,
    skipped: list[Entry],
    *,
    beside: str,
    below: tuple[Path, ...] = (),
    uncounted: bool = False,
) -> list[Path]:
    """The README-like files with install commands, and a note that they are read;
    none (``beside``: what the environment files beside them ask for, "torch alone" or
    "nothing") or exit 2."""
    from gpuenv.importers import readme

    docs = [d for d in readme.doc_files(folder) if ctx.inside(d)]
    if not docs and beside:
        return []
    if not docs:
        large = readme.oversized(folder)
        unread = "".join(f"; {ctx.display(p)}: too large to read ({n} bytes)" for p, n in large)
        skipped_names = {p.relative_to(folder).as_posix().lower() for p, _ in large}
        looked = [n for n in readme.DOC_NAMES if n.lower() not in skipped_names]
        # decision-transformer keeps one conda_env.yml in each of gym/ and atari/: the
        # error said "no environment files found" and named neither
        listed = [p.relative_to(folder).as_posix() for p in below[:_BELOW_SHOWN]]
        more = f" and {len(below) - len(listed)} more" if len(below) > len(listed) else ""
        more = " and more" if uncounted else more  # 60 subfolders said "and 32 more"
        found = f" (found in subfolders, not used: {', '.join(listed)}{more})" if below else ""
        fail(
            _folder_name(ctx, folder),
            None,
            f"no environment files found in this folder{found}, and no install commands in "
            f"{', '.join(looked)}{unread}",
            f"pass the files themselves: gpuenv import {below[0]}"
            if below
            # rosinality/stylegan2-pytorch has none: "pass the files themselves" could not
            # be followed
            else "with no environment file at all, write a requirements.txt of what the "
            "code imports (its readme may name versions) and import that, or start a spec "
            "with gpuenv init",
        )
    shown = ", ".join(ctx.display(d) for d in docs)
    because = (
        f"the environment files here ask for {beside}"
        if beside
        else f"no environment file in {ctx.display(folder)}"
    )
    skipped.append(
        Entry(
            ASSUMPTION,
            None,
            f"{because}: the install commands of "
            + (
                ""
                if all(d.name.lower().endswith(readme.SCRIPT_SUFFIXES) for d in docs)
                else "the shell code blocks in "
            )
            + f"{shown} are read (pip install, conda install/create)",
        )
    )
    return docs


def _readme_beside(ctx: Context, folder: Path, skipped: list[Entry], own: list[Reading]) -> None:
    """What a README adds to environment files found in ``folder`` (``own``, read)."""
    if not any(a.name not in TRIO for r in own for a in r.asks):
        # Files that ask for torch alone (Swin-Transformer's kernel setup.py): the
        # README's install commands say what the project needs, read whole.
        # microsoft/LoRA's setup.py asks for nothing: it was said to ask "for torch alone"
        alone = "torch alone" if any(a.name in TRIO for r in own for a in r.asks) else "nothing"
        for doc in _readme_docs(ctx, folder, skipped, beside=alone):
            if ctx.claim(doc):
                _read_found(ctx, doc, skipped)
        return
    docs = list(_docs_read_aside(ctx, folder))
    _readme_system(ctx, docs)
    if not _asks_torch(own):
        _readme_torch(ctx, skipped, docs)
    elif not _names_python(ctx):
        _readme_python(ctx, skipped, docs)


def _readme_system(ctx: Context, docs: list[tuple[Path, list[Reading]]]) -> None:
    """The system packages a README installs beside environment files (openai/whisper's
    `sudo apt install ffmpeg`, which whisper/audio.py runs): said, as a Dockerfile's apt
    line is; nothing else of the README is kept for it."""
    from gpuenv.importers.model import UNMANAGED

    for _, read in docs:
        notes = tuple(
            n
            for r in read
            for n in r.notes
            if n.kind == UNMANAGED and "system packages" in n.message
        )
        if notes:
            first = read[0]
            ctx.readings.append(Reading(first.file, first.format, first.authority, notes=notes))


def _asks_torch(readings: list[Reading]) -> bool:
    """Some file says which torch: a version, a build or a URL of torch or a companion
    (a setup.py that compiles against torch asks for it, and says nothing of which)."""
    return _says_which(tuple(a for r in readings for a in r.asks))


def _says_which(asks: tuple[Ask, ...]) -> bool:
    return any(a.name in TRIO and (a.specifier or a.build or a.url) for a in asks)


def _names_python(ctx: Context) -> bool:
    """Some file read names a Python exactly (``python=3.8``, not ``>=3.6``)."""
    from gpuenv.importers.model import PYTHON

    return any(f.key == PYTHON and f.value[:1].isdigit() for r in ctx.readings for f in r.facts)


def _docs_read_aside(ctx: Context, folder: Path) -> Iterator[tuple[Path, list[Reading]]]:
    """Each README-like file of ``folder`` this import may read, with what reading it
    gives, none of it kept: the caller keeps the part it uses (a torch install, a
    Python), nothing else of the README."""
    from gpuenv.importers import readme

    for doc in readme.doc_files(folder):
        if not ctx.inside(doc) or not ctx.claim(doc):
            continue
        start = len(ctx.readings)
        with contextlib.suppress(ForeignFileError):
            _read_one(ctx, doc, None)
        read = ctx.readings[start:]
        del ctx.readings[start:]
        yield doc, read


def _readme_python(
    ctx: Context, skipped: list[Entry], docs: list[tuple[Path, list[Reading]]]
) -> None:
    """Environment files that say which torch and name no Python, beside a README whose
    ``conda create`` names one (sczhou/CodeFormer's ``conda create -n codeformer
    python=3.8 -y`` beside requirements.txt's ``torch>=1.7.1``; hpcaitech/Open-Sora's
    ``python=3.10``): that Python is read, nothing else of the README. It was not read
    at all, and the newest Python the torch supports was taken (3.10, 3.12)."""
    from gpuenv.importers.model import PYTHON

    for doc, read in docs:
        facts = tuple(f for r in read for f in r.facts if f.key == PYTHON and f.value[:1].isdigit())
        if not facts:
            continue
        first = read[0]
        ctx.readings.append(Reading(first.file, first.format, first.authority, facts=facts[:1]))
        skipped.append(
            Entry(
                ASSUMPTION,
                None,
                f"the environment files name no Python: the Python of {ctx.display(doc)}'s "
                f"install commands is read ({facts[0].origin.cite()})" + _also_installs(ctx, read),
            )
        )
        return


def _readme_torch(
    ctx: Context, skipped: list[Entry], docs: list[tuple[Path, list[Reading]]]
) -> None:
    """Environment files that name no torch version, beside a README that installs one
    (NeuScraper's requirements.txt and its ``pip install torch==1.9.1+cu111
    torchvision==0.10.1+cu111 ... -f <torch_stable page>``; Deformable-DETR's
    ``conda install pytorch=1.5.1 torchvision=0.6.1``): the README's torch, torchvision
    and torchaudio are read, with the index and build on their lines and the Python its
    ``conda create`` names when no file names one; nothing else of it (the environment
    files say what else is installed). The newest torch was chosen otherwise."""
    from gpuenv.importers.model import INDEX, PRE, PYTHON, TORCH_BUILD

    # a Python the files name exactly (a `python_requires=">=3.6"` range says less than
    # the README's `conda create python=3.7`: GraphGym took 3.11)
    has_python = _names_python(ctx)
    for doc, read in docs:
        asks = tuple(a for r in read for a in r.asks if a.name in TRIO)
        if not _says_which(asks):
            continue  # a bare `pip install torch` says no more than the files
        lines = {a.origin.line for a in asks}
        facts = tuple(
            f
            for r in read
            for f in r.facts
            if (f.key in (INDEX, TORCH_BUILD, PRE) and f.origin.line in lines)
            or (f.key == PYTHON and not has_python)
        )
        first = read[0]
        ctx.readings.append(
            Reading(first.file, first.format, first.authority, asks=asks, facts=facts)
        )
        cited = ", ".join(sorted({a.origin.where() for a in asks}))
        skipped.append(
            Entry(
                ASSUMPTION,
                None,
                f"the environment files name no torch version: the torch install of "
                f"{ctx.display(doc)} is read ({cited}){_also_installs(ctx, read)}",
            )
        )
        return


_OTHERS_SHOWN = 6  # packages a README installs beyond the files, named before "and N more"


def _also_installs(ctx: Context, read: list[Reading]) -> str:
    """ ", nothing else of it" made specific: what the README installs that no environment
    file asks for (Open-Sora's README installs flash-attn and xformers; the note said
    only "nothing else of it", and a hard import of flash_attn failed later)."""
    asked = {a.name for r in ctx.readings for a in r.asks}
    others = sorted({a.name for r in read for a in r.asks if a.name not in asked | set(TRIO)})
    if not others:
        return ", nothing else of it"
    shown = ", ".join(others[:_OTHERS_SHOWN])
    more = f" and {len(others) - _OTHERS_SHOWN} more" if len(others) > _OTHERS_SHOWN else ""
    return (
        f"; nothing else of it, though it also installs {shown}{more}, which no "
        "environment file asks for: add those the code needs"
    )


_AGAIN_SHOWN = 3  # places a sentence said again names before "and N more"


def said_once(entries: list[Entry]) -> tuple[Entry, ...]:
    """The entries, each sentence once: a later entry of the same kind, package and why
    (k2-fsa/icefall's 22 Dockerfiles, one per torch/CUDA pair, install the same system
    packages and name the same find-links pages: the report said each 22 times) is
    named at the first as said again, where."""
    first: dict[tuple[str, str | None, str], int] = {}
    again: dict[int, list[str]] = {}
    kept: list[Entry] = []
    for entry in entries:
        key = (entry.kind, entry.package, entry.why)
        if key in first and entry.origin is not None:
            again.setdefault(first[key], []).append(entry.origin.where())
            continue
        first.setdefault(key, len(kept))
        kept.append(entry)
    for index, where in again.items():
        shown = ", ".join(where[:_AGAIN_SHOWN])
        more = f" and {len(where) - _AGAIN_SHOWN} more" if len(where) > _AGAIN_SHOWN else ""
        entry = kept[index]
        kept[index] = replace(entry, why=f"{entry.why} (said again at {shown}{more})")
    return tuple(kept)


def read_inputs(
    paths: tuple[Path, ...], knowledge: ForeignKnowledge
) -> tuple[list[Reading], list[Entry]]:
    """Every file named (folders searched), read; entries note what discovery skipped."""
    if not paths:
        raise ValueError("no paths")
    root = _root(paths)
    ctx = Context(root=root, knowledge=knowledge, reader=_read_one, roots=_roots(paths))
    skipped: list[Entry] = []
    for path in paths:
        if path.is_dir():
            found = discover(path)
            aside = [(ctx.display(where), why) for where, why in found.skipped]
            if found.project_folder is not None:
                skipped.append(
                    Entry(
                        ASSUMPTION,
                        None,
                        f"{ctx.display(found.project_folder)}: the only folder with environment "
                        "files (none at the top): read as the project's",
                    )
                )
            files = found.files
            if not files:
                below = tuple(p for p, why in found.skipped if why == SUBFOLDER)
                uncounted = any(why == NOT_LISTED for _, why in found.skipped)
                files = _readme_files(ctx, path, skipped, below, uncounted=uncounted)
            before, listed = len(ctx.readings), len(skipped)
            for file in files:
                if ctx.claim(file):
                    _read_found(ctx, file, skipped)
            if found.files:
                _readme_beside(ctx, path, skipped, ctx.readings[before:])
            if len(ctx.readings) == before and len(skipped) > listed:
                # every file found is unreadable: nothing asks for anything, and an
                # environment written from nothing would be invented
                fail(
                    _folder_name(ctx, path),
                    None,
                    "no environment file found here could be read: "
                    + "; ".join(e.why for e in skipped[listed:])[:2000],
                    "fix or pass the files themselves",
                )
            _code_imports(ctx, path)
            # what discovery set aside, but for a file another one read after all
            # (Grounded-Segment-Anything's GroundingDINO/setup.py reads its requirements.txt:
            # it was said to be imported and "not imported: in a subfolder")
            read = {r.file for r in ctx.readings}
            skipped += [
                Entry(ASSUMPTION, None, f"{shown} not imported: {why}")
                for shown, why in aside
                if shown not in read
            ]
        elif ctx.claim(path):
            _read_one(ctx, path, None)
    return [_modules_as_projects(r, knowledge) for r in ctx.readings], skipped


# Bounds of the code scan: enough for a paper's repository, never a whole monorepo.
# The sources read for what the code needs: Python, and C++/CUDA for torch's C++ API
# (THC/THC.h, which torch 1.11 removed).
_CODE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
_CODE_FILES = 3000
_CODE_BYTES = 512 * 1024
_CODE_DEPTH = 6
_TORCH_COMPANION_IMPORT = re.compile(
    rb"^[ \t]*(?:import|from)[ \t]+(torchvision|torchaudio|pkg_resources"
    rb"|torch\.utils\.cpp_extension)\b[^\n]*",
    re.MULTILINE,
)
# What a module the code imports needs installed, where no environment file asks for it:
# (project, specifier). An environment gpuenv makes has no seed packages (as uv's), and a
# conda or virtualenv environment had setuptools: stylegan3's conv2d_gradfix.py (`from
# pkg_resources import parse_version`) failed at import on an H100, whose lock had none.
# pkg_resources left setuptools in 82.0.0 (https://setuptools.pypa.io/en/stable/history.html);
# torch.utils.cpp_extension imports setuptools, and pkg_resources before torch 2.1.
_CODE_NEEDS = {
    "torchvision": ("torchvision", ""),
    "torchaudio": ("torchaudio", ""),
    "pkg_resources": ("setuptools", "<82"),
    "torch.utils.cpp_extension": ("setuptools", "<82"),
}
# Why a bound above is asked: the files never wrote it (it dates nothing).
_CODE_WHY = {
    "pkg_resources": "the code imports pkg_resources, which setuptools 82 removed",
    "torch.utils.cpp_extension": (
        "the code builds with torch.utils.cpp_extension, which imports pkg_resources "
        "(removed in setuptools 82)"
    ),
}


def _code_imports(ctx: Context, folder: Path) -> None:
    """torchvision and torchaudio that the repository's code imports and no environment
    file asks for (segment-anything's utils/transforms.py, moco's main_moco.py: their
    import wrote torchvision = false, "not in the paper's environment", and the code
    failed at its first import), and setuptools where the code imports pkg_resources or
    torch's cpp_extension (``_CODE_NEEDS``). Each is asked at the first line that imports
    it (torchvision and torchaudio with no version: paired with torch). The sources are
    searched for the markers of torch's API changes too (``torch._six``, ``THC/THC.h``),
    so that the report names the changes the code meets, and where; nothing else of the
    code is read."""
    from gpuenv.importers.model import CODE_READ, CODE_USES, Authority, Fact

    asked = {a.name for r in ctx.readings for a in r.asks}
    wanted = {module for module, (project, _) in _CODE_NEEDS.items() if project not in asked}
    markers = {c.marker for c in ctx.knowledge.torch_changes if c.marker}
    found: dict[str, tuple[Origin, str]] = {}
    uses: dict[str, Origin] = {}  # a torch change's marker -> where the code first has it
    seen = 0
    for path, text in _code_files(folder):
        seen += 1
        for marker in markers - uses.keys():
            origin = _marked(text, marker, ctx.display(path))
            if origin is not None:
                uses[marker] = origin
        if path.suffix != ".py":
            continue
        for match in _TORCH_COMPANION_IMPORT.finditer(text):
            module = match.group(1).decode()
            project = _CODE_NEEDS.get(module, ("", ""))[0]
            if module in wanted and project not in found:
                line = text.count(b"\n", 0, match.start()) + 1
                said = match.group(0).decode("utf-8", "replace").strip()[:200]
                found[project] = (Origin(ctx.display(path), line, said), module)
    for project, (origin, module) in sorted(found.items()):
        ask = Ask(project, _CODE_NEEDS[module][1], origin, inferred=_CODE_WHY.get(module))
        ctx.readings.append(Reading(origin.file, "code", Authority.METADATA, asks=(ask,)))
    if seen:
        shown = ctx.display(folder)
        facts = [Fact(CODE_READ, str(seen), Origin(shown, None, ""))]
        facts += [Fact(CODE_USES, marker, origin) for marker, origin in sorted(uses.items())]
        ctx.readings.append(Reading(shown, "code", Authority.METADATA, facts=tuple(facts)))


def _code_files(folder: Path) -> Iterator[tuple[Path, bytes]]:
    """The repository's sources (``_CODE_SUFFIXES``, at most ``_CODE_FILES``, each its
    first ``_CODE_BYTES``), outside the folders discovery skips, in a stable order."""
    from gpuenv.importers.discover import ASIDE, SKIP

    seen = 0
    for here, dirs, files in os.walk(folder):
        depth = len(Path(here).relative_to(folder).parts)
        dirs[:] = sorted(
            d
            for d in dirs
            if d.lower() not in SKIP | ASIDE and not d.startswith(".") and depth < _CODE_DEPTH
        )
        for name in sorted(files):
            if not name.endswith(_CODE_SUFFIXES) or seen >= _CODE_FILES:
                continue
            seen += 1
            path = Path(here) / name
            try:
                if path.is_symlink() or not path.is_file():  # a FIFO named x.py never opens
                    continue
                with path.open("rb") as handle:
                    yield path, handle.read(_CODE_BYTES)
            except OSError:
                continue


def _marked(text: bytes, marker: str, shown: str) -> Origin | None:
    """Where ``text`` (a source file, ``shown``) first contains ``marker``, with its line."""
    at = text.find(marker.encode())
    if at < 0:
        return None
    start, end = text.rfind(b"\n", 0, at) + 1, text.find(b"\n", at)
    said = text[start : end if end >= 0 else None].decode("utf-8", "replace")
    return Origin(shown, text.count(b"\n", 0, at) + 1, said.strip()[:200])


def _inputs(readings: list[Reading]) -> tuple[tuple[str, str], ...]:
    """The files read, each once: a file read as an environment file and for what its
    code imports (maskrcnn-benchmark's setup.py) is named as the former; the folder whose
    code was searched (its facts only) is no input of its own."""
    files = {r.file for r in readings if r.format != "code"}
    shown = (
        (r.file, r.format)
        for r in readings
        if r.format != "code" or (r.asks and r.file not in files)
    )
    return tuple(dict.fromkeys(shown))


def _modules_as_projects(reading: Reading, knowledge: ForeignKnowledge) -> Reading:
    """A module's name asked of pip (``PIL``, ``sklearn`` in facebookresearch/SlowFast's
    install_requires), where the index has no installable project of that name: the
    project that installs the module, with no version (the module's are not its)."""
    asks: list[Ask] = []
    notes = list(reading.notes)
    for ask in reading.asks:
        found = knowledge.modules.get(ask.name)
        if found is None or ask.manager != "pip" or ask.url:
            asks.append(ask)
            continue
        project, why = found
        dropped = f" (its {ask.specifier} left out)" if ask.specifier else ""
        notes.append(
            Note(
                ASKED_AS_MODULE,
                f"{ask.name}: {why}; {project} is asked instead{dropped}",
                ask.origin,
            )
        )
        asks.append(replace(ask, name=project, specifier=""))
    return replace(reading, asks=tuple(asks), notes=tuple(notes))


_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def _project_name(merged: Merged, paths: tuple[Path, ...]) -> tuple[str, str]:
    fact = merged.fact(NAME)
    raw = (
        fact.value
        if fact
        else (paths[0].resolve().name if paths[0].is_dir() else paths[0].resolve().parent.name)
    )
    name = _NAME_CHARS.sub("-", raw).strip("-._")[:64] or "imported"
    if not name[0].isalnum():
        name = f"p{name}"[:64]
    return name, fact.origin.cite() if fact else "the folder's name"


def _target_name(request: TargetRequest, kb: KnowledgeBase) -> str:
    if request.name:
        return request.name
    if request.cpu:
        return "cpu"
    model = kb.find_gpu(request.gpu) if request.gpu else None
    raw = model.name if model else (request.gpu or "gpu")
    return re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-") or "gpu"


def _summary(decision: Decision) -> str:
    torch = next(
        e for e in decision.entries if e.package == "torch" and e.kind in ("kept", "changed")
    )
    python = next(
        (e for e in decision.entries if e.package == "python" and e.kind != ASSUMPTION), None
    )
    # a range or an unpinned torch the files' era resolved is no keep of the paper's torch
    resolved = torch.kind == "kept" and torch.was not in (None, torch.now)
    moved = (
        f"torch {torch.was} → {torch.now}"
        if torch.kind == "changed" or resolved
        else f"torch {torch.now} (kept)"
    )
    py = decision.plan.python
    py_text = (
        f"Python {python.was} → {py}" if python and python.kind == "changed" else f"Python {py}"
    )
    builds = sum(e.kind == "needs_build" for e in decision.entries)
    lost = sum(e.kind == "unreproducible" for e in decision.entries)
    tail = []
    if builds:
        tail.append(f"{builds} to build")
    if lost:
        tail.append(f"{lost} cannot be reproduced")
    return f"{moved}, {py_text}" + (f"; {', '.join(tail)}" if tail else "") + "."


def reproduce(request: ImportRequest) -> Reproduction:
    """Read, merge, decide and report; nothing is written."""
    from gpuenv.importers import write

    request.target.check(request.kb)
    readings, skipped = read_inputs(request.paths, request.knowledge)
    root = _root(request.paths)
    prefer = _preferred(request.prefer, readings, root)
    recency = request.recency
    model = (
        None
        if request.target.cpu or not request.target.gpu
        else request.kb.find_gpu(request.target.gpu)
    )
    aarch64 = model is not None and (model.platform or "").endswith("aarch64")
    merged = merge(
        readings,
        prefer=prefer,
        recency=(lambda file: recency(root, file)) if recency is not None else None,
        machine="aarch64" if aarch64 else "x86_64",
    )
    target = _target_name(request.target, request.kb)
    frameworks.refuse_invented_torch(
        merged,
        request.knowledge,
        request.kb,
        target,
        None if request.target.cpu else request.target.gpu,
    )
    planning = Planning(
        _project_name(merged, request.paths)[0],
        target,
        request.target.target(),
        request.kb,
        pypi_only=request.pypi_only is not None and not request.target.cpu,
    )
    try:
        decision = decide(
            merged,
            planning,
            request.knowledge,
            _project_name(merged, request.paths),
            request.wheels,
            dict(request.kept_as_builds),
            request.torch_bound,
            Dating(request.undated, request.split, request.split_built, request.python_for_builds),
        )
    except NoCompatiblePlan as refusal:
        raise NoCompatiblePlan(
            refusal.message,
            target=target,
            alternatives=[*refusal.alternatives, *_alternatives(merged, planning, request)],
            hint=refusal.hint,
        ) from None
    decision.entries.extend(skipped)
    if planning.pypi_only:
        decision.entries.append(_pypi_only_entry(request.pypi_only or "", decision))
    hardware = decision.plan.hardware.describe()
    report = Report(
        target=target,
        hardware=hardware,
        summary=_summary(decision),
        inputs=_inputs(readings),
        entries=said_once(decision.entries),
        disagreements=tuple(d.to_json() for d in merged.disagreements),
        plan_reasons=decision.plan.reasons,
        exclude_newer=decision.as_of.day.isoformat() if decision.as_of else None,
        exclude_newer_package=tuple(
            (name, day.isoformat()) for name, day in sorted(decision.as_of_packages.items())
        ),
    )
    text = write.spec_text(decision, report)
    return Reproduction(tuple(readings), merged, decision, report, text)


def _alternatives(merged: Merged, planning: Planning, request: ImportRequest) -> list[Alternative]:
    """What would work where nothing fits this target: torch builds of any kind (where
    only PyPI's were planned), and the oldest newer driver some build needs (every
    refusal lists what would work instead)."""
    from gpuenv.knowledge.model import DriverCompat
    from gpuenv.versions import DriverVersion

    def chosen(changed: Planning) -> Decision | None:
        try:
            return decide(merged, changed, request.knowledge, (changed.project, ""), None)
        except NoCompatiblePlan:
            return None

    found: list[Alternative] = []
    if planning.pypi_only:
        other = chosen(replace(planning, pypi_only=False))
        if other is not None:
            found.append(
                Alternative(
                    f"torch builds of any kind: torch {other.plan.torch} ({other.plan.cu_tag}) "
                    "from the PyTorch index, which gpuenv lock must then reach",
                    {"--torch-builds": "any"},
                )
            )
    driver = planning.target_spec.driver
    if driver is None or request.target.cpu:
        return found
    try:
        current = DriverVersion.parse(driver)
    except ValueError:
        return found
    floors = sorted(
        {
            floor
            for release in request.kb.cuda_releases
            if (floor := request.kb.driver_floor(release.version, DriverCompat.STRICT))
            and floor > current
        }
    )
    # The oldest driver floor where something fits: a newer driver only adds builds
    # (strict compatibility), so a bisection asks the planner a handful of times.
    low, high, best = 0, len(floors) - 1, None
    while low <= high:
        middle = (low + high) // 2
        floor = floors[middle]
        other = chosen(
            replace(planning, target_spec=replace(planning.target_spec, driver=str(floor)))
        )
        if other is None:
            low = middle + 1
        else:
            best, high = (floor, other), middle - 1
    if best is not None:
        floor, other = best
        found.append(
            Alternative(
                f"driver {floor} or newer on the machine: torch {other.plan.torch} "
                f"({other.plan.cu_tag}) fits there",
                {"--driver": str(floor)},
            )
        )
    return found


def _pypi_only_entry(why: str, decision: Decision) -> Entry:
    """The assumption of a PyPI-only import: torch is PyPI's own build."""
    from gpuenv.importers.report import LOW

    plan = decision.plan
    return Entry(
        ASSUMPTION,
        "torch",
        f"{why}: torch is chosen among PyPI's own builds ({plan.torch} {plan.cu_tag}), so "
        "gpuenv lock needs no PyTorch index; --torch-builds any finds the nearest build "
        "of any kind",
        risk=LOW,
    )
