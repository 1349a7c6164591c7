"""uv is looked up once, on the main thread, before lock's background look at the
index starts: uv's own look-up reads ``sysconfig``, whose first use is not
thread-safe on Python 3.11 (``gpuenv lock`` exited 70 in 6 of 38 runs)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpuenv import _uvbin
from gpuenv.errors import ExternalToolError
from gpuenv.lock.uv import UvResolver

# A fresh interpreter (sysconfig not yet read) doing what `gpuenv lock` does first:
# make the resolvers on the main thread, then start the background look-up and the
# main path's use of uv together, released by a barrier.
RACE = """
import threading
from gpuenv.lock.backends import resolvers
from gpuenv.lock._background import Background

pip, _conda = resolvers()
barrier = threading.Barrier(2)

def beside():
    barrier.wait()
    return pip.uv_bin

watch = Background(beside)
barrier.wait()
main = pip.uv_bin
print(main == watch.result(timeout=30))
"""

RUNS = 12  # before the fix about half of such starts failed: 12 pass by chance 1 in 4000


def test_the_background_look_up_and_the_main_path_never_race() -> None:
    outcomes = []
    for _ in range(RUNS):
        done = subprocess.run(
            [sys.executable, "-c", RACE], capture_output=True, text=True, timeout=60, check=False
        )
        outcomes.append((done.returncode, done.stdout.strip(), done.stderr[-500:]))
    assert outcomes == [(0, "True", "")] * RUNS


@pytest.fixture
def finder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """A stand-in for uv.find_uv_bin that records the thread of every call."""
    import uv

    calls: list[str] = []
    binary = tmp_path / "uv"

    def find() -> str:
        calls.append(threading.current_thread().name)
        return str(binary)

    monkeypatch.setattr(uv, "find_uv_bin", find)
    return calls


def test_the_resolver_looks_uv_up_once_where_it_is_made(finder: list[str]) -> None:
    resolver = UvResolver()
    assert finder == [threading.main_thread().name]
    seen: list[str] = []
    threads = [threading.Thread(target=lambda: seen.append(resolver.uv_bin)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1 and len(seen) == 8
    UvResolver()  # a second resolver in the same process asks uv's package no more
    assert finder == [threading.main_thread().name]


def test_concurrent_first_look_ups_ask_uv_once(finder: list[str]) -> None:
    barrier = threading.Barrier(6)
    found: list[str] = []

    def look() -> None:
        barrier.wait()
        found.append(_uvbin.find_uv())

    threads = [threading.Thread(target=look) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(finder) == 1 and len(set(found)) == 1 and len(found) == 6


def test_a_missing_binary_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import uv

    def missing() -> str:
        raise FileNotFoundError("Could not find the uv binary in: /nowhere/bin")

    monkeypatch.setattr(uv, "find_uv_bin", missing)
    with pytest.raises(ExternalToolError, match=r"uv binary is missing.*/nowhere/bin") as caught:
        UvResolver()
    assert caught.value.exit_code == 5


# In a fresh interpreter: gpuenv's answer, uv's own answer, and whether gpuenv's look-up
# initialised sysconfig (its first use is 7-8 ms of every lock and install).
OWN_PREFIX = """
import sysconfig
from gpuenv import _uvbin
mine = _uvbin.find_uv()
untouched = sysconfig._CONFIG_VARS is None
import uv
print(mine == uv.find_uv_bin(), untouched)
"""


def test_in_its_own_prefix_uv_is_found_as_uv_finds_it_without_sysconfig() -> None:
    import uv

    if _uvbin._in_own_prefix(uv) is None:
        pytest.skip("the uv package is not installed in this interpreter's prefix")
    done = subprocess.run(
        [sys.executable, "-c", OWN_PREFIX], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.split(), done.stderr) == (0, ["True", "True"], "")


@pytest.mark.parametrize(
    "where",
    [
        "{prefix}/lib/python3.11/site-packages/uv/__init__.py",
        "{prefix}/lib64/python3.11/site-packages/uv/__init__.py",
    ],
)
def test_a_package_in_the_prefix_names_the_prefix_bin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "uv").write_text("")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    package = type("Package", (), {"__file__": where.format(prefix=tmp_path)})
    assert _uvbin._in_own_prefix(package) == str(tmp_path / "bin" / "uv")


@pytest.mark.parametrize(
    "where",
    [
        "{other}/lib/python3.11/site-packages/uv/__init__.py",  # another prefix
        "{prefix}/uv/__init__.py",  # pip install --target
        "{prefix}/lib/python3.11/dist-packages/uv/__init__.py",  # Debian's layout
        "{prefix}/lib/site-packages/uv/__init__.py",
        "{prefix}/lib/python3.11/site-packages/notuv/__init__.py",
    ],
)
def test_anywhere_else_uv_decides(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "uv").write_text("")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    package = type("Package", (), {"__file__": where.format(prefix=tmp_path, other=tmp_path / "o")})
    assert _uvbin._in_own_prefix(package) is None


def test_no_binary_in_the_prefix_leaves_it_to_uv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    package = type("Package", (), {"__file__": f"{tmp_path}/lib/python3.11/site-packages/uv/x.py"})
    assert _uvbin._in_own_prefix(package) is None
