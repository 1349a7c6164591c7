"""Only the lock's variables shape a build (issue 24, finding 9): CFLAGS, LDFLAGS,
NVCC_APPEND_FLAGS or FLASH_ATTENTION_* from the caller's shell changed a cached build
without being part of its identity, so the first builder decided for every machine."""

from __future__ import annotations

from pathlib import Path

from gpuenv.builds.jobs import Jobs
from gpuenv.builds.runner import BuildContext, build_env
from tests.builds.conftest import entry_for
from tests.fixtures.sdists import SdistSpec

CALLER = {
    "PATH": "/usr/bin",
    "HOME": "/home/u",
    "CFLAGS": "-O0 -DEVIL",
    "CXXFLAGS": "-O0",
    "LDFLAGS": "-Wl,-rpath,/tmp/evil",
    "NVCC_APPEND_FLAGS": "-G",
    "NVCC_PREPEND_FLAGS": "-lineinfo",
    "TORCH_NVCC_FLAGS": "-Xfatbin",
    "CMAKE_ARGS": "-DFOO=1",
    "CPATH": "/tmp/evil/include",
    "FLASH_ATTENTION_FORCE_CXX11_ABI": "TRUE",
    "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE",
    "FIXTURE_PURE_VARIANT": "debug",  # named after the package being built
    "HTTPS_PROXY": "http://proxy.invalid:3128",
    "LANG": "C.UTF-8",
}


def test_the_callers_shaping_variables_do_not_reach_the_build(tmp_path: Path) -> None:
    spec = SdistSpec("fixture-pure", "0.3.0", "fixture_pure", needs_torch=False)
    entry = entry_for(tmp_path / "x.tar.gz", "a" * 64, spec, env=(("CFLAGS", "-O3"),))
    ctx = BuildContext(prefix=tmp_path / "p", uv=Path("uv"), cuda_home=None, environ=CALLER)
    env = build_env(entry, ctx, None, Jobs(2, "test"))
    dropped = set(CALLER) - {"PATH", "HOME", "HTTPS_PROXY", "LANG", "CFLAGS"}
    assert not dropped & set(env), sorted(dropped & set(env))
    assert env["CFLAGS"] == "-O3", "the lock's own value (part of the identity) is passed"
    assert env["HOME"] == "/home/u" and env["HTTPS_PROXY"] == "http://proxy.invalid:3128"
    assert env["LANG"] == "C.UTF-8"
