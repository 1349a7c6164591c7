"""The install commands of a README's shell code blocks, for a repository with no
environment file: nanoGPT's ``pip install torch numpy transformers ...``, ConvNeXt's
INSTALL.md (``conda create -n convnext python=3.8``, then ``pip install
torch==1.8.0+cu111 ... -f <torch_stable page>`` and ``pip install timm==0.3.2``).

Only fenced blocks (````` ``` ````` or ``~~~``) with no language or a shell's are read;
``$ `` prompts and ``\\`` continuations are handled; ``pip install``, ``conda install``
and ``conda create`` are read as a Dockerfile's ``RUN`` lines are, everything else is
left. Discovery reads these files only when a folder has no environment file at all
(``doc_files``); a README named on the command line is always read.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from pathlib import Path

from gpuenv.importers import requirements
from gpuenv.importers._context import Context
from gpuenv.importers._devfiles import is_tooling
from gpuenv.importers._text import MAX_BYTES, line_not_read, quoted
from gpuenv.importers.conda_env import CONDA_TOOLS, read_install_args
from gpuenv.importers.model import (
    DROPPED,
    PYTHON,
    UNMANAGED,
    UNREADABLE,
    Authority,
    Origin,
    ReadingBuilder,
    system_packages,
)

# Where repositories keep install commands, in the order they are read.
DOC_NAMES = (
    "README.md",
    "INSTALL.md",
    "docs/INSTALL.md",
    "docs/install.md",
    "get_started.md",  # Swin-Transformer, mmdetection's
    "GETTING_STARTED.md",  # detectron2's
    "docs/get_started.md",
    # install scripts: TRELLIS (2024) keeps its environment in setup.sh alone
    "setup.sh",
    "install.sh",
    "scripts/setup.sh",
    "scripts/install.sh",
)
SCRIPT_SUFFIXES = (".sh", ".bash")
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([A-Za-z0-9_+.-]*)")  # indented too: in a list item
_SHELLS = frozenset({"", "bash", "sh", "shell", "console", "zsh", "shell-session", "sh-session"})
_PROMPT = re.compile(r"^\s*(?:\(\S+\)\s*)?[$%>]\s+")
_PIP = re.compile(r"pip(?:3(?:\.\d{1,2})?)?")
_ASKS = re.compile(r"\b(?:pip[0-9.]*|conda|mamba|micromamba)\s+(?:.*\s)?(?:install|create)\b")
# A system package manager's install (openai/whisper's README: sudo apt install ffmpeg)
_SYSTEM = re.compile(r"\b(?:apt-get|apt|yum|dnf|apk|brew)\s+(?:\S+\s+)*?install\b")
_SYSTEM_TOOLS = frozenset({"apt-get", "apt", "yum", "dnf", "apk", "brew"})
_MAX_COMMAND = 8192  # characters of one command, continuations joined


def doc_files(folder: Path) -> list[Path]:
    """The README-like files of ``folder`` that hold at least one install command, read
    whole up to the size any file is read to (``MAX_BYTES``; a 1.8 MB README's install
    block at its end was not seen when only its first MiB was looked at)."""
    found = []
    for name in DOC_NAMES:
        path = _case_insensitive(folder, name)
        if path is None or _size(path) > MAX_BYTES:
            continue
        try:
            with path.open("rb") as handle:
                head = handle.read(MAX_BYTES)
        except OSError:
            continue
        if b"\x00" in head:
            continue  # not text
        text = head.decode("utf-8", errors="replace")
        lines = _lines_of(path.name, text)
        if any(_install_words(tokens) for _, line in lines for tokens in _split(line)):
            found.append(path)
    return found


def oversized(folder: Path) -> list[tuple[Path, int]]:
    """The README-like files of ``folder`` too large to be read, with their size: a
    folder's "no install commands" must not be said of a README never looked at."""
    found = []
    for name in DOC_NAMES:
        path = _case_insensitive(folder, name)
        if path is not None and _size(path) > MAX_BYTES:
            found.append((path, _size(path)))
    return found


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _case_insensitive(folder: Path, name: str) -> Path | None:
    here = folder
    for part in name.split("/"):
        try:
            entries = {p.name.lower(): p for p in here.iterdir()}
        except OSError:
            return None
        match = entries.get(part.lower())
        if match is None:
            return None
        here = match
    return here if here.is_file() and not here.is_symlink() else None


def _lines_of(name: str, text: str) -> list[tuple[int, str]]:
    """The commands of a README's shell blocks, or of a whole shell script."""
    return _shell_lines(text, script=name.lower().endswith(SCRIPT_SUFFIXES))


def _shell_lines(text: str, *, script: bool = False) -> list[tuple[int, str]]:
    """(line number, command) of each command in the shell code blocks (``script``:
    every line of the file is shell)."""
    out: list[tuple[int, str]] = []
    fence: str | None = "script" if script else None
    shell = script
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        match = None if script else _FENCE.match(raw)
        if fence is None:
            if match is not None:
                fence, shell = match.group(1), match.group(2).lower() in _SHELLS
            continue
        if match is not None and match.group(1).startswith(fence[:3]) and not match.group(2):
            fence = None
            pending = None
            continue
        if not shell:
            continue
        line = _PROMPT.sub("", raw, count=1).rstrip()
        if pending is not None:
            start, before = pending
            line = f"{before} {line.strip()}"
        else:
            start = number
        if line.endswith("\\") and len(line) < _MAX_COMMAND:
            pending = (start, line[:-1].rstrip())
            continue
        pending = None
        if line.strip() and not line.lstrip().startswith("#"):
            out.append((start, line.strip()))
    return out


def _split(line: str) -> list[list[str]]:
    try:
        return requirements.shell_commands(line, Origin("README", None, line))
    except Exception:  # noqa: BLE001 - a line gpuenv cannot split is prose, not a command
        return []


def _words(tokens: list[str]) -> list[str]:
    while tokens and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]) or tokens[0] == "sudo"):
        tokens = tokens[1:]
    return tokens


def _install_words(tokens: list[str]) -> tuple[str, list[str]] | None:
    """("pip" | "conda" | "conda-create", the arguments) of an install command."""
    words = _words(tokens)
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    if head.startswith("python") and words[1:3] == ["-m", "pip"]:
        words, head = ["pip", *words[3:]], "pip"
    if _PIP.fullmatch(head):
        words = [head, *requirements.after_global_options(words[1:])]
    if _PIP.fullmatch(head) and words[1:2] == ["install"]:
        return "pip", words[2:]
    if head in CONDA_TOOLS and words[1:2] == ["install"]:
        return "conda", words[2:]
    if head in CONDA_TOOLS and words[1:2] == ["create"]:
        return "conda", words[2:]
    return None


# ``.[notebooks]``, ``./[a,b]``: the project in this folder, with extras
_OWN_EXTRAS = re.compile(r"\./?\[(?P<extras>[^\]]+)\]")


def guide_extras(ctx: Context, folder: Path) -> tuple[frozenset[str], Origin] | None:
    """The extras ``folder``'s install guide (its README-like files, ``DOC_NAMES``)
    installs the project itself with (facebookresearch/sam2's README.md and INSTALL.md:
    ``pip install -e ".[notebooks]"``), normalized, with the first line that names
    them; None where no guide line names an extra of the project."""
    from gpuenv.names import normalize_name

    found: set[str] = set()
    first: Origin | None = None
    for path in doc_files(folder):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:MAX_BYTES]
        except OSError:
            continue
        for number, line in _shell_lines(text):
            if not _ASKS.search(line):
                continue
            for tokens in _split(line):
                install = _install_words(tokens)
                if install is None or install[0] != "pip":
                    continue
                for arg in install[1]:
                    own = _OWN_EXTRAS.fullmatch(arg)
                    if own is None:
                        continue
                    named = {normalize_name(e) for e in own["extras"].split(",") if e.strip()}
                    named = {e for e in named if not is_tooling(e)}  # a contributing `.[dev]`
                    found |= named
                    if first is None and named:
                        first = Origin(ctx.display(path), number, quoted(line))
    return (frozenset(found), first) if found and first is not None else None


class _Script:
    """What an install script's ``cd``, ``git clone`` and ``cp`` lines did, for the pip
    lines after them (TRELLIS: ``git clone https://github.com/NVlabs/nvdiffrast.git
    /tmp/extensions/nvdiffrast``, then ``pip install /tmp/extensions/nvdiffrast``; and
    ``cd /tmp/extensions/amd_smi``, then ``pip install .``, which is not the project)."""

    def __init__(self) -> None:
        self.cwd: str | None = None  # None: the repository, where the script starts
        self.clones: dict[str, str] = {}  # folder -> the git URL cloned into it
        self.copies: dict[str, str] = {}  # folder -> the repository's folder copied there

    def _path(self, word: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd or "", word))  # join keeps a "/..."

    def moved(self, words: list[str]) -> bool:
        """Follow a ``cd``, ``git clone`` or ``cp``; True when ``words`` was one."""
        if words[:1] == ["cd"]:
            where = words[1] if len(words) > 1 else "~"
            # back to where it started ($WORKDIR, -, ~): a guess, the repository
            self.cwd = (
                None if where in (".", "-", "~") or where.startswith("$") else self._path(where)
            )
            return True
        if words[:2] == ["git", "clone"]:
            positional = [w for w in words[2:] if not w.startswith("-")]
            if positional and "://" in positional[0]:
                url = positional[0]
                folder = (
                    positional[1]
                    if len(positional) > 1
                    else posixpath.basename(url.rstrip("/")).removesuffix(".git")
                )
                self.clones[self._path(folder)] = url
            return True
        if words[:1] == ["cp"] and self.cwd is None:  # cp -r extensions/vox2seq /tmp/...
            positional = [w for w in words[1:] if not w.startswith("-")]
            if len(positional) == 2 and not positional[0].startswith(("/", "$", "~")):
                self.copies[self._path(positional[1])] = posixpath.normpath(positional[0])
            return True
        return False

    def _source(self, folder: str) -> str | None:
        """What a folder holds: a clone's git URL (a subfolder's, with #subdirectory=),
        the repository's folder copied there (./extensions/vox2seq), or None."""
        for place, cloned in self.clones.items():
            if folder == place or folder.startswith(place + "/"):
                url = cloned if cloned.startswith("git+") else f"git+{cloned}"
                below = folder[len(place) + 1 :]
                return f"{url}#subdirectory={below}" if below else url
        for place, source in self.copies.items():
            if folder == place or folder.startswith(place + "/"):
                return "./" + posixpath.join(source, folder[len(place) + 1 :]).rstrip("/")
        return None

    def pip_args(self, args: list[str]) -> list[str] | None:
        """``args`` with each cloned folder as its git URL; None where the line installs
        a folder of somewhere the script moved to (not the project, not a clone)."""
        out = []
        for word in args:
            local = word.startswith(("/", ".")) and "://" not in word
            source = self._source(self._path(word)) if local else None
            if source is not None:
                out.append(source)
            elif local and self.cwd is not None:
                return None
            else:
                out.append(word)
        return out


_ROCM = re.compile(r"/rocm\d", re.IGNORECASE)
# An environment made with a named Python: python3.10 -m venv .venv (black-forest-labs/
# flux), virtualenv -p python3.9 env, uv venv --python 3.11
_VENV = re.compile(r"\bpython3\.\d+\s+-m\s+(?:venv|virtualenv)\b|\b(?:virtualenv|uv\s+venv)\b")
_PYTHON_NAME = re.compile(r"(?:.*/)?python(3\.\d{1,2})")


def _venv_python(words: list[str]) -> str | None:
    """The Python an environment-making command names (see ``_VENV``), or None."""
    if len(words) >= 3 and words[1:3] in (["-m", "venv"], ["-m", "virtualenv"]):
        named = _PYTHON_NAME.fullmatch(words[0])
        return named[1] if named else None
    if words[:1] == ["virtualenv"] or words[:2] == ["uv", "venv"]:
        for flag, value in itertools.pairwise(words):
            if flag in ("-p", "--python"):
                named = _PYTHON_NAME.fullmatch(value) or re.fullmatch(r"(3\.\d{1,2})", value)
                return named[1] if named else None
    return None


def _system(line: str) -> bool:
    return _SYSTEM.search(line) is not None


def _system_install(builder: ReadingBuilder, words: list[str], origin: Origin) -> bool:
    """``sudo apt install ffmpeg`` (apt-get, yum, dnf, apk, brew): the packages said as
    the machine's to provide, as a Dockerfile's are. True when ``words`` is one."""
    if words[:1] == ["sudo"]:
        words = words[1:]
    if len(words) < 2 or words[0] not in _SYSTEM_TOOLS or "install" not in words:
        return False
    after = words[words.index("install") + 1 :]
    packages = [w for w in after if not w.startswith("-")]
    if packages:
        builder.note(UNMANAGED, system_packages(packages), origin)
    return True


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    display = ctx.display(path)
    builder = ReadingBuilder(display, fmt, Authority.DEFINITION)
    feeder = requirements.PipLines(ctx, builder, path.parent)
    script = _Script() if path.name.lower().endswith(SCRIPT_SUFFIXES) else None
    for number, line in _lines_of(path.name, text):
        venv = _VENV.search(line)
        if not _ASKS.search(line) and script is None and venv is None and not _system(line):
            continue  # sample output, other commands: prose to gpuenv
        origin = Origin(display, number, line[:200])
        with line_not_read(builder, origin):
            for tokens in requirements.shell_commands(line, origin):
                python = _venv_python(_words(tokens))
                if python is not None:
                    builder.fact(PYTHON, python, origin, "the Python its environment is made with")
                    continue
                if script is not None and script.moved(_words(tokens)):
                    continue
                found = _install_words(tokens)
                if found is None:
                    _system_install(builder, _words(tokens), origin)
                    continue
                kind, args = found
                if kind == "pip":
                    rest = [a for a in args if a not in ("-U", "--upgrade")]
                    if "-r" in rest or "--requirement" in rest:
                        continue  # a file discovery would have found: not in this folder
                    if any(_ROCM.search(a) for a in rest):
                        builder.note(DROPPED, "an install for AMD GPUs (ROCm): not read", origin)
                        continue
                    moved = script.pip_args(rest) if script is not None else rest
                    if moved is None:
                        builder.note(
                            DROPPED,
                            "a folder of somewhere the script moved to (not the project, "
                            "not a clone gpuenv can name): not read",
                            origin,
                        )
                        continue
                    feeder.args(moved, origin)
                else:
                    read_install_args(ctx, builder, args, origin)
    if not builder.asks and not builder.facts:
        # facebookresearch/moco's README links PyTorch's ImageNet example and installs
        # nothing: its import wrote a spec of gpuenv's defaults and said nothing
        what = "install script" if script is not None else "shell code blocks"
        builder.note(
            UNREADABLE,
            f"no pip or conda install command in its {what}: nothing is read from it, and "
            "the spec holds gpuenv's defaults (pass the files the README names instead)",
            Origin(display, None, ""),
        )
    ctx.readings.append(builder.build())
