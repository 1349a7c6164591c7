"""gc reports the bytes it actually releases: on a file system of its own (a tmpfs
mounted for the test; skipped where mounting is not allowed), what gc says it freed
is what ``statvfs`` shows, and ``--dry-run`` says the same number. ``list`` splits
each prefix into what is its own and what it shares with uv's cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.index import Seen, Serve
from tests.fixtures.pkgindex.plugin import PkgIndex


@pytest.fixture
def own_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "fs"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def free(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bfree * info.f_frsize


def test_gc_frees_what_it_says_and_the_dry_run_says_it_first(
    make_project: Callable[..., Project], own_fs: Path
) -> None:
    project = make_project(home=own_fs / "store")
    project.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    project.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    listed = json.loads(project.gpuenv("list", "--json", check=True).stdout)["prefixes"]
    (prefix,) = listed
    assert prefix["shared_bytes"] > 0 and prefix["unique_bytes"] > 0, "uv's links are shared"
    assert prefix["size_bytes"] == prefix["unique_bytes"] + prefix["shared_bytes"]

    other = make_project(home=own_fs / "store")  # a project that stays: its lock is kept
    shutil.rmtree(project.dir)
    dry = json.loads(other.gpuenv("gc", "--grace", "0", "--dry-run", "--json", check=True).stdout)
    before = free(own_fs)
    real = json.loads(other.gpuenv("gc", "--grace", "0", "--json", check=True).stdout)
    released = free(own_fs) - before
    assert real["removed"] == dry["removed"] == [prefix["path"]]
    assert real["freed_bytes"] == dry["freed_bytes"], "the dry run says the same number"
    assert released > 0 and abs(real["freed_bytes"] - released) <= 0.05 * released, (
        real["freed_bytes"],
        released,
    )
    assert real["fs_freed_bytes"] is not None
    assert real["removed_artifacts"] and real["removed_cache_entries"] > 0
    assert not any((own_fs / "store" / "cache" / "artifacts").glob("*/*.whl"))

    # What gc pruned is fetched and unpacked again when it is needed again.
    again = make_project(home=own_fs / "store")
    again.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    again.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    ran = again.gpuenv("run", "--unverified", "--", "python", "-c", "import torch")
    assert ran.returncode == 0, ran.stderr


def test_gc_keeps_what_a_kept_prefix_uses(
    make_project: Callable[..., Project], own_fs: Path
) -> None:
    kept = make_project(home=own_fs / "store")
    kept.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    kept.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    artifacts = sorted((own_fs / "store" / "cache" / "artifacts").glob("*/*.whl"))
    result = json.loads(kept.gpuenv("gc", "--grace", "0", "--json", check=True).stdout)
    assert result["removed"] == [] and result["removed_artifacts"] == []
    assert result["removed_cache_entries"] == 0 and result["freed_bytes"] == 0
    assert sorted((own_fs / "store" / "cache" / "artifacts").glob("*/*.whl")) == artifacts
    ran = kept.gpuenv("run", "--unverified", "--", "python", "-c", "import torch")
    assert ran.returncode == 0, ran.stderr


def fill(mount: Path, leave: int) -> None:
    """Take all but ``leave`` bytes of the file system."""
    with (mount / "ballast").open("wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, free(mount) - leave)


def test_install_and_pack_say_their_cost_and_refuse_early_when_the_disk_is_short(
    make_project: Callable[..., Project],
    serve_index: Callable[..., PkgIndex],
    own_fs: Path,
    tmp_path: Path,
) -> None:
    seen = Seen()
    index = serve_index(Serve(), seen=seen)
    project = make_project(spec_text(index), home=own_fs / "store")
    project.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    fill(own_fs, 8 << 10)
    with seen.lock:
        seen.requests.clear()
        seen.methods.clear()
    refused = project.gpuenv("install", "--target", "cpu", "--json")
    assert refused.returncode == 5, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["kind"] == "storage" and error["path"] == str(own_fs / "store")
    assert "needs about" in error["message"]
    archive = own_fs / "cpu.tar"
    packed = project.gpuenv("pack", "--target", "cpu", "-o", str(archive), "--json")
    assert packed.returncode == 5 and not archive.exists(), packed.stderr
    assert json.loads(packed.stdout)["error"]["kind"] == "storage", packed.stdout
    gets = [p for (p, _a), m in zip(seen.requests, seen.methods, strict=True) if m == "GET"]
    assert not [p for p in gets if p.endswith(".whl")], packed.stdout
    assert not any((own_fs / "store" / "cache" / "artifacts").glob("*/*.whl"))

    (own_fs / "ballast").unlink()
    done = project.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    assert "to download" in done.stderr and "more disk in the store" in done.stderr
    said = project.gpuenv("pack", "--target", "cpu", "-o", str(tmp_path / "cpu.tar"), check=True)
    assert "0 artifacts not in the store yet" in said.stderr, said.stderr


def test_gc_prunes_rattler_packages_no_kept_prefix_links_to(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    local_channel: LocalChannel,
    own_fs: Path,
) -> None:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { "cuda-nvcc" = "12.4.*" }\npython = false\n'
    )
    project = make_project(text, home=own_fs / "store")
    project.gpuenv("lock", "--target", "cpu", check=True, timeout=300)
    project.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    rattler = own_fs / "store" / "cache" / "rattler"
    packages = sorted(p for p in rattler.iterdir() if p.is_dir())
    assert packages, "rattler extracted the conda packages there"
    kept = json.loads(project.gpuenv("gc", "--grace", "0", "--json", check=True).stdout)
    assert kept["removed_cache_entries"] == 0, "the installed prefix links to them"
    assert sorted(p for p in rattler.iterdir() if p.is_dir()) == packages

    keeper = make_project(home=own_fs / "store")
    shutil.rmtree(project.dir)
    before = free(own_fs)
    result = json.loads(keeper.gpuenv("gc", "--grace", "0", "--json", check=True).stdout)
    released = free(own_fs) - before
    assert not [p for p in rattler.iterdir() if p.is_dir()], "pruned with the prefix"
    assert abs(result["freed_bytes"] - released) <= 0.05 * released, (result, released)
