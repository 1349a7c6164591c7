"""Disk use that hard links cannot fool: bytes counted per inode, with ``st_nlink``.

A prefix's files are hard links into uv's and rattler's caches, so removing a prefix
frees only the files no other link keeps. ``tree_usage`` splits a tree's bytes into
what is its own (every link of the inode lies inside it) and what it shares;
``Release`` adds up what removing several trees together frees, and says whether a
cache entry would be left without any link outside the trees already being removed
(then nothing uses it). Sizes are allocated blocks (``st_blocks``), as ``du`` and
``statvfs`` count them. Standard library only.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

Key = tuple[int, int]  # (st_dev, st_ino)


@dataclass(frozen=True)
class Usage:
    """A tree's disk use, in allocated bytes: what is its own and what it shares."""

    unique: int  # bytes that removing the tree frees
    shared: int  # bytes of files the tree shares with others (hard links elsewhere)

    @property
    def total(self) -> int:
        return self.unique + self.shared


def _walk(path: Path) -> list[os.stat_result]:
    """lstat of every entry under ``path`` (``path`` itself included); unreadable ones
    are skipped."""
    out: list[os.stat_result] = []
    try:
        out.append(os.lstat(path))
    except OSError:
        return out
    if not stat.S_ISDIR(out[0].st_mode):
        return out
    for directory, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            try:
                out.append(os.lstat(os.path.join(directory, name)))  # noqa: PTH118 - speed
            except OSError:
                continue
    return out


def _bytes(info: os.stat_result) -> int:
    return info.st_blocks * 512


def tree_usage(path: Path) -> Usage:
    links: dict[Key, list[int]] = {}  # key -> [links seen here, nlink, bytes]
    for info in _walk(path):
        key = (info.st_dev, info.st_ino)
        seen = links.get(key)
        if seen is None:
            nlink = 1 if stat.S_ISDIR(info.st_mode) else info.st_nlink
            links[key] = [1, nlink, _bytes(info)]
        else:
            seen[0] += 1
    unique = sum(size for here, nlink, size in links.values() if here >= nlink)
    shared = sum(size for here, nlink, size in links.values() if here < nlink)
    return Usage(unique, shared)


@dataclass
class Release:
    """What removing a set of trees frees, counted per inode across all of them."""

    _links: dict[Key, list[int]] = field(default_factory=dict)  # key -> [seen, nlink, bytes]

    def add(self, path: Path) -> None:
        for info in _walk(path):
            self._count(info)

    def _count(self, info: os.stat_result) -> None:
        key = (info.st_dev, info.st_ino)
        seen = self._links.get(key)
        if seen is None:
            nlink = 1 if stat.S_ISDIR(info.st_mode) else info.st_nlink
            self._links[key] = [1, nlink, _bytes(info)]
        else:
            seen[0] += 1

    def unused(self, path: Path) -> bool:
        """Whether no link to anything under ``path`` lies outside ``path`` and the trees
        added so far: once they are gone, nothing uses it."""
        local: dict[Key, int] = {}
        infos = _walk(path)
        for info in infos:
            key = (info.st_dev, info.st_ino)
            local[key] = local.get(key, 0) + 1
        for info in infos:
            if stat.S_ISDIR(info.st_mode):
                continue
            key = (info.st_dev, info.st_ino)
            elsewhere = self._links.get(key, [0, 0, 0])[0]
            if local[key] + elsewhere < info.st_nlink:
                return False
        return bool(infos)

    @property
    def freed(self) -> int:
        return sum(size for seen, nlink, size in self._links.values() if seen >= nlink)


def free_bytes(path: Path) -> int | None:
    """The file system's free bytes where ``path`` (or its nearest existing parent) lies,
    as ``statvfs`` counts them (f_bfree: blocks reserved for root included, so a
    release shows in full)."""
    info = _statvfs(path)
    return None if info is None else info.f_bfree * info.f_frsize


def available_bytes(path: Path) -> int | None:
    """Bytes this user may still write where ``path`` lies (f_bavail)."""
    info = _statvfs(path)
    return None if info is None else info.f_bavail * info.f_frsize


def _statvfs(path: Path) -> os.statvfs_result | None:
    """``statvfs`` of ``path``, or of its nearest existing parent (None: unreadable)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return os.statvfs(probe)
    except OSError:
        return None
