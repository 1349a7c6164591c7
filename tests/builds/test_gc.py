"""`gpuenv gc` and the build cache: entries a kept prefix lists stay; the others go, with
their logs and sources, unfinished builds nobody holds, and the torch-extensions folders
of removed prefixes. An entry being built (its lock held) is never removed."""

from __future__ import annotations

import json
from pathlib import Path

from gpuenv.store import Store, point_project


def _entry(store: Store, digest: str, source_sha: str) -> Path:
    entry = store.root / "builds" / digest
    entry.mkdir(parents=True)
    (entry / "x-1.0-py3-none-any.whl").write_bytes(b"wheel" * 100)
    (entry / "entry.json").write_text(
        json.dumps({"identity": f"sha256:{digest}", "source": {"sha256": source_sha}})
    )
    (store.root / "builds" / "logs").mkdir(exist_ok=True)
    (store.root / "builds" / "logs" / f"{digest}.log").write_text("log")
    source = store.root / "builds" / "sources" / source_sha
    source.mkdir(parents=True)
    (source / "x-1.0.tar.gz").write_bytes(b"sdist")
    return entry


def _prefix(store: Store, name: str, identities: list[str]) -> Path:
    prefix = store.prefixes / name
    (prefix / "etc" / "gpuenv").mkdir(parents=True)
    record = {"format": 1, "builds": [{"identity": f"sha256:{i}"} for i in identities]}
    (prefix / "etc" / "gpuenv" / "builds.json").write_text(json.dumps(record))
    (store.torch_extensions_dir(prefix)).mkdir(parents=True)
    return prefix


def test_gc_keeps_the_builds_kept_prefixes_list_and_removes_the_rest(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    kept_id, gone_id, busy_id = "a" * 64, "b" * 64, "c" * 64
    kept = _entry(store, kept_id, "1" * 64)
    gone = _entry(store, gone_id, "2" * 64)
    incoming = store.root / "builds" / ".incoming" / f"{busy_id}.deadbeef"
    incoming.mkdir(parents=True)
    live = _prefix(store, "t-live", [kept_id])
    dead = _prefix(store, "t-dead", [gone_id])
    project = tmp_path / "project"
    project.mkdir()
    point_project(store, project, "t", live)
    with store.locked(Path(f"build-{busy_id}")):  # a build in progress elsewhere
        dry = store.gc(dry_run=True)
        assert gone in dry.removed_builds and kept not in dry.removed_builds and gone.exists()
        result = store.gc()
    assert dead in result.removed and gone in result.removed_builds
    assert kept.exists() and not gone.exists()
    assert incoming.exists(), "held by a running build: kept"
    assert (store.root / "builds" / "logs" / f"{kept_id}.log").exists()
    assert not (store.root / "builds" / "logs" / f"{gone_id}.log").exists()
    assert (store.root / "builds" / "sources" / ("1" * 64)).exists()
    assert not (store.root / "builds" / "sources" / ("2" * 64)).exists()
    assert store.torch_extensions_dir(live).exists()
    assert not store.torch_extensions_dir(dead).exists()
    again = store.gc()
    assert incoming in again.removed_builds, "an unfinished build nobody holds goes"


def test_a_damaged_builds_record_keeps_nothing_alive_but_does_not_crash(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    entry = _entry(store, "d" * 64, "3" * 64)
    live = _prefix(store, "t-live", [])
    (live / "etc/gpuenv/builds.json").write_text("{not json")
    project = tmp_path / "project"
    project.mkdir()
    point_project(store, project, "t", live)
    assert entry in store.gc().removed_builds
