"""Who owns which file: every RECORD of the environment's distributions (and of the GPU
stack's distributions anywhere on ``sys.path``) and every conda-meta record, read once.

A path two owners claim with different contents (a CUDA 12 and a CUDA 13 wheel both
writing ``nvidia/cudnn/lib/libcudnn.so.9``, pip writing over conda's files) is a clash;
which owner's bytes are on disk is decided by size, then, for files up to
``HASH_LIMIT``, by sha256. A distribution conda installed (its metadata listed in a
conda-meta record, or ``INSTALLER`` saying conda) is the conda package itself, not a
second owner.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path

from gpuenv.doctor._fsafe import read_bytes, resolved
from gpuenv.doctor.environment import CondaPackage, Dist, Environment
from gpuenv.names import TORCH_IMPORTS

HASH_LIMIT = 32 << 20  # larger files are judged by size alone
STACK = TORCH_IMPORTS
_MAX_RECORD = 16 << 20


def is_stack(name: str) -> bool:
    """The GPU stack's distributions: torch's family and the nvidia-* wheels."""
    return name in STACK or name.startswith("nvidia-")


@dataclass(frozen=True, eq=False)  # one object per record: compared by identity
class Owner:
    """A distribution whose record claims files: a pip ``.dist-info`` or a conda package,
    with the record it was read from."""

    kind: str  # "pip" | "conda"
    name: str
    version: str
    meta: Path  # the dist-info directory or the conda-meta record
    dist: Dist | None = None
    package: CondaPackage | None = None

    @property
    def label(self) -> str:
        return f"{'conda' if self.kind == 'conda' else 'pip'} {self.name} {self.version}"

    def to_json(self) -> dict[str, str]:
        return {"owner": self.label, "record": str(self.meta)}


@dataclass(frozen=True)
class Claim:
    """One owner's claim on a path: the hash and size its record states for the file."""

    owner: Owner
    record_hash: str  # as the record states it: "sha256=<urlsafe base64>" or a hex digest
    record_size: str  # as written ("" when not stated)

    @property
    def digest(self) -> str | None:
        """sha256 as hex, where the record gives one."""
        if not self.record_hash:
            return None
        if "=" not in self.record_hash:
            return self.record_hash  # conda's paths_data: hex already
        return _hex(self.record_hash)

    @property
    def size(self) -> int | None:
        return int(self.record_size) if self.record_size.isdigit() else None


def _hex(record_hash: str) -> str | None:
    algorithm, _, value = record_hash.partition("=")
    if algorithm != "sha256" or not value:
        return None
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    except (ValueError, binascii.Error):
        return None


def _size(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _read(path: str) -> str:
    data = read_bytes(path, _MAX_RECORD)
    return data.decode("utf-8", "replace") if data else ""


def _normalised(base: str, rel: str) -> str:
    if rel.startswith("/"):
        return os.path.normpath(rel)
    return os.path.normpath(base + "/" + rel)


def _resolved(path: Path) -> str:
    return str(resolved(path))


class Records:
    """Every claimed path (absolute, under the resolved site or prefix directory) and
    who claims it. Paths are collected with set operations; a record's hashes and sizes
    are parsed only for paths that need them (claimed twice, or the GPU stack's)."""

    def __init__(self, env: Environment) -> None:
        self.first: dict[str, Owner] = {}  # path -> its first claimant
        self.others: dict[str, list[Owner]] = {}  # path -> later claimants, where any
        self.files_of: dict[Owner, list[str]] = {}  # the GPU stack's pip distributions
        self.conda_owned: set[str] = set()
        self._lines: dict[Owner, tuple[str, list[str]]] = {}  # base, RECORD lines
        self._rows: dict[Owner, dict[str, tuple[str, str]]] = {}
        prefix = _resolved(env.prefix)
        for package in env.conda_packages:
            self._conda(prefix, package)
        own = {d.path for d in env.dists}
        bases: dict[Path, str] = {}
        for dist in env.path_dists:
            if dist.path not in own and not is_stack(dist.name):
                continue
            base = bases.get(dist.site_packages)
            if base is None:
                base = bases[dist.site_packages] = _resolved(dist.site_packages)
            if base + "/" + dist.path.name + "/METADATA" in self.conda_owned:
                continue  # conda's own copy of the metadata: the conda package owns it
            self._dist(base, dist)

    def _claim(self, owner: Owner, paths: list[str]) -> None:
        first = self.first
        # membership per new path: `first.keys() & paths` would copy every key each time
        earlier = {path: first[path] for path in paths if path in first}
        first.update(dict.fromkeys(paths, owner))
        first.update(earlier)  # earlier claimants stay first
        for path in earlier:
            self.others.setdefault(path, []).append(owner)

    def _conda(self, prefix: str, package: CondaPackage) -> None:
        owner = Owner("conda", package.name, package.version, package.meta, package=package)
        base = prefix + "/"
        paths = [
            base + rel
            if "./" not in rel and not rel.startswith((".", "/"))
            else _normalised(prefix, rel)
            for rel in package.files
        ]
        self.conda_owned.update(paths)
        recorded = package.recorded
        self._rows[owner] = (
            {
                path: (
                    (recorded.get(rel) or (None, None))[0] or "",
                    str((recorded.get(rel) or (None, None))[1] or ""),
                )
                for path, rel in zip(paths, package.files, strict=True)
            }
            if recorded
            else {}
        )
        self._claim(owner, paths)

    def _dist(self, base: str, dist: Dist) -> None:
        owner = Owner("pip", dist.name, dist.version, dist.path, dist=dist)
        text = _read(str(dist.path) + "/RECORD")
        lines = text.splitlines()
        prefix = base + "/"
        if '"' in text or "./" in text or "//" in text or "\n." in text or text.startswith("."):
            paths = [p for p in (_path(base, line) for line in lines) if p]
        else:  # the usual RECORD: plain relative paths
            paths = [prefix + line.partition(",")[0] for line in lines if line]
        self._lines[owner] = (base, lines)
        self._claim(owner, paths)
        if is_stack(dist.name):
            self.files_of[owner] = paths

    def row(self, owner: Owner, path: str) -> tuple[str, str]:
        """(hash, size) as ``owner``'s record states them for ``path``."""
        rows = self._rows.get(owner)
        if rows is None:
            base, lines = self._lines.get(owner, ("", []))
            rows = self._rows[owner] = {}
            for line in lines:
                parsed = _parse(base, line)
                if parsed:
                    rows[parsed[0]] = (parsed[1], parsed[2])
        return rows.get(path, ("", ""))

    @property
    def multi(self) -> dict[str, list[tuple[Owner, str, str]]]:
        """Every path claimed more than once, with each claim's hash and size."""
        out = {}
        for path, later in self.others.items():
            owners = [self.first[path], *later]
            out[path] = [(o, *self.row(o, path)) for o in owners]
        return out

    def claims(self, path: str) -> list[Claim]:
        first = self.first.get(path)
        if first is None:
            return []
        return [Claim(o, *self.row(o, path)) for o in [first, *self.others.get(path, [])]]

    def owner_of(self, path: str) -> Claim | None:
        """The claim whose bytes are on disk at ``path`` (or the only claim)."""
        claims = self.claims(path)
        if len(claims) <= 1:
            return claims[0] if claims else None
        return on_disk(path, claims) or claims[-1]


def _parse(base: str, line: str) -> tuple[str, str, str] | None:
    """(absolute path, hash, size) of one RECORD line."""
    if '"' in line:  # a quoted path (with a comma in it): the CSV reader knows how
        import csv

        row = next(csv.reader([line]), [])
        rel, digest, size = [*row, "", "", ""][:3]
    else:
        rel, _, rest = line.partition(",")
        digest, _, size = rest.partition(",")
    if not rel:
        return None
    if "./" in rel or "//" in rel or rel[0] in "./":
        return _normalised(base, rel), digest, size
    return base + "/" + rel, digest, size


def _path(base: str, line: str) -> str | None:
    parsed = _parse(base, line)
    return parsed[0] if parsed else None


def on_disk(path: str, claims: list[Claim]) -> Claim | None:
    """The claim the file matches: by size, then (small files) by sha256."""
    try:
        size = os.stat(path).st_size
    except (OSError, ValueError):
        return None
    fitting = [c for c in claims if c.size is None or c.size == size]
    if len({(c.size, c.digest) for c in fitting}) <= 1:
        return fitting[0] if fitting else None
    if size > HASH_LIMIT:
        return None
    digest = file_sha256(path)
    return next((c for c in fitting if c.digest == digest), None)


def file_sha256(path: str) -> str | None:
    """The file's sha256, or None when it is unreadable or not a regular file (a FIFO
    would hang, /dev/zero would never end): the store's one file-hash helper."""
    from gpuenv._fetch import file_sha256 as sha256_of  # only for the few undecided files

    try:
        return sha256_of(path)
    except (OSError, ValueError):
        return None


def differs(claims: list[Claim]) -> bool:
    """Whether the records describe different bytes: two known digests or sizes that
    differ (claims that state neither, like ``__pycache__`` entries, say nothing)."""
    digests = {c.digest for c in claims if c.digest}
    sizes = {c.size for c in claims if c.size is not None}
    return len(digests) > 1 or len(sizes) > 1
