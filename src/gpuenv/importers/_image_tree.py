"""Where a folder of a Docker image came from, so that a Dockerfile's ``pip install .``
installs what the image holds there, not what the word says.

Papers' Dockerfiles build third-party CUDA packages from a checkout made in the image:
``RUN git clone https://github.com/NVIDIA/apex && cd apex && pip install ./`` (with
``WORKDIR /opt`` and the ``cd`` in a later ``RUN`` just as often), or from a folder of
the build context (tacotron2: ``ADD apex /apex/``, ``WORKDIR /apex/``, ``RUN pip install
.``). Read as written, each ``.`` was "the project itself" and the package was lost.

``ImageTree`` follows the working directory (``WORKDIR``; ``cd`` within one ``RUN``)
and what filled each folder: a ``COPY``/``ADD`` of the build context (``Copied``, a path
relative to the context) or a ``git clone`` (``Cloned``, with the ref a ``--branch``, a
``git checkout`` or a ``git reset --hard`` chose). ``origin_of`` answers for a path as
pip would read it in the current directory; None where nothing is known (a folder of
the base image, a path with a variable), and the word is then read as before.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass


@dataclass(frozen=True)
class Copied:
    """A folder copied from the build context (``.`` is the context itself)."""

    path: str


@dataclass(frozen=True)
class Cloned:
    """A folder ``git clone`` made; ``ref`` the branch, tag or commit checked out."""

    url: str
    ref: str | None = None

    def requirement(self, subdirectory: str) -> str:
        """The pip requirement that installs the checkout's ``subdirectory``."""
        url = self.url if self.url.startswith("git+") else f"git+{self.url}"
        if self.ref:
            url += f"@{self.ref}"
        if subdirectory != ".":
            url += f"#subdirectory={subdirectory}"
        return url


Source = Copied | Cloned

# git clone's options that take a value as the next word
_CLONE_VALUE_OPTIONS = frozenset(
    {"-b", "--branch", "--depth", "-o", "--origin", "-c", "--config", "--reference",
     "--filter", "-j", "--jobs", "-u", "--upload-pack", "--template", "--separate-git-dir",
     "--shallow-since", "--shallow-exclude"}
)  # fmt: skip


def _join(base: str | None, path: str) -> str | None:
    """``path`` read in ``base`` (an absolute folder of the image); None when either is
    unknown (``~``, a variable left in it)."""
    if "$" in path or path.startswith("~"):
        return None
    if path.startswith("/"):
        return posixpath.normpath(path)
    if base is None:
        return None
    return posixpath.normpath(posixpath.join(base, path))


def _repository_folder(url: str) -> str:
    """The folder ``git clone URL`` makes: the last part of the path, less ``.git``."""
    tail = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return tail[: -len(".git")] if tail.endswith(".git") else tail


def _clone_url(url: str) -> str | None:
    """A URL pip can install from, or None: ``git@host:o/r.git`` is ``ssh://git@host/o/r.git``."""
    if "://" in url:
        return url
    if "@" in url and ":" in url.split("@", 1)[1]:
        user_host, path = url.split(":", 1)
        return f"ssh://{user_host}/{path}"
    return None  # a local path: a clone of a folder already in the image


class ImageTree:
    """The working directory and the known sources of the image's folders, for one stage."""

    def __init__(self) -> None:
        self.workdir: str | None = "/"
        self.cwd: str | None = "/"
        self._sources: dict[str, Source] = {}
        # a file copied to a destination with no ``/``: the destination is the file, or a
        # folder already in the image (``COPY requirements.txt /tmp``, ``COPY conda.yml
        # /home/work_dir`` over a clone in it) the file went into; which, only the image knows
        self._file_or_into: set[str] = set()

    def new_stage(self) -> None:
        """``FROM``: another image, nothing of the last stage's folders."""
        self.workdir = self.cwd = "/"
        self._sources.clear()
        self._file_or_into.clear()

    def copy(self) -> ImageTree:
        """This tree as it is now: what a later ``FROM <this stage>`` starts from."""
        twin = ImageTree()
        twin.workdir = twin.cwd = self.workdir
        twin._sources = dict(self._sources)
        twin._file_or_into = set(self._file_or_into)
        return twin

    def set_workdir(self, path: str) -> None:
        self.workdir = self.cwd = _join(self.workdir, path)

    def begin_run(self) -> None:
        """A ``RUN`` starts in the ``WORKDIR`` (a ``cd`` lasts for its own ``RUN`` only)."""
        self.cwd = self.workdir

    def cd(self, path: str | None) -> None:
        self.cwd = None if path is None or path == "-" else _join(self.cwd, path)

    def _fill(self, folder: str | None, source: Source, *, file_or_into: bool = False) -> None:
        if folder is None:
            return
        self._file_or_into.discard(folder)
        if file_or_into:  # a file beside what the folder holds, if it is one: nothing overlaid
            self._file_or_into.add(folder)
        else:  # what was known below it is now overlaid (COPY . /app after COPY apex /app/apex)
            for known in [k for k in self._sources if k.startswith(folder.rstrip("/") + "/")]:
                del self._sources[known]
                self._file_or_into.discard(known)
        self._sources[folder] = source

    def copied(self, sources: list[str], destination: str, *, folders: list[bool]) -> None:
        """``COPY``/``ADD`` of the context's ``sources`` to ``destination``; ``folders``
        says which sources are folders. A folder's contents become ``destination``
        (several folders merge there: then no one of them is it); a file goes into it
        when it ends with ``/`` (or several are copied, or it is a folder the tree knows),
        else becomes it or goes into a folder the image has there (``/tmp``)."""
        into = destination.endswith(("/", "/.")) or destination == "." or len(sources) > 1
        for source, is_folder in zip(sources, folders, strict=True):
            path = "." if source.strip("/") in ("", ".") else posixpath.normpath(source.lstrip("/"))
            if path.startswith("..") or any(c in path for c in "*?["):
                continue  # outside the context, or a pattern: not one known path
            if is_folder:
                if len(sources) == 1:
                    self._fill(_join(self.workdir, destination), Copied(path))
                continue
            folder = _join(self.workdir, destination)
            # a folder the tree knows (a clone, a folder copied there): the file goes into it
            known = folder in self._sources and folder not in self._file_or_into
            target = (
                posixpath.join(destination, posixpath.basename(path))
                if into or known
                else destination
            )
            self._fill(_join(self.workdir, target), Copied(path), file_or_into=not (into or known))

    def git(self, words: list[str]) -> None:
        """A ``git`` command: a clone fills a folder; a checkout or hard reset picks a ref."""
        args = list(words[1:])
        where = self.cwd
        while len(args) >= 2 and args[0] == "-C":
            where = _join(where, args[1])
            args = args[2:]
        if not args:
            return
        if args[0] == "clone":
            self._clone(args[1:], where)
        elif args[0] in ("checkout", "switch") or args[:2] == ["reset", "--hard"]:
            rest = args[2:] if args[0] == "reset" else args[1:]
            if any(w in ("-b", "-B", "-c", "-C", "--orphan") for w in rest):
                return  # a new branch: the ref is what was checked out before
            refs = [w for w in rest if not w.startswith("-")]
            if "--" in rest:
                refs = [w for w in rest[: rest.index("--")] if not w.startswith("-")]
            if where is not None and len(refs) == 1:
                self._checkout(where, refs[0])

    def _clone(self, args: list[str], where: str | None) -> None:
        positional: list[str] = []
        branch = None
        i = 0
        while i < len(args):
            word = args[i]
            if word in _CLONE_VALUE_OPTIONS and i + 1 < len(args):
                if word in ("-b", "--branch"):
                    branch = args[i + 1]
                i += 2
                continue
            if word.startswith("--branch="):
                branch = word.split("=", 1)[1]
            elif not word.startswith("-"):
                positional.append(word)
            i += 1
        if not positional:
            return
        url = _clone_url(positional[0])
        if url is None:
            return
        folder = positional[1] if len(positional) > 1 else _repository_folder(url)
        self._fill(_join(where, folder), Cloned(url, branch))

    def _checkout(self, folder: str, ref: str) -> None:
        found = self.origin_of(folder, base="/")
        if found is None or not isinstance(found[0], Cloned) or found[1] != ".":
            return
        ref = ref.removeprefix("tags/").removeprefix("origin/")
        self._sources[folder] = Cloned(found[0].url, ref)

    def origin_of(self, path: str, *, base: str | None = None) -> tuple[Source, str] | None:
        """What filled the folder ``path`` names (read in the current directory, or in
        ``base``), with the path below it ("." for the folder itself)."""
        full = _join(self.cwd if base is None else base, path)
        if full is None:
            return None
        inside = [f for f in self._sources if full == f or full.startswith(f.rstrip("/") + "/")]
        for folder in sorted(inside, key=len, reverse=True):
            source, below = self._sources[folder], posixpath.relpath(full, folder)
            if folder not in self._file_or_into or below == ".":
                return source, below
            if isinstance(source, Copied) and below == posixpath.basename(source.path):
                return source, "."  # the file, gone into the folder it was copied to
            # else something else of that folder, which the file did not fill
        return None
