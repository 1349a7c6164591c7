"""A non-UTF-8 locale (LC_ALL=C with PYTHONUTF8=0: an old server, a minimal container)
with a store and a project under non-ASCII folders (/home/josé). Python decodes such
paths into surrogates there; the suite runs in a UTF-8 locale under ASCII temp paths,
so none of this was ever reached: run ended in a traceback, install and activate in
exit 70."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gpuenv._fs import atomic_write_text
from gpuenv._marker import root_link
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.pkgindex.plugin import PkgIndex

C_LOCALE = {"PYTHONUTF8": "0", "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0"}
SURROGATES = "/srv/jos\udcc3\udca9/project/.gpuenv/cpu"  # /srv/josé/... as LC_ALL=C decodes it


def test_a_gc_root_is_named_by_the_paths_bytes_whatever_the_locale() -> None:
    assert root_link("/store", SURROGATES) == root_link("/store", "/srv/josé/project/.gpuenv/cpu")


def test_a_written_file_keeps_a_paths_own_bytes(tmp_path: Path) -> None:
    target = tmp_path / "activate"
    atomic_write_text(target, f"export P='{SURROGATES}'\n")
    assert target.read_bytes() == b"export P='/srv/jos\xc3\xa9/project/.gpuenv/cpu'\n"


def test_install_run_and_activate_under_a_c_locale_in_non_ascii_folders(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    made = make_project(spec_text(pkgindex, deps=""))
    home = tmp_path / "josé"
    home.mkdir()
    directory = home / "project"
    made.dir.rename(directory)
    store = home / "störe"
    env = {**made.env, **C_LOCALE, "GPUENV_HOME": str(store)}
    project = Project(directory, store, env)

    install = project.gpuenv("install", "--target", "cpu", timeout=300)
    assert install.returncode == 0, install.stderr
    prefix_bytes = "import os, sys; os.write(1, os.fsencode(sys.prefix))"
    run = project.gpuenv(
        "run", "--target", "cpu", "--unverified", "--", "python", "-c", prefix_bytes
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{store}/prefixes/cpu-"), run.stdout
    activate = subprocess.run(
        [sys.executable, "-m", "gpuenv", "activate", "--target", "cpu", "--unverified"],
        cwd=directory,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert activate.returncode == 0, activate.stderr
    assert os.fsencode(f"'{store}/prefixes/cpu-") in activate.stdout  # the bytes, no escapes
