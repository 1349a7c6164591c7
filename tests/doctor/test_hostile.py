"""Hostile and broken input: everything read from disk is checked before it is believed,
and nothing the doctor reads can make it crash, hang or report nonsense."""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import pytest

from gpuenv.doctor import environment
from gpuenv.doctor._catalog import torch_preload
from gpuenv.doctor._ldcache import parse
from gpuenv.errors import ExternalToolError, UsageError
from tests.doctor.conftest import ElfFactory, FakeEnv, Run, codes, make_cu13_venv
from tests.doctor.test_cuda13 import H100_580


@pytest.mark.parametrize(
    "record",
    [
        b"\x00\xff\xfe garbage \x00\n" * 50,
        b"no commas at all\n\n\n",
        b'"nvidia/cudnn/lib/lib,cudnn.so.9",sha256=xx,12\n',
        b"/etc/passwd,sha256=abc,1\n../../../../etc/shadow,,\n",
        b"nvidia/cudnn/lib/libcudnn.so.9,sha256=!!!notbase64,notanumber\n",
        b"a," * 100_000 + b"\n",
    ],
)
def test_garbage_records_do_not_crash(cu13: FakeEnv, run: Run, record: bytes) -> None:
    info = next(cu13.site.glob("nvidia_cudnn_cu13-*.dist-info"))
    (info / "RECORD").write_bytes(record)
    report = run(cu13, facts=H100_580)
    assert "file-ownership-clash" not in codes(report)


@pytest.fixture
def cu13(tmp_path: Path, elf: ElfFactory) -> FakeEnv:
    return make_cu13_venv(tmp_path / "cu13", elf)


def test_garbage_conda_meta_is_skipped(cu13: FakeEnv, run: Run) -> None:
    meta = cu13.prefix / "conda-meta"
    meta.mkdir()
    (meta / "a.json").write_bytes(b"\xff\xfe{not json")
    (meta / "b.json").write_text('{"name": 3}')
    (meta / "c.json").write_text(
        '{"name": "cudnn", "files": [1, null, "lib/x"], "depends": "no", '
        '"paths_data": {"paths": [{"_path": 5}, {"_path": "lib/x", "sha256": 7, '
        '"size_in_bytes": true}, "nope"]}}'
    )
    report = run(
        cu13, facts=H100_580
    )  # a conda-meta directory makes it a conda env: no crash, that is all
    assert report.environment["conda_packages"] == 1


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"glibc-ld.so.cache1.1",
        b"glibc-ld.so.cache1.1" + struct.pack("<IIB3xI12x", 0xFFFFFFFF, 0, 0, 0),
        b"glibc-ld.so.cache1.1"
        + struct.pack("<IIB3xI12x", 1, 0, 0, 0)
        + struct.pack("<iIIIQ", 0x0303, 10**9, 10**9, 0, 0),
        b"ld.so-1.7.0" + b"\xff" * 40,
        os.urandom(4096),
    ],
)
def test_garbage_ld_so_cache(data: bytes) -> None:
    assert isinstance(parse(data), dict)


def test_garbage_ld_so_cache_on_the_host(cu13: FakeEnv, run: Run, host_root: Path) -> None:
    (host_root / "etc").mkdir()
    (host_root / "etc" / "ld.so.cache").write_bytes(os.urandom(10_000))
    assert run(cu13, facts=H100_580).findings == ()


def test_pth_files_that_are_huge_binary_or_point_nowhere(
    clean_env: FakeEnv, run: Run, tmp_path: Path
) -> None:
    (clean_env.site / "big.pth").write_text("/nowhere\n" * 50_000)
    (clean_env.site / "bin.pth").write_bytes(os.urandom(2048))
    (clean_env.site / "loop.pth").write_text(f"{clean_env.site}\n.\n..\n")
    assert run(clean_env).findings == ()


def test_symlink_loops_and_non_elf_libraries(clean_env: FakeEnv, run: Run) -> None:
    loop = clean_env.site / "nvidia" / "loop"
    loop.mkdir()
    (loop / "lib").symlink_to(loop / "lib")
    (clean_env.site / "nvidia" / "fake" / "lib").mkdir(parents=True)
    (clean_env.site / "nvidia" / "fake" / "lib" / "libcublas.so.12").write_text("not an ELF")
    report = run(clean_env)
    assert not report.has_errors, [(f.code, f.message) for f in report.findings]


def test_torch_init_py_that_is_garbage(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_bytes(b"def _preload_cuda_deps(\n" + os.urandom(5000))
    assert torch_preload(init).order  # the data file's copy stands in
    init.write_text("def _load_global_deps():\n    pass\n")
    old = torch_preload(init)
    assert old.order == () and old.after_success is False


def test_pythonpath_with_odd_entries(clean_env: FakeEnv, run: Run) -> None:
    report = run(clean_env, environ={"PYTHONPATH": ":::/nonexistent:\udcff:" + "x" * 5000})
    assert not report.has_errors


def _write_python(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    "body",
    ["echo '{not json'", "exit 3", "echo '{\"prefix\": 1}'", "echo '[]'"],
)
def test_an_interpreter_that_answers_garbage_falls_back_to_the_model(
    clean_env: FakeEnv, run: Run, body: str
) -> None:
    _write_python(clean_env.prefix / "bin" / "python", body)
    report = run(clean_env)
    assert report.environment["sys_path_from"] == "modelled from the files"
    assert report.environment["interpreter_not_asked"]
    assert codes(report) == {"interpreter-not-asked"}
    assert not report.has_errors


def test_an_interpreter_that_hangs_is_given_up(
    clean_env: FakeEnv, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(environment, "_ASK_TIMEOUT", 1.0)
    _write_python(clean_env.prefix / "bin" / "python", "sleep 30")
    report = run(clean_env)
    assert "interpreter_not_asked" in report.environment


def test_python_flag_with_a_garbage_interpreter_is_an_error(tmp_path: Path) -> None:
    python = _write_python(tmp_path / "python", "echo nonsense")
    with pytest.raises(UsageError, match="not a Python interpreter we can ask"):
        environment.locate(prefix=None, python=python, environ={}, default_prefix=None)
    failing = _write_python(tmp_path / "python2", "exit 7")
    with pytest.raises(ExternalToolError):
        environment.locate(prefix=None, python=failing, environ={}, default_prefix=None)


def test_the_real_interpreter_survives_a_hostile_environment(clean_env: FakeEnv) -> None:
    environ = {"PYTHONPATH": "/nonexistent", "PYTHONHOME": "/nonexistent-home"}
    with pytest.raises((ExternalToolError, UsageError)):
        environment.locate(
            prefix=None, python=Path(sys.executable), environ=environ, default_prefix=None
        )


# Every file the doctor opens in an environment, by where it sits in the clean venv.
_ENV_FILES = (
    "pyvenv.cfg",
    "lib/python3.11/site-packages/torch-2.4.1+cu124.dist-info/INSTALLER",
    "lib/python3.11/site-packages/torch-2.4.1+cu124.dist-info/RECORD",
    "lib/python3.11/site-packages/torch-2.4.1+cu124.dist-info/METADATA",
    "lib/python3.11/site-packages/torch/__init__.py",
    "lib/python3.11/site-packages/torch/version.py",
    "lib/python3.11/site-packages/torch/lib/libtorch_cuda.so",
    "lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
    "lib/python3.11/site-packages/odd.pth",
    "lib/python3.11/site-packages/odd-1.0.dist-info/METADATA",
    "lib/python3.11/site-packages/odd-1.0.dist-info/gpuenv-build.json",
    "conda-meta/odd-1.0-0.json",
)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("rel", _ENV_FILES)
def test_a_fifo_or_dev_zero_anywhere_in_the_environment_never_hangs(
    clean_env: FakeEnv, run: Run, rel: str, kind: str
) -> None:
    import signal

    odd = clean_env.dist("odd", "1.0", files=["odd/_C.so"])
    (odd / "gpuenv-build.json").write_text("{}")
    clean_env.conda("odd", "1.0", files=["lib/libodd.so"])
    target = clean_env.prefix / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"doctor hung on {kind} {rel}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        report = run(clean_env, environ={"CUDA_HOME": str(clean_env.prefix)})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert report.environment  # it finished, with whatever it could read


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_an_interpreter_whose_pyvenv_cfg_would_block_it_is_not_asked(
    clean_env: FakeEnv, run: Run, kind: str
) -> None:
    import signal

    (clean_env.prefix / "bin").mkdir()
    (clean_env.prefix / "bin" / "python").symlink_to(sys.executable)
    cfg = clean_env.prefix / "pyvenv.cfg"
    cfg.unlink()
    if kind == "fifo":
        os.mkfifo(cfg)  # Python blocks opening it (until the 30 s ask timeout)
    else:
        cfg.symlink_to("/dev/zero")  # Python reads it until memory runs out

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"doctor waited on an interpreter blocked by a {kind} pyvenv.cfg")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        report = run(clean_env)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert "pyvenv.cfg is not a regular file" in report.environment["interpreter_not_asked"]
    assert report.environment["sys_path_from"] == "modelled from the files"
