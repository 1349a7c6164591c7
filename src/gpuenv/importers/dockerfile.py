"""Dockerfiles: the ``FROM`` image (``ARG`` defaults substituted, stage names followed
to the final stage's base) and the ``pip install`` / ``conda install`` commands of
``RUN`` lines (shell form split at ``&&``, ``||``, ``;`` and ``|``; exec form as JSON;
BuildKit's ``--mount=``/``--network=``/``--security=`` flags before the command skipped;
a ``bash -c`` script and ``conda run -n ENV`` read as the commands they run).

A Dockerfile with no ``FROM`` is not one (exit 2). ``RUN`` heredocs, commands that use
unset variables, and ``apt-get install`` lines are reported, not read. A ``pip install
-r FILE`` reads FILE when it is beside the Dockerfile or at the root of what is imported.
A path pip installs is read in the image (``_image_tree``): a clone's repository, a
folder of the build context, or the project itself.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpuenv._redact import redact_url
from gpuenv.importers import images, requirements
from gpuenv.importers._context import Context
from gpuenv.importers._image_tree import Cloned, Copied, ImageTree
from gpuenv.importers._text import OUTSIDE, fail, line_not_read, quoted
from gpuenv.importers.conda_env import CONDA_TOOLS, read_install_args
from gpuenv.importers.local_paths import folder_named, read_local_path
from gpuenv.importers.model import (
    INCLUDED,
    PYTHON,
    UNMANAGED,
    UNREADABLE,
    Ask,
    Authority,
    Origin,
    ReadingBuilder,
    system_packages,
)

_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s*(.*)$", re.DOTALL)
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_PIP = ("pip", "pip3", "pip3.8", "pip3.9", "pip3.10", "pip3.11", "pip3.12")


def instructions(text: str, display: str) -> list[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with continuations joined and comments dropped."""
    lines = text.splitlines()
    escape = "\\"
    for line in lines[:5]:
        directive = re.match(r"^\s*#\s*escape\s*=\s*(\S)\s*$", line)
        if directive:
            escape = directive.group(1)
    out: list[tuple[int, str, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(lines, 1):
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if pending and raw.lstrip().startswith("#"):
            continue  # comment lines inside a continued instruction
        if not pending:
            start = number
        if raw.rstrip().endswith(escape):
            pending.append(raw.rstrip()[:-1])
            continue
        pending.append(raw)
        _append(out, start, " ".join(pending), display)
        pending = []
    if pending:
        _append(out, start, " ".join(pending), display)
    return out


def _append(out: list[tuple[int, str, str]], line: int, text: str, display: str) -> None:
    match = _INSTRUCTION.match(text)
    if match is None:  # listed as not read by ``read``
        out.append((line, "", text.strip()[:60]))
        return
    out.append((line, match.group(1).upper(), match.group(2).strip()))


@dataclass
class _State:
    """What reading one Dockerfile has gathered so far: the ARG and ENV values, each stage's
    base image, the final base image, and what the RUN lines said of torch and Python."""

    ctx: Context
    path: Path
    builder: ReadingBuilder
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # stage name -> its base image, and the FROM that named it (a later FROM of the stage
    # cites that line: the image is read there)
    stages: dict[str, tuple[str, Origin]] = field(default_factory=dict)
    base: tuple[str, Origin] | None = None
    torch_by_run: bool = False
    # torch asked by pip without a version or upgrade flag: pip keeps an installed torch
    # these allow ("Requirement already satisfied"), so the base image's stays
    torch_if_missing: list[str] = field(default_factory=list)
    # a python3.X the RUN lines install with apt (over the OS's python3) or invoke by
    # name (python3.9 get-pip.py, python3.9 -m pip, pip3.9): (version, origin)
    apt_python: tuple[str, Origin] | None = None
    run_python: tuple[str, Origin] | None = None
    # the working directory and what filled the image's folders (COPY, ADD, git clone)
    tree: ImageTree = field(default_factory=ImageTree)
    stage: str | None = None  # the name of the stage being read (FROM ... AS name)
    stage_trees: dict[str, ImageTree] = field(default_factory=dict)  # each ended stage's

    def expand(self, text: str) -> tuple[str, bool]:
        """``text`` with known ARG/ENV values substituted; False when one is unknown."""
        known = {**self.args, **self.env}
        complete = True

        def value(match: re.Match[str]) -> str:
            nonlocal complete
            name = match.group(1) or match.group(3)
            if name in known:
                return known[name]
            if match.group(2) is not None:
                return match.group(2)
            complete = False
            return match.group(0)

        return _VARIABLE.sub(value, text), complete


def _assignments(text: str) -> dict[str, str]:
    """``A=1 B="two"`` or the legacy ``A 1`` form of ARG and ENV."""
    if "=" not in text.split(" ", 1)[0]:
        name, _, value = text.partition(" ")
        return {name: value.strip().strip("\"'")}
    found = {}
    for part in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\'[^\']*\'|\S*)', text):
        found[part[0]] = part[1].strip("\"'")
    return found


def _from(state: _State, line: int, args: str) -> None:
    words = [w for w in args.split() if not w.startswith("--")]
    if not words:
        fail(state.builder.file, line, "FROM names no image")
    image, complete = state.expand(words[0])
    if not complete:
        state.builder.note(
            UNREADABLE,
            f"FROM {words[0]}: a variable with no default",
            Origin(state.builder.file, line, f"FROM {args}"),
        )
    if state.stage is not None:  # the stage that ends here, for a FROM naming it later
        state.stage_trees[state.stage] = state.tree.copy()
    earlier = state.stage_trees.get(image)
    origin = Origin(state.builder.file, line, f"FROM {args}")
    while image in state.stages:  # FROM an earlier stage: its base
        image, origin = state.stages[image]
    state.stage = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
    if state.stage is not None:
        state.stages[state.stage] = (image, origin)
    state.base = (image, origin)
    if earlier is not None:  # its folders and WORKDIR, as the builder starts from them
        state.tree = earlier.copy()
    else:
        state.tree.new_stage()


def _command_words(tokens: list[str]) -> list[str]:
    """Drop leading ``VAR=value`` assignments, ``sudo``, ``env`` and ``conda run -n ENV``."""
    while tokens:
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]) or tokens[0] in _PREFIXES:
            tokens = tokens[1:]
        elif tokens[0].rsplit("/", 1)[-1] in CONDA_TOOLS and tokens[1:2] == ["run"]:
            tokens = _after_options(tokens[2:], _CONDA_RUN_VALUE_OPTIONS)
        else:
            break
    return tokens


_PREFIXES = ("sudo", "env", "exec")
# ``conda run``'s options that take a value as the next word
_CONDA_RUN_VALUE_OPTIONS = frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})


def _after_options(tokens: list[str], value_options: frozenset[str]) -> list[str]:
    """``tokens`` from the first word that is not an option (or an option's value)."""
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        i += 2 if tokens[i] in value_options else 1
    return tokens[i:]


def _pip_tokens(tokens: list[str]) -> list[str] | None:
    """The arguments after ``pip install`` (``python -m pip install`` too), or None."""
    words = _command_words(tokens)
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    if head.startswith("python") and words[1:3] == ["-m", "pip"]:
        words = ["pip", *words[3:]]
        head = "pip"
    if head.startswith("python") and words[1:3] == ["-m", "uv"]:
        words, head = words[2:], "uv"
    if head == "uv" and words[1:3] == ["pip", "install"]:
        # ultralytics/yolov5's images: `uv pip install --system -r requirements.txt
        # onnxruntime ...`, whose packages were dropped without a word
        return _without_uv_options(words[3:])
    if head in _PIP:
        words = [head, *requirements.after_global_options(words[1:])]
    if head in _PIP and len(words) >= 2 and words[1] == "install":
        return words[2:]
    return None


# uv pip install's own options (not pip's): those that take a value, and flags
_UV_VALUES = frozenset(
    {
        "-p", "--python", "--index-strategy", "--resolution", "--prerelease", "--link-mode",
        "--exclude-newer", "--python-platform", "--torch-backend", "--keyring-provider",
        "--cache-dir", "--config-file", "--color",
    }
)  # fmt: skip
_UV_FLAGS = frozenset(
    {
        "--system", "--break-system-packages", "--no-cache", "-n", "--native-tls",
        "--compile-bytecode", "--strict", "--reinstall", "--no-config", "--offline", "-q",
        "--quiet", "-v", "--verbose", "--no-progress",
    }
)  # fmt: skip


def _without_uv_options(words: list[str]) -> list[str]:
    """``uv pip install``'s arguments as pip's: uv's own options left out."""
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name = word.split("=", 1)[0]
        if name in _UV_VALUES:
            i += 1 if "=" in word else 2
            continue
        if word not in _UV_FLAGS:
            kept.append(word)
        i += 1
    return kept


def _conda_tokens(tokens: list[str]) -> list[str] | None:
    words = _command_words(tokens)
    # ``conda create -n env python=3.6.7 ...`` names packages as ``install`` does
    # (maskrcnn-benchmark's Dockerfile names its Python there)
    tool = words[0].rsplit("/", 1)[-1] if words else ""
    if len(words) >= 2 and tool in CONDA_TOOLS and words[1] in ("install", "create"):
        return words[2:]
    return None


def _pip_install(state: _State, tokens: list[str], origin: Origin) -> None:
    tokens = _in_image(state, tokens, origin)
    for i, token in enumerate(tokens):
        if token in ("-r", "--requirement") and i + 1 < len(tokens):
            _requirements_file(state, tokens[i + 1], origin)
    rest: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token in ("-r", "--requirement"):
            skip = True
        else:
            rest.append(token)
    before = len(state.builder.asks)
    requirements.PipLines(state.ctx, state.builder, state.path.parent).args(rest, origin)
    torch = [a for a in state.builder.asks[before:] if a.name == "torch"]
    if (
        torch
        and not _REPLACES.intersection(tokens)
        and not any(a.url or _EXACT.fullmatch(a.specifier.strip()) for a in torch)
    ):
        state.torch_if_missing += [a.specifier for a in torch]
    elif torch:
        state.torch_by_run = True


_EXACT = re.compile(r"===?\s*([^*,;\s]+)")
# pip options that install over an installed torch, whatever it is
_REPLACES = frozenset({"-U", "--upgrade", "--force-reinstall", "-I", "--ignore-installed"})


def _keeps(image_asks: list[Ask], specifiers: list[str]) -> bool:
    """Whether the image's torch satisfies every versionless ``pip install torch`` after
    it (a range it is outside of makes pip replace it)."""
    exact = [_EXACT.fullmatch(a.specifier.strip()) for a in image_asks if a.name == "torch"]
    if not specifiers or not exact or exact[0] is None:
        return True
    try:
        version = Version(exact[0].group(1))
        return all(SpecifierSet(s).contains(version, prereleases=True) for s in specifiers)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _requirements_file(state: _State, name: str, origin: Origin) -> None:
    """``pip install -r FILE``: read FILE when it is here: the context's file a COPY put
    there, else FILE beside the Dockerfile or at the root (the build context unknown)."""
    found = state.tree.origin_of(name)
    if found is not None and isinstance(found[0], Cloned):
        state.builder.note(
            UNREADABLE,
            f"pip install -r {name}: a file of {redact_url(found[0].url)}, cloned in the "
            "image, not of this repository",
            origin,
        )
        return
    if found is not None and isinstance(found[0], Copied):
        name = posixpath.normpath(posixpath.join(found[0].path, found[1]))
    for base in (state.path.parent, state.ctx.root):
        candidate = Path(os.path.normpath(base / name))
        if not state.ctx.inside(candidate):
            state.builder.note(UNREADABLE, f"{OUTSIDE}: pip install -r {name}", origin)
            return
        if candidate.is_file():
            state.ctx.include(candidate, "requirements", by=origin.file, line=origin.line)
            state.builder.note(INCLUDED, f"reads {state.ctx.display(candidate)}", origin)
            return
    state.builder.note(UNREADABLE, f"pip install -r {name}: that file is not here", origin)


def _conda_install(state: _State, tokens: list[str], origin: Origin) -> None:
    read_install_args(state.ctx, state.builder, tokens, origin)
    if any(a.name == "torch" and a.origin is origin for a in state.builder.asks):
        state.torch_by_run = True


# BuildKit's flags of RUN (``--mount=type=cache,target=/root/.cache/pip``,
# ``--network=none``, ``--security=insecure``): how the build runs the command, not its
# words (Time-Series-Library's Dockerfile: the whole instruction was read as a command
# named "--mount=..." and vanished with no note)
_RUN_FLAGS = re.compile(r"^(?:--[a-z][a-z-]*=\S*\s+)+")


def _run(state: _State, line: int, args: str) -> None:
    origin = Origin(state.builder.file, line, quoted(f"RUN {args}"))
    args = _RUN_FLAGS.sub("", args)
    if "<<" in args and re.search(r"<<-?\s*['\"]?[A-Za-z]", args):
        state.builder.note(UNREADABLE, "RUN with a heredoc: not read", origin)
        return
    commands = None
    if args.startswith("["):
        try:
            commands = [json.loads(args)]
        except RecursionError:  # nested past the reader
            fail(state.builder.file, line, "RUN [...]: not a JSON array")
        except ValueError:  # Docker's rule: not JSON, so the shell form (RUN [ -d x ] || ...)
            commands = None
    if commands is None:
        commands = requirements.shell_commands(args, origin)
    state.tree.begin_run()
    outside: list[str | None] = []  # the directory before each open ( subshell
    for given in commands:
        if not isinstance(given, list) or not all(isinstance(t, str) for t in given):
            fail(state.builder.file, line, "RUN [...]: not an array of strings")
        tokens: list[str] = given
        opens = bool(tokens) and tokens[0].startswith("(")
        closes = bool(tokens) and tokens[-1].endswith(")")
        if opens:
            outside.append(state.tree.cwd)
            tokens = [tokens[0][1:], *tokens[1:]] if tokens[0] != "(" else tokens[1:]
        if closes and tokens:
            tokens = [*tokens[:-1], tokens[-1][:-1]] if tokens[-1] != ")" else tokens[:-1]
        if tokens:
            _command(state, tokens, origin)
        if closes and outside:
            # (cd apex && pip install .) && pip install -e .: the cd ended with the subshell
            state.tree.cwd = outside.pop()


def _command(state: _State, tokens: list[str], origin: Origin) -> None:
    script = _shell_script(_command_words(tokens))
    if script is not None:  # bash -c "...": its commands, in a shell of its own
        cwd = state.tree.cwd
        for inner in requirements.shell_commands(script, origin):
            _command(state, inner, origin)
        state.tree.cwd = cwd
        return
    expanded = []
    for token in tokens:
        value, complete = state.expand(token)
        if not complete:
            if _command_words(tokens)[:1] not in _SAYS_ONLY:  # echo $p: nothing installed
                state.builder.note(UNREADABLE, f"{token}: a variable gpuenv cannot know", origin)
            return
        expanded.append(value)
    _python_named(state, _command_words(expanded), origin)
    if _moves(state, _command_words(expanded), origin):
        return
    pip = _pip_tokens(expanded)
    if pip is not None:
        _pip_install(state, pip, origin)
        return
    conda = _conda_tokens(expanded)
    if conda is not None:
        _conda_install(state, conda, origin)
        return
    words = _command_words(expanded)
    if (
        len(words) >= 2
        and words[0] in ("apt-get", "apt", "yum", "dnf", "apk")
        and "install" in words
    ):
        packages = [w for w in words[2:] if not w.startswith("-") and w != "install"]
        state.builder.note(UNMANAGED, system_packages(packages), origin)


_SHELLS = ("sh", "bash", "dash", "zsh")
# Commands that install nothing and move nowhere, whose unknown variables are no loss.
_SAYS_ONLY = [[word] for word in ("echo", "printf", "[", "test", "true", "false", ":")]


def _shell_script(words: list[str]) -> str | None:
    """The script of ``bash -c "..."`` (``/bin/bash -lc``, ``sh -c``), or None: old
    conda images' Dockerfiles run each step so (``RUN /bin/bash -c ". activate habitat;
    cd habitat-sim; python setup.py install --headless"``)."""
    if len(words) < 3 or words[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for i, word in enumerate(words[1:-1], 1):
        if not word.startswith("-"):
            return None  # a script file's name: ``bash install.sh``
        if "c" in word[1:] and not word.startswith("--"):
            return words[i + 1]
    return None


_APT_PYTHON = re.compile(r"python(3\.\d{1,2})(?:-(?:dev|venv|distutils|full|minimal|tk))?(?:=\S*)?")
_RUN_PYTHON = re.compile(r"(?:python|pip)(3\.\d{1,2})")


def _python_named(state: _State, words: list[str], origin: Origin) -> None:
    """A ``python3.X`` installed by apt or run by name: the Python the image's pip
    installs into (FastChat: ``FROM nvidia/cuda:...-ubuntu20.04``, whose python3 is 3.8,
    then ``apt-get install python3.9`` and ``python3.9 get-pip.py``)."""
    if not words:
        return
    head = _RUN_PYTHON.fullmatch(words[0].rsplit("/", 1)[-1])
    if head is not None:
        state.run_python = (head.group(1), origin)
        return
    if words[0] in ("apt-get", "apt") and "install" in words:
        found = [m.group(1) for w in words if (m := _APT_PYTHON.fullmatch(w))]
        if found:
            newest = max(found, key=lambda v: int(v.split(".")[1]))
            state.apt_python = (newest, origin)


def _own_python(state: _State, image: ReadingBuilder) -> None:
    """The RUN lines' python3.X replaces what the base image implies: one run by name
    replaces any image's Python; one only installed by apt replaces the OS's python3."""
    chosen = state.run_python or state.apt_python
    if chosen is None:
        return
    version, origin = chosen
    os_only = state.run_python is None
    image.facts = [
        f
        for f in image.facts
        if f.key != PYTHON or (os_only and not (f.note or "").endswith(_OS_PYTHON))
    ]
    if any(f.key == PYTHON for f in image.facts):
        return
    state.builder.fact(PYTHON, version, origin)


_OS_PYTHON = "the OS's python3"


def _instruction(state: _State, line: int, name: str, args: str) -> None:
    if name == "":
        fail(state.builder.file, line, f"not a Dockerfile instruction: {args!r}")
    # A value names earlier ones as the builder expands them (ARG from=nvidia/cuda:
    # ${CUDA_VERSION}-devel, then FROM ${from}); one it cannot know stays as written.
    values = {k: state.expand(v)[0] for k, v in _assignments(args).items()}
    if name == "ARG" and state.base is None:
        state.args.update(values)
    elif name == "ARG":
        state.args.update({k: v for k, v in values.items() if v})
    elif name == "ENV":
        state.env.update(values)
    elif name == "FROM":
        _from(state, line, args)
    elif name == "RUN":
        _run(state, line, args)
    elif name == "WORKDIR":
        path, complete = state.expand(args.strip().strip("\"'"))
        state.tree.set_workdir(path if complete else "$")
    elif name in ("COPY", "ADD"):
        _copy(state, args)


def _copy(state: _State, args: str) -> None:
    """``COPY``/``ADD`` from the build context (not ``--from`` another stage or image,
    nor ``ADD``'s URLs): which folders and files of the context land where."""
    if args.startswith("["):
        try:
            words = json.loads(args)
        except (ValueError, RecursionError):
            return
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            return
    else:
        words = args.split()
    if any(w.startswith("--from") for w in words):
        return
    words = [w for w in words if not w.startswith("--")]
    expanded = [state.expand(w) for w in words]
    if len(words) < 2 or not all(complete for _, complete in expanded):
        return
    *sources, destination = [w for w, _ in expanded]
    if any("://" in s for s in sources):
        return
    state.tree.copied(sources, destination, folders=[_context_folder(state, s) for s in sources])


def _context_folder(state: _State, source: str) -> bool:
    """Whether ``source`` of the build context is a folder: where it is here, what it is;
    where it is not (a submodule not fetched, a folder the build's user adds), a name
    with no file suffix is taken for one."""
    for base in (state.ctx.root, state.path.parent):
        here = base / source.lstrip("/")
        if _exists(here) and state.ctx.inside(here):
            return here.is_dir()
    return source.strip("/") in ("", ".") or "." not in posixpath.basename(source.rstrip("/"))


def _exists(path: Path) -> bool:
    """``path.exists()``, False for a name no file system takes (a NUL byte, too long)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _moves(state: _State, words: list[str], origin: Origin) -> bool:
    """A command that changes where the RUN is or what a folder holds (``cd``, ``git``),
    or ``python setup.py install|develop`` of a folder the image's tree knows (read as
    pip's install of it); False for any other command."""
    if not words:
        return False
    head = words[0]
    if head in ("cd", "pushd"):
        state.tree.cd(words[1] if len(words) > 1 and not words[1].startswith("-") else None)
        return True
    if head == "git":
        state.tree.git(words)
        return True
    setup = _setup_py(words)
    if setup is not None:
        folder, develop = setup
        if state.tree.origin_of(folder) is None:
            return False  # a folder of the base image: not what pip would name
        _pip_install(state, ["-e", folder] if develop else [folder], origin)
        return True
    return False


def _setup_py(words: list[str]) -> tuple[str, bool] | None:
    """(folder, develop) of ``python setup.py install|develop``, its commands chained as
    setup.py takes them (detectron2's and maskrcnn-benchmark's ``setup.py build develop``,
    ``setup.py build_ext install``); None for another command (``build_ext --inplace``)."""
    if len(words) < 3 or not words[0].rsplit("/", 1)[-1].startswith("python"):
        return None
    if words[1].rsplit("/", 1)[-1] != "setup.py":
        return None
    commands = [w for w in words[2:] if not w.startswith("-")]
    if "develop" not in commands and "install" not in commands:
        return None
    return posixpath.dirname(words[1]) or ".", "develop" in commands


_EXTRAS = re.compile(r"\[[^\]]*\]$")


def _in_image(state: _State, tokens: list[str], origin: Origin) -> list[str]:
    """``pip install``'s words with each path the image's tree knows replaced by what it
    holds: a clone's git URL; the project itself (``.``) for the context's root; a
    folder of the context recorded here as the repository's folder (and dropped)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        word = tokens[i]
        if word in ("-e", "--editable") and i + 1 < len(tokens):
            replaced = _image_path(state, tokens[i + 1], origin, editable=True)
            if replaced is None or replaced == "." or replaced.startswith(".["):
                out += [word, tokens[i + 1] if replaced is None else replaced]
            elif replaced:
                out.append(replaced)  # a clone: installed from git, not editable
            i += 2
            continue
        if word.startswith("-"):
            taken = requirements.skip_option(word, tokens, i)
            out += tokens[i : i + taken]
            i += taken
            continue
        replaced = _image_path(state, word, origin, editable=False)
        if replaced is None:
            out.append(word)
        elif replaced:
            out.append(replaced)
        i += 1
    return out


def _path_word(word: str, *, editable: bool) -> tuple[str, str] | None:
    """(path, extras) of a pip word that names a folder (``local_paths.folder_named``);
    None for a package's name, a URL, an archive."""
    path = folder_named(word, editable=editable)
    if path is None:
        return None
    extras_match = _EXTRAS.search(path)
    extras = extras_match.group(0) if extras_match else ""
    return path[: len(path) - len(extras)], extras


def _image_path(state: _State, word: str, origin: Origin, *, editable: bool) -> str | None:
    """What ``word`` installs from the image (see ``_in_image``): None when it is not a
    path the tree knows, "" when it was recorded here."""
    named = _path_word(word, editable=editable)
    if named is None:
        return None
    path, extras = named
    found = state.tree.origin_of(path)
    if found is None:
        return None
    source, below = found
    if isinstance(source, Cloned):
        return source.requirement(below)
    relative = posixpath.normpath(posixpath.join(source.path, below))
    if relative == ".":
        return f".{extras}"
    if not _exists(state.ctx.root / relative) and _exists(state.path.parent / relative):
        relative = os.path.relpath(state.path.parent / relative, state.ctx.root)
    read_local_path(
        state.ctx, state.builder, f"./{relative}{extras}", origin, editable=editable, context=True
    )
    return ""


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    parsed = instructions(text, display)
    if not any(name == "FROM" for _, name, _ in parsed):
        fail(display, 1, "no FROM instruction: not a Dockerfile")
    state = _State(ctx, path, ReadingBuilder(display, "dockerfile", Authority.DEFINITION))
    for line, name, args in parsed:
        with line_not_read(state.builder, Origin(display, line, quoted(f"{name} {args}"))):
            _instruction(state, line, name, args)
    if state.base is None:
        fail(display, 1, "no FROM instruction gpuenv can read: not a Dockerfile it can use")
    image, origin = state.base
    image_builder = ReadingBuilder(display, "dockerfile", Authority.DEFINITION)
    images.image_facts(image, origin, image_builder, ctx.knowledge)
    _own_python(state, image_builder)
    if state.torch_by_run or not _keeps(image_builder.asks, state.torch_if_missing):
        image_builder.asks = [a for a in image_builder.asks if a.name != "torch"]
    state.builder.asks[:0] = image_builder.asks
    state.builder.facts[:0] = image_builder.facts
    state.builder.notes[:0] = image_builder.notes
    ctx.readings.append(state.builder.build())
