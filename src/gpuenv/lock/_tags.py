"""The wheel tags a target installs, most preferred first: one list for the resolver
(how uv's candidate files are ranked) and the lock reader (a locked wheel none of whose
tags is in it does not install on the target). Linux targets by glibc level; macOS
(Apple silicon) and Windows targets, which gpuenv locks but never installs here, by
their own platform tags."""

from __future__ import annotations

from packaging.tags import Tag, compatible_tags, cpython_tags, mac_platforms

ARCHES = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}  # the platforms gpuenv locks
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}  # PEP 600
_OLDEST_GLIBC_MINOR = 5  # manylinux1
# Above every glibc there is: a lock edited to say glibc 2.99999999998 must not make a
# list of a hundred billion tags (the reader was killed for memory, or exited 70).
NEWEST_GLIBC_MINOR = 99
# Likewise a Python 3.99999999991 (packaging lists an abi3 tag for every minor below it)
# and a macOS 99999999 (a platform tag for every major down to 11): the reader hung.
NEWEST_PYTHON_MINOR = 99
NEWEST_MACOS_MAJOR = 99


def linux_tags(platform: str, python: tuple[int, int], glibc_minor: int) -> list[Tag]:
    """The tags of CPython ``python`` on ``platform`` (a key of ``ARCHES``) with glibc
    2.``glibc_minor``: every manylinux level up to it (PEP 600 and the legacy aliases),
    then ``linux_<arch>``, then the pure-Python and abi3 tags."""
    arch = ARCHES[platform]
    platforms: list[str] = []
    for minor in range(min(glibc_minor, NEWEST_GLIBC_MINOR), _OLDEST_GLIBC_MINOR - 1, -1):
        platforms.append(f"manylinux_2_{minor}_{arch}")
        if minor in _LEGACY_MANYLINUX:
            platforms.append(f"{_LEGACY_MANYLINUX[minor]}_{arch}")
    platforms.append(f"linux_{arch}")
    cp = f"cp{python[0]}{python[1]}"
    return [
        *cpython_tags(python, abis=[cp], platforms=platforms),
        *compatible_tags(python, cp, platforms),
    ]


# uv's --python-platform of the macOS and Windows targets gpuenv locks
FOREIGN = {"osx-arm64": "aarch64-apple-darwin", "win-64": "x86_64-pc-windows-msvc"}
DEFAULT_MACOS = (11, 0)  # the oldest macOS PyTorch's arm64 wheels have ever needed


def foreign_tags(
    platform: str, python: tuple[int, int], macos: tuple[int, int] | None
) -> list[Tag]:
    """The tags of CPython ``python`` on ``osx-arm64`` (macOS ``macos`` or newer wheels'
    tags: every macosx_X_Y_arm64 up to it, and universal2) or ``win-64``."""
    if platform == "win-64":
        platforms = ["win_amd64"]
    else:
        platforms = list(mac_platforms(macos or DEFAULT_MACOS, "arm64"))
    cp = f"cp{python[0]}{python[1]}"
    return [
        *cpython_tags(python, abis=[cp], platforms=platforms),
        *compatible_tags(python, cp, platforms),
    ]


def macos_of(text: str | None) -> tuple[int, int] | None:
    """``"14.0"`` -> (14, 0); None for anything else."""
    major, _, minor = (text or "").partition(".")
    return (int(major), int(minor or 0)) if major.isdigit() and (minor or "0").isdigit() else None
