"""Running builds for real: uv builds fixture sdists in a prefix whose torch is the
fixture index's, and the backend records the environment it was built in."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from gpuenv.builds.cache import BuildCache
from gpuenv.builds.runner import BuildContext, wheel_for
from gpuenv.errors import BuildError
from gpuenv.store import Store
from tests.builds.conftest import (
    entry_for,
    fake_toolkit,
    gcc_major,
    make_prefix,
    needs_gcc,
    uv_bin,
    write_sdist,
)
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.fixtures.sdists import SdistSpec

EXT = SdistSpec("fixture-ext", "1.0.0", "fixture_ext", ("torch",), extension="c")
PURE = SdistSpec("fixture-pure", "0.3.0", "fixture_pure", needs_torch=False)


def _context(prefix: Path, home: Path | None, **environ: str) -> BuildContext:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIXTURE_")}
    env.update(environ)
    return BuildContext(prefix=prefix, uv=uv_bin(), cuda_home=home, environ=env)


def _build_env(wheel: Path, module: str) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as archive:
        return json.loads(archive.read(f"{module}/build_env.json"))


@needs_gcc
def test_a_build_runs_in_the_prefix_against_its_torch_with_the_locked_environment(
    tmp_path: Path, pkgindex: PkgIndex
) -> None:
    prefix = make_prefix(tmp_path, pkgindex)
    home = fake_toolkit(tmp_path)
    sdist, sha = write_sdist(tmp_path, EXT)
    entry = entry_for(sdist, sha, EXT, host_compiler=f"gcc-{gcc_major()}", arch_list="8.9;9.0+PTX")
    cache = BuildCache(Store(tmp_path / "store"))
    reports: list[str] = []
    ctx = _context(prefix, home)
    ctx = BuildContext(**{**ctx.__dict__, "progress": lambda p: reports.append(p.render())})
    with wheel_for(cache, entry, ctx) as (wheel, outcome):
        assert outcome.cached is False
        recorded = _build_env(wheel.wheel, "fixture_ext")
    assert recorded["torch_version"] == "2.4.1+cpu"
    assert str(recorded["torch_file"]).startswith(str(prefix)), "torch came from the prefix"
    assert recorded["sys_prefix"] == str(prefix), (
        "no build isolation: the backend ran in the prefix"
    )
    env = recorded["env"]
    assert isinstance(env, dict)
    assert env["CUDA_HOME"] == str(home)
    assert env["TORCH_CUDA_ARCH_LIST"] == "8.9;9.0+PTX"
    assert int(env["MAX_JOBS"]) >= 1
    assert Path(env["CC"]).name.startswith("gcc")
    assert any("[1/2]" in r and "native.c" in r for r in reports), reports
    assert reports[-1].startswith("built fixture-ext 1.0.0")
    with zipfile.ZipFile(wheel.wheel) as archive:
        names = archive.namelist()
        record = json.loads(archive.read("fixture_ext-1.0.0.dist-info/gpuenv-build.json"))
        assert (
            "fixture_ext-1.0.0.dist-info/gpuenv-build.json"
            in archive.read("fixture_ext-1.0.0.dist-info/RECORD").decode()
        )
    assert any(n.endswith(".so") for n in names), "the C extension was compiled"
    assert record["identity"] == entry.identity and record["torch"] == "2.4.1+cpu"
    assert wheel.log.read_text().count("native.c") >= 1
    with wheel_for(cache, entry, ctx) as (again, outcome):
        assert outcome.cached is True and again.sha256 == wheel.sha256


def test_an_isolated_build_of_a_torch_extension_fails_with_a_diagnosis(
    tmp_path: Path, pkgindex: PkgIndex
) -> None:
    prefix = make_prefix(tmp_path, pkgindex)
    spec = SdistSpec("fixture-ext", "1.0.0", "fixture_ext", ("torch",))
    sdist, sha = write_sdist(tmp_path, spec)
    entry = entry_for(sdist, sha, spec, toolkit=None, arch_list=None, no_build_isolation=False)
    cache = BuildCache(Store(tmp_path / "store"))
    with pytest.raises(BuildError) as caught, wheel_for(cache, entry, _context(prefix, None)):
        pass
    error = caught.value
    assert "No module named 'torch'" in error.tail
    assert [d["code"] for d in error.diagnosis] == ["no-torch-in-build-env"]
    assert "no-build-isolation = true" in error.message
    assert error.log is not None and Path(error.log).is_file()
    assert not list((tmp_path / "store" / "builds").glob("[0-9a-f]*")), "no entry was made"


def test_a_failing_build_shows_the_log_tail_and_leaves_no_entry(
    tmp_path: Path, pkgindex: PkgIndex
) -> None:
    prefix = make_prefix(tmp_path, pkgindex)
    sdist, sha = write_sdist(tmp_path, PURE)
    entry = entry_for(sdist, sha, PURE, toolkit=None, arch_list=None, no_build_isolation=False)
    cache = BuildCache(Store(tmp_path / "store"))
    message = "c++: fatal error: Killed signal terminated program cc1plus"
    ctx = _context(prefix, None, FIXTURE_FAIL=message)
    with pytest.raises(BuildError) as caught, wheel_for(cache, entry, ctx):
        pass
    text = caught.value.message
    assert "fixture-pure 0.3.0 failed to build" in text
    assert message in text and "[40/48]" in text, "the last lines of the log are shown"
    assert "[1/48]" not in text, "only the tail"
    assert [d["code"] for d in caught.value.diagnosis] == ["oom-killed"]
    assert "max-jobs" in text
    assert not list((tmp_path / "store" / "builds").glob("[0-9a-f]*"))
    assert not list((tmp_path / "store" / "builds" / ".incoming").iterdir())


def test_the_build_environment_keeps_index_settings_and_drops_the_rest(tmp_path: Path) -> None:
    from gpuenv.builds.jobs import Jobs
    from gpuenv.builds.runner import build_env

    spec = SdistSpec("fixture-pure", "0.3.0", "fixture_pure", needs_torch=False)
    entry = entry_for(tmp_path / "x.tar.gz", "a" * 64, spec, env=(("HOSTILE", "$(id)"),))
    environ = {
        "PATH": "/usr/bin",
        "UV_DEFAULT_INDEX": "https://mirror.invalid/simple",
        "UV_INDEX_MIRROR_PASSWORD": "secret",
        "UV_CACHE_DIR": "/elsewhere",
        "UV_PYTHON": "3.8",
        "PIP_INDEX_URL": "https://x.invalid",
        "TORCH_CUDA_ARCH_LIST": "7.0",
        "MAX_JOBS": "64",
        "CUDA_HOME": "/usr/local/cuda-11.8",
        "PYTHONPATH": "/somewhere",
    }
    ctx = BuildContext(
        prefix=tmp_path / "p",
        uv=Path("uv"),
        cuda_home=tmp_path / "cuda",
        environ=environ,
        cache_env={"UV_CACHE_DIR": "/store/cache/uv"},
    )
    env = build_env(entry, ctx, None, Jobs(3, "test"))
    assert env["UV_DEFAULT_INDEX"] == "https://mirror.invalid/simple"
    assert env["UV_INDEX_MIRROR_PASSWORD"] == "secret"
    assert env["UV_CACHE_DIR"] == "/store/cache/uv" and "UV_PYTHON" not in env
    assert "PIP_INDEX_URL" not in env and "PYTHONPATH" not in env
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0+PTX" and env["MAX_JOBS"] == "3"
    assert env["CUDA_HOME"] == str(tmp_path / "cuda")
    assert env["PATH"].split(":")[:2] == [
        str(tmp_path / "p" / "bin"),
        str(tmp_path / "cuda" / "bin"),
    ]
    assert env["HOSTILE"] == "$(id)"


def test_a_build_that_reads_its_archs_from_its_own_variable_gets_them(tmp_path: Path) -> None:
    """threestudio's tiny-cuda-nn reads TCNN_CUDA_ARCHITECTURES, not TORCH_CUDA_ARCH_LIST:
    unset, it builds for the build machine's GPU, and raises where there is none."""
    from gpuenv.builds.jobs import Jobs
    from gpuenv.builds.model import arch_numbers
    from gpuenv.builds.runner import build_env

    assert arch_numbers("8.6;8.9+PTX") == "86;89" and arch_numbers("9.0+PTX") == "90"
    ctx = BuildContext(
        prefix=tmp_path / "p", uv=Path("uv"), cuda_home=None, environ={"PATH": "/usr/bin"}
    )
    spec = SdistSpec("tinycudann", "1.7", "tinycudann", needs_torch=True)
    entry = entry_for(tmp_path / "x.tar.gz", "a" * 64, spec, arch_list="8.6;9.0+PTX")
    env = build_env(entry, ctx, None, Jobs(2, "test"))
    assert env["TCNN_CUDA_ARCHITECTURES"] == "86;90"
    assert env["TORCH_CUDA_ARCH_LIST"] == "8.6;9.0+PTX"
    other = entry_for(
        tmp_path / "x.tar.gz",
        "a" * 64,
        SdistSpec("fixture-pure", "0.3.0", "fixture_pure", needs_torch=False),
    )
    assert "TCNN_CUDA_ARCHITECTURES" not in build_env(other, ctx, None, Jobs(2, "test"))
