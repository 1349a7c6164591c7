"""The offline archive attacked: every hostile or damaged variant of a valid archive is
refused with ArchiveError (exit 2) or, for one that cannot fit, InstallError (exit 5);
nothing is written outside the store's artifact cache, and nothing unchecked is left in it.

The valid archive is packed by the real code from a lock whose artifacts are small
files served as ``file://`` URLs (no network)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.errors import ArchiveError, DownloadError, HashMismatch, InstallError
from gpuenv.lock.model import (
    CondaPackage,
    Lock,
    LockedHardware,
    LockedTarget,
    PipPackage,
    StackSummary,
)
from gpuenv.pack import PackRequest, prepare, unpack, write
from gpuenv.pack._tar import MTIME
from gpuenv.pack.manifest import MANIFEST
from gpuenv.store import Store


def _file(root: Path, name: str, data: bytes) -> tuple[str, str, str]:
    path = root / name
    path.write_bytes(data)
    return path.as_uri(), hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest()


def make_lock(root: Path) -> Lock:
    root.mkdir(parents=True, exist_ok=True)
    url_a, sha_a, _ = _file(root, "alpha-1.0-py3-none-any.whl", b"alpha wheel bytes" * 100)
    url_b, sha_b, _ = _file(root, "beta-2.0-py3-none-any.whl", b"beta wheel bytes" * 300)
    url_t, sha_t, _ = _file(root, "torch-2.4.1+cpu-cp311-cp311-linux_x86_64.whl", b"torch" * 80)
    (root / "linux-64").mkdir(exist_ok=True)  # a conda archive lies in its subdir
    url_c, sha_c, md5_c = _file(
        root / "linux-64", "tool-1.0-h0_0.tar.bz2", b"conda archive bytes" * 50
    )
    target = LockedTarget(
        name="cpu",
        input_hash="sha256:" + "1" * 64,
        platform="linux-64",
        hardware=LockedHardware(True, None, (), None, None, "declared"),
        stack=StackSummary("3.11", None, "cpu", "2.4.1", None, None, None, None, (), "file:///x"),
        virtual_packages={"__glibc": "2.28"},
        conda=(
            CondaPackage(
                "tool", "1.0", "h0_0", 0, root.as_uri() + "/", "linux-64", url_c, sha_c, md5_c
            ),
        ),
        pip=(
            PipPackage("alpha", "1.0", url_a, sha_a),
            PipPackage("beta", "2.0", url_b, sha_b),
            PipPackage("torch", "2.4.1+cpu", url_t, sha_t),  # the stack's torch is locked
        ),
    )
    return Lock(spec_hash="sha256:" + "2" * 64, targets={"cpu": target})


@pytest.fixture
def packed(tmp_path: Path) -> tuple[Path, Lock]:
    lock = make_lock(tmp_path / "origin")
    spec = tmp_path / "gpuenv.toml"
    spec.write_text('[project]\nname = "attack"\n')
    request = PackRequest(lock, ("cpu",), "attack", spec, Store(tmp_path / "pack-store"))
    archive = tmp_path / "good.tar"
    plan = prepare(request)
    assert write(plan, archive) == plan.size
    return archive, lock


def _members(archive: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(archive) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]


def _rewrite(
    path: Path, members: list[tuple[tarfile.TarInfo, bytes]], fmt: int = tarfile.PAX_FORMAT
) -> Path:
    with tarfile.open(path, "w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _special(name: str, kind: bytes, **fields: object) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mtime = MTIME
    for key, value in fields.items():
        setattr(info, key, value)
    return info, b""


def _regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


Variant = Callable[[list[tuple[tarfile.TarInfo, bytes]]], list[tuple[tarfile.TarInfo, bytes]]]


def _artifact_index(members: list[tuple[tarfile.TarInfo, bytes]]) -> int:
    return next(i for i, (m, _) in enumerate(members) if "/artifacts/" in m.name)


def _flip(
    members: list[tuple[tarfile.TarInfo, bytes]], index: int
) -> list[tuple[tarfile.TarInfo, bytes]]:
    info, data = members[index]
    changed = bytearray(data)
    changed[len(changed) // 2] ^= 0x20
    return [*members[:index], (info, bytes(changed)), *members[index + 1 :]]


def _manifest_edit(edit: Callable[[dict[str, object]], None]) -> Variant:
    def variant(
        members: list[tuple[tarfile.TarInfo, bytes]],
    ) -> list[tuple[tarfile.TarInfo, bytes]]:
        info, data = members[0]
        raw = json.loads(data)
        edit(raw)
        new = json.dumps(raw).encode()
        return [_regular(info.name, new), *members[1:]]

    return variant


def _first_artifact(raw: dict[str, object]) -> dict[str, object]:
    artifacts = raw["artifacts"]
    assert isinstance(artifacts, list)
    first: dict[str, object] = artifacts[0]
    return first


ARTIFACT = "gpuenv-pack/artifacts/"
VARIANTS: dict[str, Variant] = {
    "path traversal ../": lambda m: [*m, _regular("gpuenv-pack/../../escaped.txt", b"x")],
    "absolute path": lambda m: [*m, _regular("/tmp/gpuenv-escaped.txt", b"x")],
    "empty path part": lambda m: [*m, _regular("gpuenv-pack//x", b"x")],
    "symlink": lambda m: [*m, _special(ARTIFACT + "link", tarfile.SYMTYPE, linkname="/etc/passwd")],
    "hard link": lambda m: [
        *m,
        _special(ARTIFACT + "hard", tarfile.LNKTYPE, linkname=m[1][0].name),
    ],
    "character device": lambda m: [
        *m,
        _special("gpuenv-pack/dev", tarfile.CHRTYPE, devmajor=1, devminor=3),
    ],
    "block device": lambda m: [*m, _special("gpuenv-pack/blk", tarfile.BLKTYPE, devmajor=8)],
    "fifo": lambda m: [*m, _special("gpuenv-pack/fifo", tarfile.FIFOTYPE)],
    "directory": lambda m: [*m, _special("gpuenv-pack/dir", tarfile.DIRTYPE)],
    "duplicate member": lambda m: [*m, m[_artifact_index(m)]],
    "duplicate manifest": lambda m: [m[0], *m],
    "member not in the manifest": lambda m: [*m, _regular(ARTIFACT + "extra/evil.whl", b"evil")],
    "manifest not first": lambda m: [*m[1:], m[0]],
    "missing artifact": lambda m: [x for i, x in enumerate(m) if i != _artifact_index(m)],
    "missing lock": lambda m: [x for x in m if not x[0].name.endswith("gpuenv.lock")],
    "one altered byte in an artifact": lambda m: _flip(m, _artifact_index(m)),
    "one altered byte in the lock": lambda m: _flip(m, 1),
    "member larger than the manifest says": lambda m: [
        *m[:-1],
        _regular(m[-1][0].name, m[-1][1] + b"more"),
    ],
    "manifest: file name with ../": _manifest_edit(
        lambda r: _first_artifact(r).update(filename="../../x.whl")
    ),
    "manifest: another sha256": _manifest_edit(
        lambda r: _first_artifact(r).update(sha256="0" * 64)
    ),
    "manifest: other target hash": _manifest_edit(
        lambda r: r.update(targets={"cpu": "sha256:" + "9" * 64})
    ),
    "manifest: unknown format version": _manifest_edit(lambda r: r.update({"format-version": 99})),
    "manifest: a URL the lock does not name": _manifest_edit(
        lambda r: _first_artifact(r).update(urls=["file:///elsewhere/alpha-1.0-py3-none-any.whl"])
    ),
    "manifest: not JSON": lambda m: [_regular(MANIFEST, b"{not json"), *m[1:]],
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_hostile_or_damaged_archive_is_refused_and_leaves_nothing_behind(
    packed: tuple[Path, Lock], tmp_path: Path, name: str
) -> None:
    archive, _lock = packed
    hostile = _rewrite(tmp_path / "hostile.tar", VARIANTS[name](_members(archive)))
    store = Store(tmp_path / "air-store")
    with pytest.raises(ArchiveError) as refused:
        unpack(hostile, store)
    assert "Traceback" not in refused.value.message
    assert not Path("/tmp/gpuenv-escaped.txt").exists()
    assert (
        not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()
    )
    cache = store.cache("artifacts")
    leftovers = [
        p
        for p in cache.rglob("*")
        if p.is_file() and p.name.startswith(".") and not p.name.endswith(".ok")
        if ".locks" not in p.parts  # the check stamps and the fetch locks stay
    ]
    assert leftovers == [], "no temporary file is left in the cache"
    for path in (p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.parent.name, (
            "only checked files"
        )


def test_the_valid_archive_unpacks_and_maps_each_locked_url_to_a_checked_file(
    packed: tuple[Path, Lock], tmp_path: Path
) -> None:
    archive, lock = packed
    unpacked = unpack(archive, Store(tmp_path / "air-store"))
    target = lock.targets["cpu"]
    urls = {p.url for p in target.pip} | {c.url for c in target.conda}
    assert set(unpacked.files) == urls
    for package in target.pip:
        assert (
            hashlib.sha256(unpacked.files[package.url].read_bytes()).hexdigest() == package.sha256
        )
    assert unpacked.lock.targets["cpu"].content_hash == target.content_hash
    assert unpacked.spec_text == '[project]\nname = "attack"\n'


@pytest.mark.parametrize(
    "damage",
    ["truncated in an artifact", "truncated at a header", "gzip-compressed", "not a tar", "empty"],
)
def test_a_truncated_or_foreign_file_is_refused(
    packed: tuple[Path, Lock], tmp_path: Path, damage: str
) -> None:
    archive, _ = packed
    data = archive.read_bytes()
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if "/artifacts/" in m.name)
    cut = {
        "truncated in an artifact": data[: member.offset_data + member.size // 2],
        "truncated at a header": data[: member.offset],
        "gzip-compressed": gzip.compress(data, mtime=0),
        "not a tar": b"\x7fELF" + b"\0" * 4096,
        "empty": b"",
    }[damage]
    bad = tmp_path / "bad.tar"
    bad.write_bytes(cut)
    with pytest.raises(ArchiveError):
        unpack(bad, Store(tmp_path / "air-store"))


def test_a_pipe_is_refused_at_once_not_waited_on_nor_called_altered(tmp_path: Path) -> None:
    # `install --from <(curl ...)` hands gpuenv a pipe, and a FIFO with no writer blocks
    # open(2) for ever. A writer that shows up after 5 s keeps a regression from hanging.
    fifo = tmp_path / "archive.tar"
    os.mkfifo(fifo)

    def late_writer() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet (ENXIO)
                time.sleep(0.1)
                continue
            with os.fdopen(fd, "wb") as handle:
                handle.write(b"junk")
            return

    writer = threading.Thread(target=late_writer, daemon=True)
    writer.start()
    started = time.monotonic()
    with pytest.raises(ArchiveError) as refused:
        unpack(fifo, Store(tmp_path / "air-store"))
    assert time.monotonic() - started < 4
    message = str(refused.value)
    assert "a FIFO (named pipe), not a file" in message and "altered" not in message
    writer.join(timeout=10)


def test_an_archive_that_cannot_fit_is_refused_before_anything_is_extracted(
    packed: tuple[Path, Lock], tmp_path: Path
) -> None:
    archive, _ = packed
    members = _members(archive)
    raw = json.loads(members[0][1])
    raw["artifacts"][0]["size"] = 1 << 60  # a "huge member": an exabyte
    hostile = _rewrite(
        tmp_path / "huge.tar", [_regular(MANIFEST, json.dumps(raw).encode()), *members[1:]]
    )
    store = Store(tmp_path / "air-store")
    with pytest.raises(InstallError, match="TiB free under"):
        unpack(hostile, store)
    assert not any(p.is_file() for p in store.cache("artifacts").rglob("*"))


def test_pax_headers_cannot_smuggle_a_path(packed: tuple[Path, Lock], tmp_path: Path) -> None:
    archive, _ = packed
    members = _members(archive)
    info, data = _regular("gpuenv-pack/harmless", b"x")
    info.pax_headers = {"path": "../../smuggled"}
    hostile = _rewrite(tmp_path / "pax.tar", [*members, (info, data)])
    with pytest.raises(ArchiveError, match="unsafe path"):
        unpack(hostile, Store(tmp_path / "air-store"))


def test_a_cached_artifact_damaged_on_disk_is_fetched_again(
    packed: tuple[Path, Lock], tmp_path: Path
) -> None:
    _archive, lock = packed
    store = Store(tmp_path / "pack-store")  # the one the fixture packed through
    cached = next(p for p in store.cache("artifacts").rglob("*.whl"))
    cached.write_bytes(b"rotted")
    request = PackRequest(lock, ("cpu",), "attack", None, store)
    plan = prepare(request)
    assert plan.downloaded == 1
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == cached.parent.name


def test_pack_refuses_a_download_that_does_not_match_the_lock(tmp_path: Path) -> None:
    from dataclasses import replace

    lock = make_lock(tmp_path / "origin")
    target = lock.targets["cpu"]
    bad = replace(target, pip=(replace(target.pip[0], sha256="0" * 64), target.pip[1]))
    request = PackRequest(
        replace(lock, targets={"cpu": bad}), ("cpu",), "attack", None, Store(tmp_path / "s")
    )
    with pytest.raises(HashMismatch, match="locked 0000"):
        prepare(request)
    assert not [p for p in (tmp_path / "s" / "cache").rglob("*") if p.is_file()]


def test_pack_names_the_url_it_cannot_reach(tmp_path: Path) -> None:
    from dataclasses import replace

    lock = make_lock(tmp_path / "origin")
    target = lock.targets["cpu"]
    gone = replace(target.pip[0], url="http://127.0.0.1:9/alpha-1.0-py3-none-any.whl")
    request = PackRequest(
        replace(lock, targets={"cpu": replace(target, pip=(gone,))}),
        ("cpu",),
        "attack",
        None,
        Store(tmp_path / "s"),
    )
    with pytest.raises(DownloadError, match=r"http://127\.0\.0\.1:9/alpha"):
        prepare(request)


def test_an_altered_archive_is_refused_even_when_its_artifacts_are_already_cached(
    packed: tuple[Path, Lock], tmp_path: Path
) -> None:
    archive, _ = packed
    store = Store(tmp_path / "air-store")
    unpack(archive, store)  # every artifact is now in the cache
    members = _members(archive)
    altered = _rewrite(tmp_path / "altered.tar", _flip(members, _artifact_index(members)))
    with pytest.raises(ArchiveError, match="altered or damaged"):
        unpack(altered, store)


CHILD = """
import sys, hashlib
from pathlib import Path
from dataclasses import replace
from tests.pack.test_archive import make_lock
from gpuenv.lock.model import PipPackage
from gpuenv.pack import PackRequest, prepare, write
from gpuenv.store import Store
root = Path(sys.argv[1])
lock = make_lock(root / "origin")
big = root / "origin" / "big-1.0-py3-none-any.whl"
with open(big, "wb") as out:
    for i in range(256):
        out.write(hashlib.sha256(str(i).encode()).digest() * 8192)  # 64 MiB
sha = hashlib.sha256(big.read_bytes()).hexdigest()
target = lock.targets["cpu"]
target = replace(target, pip=(*target.pip, PipPackage("big", "1.0", big.as_uri(), sha)))
request = PackRequest(replace(lock, targets={"cpu": target}), ("cpu",), "x", None, Store(root / "s"))
def report(event):
    if event.phase == sys.argv[2] and event.done > (1 << 24):
        print("ready", flush=True)
        import time; time.sleep(60)
write(prepare(request, report), root / "out.tar", report)
"""


@pytest.mark.parametrize(
    ("phase", "how"), [("download", "SIGKILL"), ("write", "SIGKILL"), ("write", "SIGINT")]
)
def test_a_pack_killed_midway_leaves_no_archive_and_nothing_unchecked_in_the_cache(
    tmp_path: Path, phase: str, how: str
) -> None:
    import os
    import signal
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{repo}:{repo / 'src'}"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), phase],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=repo,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(getattr(signal, how))
    child.wait(timeout=30)
    assert child.returncode != 0
    assert not (tmp_path / "out.tar").exists(), "no half-written archive at the real path"
    if how == "SIGINT":
        assert not list(tmp_path.glob(".out.tar.*")), "an interrupted write cleans up"
    for path in (
        p
        for p in (tmp_path / "s" / "cache").rglob("*")
        if p.is_file() and not p.name.startswith(".")
    ):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.parent.name
