"""Fixtures for the fault tests: a locked project, a stand-in uv, an OS-level write
fault injector, and a read-only bind mount (in a private mount namespace)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuenv.cli import main
from tests.e2e.conftest import spec_text
from tests.fixtures.pkgindex.plugin import PkgIndex

REPO = Path(__file__).resolve().parents[2]

# A stand-in for the uv binary, for install tests that need many quick installs (a
# shell script: no interpreter start-up per call). It makes a virtual environment the
# way uv does (pyvenv.cfg, bin/python) from the interpreter running the tests, and
# "installs" the requirements by keeping a copy. It writes its pid first (so tests can
# check it is gone), and FAKE_UV_HANG=venv|pip makes that step hang (with a child of
# its own, which writes its pid too).
FAKE_UV = """#!/bin/sh
[ -n "$FAKE_UV_PIDS" ] && echo $$ >> "$FAKE_UV_PIDS"
if [ "${{FAKE_UV_HANG-}}" = "$1" ]; then
    sleep 600 &
    [ -n "$FAKE_UV_PIDS" ] && echo $! >> "$FAKE_UV_PIDS"
    wait
fi
case "$1" in
    venv)
        for prefix; do :; done
        mkdir -p "$prefix/bin" "$prefix/lib/python3.{minor}/site-packages" || exit 2
        [ -e "$prefix/bin/python" ] || ln -s {base} "$prefix/bin/python" || exit 2
        printf 'home = {home}\\ninclude-system-site-packages = false\\nversion_info = {version}\\n' \\
            > "$prefix/pyvenv.cfg" || exit 2
        ;;
    pip)
        while [ $# -gt 0 ]; do
            case "$1" in
                -r) reqs=$2 ;;
                --python) python=$2 ;;
            esac
            shift
        done
        cp "$reqs" "${{python%/bin/python}}/fake-uv-installed.txt" || exit 2
        ;;
    --version) echo "uv 0.0.0 (fake)" ;;
esac
"""


@pytest.fixture
def fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in uv, used by in-process installs (``uv.find_uv_bin`` points at it)."""
    import uv

    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    version = ".".join(str(v) for v in sys.version_info[:3])
    script = tmp_path / "fake-uv"
    script.write_text(
        FAKE_UV.format(
            minor=sys.version_info[1], base=str(base), home=str(base.parent), version=version
        )
    )
    script.chmod(0o755)
    monkeypatch.setattr(uv, "find_uv_bin", lambda: str(script))
    return script


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long fuzz runs only when asked for (``-m fuzz``)."""
    if "fuzz" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="long fuzz run: select it with -m fuzz")
    for item in items:
        if item.get_closest_marker("fuzz"):
            item.add_marker(skip)


@dataclass
class Locked:
    """A project with a spec and a lock resolved by real uv against the local index."""

    dir: Path
    spec: Path
    lock: Path


@pytest.fixture(scope="session")
def locked_template(
    pkgindex: PkgIndex, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Locked]:
    directory = tmp_path_factory.mktemp("locked")
    spec = directory / "gpuenv.toml"
    spec.write_text(spec_text(pkgindex, deps=""))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "GPUENV_"))}
    env.update(
        GPUENV_HOME=str(directory / "store"),
        GPUENV_NO_CACHE="1",
        HOME=str(directory),
        XDG_CACHE_HOME=str(directory / ".cache"),
        PYTHONPATH=str(REPO / "src"),
    )
    subprocess.run(
        [sys.executable, "-m", "gpuenv", "lock", "--target", "cpu"],
        cwd=directory,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    yield Locked(directory, spec, directory / "gpuenv.lock")


@pytest.fixture
def project(locked_template: Locked, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Locked:
    """A copy of the locked project, with gpuenv's store, cache and state under tmp."""
    directory = tmp_path / "project"
    directory.mkdir()
    for name in ("gpuenv.toml", "gpuenv.lock"):
        shutil.copy2(locked_template.dir / name, directory / name)
    for key in [k for k in os.environ if k.startswith(("UV_", "GPUENV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(directory)
    return Locked(directory, directory / "gpuenv.toml", directory / "gpuenv.lock")


@dataclass
class Cli:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Cli]:
    def run(*args: str) -> Cli:
        code = main(list(args))
        captured = capsys.readouterr()
        return Cli(code, captured.out, captured.err)

    return run


# --- write faults ------------------------------------------------------------------------

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT


@dataclass
class WriteFaults:
    """Makes the ``fail_at``-th write-like system call under ``root`` (1-based) fail
    with ``code``, through the real functions every layer calls (``os.open`` for
    writing, ``os.mkdir``, ``os.symlink``, ``os.replace``, ``os.rename``, ``os.chmod``,
    ``os.link``). ``seen`` lists each counted call."""

    root: Path
    code: int = errno.ENOSPC
    fail_at: int | None = None
    seen: list[str] = field(default_factory=list)

    def _hit(self, what: str, path: object) -> None:
        text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
        if not text.startswith(str(self.root)):
            return
        self.seen.append(f"{what} {text}")
        if self.fail_at is not None and len(self.seen) == self.fail_at:
            raise OSError(self.code, os.strerror(self.code), text)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_open, real_mkdir, real_symlink = os.open, os.mkdir, os.symlink
        real_replace, real_rename, real_chmod, real_link = (
            os.replace,
            os.rename,
            os.chmod,
            os.link,
        )

        def open_(path: object, flags: int, *args: object, **kwargs: object) -> int:
            if flags & WRITE_FLAGS and not flags & os.O_DIRECTORY:  # O_TMPFILE: a probe
                self._hit("open", path)
            return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

        def wrap(name: str, real: Callable[..., object]) -> Callable[..., object]:
            def call(path: object, *args: object, **kwargs: object) -> object:
                if name == "mkdir" and os.path.lexists(path):  # type: ignore[arg-type]
                    return real(path, *args, **kwargs)  # the kernel answers EEXIST first
                self._hit(name, args[0] if name in ("symlink", "link") and args else path)
                return real(path, *args, **kwargs)

            return call

        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "mkdir", wrap("mkdir", real_mkdir))
        monkeypatch.setattr(os, "symlink", wrap("symlink", real_symlink))
        monkeypatch.setattr(os, "replace", wrap("replace", real_replace))
        monkeypatch.setattr(os, "rename", wrap("rename", real_rename))
        monkeypatch.setattr(os, "chmod", wrap("chmod", real_chmod))
        monkeypatch.setattr(os, "link", wrap("link", real_link))


@pytest.fixture
def write_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WriteFaults:
    faults = WriteFaults(tmp_path)
    faults.install(monkeypatch)
    return faults


# --- read-only mounts ------------------------------------------------------------------

_MOUNT = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do '
    'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 97; '
    'shift; n=$((n - 1)); done; exec "$@"'
)


def read_only_prefix(paths: list[Path]) -> list[str] | None:
    """An argv prefix that runs a command with ``paths`` bind-mounted read-only in a
    private mount namespace (as root: ``unshare -m``; else a user namespace), or None
    where neither is allowed. Read-only mounts hold for root too (permission bits
    do not)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    argv = [unshare, *flags, "--", "sh", "-c", _MOUNT, "sh", str(len(paths)), *map(str, paths)]
    probe = subprocess.run([*argv, "true"], capture_output=True, timeout=30, check=False)
    return argv if probe.returncode == 0 else None


from tests.e2e.conftest import make_project  # noqa: E402, F401 - the e2e projects, here too
