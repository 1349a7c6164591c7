"""`gpuenv pack` and `gpuenv install --from` with real uv and rattler: identical bytes
twice, an install with the index server stopped (and a fresh store, so no cache can
help), and refusals of altered archives with nothing installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.index import serve
from tests.fixtures.pkgindex.plugin import PkgIndex


@pytest.fixture
def private_index(pkgindex: PkgIndex) -> Iterator[tuple[PkgIndex, Callable[[], None]]]:
    """The fixture tree on a server of its own, which the test can stop."""
    context = serve(pkgindex.root)
    url = context.__enter__()
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            context.__exit__(None, None, None)
            stopped = True

    yield PkgIndex(pkgindex.root, url, pkgindex.artifacts), stop
    stop()


def _member(archive: Path, suffix: str) -> tarfile.TarInfo:
    with tarfile.open(archive) as tar:
        return next(m for m in tar.getmembers() if m.name.endswith(suffix))


def test_pack_twice_gives_identical_bytes_and_announces_its_size(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project()
    project.gpuenv("lock", check=True, timeout=300)
    first = project.gpuenv("pack", "--target", "cpu", "-o", str(tmp_path / "a.tar"), check=True)
    assert "writing" in first.stderr and "downloaded now" in first.stderr
    again = project.gpuenv(
        "pack", "--target", "cpu", "--json", "-o", str(tmp_path / "b.tar"), check=True
    )
    report = json.loads(again.stdout)
    assert report["downloaded"] == 0, "the second pack reads the store's artifact cache"
    a, b = (tmp_path / "a.tar").read_bytes(), (tmp_path / "b.tar").read_bytes()
    assert a == b
    assert report["size_bytes"] == len(b)
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = tar.getmembers()
    assert members[0].name == "gpuenv-pack/manifest.json"
    assert all(m.mtime == members[0].mtime and m.uid == 0 and m.uname == "" for m in members)
    artifacts = [m.name for m in members if "/artifacts/" in m.name]
    assert artifacts == sorted(artifacts) and all(m.isreg() for m in members)


def test_install_from_works_with_the_index_stopped_and_refuses_one_altered_byte(
    make_project: Callable[..., Project],
    private_index: tuple[PkgIndex, Callable[[], None]],
    tmp_path: Path,
) -> None:
    index, stop = private_index
    project = make_project(spec_text(index))
    project.gpuenv("lock", check=True, timeout=300)
    archive = tmp_path / "cpu.tar"
    project.gpuenv("pack", "--target", "cpu", "-o", str(archive), check=True, timeout=300)
    stop()

    # Packing again with the index down works from the store's cache...
    project.gpuenv("pack", "--target", "cpu", "-o", str(tmp_path / "again.tar"), check=True)
    assert (tmp_path / "again.tar").read_bytes() == archive.read_bytes()
    # ...and, with an empty store, says which URL it could not reach (exit 5).
    down = make_project(spec_text(index), home=tmp_path / "empty-store")
    down.lock.write_text(project.lock.read_text())
    failed = down.gpuenv("pack", "--target", "cpu", "-o", str(tmp_path / "none.tar"))
    assert failed.returncode == 5, failed.stderr
    assert index.url in failed.stderr and "Traceback" not in failed.stderr
    assert not (tmp_path / "none.tar").exists()

    # An altered byte inside one artifact: refused, nothing installed.
    offline = make_project(home=tmp_path / "air-store")
    (offline.dir / "gpuenv.toml").unlink()
    member = _member(archive, ".whl")
    data = bytearray(archive.read_bytes())
    data[member.offset_data + member.size // 2] ^= 0x01
    altered = tmp_path / "altered.tar"
    altered.write_bytes(bytes(data))
    refused = offline.gpuenv("install", "--from", str(altered))
    assert refused.returncode == 2, refused.stderr
    assert member.name.rsplit("/", 1)[-1] in refused.stderr and "altered" in refused.stderr
    assert not (offline.dir / ".gpuenv").exists() and not offline.spec.exists()
    assert not list((tmp_path / "air-store").glob("prefixes/*"))

    # The archive as written: installs with no index at all, into a fresh store.
    installed = offline.gpuenv("install", "--from", str(archive), "--json", timeout=300)
    assert installed.returncode == 0, installed.stderr
    prefix = Path(json.loads(installed.stdout)["targets"]["cpu"]["prefix"])
    assert prefix.is_relative_to(tmp_path / "air-store")
    assert offline.lock.read_text() == project.lock.read_text()
    assert (prefix / "etc/gpuenv/installed.json").is_file()
    assert Path(os.readlink(offline.dir / ".gpuenv" / "cpu")) == prefix
    ran = offline.gpuenv(
        "run",
        "--unverified",
        "--",
        "python",
        "-c",
        "import torch, transformers; print(torch.__version__)",
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "2.4.1+cpu", ran.stderr
    requirements = (prefix / "etc/gpuenv/requirements.txt").read_text()
    assert index.url not in requirements, "every artifact came from the archive"
    again = offline.gpuenv("install", "--from", str(archive), "--json", check=True)
    assert json.loads(again.stdout)["targets"]["cpu"]["built"] is False
    # Its lock's bytes passed the schema at the first install --from: again, they are
    # not validated again (no pydantic import, ~100 ms), as a lock on disk is not
    probe = (
        "import sys\n"
        "from gpuenv.cli import main\n"
        "code = main(['install', '--from', sys.argv[1]])\n"
        "print(code, 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(archive)],
        cwd=offline.dir,
        env=offline.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines()[-1].split() == ["0", "False"], out.stderr


def test_pack_and_install_from_carry_conda_records_too(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    local_channel: LocalChannel,
    tmp_path: Path,
) -> None:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { "cuda-nvcc" = "12.4.*" }\npython = false\n'
    )
    project = make_project(text)
    project.gpuenv("lock", "--target", "h100", check=True, timeout=300)
    archive = tmp_path / "h100.tar"
    project.gpuenv("pack", "--target", "h100", "-o", str(archive), check=True, timeout=300)
    with tarfile.open(archive) as tar:
        names = [m.name for m in tar.getmembers()]
    assert any(n.endswith(".tar.bz2") for n in names), "the conda archives are inside"
    offline = make_project(home=tmp_path / "air-store")
    offline.spec.unlink()
    installed = offline.gpuenv("install", "--from", str(archive), "--json", timeout=300)
    assert installed.returncode == 0, installed.stderr
    prefix = Path(json.loads(installed.stdout)["targets"]["h100"]["prefix"])
    assert any((prefix / "conda-meta").glob("cuda-nvcc-*.json"))


def test_pack_downloads_from_an_authenticated_index_and_keeps_the_credentials_out(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex, tmp_path: Path
) -> None:
    from tests.fixtures.pkgindex.plugin import AUTH_PASSWORD, AUTH_USER

    project = make_project(spec_text(pkgindex_auth))
    project.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    archive = tmp_path / "auth.tar"
    packed = project.gpuenv("pack", "--target", "cpu", "-o", str(archive), timeout=300)
    assert packed.returncode == 0, packed.stderr
    data = archive.read_bytes()
    assert AUTH_PASSWORD.encode() not in data and f"{AUTH_USER}:".encode() not in data
    assert AUTH_PASSWORD not in packed.stdout + packed.stderr
    # Without the credentials (another spec, same lock, empty store): 401, named, no secret.
    bare = make_project(
        spec_text(pkgindex_auth).replace(f"{AUTH_USER}:{AUTH_PASSWORD}@", ""),
        home=tmp_path / "other-store",
    )
    bare.lock.write_text(project.lock.read_text())
    refused = bare.gpuenv("pack", "--target", "cpu", "-o", str(tmp_path / "no.tar"), timeout=300)
    assert refused.returncode == 5, refused.stderr
    assert "HTTP 401" in refused.stderr and "credentials" in refused.stderr
    assert AUTH_PASSWORD not in refused.stderr


def test_install_from_refuses_a_project_locked_otherwise_and_an_unpacked_target(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    packed = make_project()
    packed.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    archive = tmp_path / "cpu.tar"
    packed.gpuenv("pack", "--target", "cpu", "-o", str(archive), check=True, timeout=300)
    other = make_project(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    other.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    refused = other.gpuenv("install", "--from", str(archive))
    assert refused.returncode == 2 and "differently from the archive" in refused.stderr
    assert not (other.dir / ".gpuenv").exists()
    fresh = make_project()
    fresh.spec.unlink()
    missing = fresh.gpuenv("install", "--from", str(archive), "--target", "h100")
    assert missing.returncode == 2 and "h100" in missing.stderr
    assert not (fresh.dir / ".gpuenv").exists() and not fresh.spec.exists()


def test_pack_refuses_an_output_that_is_not_a_file_before_fetching_anything(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project()
    project.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = project.gpuenv("pack", "--target", "cpu", "-o", str(fifo))
    assert result.returncode == 2, result.stderr
    assert str(fifo) in result.stderr and "not a regular file" in result.stderr
    assert fifo.is_fifo() and not (project.home / "cache").exists()
