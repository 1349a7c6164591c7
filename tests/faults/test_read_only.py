"""A read-only shared store (as clusters mount them on compute nodes) is a supported
setup: a prefix installed where the store is writable can be attached by another
project, verified and run where it is mounted read-only; the records and locks go to
the user's state directory. A read-only project is a typed error naming what could
not be written, where something must be written there. Real read-only bind mounts (in
a private mount namespace): they hold for root too, unlike permission bits."""

from __future__ import annotations

import json
import os
import shutil
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Project, spec_text
from tests.faults.conftest import Cli, Locked, read_only_prefix
from tests.fixtures.pkgindex.plugin import PkgIndex

FAKE_TORCH = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torch"
FAKE_CPU = {
    "version": "2.4.1+cpu",
    "cuda": None,
    "devices": [],
    "torchvision": "0.19.1+cpu",
    "torchaudio": "2.4.1+cpu",
}


def gpuenv_in(project: Project, ro: list[str], *args: str, timeout: float = 180) -> object:
    import subprocess
    import sys

    return subprocess.run(
        [*ro, sys.executable, "-m", "gpuenv", *args],
        cwd=project.dir,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_read_only_store_is_attached_verified_and_run(
    make_project: Callable[..., Project], tmp_path: Path, pkgindex: PkgIndex
) -> None:
    writer = make_project(spec_text(pkgindex, deps=""))
    writer.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    prefix = Path(os.readlink(writer.dir / ".gpuenv" / "cpu"))
    site = next(prefix.glob("lib/python3*/site-packages"))
    for name in ("torch", "torchvision", "torchaudio"):
        shutil.rmtree(site / name)
        shutil.copytree(FAKE_TORCH / name, site / name)
    ro = read_only_prefix([writer.home])
    if ro is None:
        pytest.skip("no read-only bind mounts here (no mount namespace)")
    reader = make_project(spec_text(pkgindex, deps=""))
    for name in ("gpuenv.toml", "gpuenv.lock"):
        shutil.copy2(writer.dir / name, reader.dir / name)
    state = tmp_path / "state"
    reader.env.update(XDG_STATE_HOME=str(state), GPUENV_FAKE_TORCH=json.dumps(FAKE_CPU))
    roots_before = sorted(os.listdir(writer.home / "roots"))

    attach = gpuenv_in(reader, ro, "install", "--target", "cpu", "--frozen", "--json")
    assert attach.returncode == 0, attach.stderr
    assert json.loads(attach.stdout)["targets"]["cpu"]["built"] is False
    assert Path(os.readlink(reader.dir / ".gpuenv" / "cpu")) == prefix
    assert sorted(os.listdir(writer.home / "roots")) == roots_before

    refused = gpuenv_in(reader, ro, "run", "--", "true")
    assert refused.returncode == 4, refused.stderr
    verify = gpuenv_in(reader, ro, "verify", "--target", "cpu", "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    records = list(state.glob("gpuenv/verify/*/*.json"))
    assert len(records) == 1
    assert not (prefix / "etc/gpuenv/verify").exists(), "nothing was written in the store"
    run = gpuenv_in(reader, ro, "run", "--", "python", "-c", "print('ran')")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ran"
    listing = gpuenv_in(reader, ro, "list", "--json")
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout)["prefixes"][0]["verified_machines"] == 1

    # a prefix that is not built cannot be built there: a typed error, nothing moves
    reader.spec.write_text(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    build = gpuenv_in(reader, ro, "install", "--target", "cpu", "--json", timeout=300)
    assert build.returncode == 5, build.stdout + build.stderr
    error = json.loads(build.stdout)["error"]
    assert error["kind"] == "storage" and "read-only here" in error["message"]
    assert Path(os.readlink(reader.dir / ".gpuenv" / "cpu")) == prefix


def test_a_read_only_project_is_a_typed_error(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    writer = make_project(spec_text(pkgindex, deps=""))
    writer.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    reader = make_project(spec_text(pkgindex, deps=""))
    shutil.copy2(writer.dir / "gpuenv.lock", reader.dir / "gpuenv.lock")
    ro = read_only_prefix([reader.dir])
    if ro is None:
        pytest.skip("no read-only bind mounts here (no mount namespace)")
    attach = gpuenv_in(reader, ro, "install", "--target", "cpu", "--frozen", "--json")
    assert attach.returncode == 5, attach.stdout + attach.stderr
    error = json.loads(attach.stdout)["error"]
    assert error["kind"] == "storage", error
    assert ".gpuenv" in error["path"] and "read-only" in error["message"]
    assert not (reader.dir / ".gpuenv").exists()
    (reader.dir / "gpuenv.lock").unlink()
    lock = gpuenv_in(reader, ro, "lock", timeout=300)
    assert lock.returncode == 5, lock.stderr
    assert "cannot write the lock" in lock.stderr and "Traceback" not in lock.stderr


def test_a_read_only_project_already_installed_installs(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    # Installed, its pointer current, then mounted read-only: install refused it (exit 5)
    # although it had nothing to write. Only a pointer that must move is refused.
    project = make_project(spec_text(pkgindex, deps=""))
    project.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    pointer = project.dir / ".gpuenv" / "cpu"
    prefix = Path(os.readlink(pointer))
    ro = read_only_prefix([project.dir])
    if ro is None:
        pytest.skip("no read-only bind mounts here (no mount namespace)")
    for frozen in (["--frozen"], []):
        again = gpuenv_in(project, ro, "install", "--target", "cpu", *frozen, "--json")
        assert again.returncode == 0, again.stdout + again.stderr  # type: ignore[attr-defined]
        result = json.loads(again.stdout)["targets"]["cpu"]  # type: ignore[attr-defined]
        assert result["built"] is False and result["prefix"] == str(prefix), result
    plain = gpuenv_in(project, ro, "install", "--target", "cpu")
    said = plain.stdout + plain.stderr  # type: ignore[attr-defined]
    assert plain.returncode == 0 and "cpu: already installed" in said, said  # type: ignore[attr-defined]
    pointer.unlink()  # now the pointer must be written: the clear refusal stays
    refused = gpuenv_in(project, ro, "install", "--target", "cpu", "--frozen", "--json")
    assert refused.returncode == 5, refused.stdout + refused.stderr  # type: ignore[attr-defined]
    error = json.loads(refused.stdout)["error"]  # type: ignore[attr-defined]
    assert error["kind"] == "storage" and ".gpuenv" in error["path"], error
    assert not pointer.is_symlink()


def test_the_project_check_runs_only_where_a_pointer_moves(
    project: Locked, fake_uv: Path, run_cli: Callable[..., Cli], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same, in-process where no mount namespace is allowed: the project's file
    # system says read-only (statvfs), as a read-only mount does for root too.
    assert run_cli("install", "--frozen", "--target", "cpu").code == 0
    real = os.statvfs

    def statvfs(path: object) -> object:
        if str(path).startswith(str(project.dir)):
            return types.SimpleNamespace(f_flag=os.ST_RDONLY)
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "statvfs", statvfs)
    again = run_cli("install", "--frozen", "--target", "cpu")
    assert again.code == 0 and "cpu: already installed" in again.out, again.err
    (project.dir / ".gpuenv" / "cpu").unlink()
    refused = run_cli("install", "--frozen", "--target", "cpu", "--json")
    assert refused.code == 5, refused.out + refused.err
    error = json.loads(refused.out)["error"]
    assert error["kind"] == "storage" and error["errno"] == "EROFS", error
    assert ".gpuenv" in error["path"] and "Traceback" not in refused.err


def test_add_and_remove_on_a_read_only_mount_name_the_mount_not_the_mode(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    # The spec is mode 0644 on a read-only mount: the refusal said 'read-only (mode 0644)'
    # with 'chmod u+w', which changes nothing there.
    project = make_project(spec_text(pkgindex, deps='"transformers>=4.44"'))
    ro = read_only_prefix([project.dir])
    if ro is None:
        pytest.skip("no read-only bind mounts here (no mount namespace)")
    before = project.spec.read_bytes()
    for line in (["add", "pillow"], ["remove", "transformers"]):
        result = gpuenv_in(project, ro, *line, "--no-install", "--json", timeout=60)
        assert result.returncode == 5, result.stdout + result.stderr  # type: ignore[attr-defined]
        error = json.loads(result.stdout)["error"]  # type: ignore[attr-defined]
        assert error["kind"] == "storage" and error["path"] == str(project.spec), error
        assert "read-only file system" in error["message"], error
        assert "mounted read-only" in error["hint"] and "chmod" not in error["hint"], error
    assert project.spec.read_bytes() == before
    assert not project.lock.exists()


def test_a_stale_lock_in_a_read_only_project_is_refused_before_resolving(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """install (not --frozen) relocks a stale lock. In a project mounted read-only the
    relock ran to its end (seconds to minutes for a CUDA stack) and only then failed to
    write gpuenv.lock; it is now refused first, saying why and what to do."""
    writer = make_project(spec_text(pkgindex, deps=""))
    writer.gpuenv("lock", check=True, timeout=300)
    reader = make_project(spec_text(pkgindex, deps='"transformers>=4.44"'))
    shutil.copy2(writer.dir / "gpuenv.lock", reader.dir / "gpuenv.lock")
    ro = read_only_prefix([reader.dir])
    if ro is None:
        pytest.skip("no read-only bind mounts here (no mount namespace)")
    stale = gpuenv_in(reader, ro, "install", "--target", "cpu", "--json", timeout=300)
    assert stale.returncode == 5, stale.stdout + stale.stderr
    error = json.loads(stale.stdout)["error"]
    assert error["kind"] == "storage" and error["path"].endswith("gpuenv.lock"), error
    assert "is out of date for cpu and cannot be rewritten here" in error["message"]
    assert "nothing was resolved" in error["message"] and "gpuenv lock" in error["hint"]
