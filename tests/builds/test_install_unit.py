"""Install-side pieces of builds: a toolkit is added when a build needs nvcc, builds
that need other builds come after them, and a prefix's build record is checked before
verification believes it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuenv.build.install import extensions_of, ordered, read_record
from gpuenv.errors import InstallError
from gpuenv.install import InstallRequest, _toolkit_of
from tests.builds.conftest import entry_for
from tests.fixtures.sdists import SdistSpec
from tests.lock.test_format import PIP, _target

SPEC = SdistSpec("fixture-ext", "1.0.0", "fixture_ext", ("torch",))


def test_a_build_that_needs_nvcc_adds_a_toolkit_unless_the_spec_names_one(tmp_path: Path) -> None:
    entry = entry_for(tmp_path / "x.tar.gz", "a" * 64, SPEC)
    target = dataclasses.replace(_target("h100", PIP), builds=(entry,))
    request = InstallRequest(target=target, project=tmp_path, env_name="x")
    assert _toolkit_of(request) == "auto"
    pinned = dataclasses.replace(request, toolkit="system:/opt/cuda-12.4")
    assert _toolkit_of(pinned) == "system:/opt/cuda-12.4"
    no_nvcc = entry_for(tmp_path / "x.tar.gz", "a" * 64, SPEC, toolkit=None, arch_list=None)
    plain = dataclasses.replace(request, target=dataclasses.replace(target, builds=(no_nvcc,)))
    assert _toolkit_of(plain) is None


def test_builds_are_ordered_after_the_builds_they_need(tmp_path: Path) -> None:
    def named(name: str, requires: tuple[str, ...]):  # type: ignore[no-untyped-def]
        entry = entry_for(tmp_path / "x.tar.gz", "a" * 64, SPEC)
        return dataclasses.replace(entry, name=name, requires=requires)

    builds = (
        named("mamba-ssm", ("causal-conv1d", "torch")),
        named("causal-conv1d", ("torch",)),
        named("apex", ()),
    )
    assert [b.name for b in ordered(builds)] == ["apex", "causal-conv1d", "mamba-ssm"]
    cycle = (named("a", ("b",)), named("b", ("a",)))
    assert sorted(b.name for b in ordered(cycle)) == ["a", "b"], "a cycle does not hang"


def test_the_build_record_is_checked_before_it_is_believed(tmp_path: Path) -> None:
    assert read_record(tmp_path) == [], "no record: no builds"
    record = tmp_path / "etc" / "gpuenv" / "builds.json"
    record.parent.mkdir(parents=True)
    record.write_text(
        '{"format": 1, "builds": [{"name": "x", "modules": ["x._C"], "extensions": ["lib/python3.11/site-packages/x/_C.so"]}]}'
    )
    (ext,) = extensions_of(tmp_path)
    assert ext["files"] == [str(tmp_path / "lib/python3.11/site-packages/x/_C.so")]
    record.write_text(
        '{"format": 1, "builds": [{"name": "x", "extensions": ["../../etc/passwd"]}]}'
    )
    with pytest.raises(InstallError, match="leaves the prefix"):
        extensions_of(tmp_path)
    record.write_text('{"format": 1, "builds": [{"name": "x", "extensions": ["/etc/passwd"]}]}')
    with pytest.raises(InstallError, match="leaves the prefix"):
        extensions_of(tmp_path)
    record.write_text("[1, 2")
    with pytest.raises(InstallError, match="unreadable"):
        read_record(tmp_path)
    record.write_text('{"builds": "nope"}')
    with pytest.raises(InstallError, match="not gpuenv's build record"):
        read_record(tmp_path)
