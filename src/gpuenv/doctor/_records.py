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
import csv
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuenv.doctor.environment import CondaPackage, Dist, Environment

HASH_LIMIT = 32 << 20  # larger files are judged by size alone
STACK = ("torch", "torchvision", "torchaudio", "triton")
_MAX_RECORD = 16 << 20


def is_stack(name: str) -> bool:
    """The GPU stack's distributions: torch's family and the nvidia-* wheels."""
    return name in STACK or name.startswith("nvidia-")


@dataclass(frozen=True, eq=False)  # one object per record: compared by identity
class Owner:
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


def _record_rows(path: Path) -> Iterator[tuple[str, str, str]]:
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            text = fh.read(_MAX_RECORD)
    except OSError:
        return
    for line in text.splitlines():
        if '"' in line:  # a quoted path (with a comma in it): the CSV reader knows how
            row = next(csv.reader([line]), [])
            if len(row) >= 3:
                yield row[0], row[1], row[2]
            continue
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[0]:
            yield parts[0], parts[1], parts[2]


def _join(base: str, rel: str) -> str:
    if rel.startswith("/"):
        return os.path.normpath(rel)
    if "./" in rel or "//" in rel or rel.startswith("."):
        return os.path.normpath(base + "/" + rel)
    return base + "/" + rel


def _resolved(path: Path) -> str:
    try:
        return str(path.resolve())
    except OSError:
        return str(path)


class Records:
    """Every claimed path (absolute, under the resolved site or prefix directory) and
    its claims; ``files_of`` the claims of the GPU stack's pip distributions."""

    def __init__(self, env: Environment) -> None:
        # path -> (owner, hash, size) for a path claimed once; lists for the rest
        self.single: dict[str, tuple[Owner, str, str]] = {}
        self.multi: dict[str, list[tuple[Owner, str, str]]] = {}
        self.files_of: dict[Owner, list[str]] = {}
        self.conda_owned: set[str] = set()
        self.owners: list[Owner] = []
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

    def _add_all(self, owner: Owner, rows: list[tuple[str, str, str]]) -> None:
        single, multi = self.single, self.multi
        for row in rows:
            path = row[0]
            entry = (owner, row[1], row[2])
            earlier = single.pop(path, None)
            if earlier is not None:
                multi[path] = [earlier, entry]
            elif path in multi:
                multi[path].append(entry)
            else:
                single[path] = entry

    def _conda(self, prefix: str, package: CondaPackage) -> None:
        owner = Owner("conda", package.name, package.version, package.meta, package=package)
        self.owners.append(owner)
        recorded = package.recorded
        rows = []
        for rel in package.files:
            path = _join(prefix, rel)
            digest, size = recorded.get(rel, (None, None)) if recorded else (None, None)
            rows.append((path, digest or "", "" if size is None else str(size)))
        self.conda_owned.update(r[0] for r in rows)
        self._add_all(owner, rows)

    def _dist(self, base: str, dist: Dist) -> None:
        owner = Owner("pip", dist.name, dist.version, dist.path, dist=dist)
        self.owners.append(owner)
        rows = [
            (_join(base, rel), digest, size)
            for rel, digest, size in _record_rows(dist.path / "RECORD")
        ]
        self._add_all(owner, rows)
        if is_stack(dist.name):
            self.files_of[owner] = [r[0] for r in rows]

    def claims(self, path: str) -> list[Claim]:
        single = self.single.get(path)
        rows = [single] if single is not None else self.multi.get(path, [])
        return [Claim(*row) for row in rows]

    def owner_of(self, path: str) -> Claim | None:
        """The claim whose bytes are on disk at ``path`` (or the only claim)."""
        claims = self.claims(path)
        if len(claims) <= 1:
            return claims[0] if claims else None
        return on_disk(path, claims) or claims[-1]


def on_disk(path: str, claims: list[Claim]) -> Claim | None:
    """The claim the file matches: by size, then (small files) by sha256."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    fitting = [c for c in claims if c.size is None or c.size == size]
    if len({(c.size, c.digest) for c in fitting}) <= 1:
        return fitting[0] if fitting else None
    if size > HASH_LIMIT:
        return None
    digest = file_sha256(path)
    return next((c for c in fitting if c.digest == digest), None)


def file_sha256(path: str) -> str | None:
    sha = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                sha.update(block)
    except OSError:
        return None
    return sha.hexdigest()


def differs(claims: list[Claim]) -> bool:
    """Whether the records describe different bytes: two known digests or sizes that
    differ (claims that state neither, like ``__pycache__`` entries, say nothing)."""
    digests = {c.digest for c in claims if c.digest}
    sizes = {c.size for c in claims if c.size is not None}
    return len(digests) > 1 or len(sizes) > 1
