"""Install-side pieces of builds: a toolkit is added when a build needs nvcc, builds
that need other builds come after them, and a prefix's build record is checked before
verification believes it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuenv.builds.install import extensions_of, ordered, read_record
from gpuenv.errors import InstallError
from gpuenv.install import InstallRequest
from gpuenv.install.pipeline import _toolkit_of
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
    for damaged in ("[1, 2", "[" * 100_000):  # the second: past the JSON reader's recursion
        record.write_text(damaged)
        with pytest.raises(InstallError, match="unreadable"):
            read_record(tmp_path)
    record.write_text('{"builds": "nope"}')
    with pytest.raises(InstallError, match="not gpuenv's build record"):
        read_record(tmp_path)


@pytest.mark.parametrize(
    ("torch", "cuda", "arch", "expected"),
    [
        ("1.12.1", "11.6", ("3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6"), "8.6+PTX"),
        ("2.4.1", "12.4", ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"), "8.9+PTX"),
        ("2.4.1", None, (), None),
    ],
)
def test_jit_archs_on_an_rtx_4090_stay_within_what_torchs_toolkit_knows(
    torch: str, cuda: str | None, arch: tuple[str, ...], expected: str | None
) -> None:
    """torch 1.12's cpp_extension refuses 8.9 ('Unknown CUDA arch') and nvcc 11.6 has no
    compute_89: activation set TORCH_CUDA_ARCH_LIST=8.9+PTX for every CUDA build."""
    from dataclasses import replace

    from gpuenv.install import jit_arch_list
    from gpuenv.lock.model import LockedHardware
    from tests.locked import cpu_target

    base = cpu_target()
    target = replace(
        base,
        hardware=LockedHardware(False, "RTX 4090", ("8.9",), "550.54.15", "12.4", "declared"),
        stack=replace(base.stack, torch=torch, cuda=cuda, arch_list=arch),
    )
    assert jit_arch_list(target) == expected
