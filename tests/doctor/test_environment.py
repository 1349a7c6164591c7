"""Locating the environment and reading its inventory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpuenv.doctor.environment import inventory, locate, read_version_py, scan_dists
from gpuenv.errors import UsageError
from tests.doctor.conftest import ElfFactory, FakeEnv


def test_virtual_env_wins_over_conda_prefix(clean_env: FakeEnv, tmp_path: Path) -> None:
    environ = {"VIRTUAL_ENV": str(clean_env.prefix), "CONDA_PREFIX": str(tmp_path)}
    location = locate(prefix=None, python=None, environ=environ, default_prefix=None)
    assert location.prefix == clean_env.prefix
    assert location.site_packages == (clean_env.site,)


def test_conda_prefix_then_default(tmp_path: Path) -> None:
    located = locate(
        prefix=None, python=None, environ={"CONDA_PREFIX": str(tmp_path)}, default_prefix=None
    )
    assert located.prefix == tmp_path
    fallback = locate(prefix=None, python=None, environ={}, default_prefix=tmp_path)
    assert fallback.prefix == tmp_path


def test_missing_prefix_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no environment"):
        locate(prefix=tmp_path / "nope", python=None, environ={}, default_prefix=None)
    with pytest.raises(UsageError, match="no such file"):
        locate(prefix=None, python=tmp_path / "python", environ={}, default_prefix=None)


def test_python_is_asked_once_where_it_lives() -> None:
    location = locate(prefix=None, python=Path(sys.executable), environ={}, default_prefix=None)
    assert location.prefix == Path(sys.prefix)
    assert location.python is not None
    assert any(p.name == "site-packages" for p in location.site_packages)


def test_inventory(clean_env: FakeEnv) -> None:
    env = inventory(locate(prefix=clean_env.prefix, python=None, environ={}, default_prefix=None))
    assert env.kind == "venv"
    assert env.torch is not None and str(env.torch.cuda) == "12.4"
    assert env.dist("nvidia-cuda-runtime-cu12") is not None
    assert env.dist("Torch") is not None


def test_dist_names_and_egg_info(tmp_path: Path) -> None:
    (tmp_path / "Foo_Bar-1.0.dist-info").mkdir()
    (tmp_path / "baz-2.0-py3.11.egg-info").mkdir()
    odd = tmp_path / "qux.egg-info"
    odd.mkdir()
    (odd / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: Qux\nVersion: 3.1\n\nbody\n")
    found = {(d.name, d.version) for d in scan_dists(tmp_path)}
    assert found == {("foo-bar", "1.0"), ("baz", "2.0"), ("qux", "3.1")}


def test_version_py(tmp_path: Path) -> None:
    path = tmp_path / "version.py"
    path.write_text("__version__ = '2.4.1'\ncuda: Optional[str] = None\nhip = os.environ\n")
    assert read_version_py(path) == {"__version__": "2.4.1", "cuda": None}


def _bare_venv(tmp_path: Path, elf: ElfFactory) -> FakeEnv:
    env = FakeEnv(tmp_path / "env", elf)
    env.site.mkdir(parents=True)
    (env.prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return env


@pytest.mark.parametrize(
    ("version", "cuda", "tag"),
    [("2.4.1+cpu", None, "cpu"), ("2.4.1+cu121", "12.1", "cu121"), ("2.4.1", None, "cpu")],
)
def test_a_torch_without_version_py_is_read_from_its_dist_info(
    tmp_path: Path, elf: ElfFactory, version: str, cuda: str | None, tag: str
) -> None:
    """doctor said "no torch" of a torch that imports (a trimmed build, the tests' own
    small wheels), and skipped the trio checks with it."""
    bare = _bare_venv(tmp_path, elf)
    bare.torch(version, cuda)
    (bare.site / "torch" / "version.py").unlink()
    env = inventory(locate(prefix=bare.prefix, python=None, environ={}, default_prefix=None))
    assert env.torch is not None
    assert (env.torch.version, env.torch.tag) == (version, tag)
    assert str(env.torch.cuda) == str(cuda)
    assert env.torch.package_dir == bare.site / "torch"
    assert env.torch.lib_dir == bare.site / "torch" / "lib"


def test_no_torch_package_is_no_torch_even_with_a_stray_dist_info(
    tmp_path: Path, elf: ElfFactory
) -> None:
    bare = _bare_venv(tmp_path, elf)
    bare.dist("torch", "2.4.1")  # metadata left behind, no package
    env = inventory(locate(prefix=bare.prefix, python=None, environ={}, default_prefix=None))
    assert env.torch is None
