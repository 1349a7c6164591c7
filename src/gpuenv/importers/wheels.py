"""Which Pythons a pin has wheels for, asked of the package index (``--check-resolves``).

``gpuenv import`` must not write an environment whose pins only resolve as source builds
(torchvision 0.14.1 has no cp311 wheels; scipy 1.7.1 stops at cp39; onnxruntime has
none for a brand-new Python). For each package the merged files ask for, it reads the
index's project page once (PEP 691 JSON, else the PEP 503 HTML page: each file's name,
``Requires-Python`` and yanked flag), and answers "does a release matching this
specifier have a wheel that installs on Python 3.X on this platform".

The JSON page's ``upload-time`` (PEP 700) of each file is kept too: ``published`` answers
"when was this release first uploaded", which dates the files a torch range is read from
(``importers.era``). A malformed or future upload time is no date.

Bounded: at most ``MAX_PROJECTS`` pages, each at most ``MAX_PAGE`` bytes, read eight at a
time with a per-request timeout, all of it under one deadline; the first failure to
reach the index stops further asks (the report then says what was not checked). Pages
are kept in gpuenv's cache for a day (``<cache>/import-index/``), so a second import of
the same repository asks nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

MAX_PROJECTS = 64
MAX_PAGE = 32 * 1024 * 1024
TIMEOUT = 10.0  # seconds per request
DEADLINE = 30.0  # seconds for every page of one import
CACHE_SECONDS = 24 * 3600
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"

Fetch = Callable[[str, float], bytes]  # (url, timeout) -> body; raises OSError/ValueError
_Raw = tuple[str, str | None, bool, str | None]  # file name, requires-python, yanked, uploaded


class Unreachable(Exception):
    """The index could not be read (the reason is the message)."""


class NotOnIndex(Exception):
    """The index has no page for the project (HTTP 404)."""


@dataclass(frozen=True)
class IndexFile:
    """One file of a project's index page: its release, its wheel tags (None for an sdist),
    its ``Requires-Python``, whether it is yanked, and when it was uploaded."""

    version: Version
    tags: frozenset[Tag] | None  # None: an sdist
    requires_python: str | None
    yanked: bool = False
    uploaded: date | None = None  # PEP 700 upload-time (JSON pages only)


def _machine(platform: str) -> str:
    return "aarch64" if platform.endswith(("aarch64", "arm64")) else "x86_64"


def _platform_fits(tag: str, machine: str) -> bool:
    if tag == "any":
        return True
    if not tag.endswith(machine) or tag.startswith("musllinux"):
        return False
    return tag.startswith(("manylinux", "linux"))


def _python_fits(tag: Tag, python: str) -> bool:
    minor = int(python.split(".")[1])
    own = f"cp3{minor}"
    if tag.interpreter == own:
        return tag.abi in ("none", "abi3") or tag.abi.startswith(own)
    if tag.interpreter.startswith("cp3") and tag.abi == "abi3":
        digits = tag.interpreter[3:]
        return digits.isdigit() and int(digits) <= minor
    if tag.abi != "none":
        return False
    return tag.interpreter in ("py3", f"py3{minor}") or (
        tag.interpreter.startswith("py3") and tag.interpreter[3:].isdigit()
        and int(tag.interpreter[3:]) <= minor
    )  # fmt: skip


def installs_on(file: IndexFile, python: str, platform: str) -> bool:
    """A wheel that pip would install on CPython ``python`` on ``platform`` (Linux)."""
    if file.tags is None or file.yanked:
        return False
    if file.requires_python:
        try:
            if not SpecifierSet(file.requires_python).contains(python, prereleases=True):
                return False
        except InvalidSpecifier:
            pass
    machine = _machine(platform)
    return any(_python_fits(t, python) and _platform_fits(t.platform, machine) for t in file.tags)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[_Raw] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        found = dict(attrs)
        href = found.get("href") or ""
        name = unquote(href.split("#", 1)[0].rsplit("/", 1)[-1])
        self.files.append((name, found.get("data-requires-python"), "data-yanked" in found, None))


def parse_page(body: bytes, project: str) -> list[IndexFile]:
    """The files a simple-API project page lists (JSON or HTML); names that are not a
    wheel or sdist of ``project`` are ignored."""
    text = body.decode("utf-8", "replace")
    raw: list[_Raw] = []
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: deep nesting
            return []
        for item in data.get("files", []) if isinstance(data, dict) else []:
            if isinstance(item, dict):
                rp = item.get("requires-python")
                up = item.get("upload-time")
                raw.append(
                    (
                        str(item.get("filename", "")),
                        rp if isinstance(rp, str) else None,
                        bool(item.get("yanked")),
                        up if isinstance(up, str) else None,
                    )
                )
    else:
        parser = _Links()
        with contextlib.suppress(AssertionError):  # html.parser on hostile markup
            parser.feed(text)
        raw = parser.files
    wanted = canonicalize_name(project)
    out = []
    for name, requires, yanked, uploaded in raw:
        found = _file_of(name, requires, yanked, uploaded)
        if found is not None and found[0] == wanted:
            out.append(found[1])
    return out


_UPLOAD_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ][0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?)?")


def upload_day(text: str | None) -> date | None:
    """The UTC day of a PEP 700 ``upload-time`` ("2023-04-13T12:01:02.345Z"); None when it
    is not one, or lies in the future (an index's clock or data gone wrong)."""
    match = _UPLOAD_TIME.fullmatch(text.strip()) if text and len(text) < 64 else None
    if match is None:
        return None
    try:
        day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None
    return day if day <= datetime.now(timezone.utc).date() else None


def _file_of(
    name: str, requires: str | None, yanked: bool, uploaded: str | None = None
) -> tuple[str, IndexFile] | None:
    requires = requires.strip() if requires else None
    day = upload_day(uploaded)
    try:
        if name.endswith(".whl"):
            project, version, _build, tags = parse_wheel_filename(name)
            return project, IndexFile(version, tags, requires, yanked, day)
        if name.endswith((".tar.gz", ".zip")):
            project, version = parse_sdist_filename(name)
            return project, IndexFile(version, None, requires, yanked, day)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion, ValueError):
        return None
    return None


def _default_fetch(url: str, timeout: float) -> bytes:
    from gpuenv.lock.wheelmeta import MetadataUnavailable, fetch

    try:
        return fetch(url, accept=_ACCEPT, timeout=timeout)
    except MetadataUnavailable as exc:
        if "HTTP 404" in str(exc) or "HTTP 410" in str(exc):
            raise NotOnIndex(str(exc)) from None
        raise Unreachable(str(exc)) from None


@dataclass
class WheelIndex:
    """The project pages of one index, read on demand, cached."""

    index: str
    cache_dir: Path | None = None
    fetch: Fetch = _default_fetch
    deadline: float = DEADLINE
    failure: str | None = None  # why the index stopped being asked
    skipped: list[str] = field(default_factory=list)  # projects not asked (over the bounds)
    # Told once, before the first page is asked of the index ("asking <index> ..."): the
    # asks may take up to ``deadline`` seconds, which without a word looked like a hang.
    announce: Callable[[str], None] | None = None
    _pages: dict[str, list[IndexFile] | None] = field(default_factory=dict)
    _started: float | None = None

    def _cache_file(self, project: str) -> Path | None:
        if self.cache_dir is None:
            return None
        # "2": the first format wrote hyphenated names into wheel names, which do not
        # parse back (every wheel of pytorch-lightning was lost): never read those.
        # "3": entries carry the upload day (a page cached without it is a miss).
        key = hashlib.sha256(f"3\n{self.index}\n{project}".encode()).hexdigest()[:32]
        return self.cache_dir / "import-index" / f"{key}.json"

    def _cached(self, project: str) -> list[IndexFile] | None:
        path = self._cache_file(project)
        if path is None:
            return None
        try:
            if time.time() - path.stat().st_mtime > CACHE_SECONDS or path.stat().st_size > MAX_PAGE:
                return None
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, list):
            return None
        out = []
        for item in data:
            if isinstance(item, list) and len(item) == 4:
                rp, up = (v if isinstance(v, str) else None for v in (item[1], item[3]))
                found = _file_of(str(item[0]), rp, bool(item[2]), up)
                if found is not None:
                    out.append(found[1])
        return out

    def _remember(self, project: str, names: list[_Raw]) -> None:
        path = self._cache_file(project)
        if path is None:
            return
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(names), encoding="utf-8")
            tmp.replace(path)

    def _read(self, project: str) -> list[IndexFile] | None:
        cached = self._cached(project)
        if cached is not None or self.failure is not None:
            return cached
        assert self._started is not None
        left = self.deadline - (time.monotonic() - self._started)
        body = self._ask(project, left) if left > 0 else None
        if body is None or len(body) > MAX_PAGE:
            if self.failure is None:
                self.skipped.append(project)
            return None
        files = parse_page(body, project)
        self._remember(project, [_name_of(project, f) for f in files])
        return files

    def _ask(self, project: str, left: float) -> bytes | None:
        """The page's body (empty when the index has no such project); None on failure."""
        url = f"{self.index.rstrip('/')}/{project}/"
        announce, self.announce = self.announce, None  # once (a page from the cache: never)
        if announce is not None:
            announce(f"asking {self.index} which Pythons the pins have wheels for")
        try:
            return self.fetch(url, min(TIMEOUT, left))
        except NotOnIndex:
            return b""
        except (Unreachable, OSError, ValueError) as exc:
            self.failure = self.failure or str(exc) or type(exc).__name__
            return None

    def prefetch(self, projects: Iterable[str]) -> None:
        """Read the pages of ``projects`` (at most ``MAX_PROJECTS``), eight at a time."""
        if self._started is None:
            self._started = time.monotonic()
        todo: list[str] = []
        for raw in projects:
            name = str(canonicalize_name(raw))
            if name in self._pages or name in todo:
                continue
            if sum(f is not None for f in self._pages.values()) + len(todo) >= MAX_PROJECTS:
                self.skipped.append(name)
                self._pages[name] = None
                continue
            todo.append(name)
        if not todo:
            return
        with ThreadPoolExecutor(max_workers=min(8, len(todo))) as pool:
            for project, files in zip(todo, pool.map(self._read, todo), strict=True):
                self._pages[project] = files

    def files(self, project: str) -> list[IndexFile] | None:
        """The files of ``project``; [] when the index has none, None when not known."""
        name = str(canonicalize_name(project))
        if name not in self._pages:
            self.prefetch([name])
        return self._pages.get(name)


def _name_of(project: str, file: IndexFile) -> _Raw:
    """A file name that parses back to ``file`` (for the cache), with its facts. The name
    is escaped as wheel names are (PEP 427: runs of ``-_.`` become ``_``): a hyphen in it
    would split the wheel name wrongly, and the file would be lost on reading."""
    project = re.sub(r"[-_.]+", "_", project)
    day = file.uploaded.isoformat() if file.uploaded else None
    if file.tags is None:
        return f"{project}-{file.version}.tar.gz", file.requires_python, file.yanked, day
    tags = sorted(file.tags, key=str)
    interp = ".".join(sorted({t.interpreter for t in tags}))
    abi = ".".join(sorted({t.abi for t in tags}))
    plat = ".".join(sorted({t.platform for t in tags}))
    name = f"{project}-{file.version}-{interp}-{abi}-{plat}.whl"
    return name, file.requires_python, file.yanked, day


@dataclass(frozen=True)
class Verdict:
    """What the index says about one requirement on one Python."""

    fits: bool  # a matching release has a wheel for it
    known: bool  # the index was read (False: nothing can be said)
    sdist: bool = False  # a matching release has an sdist (it can be built)
    wheels: bool = True  # a matching release has a wheel for some Python or platform


def _matching(files: list[IndexFile], specifier: str) -> list[IndexFile]:
    try:
        spec = SpecifierSet(specifier)
    except InvalidSpecifier:
        return files
    exact = re.fullmatch(r"===?\s*(\S+)", specifier.strip())
    if exact and not exact.group(1).endswith(".*"):
        try:
            pinned = Version(exact.group(1))
            return [f for f in files if Version(f.version.public) == Version(pinned.public)]
        except InvalidVersion:
            return []
    return [f for f in files if spec.contains(f.version, prereleases=f.version.is_prerelease)]


def verdict(index: WheelIndex, project: str, specifier: str, python: str, platform: str) -> Verdict:
    files = index.files(project)
    if not files:  # not read, or not on this index: nothing to say
        return Verdict(True, False)
    matching = _matching(files, specifier)
    if not matching:
        return Verdict(True, False)  # another index serves it, or the resolver will say
    fits = any(installs_on(f, python, platform) for f in matching)
    return Verdict(
        fits,
        True,
        sdist=any(f.tags is None for f in matching),
        wheels=any(f.tags is not None for f in matching),
    )


def nearest_with_wheel(
    index: WheelIndex, project: str, pinned: Version, python: str, platform: str
) -> Version | None:
    """The oldest release after ``pinned`` with a wheel for ``python`` (the newest one
    before it when no later release has one)."""
    files = index.files(project) or []
    good = sorted(
        {
            Version(f.version.public)
            for f in files
            if not f.version.is_prerelease and installs_on(f, python, platform)
        }
    )
    later = [v for v in good if v > pinned]
    if later:
        return later[0]
    earlier = [v for v in good if v < pinned]
    return earlier[-1] if earlier else None


def published(index: WheelIndex, project: str, version: Version) -> date | None:
    """The day ``project`` ``version`` was first uploaded to the index (its earliest file's
    PEP 700 upload time); None when the index does not say."""
    wanted = Version(version.public)
    days = [
        f.uploaded
        for f in index.files(project) or []
        if f.uploaded is not None and Version(f.version.public) == wanted
    ]
    return min(days) if days else None
