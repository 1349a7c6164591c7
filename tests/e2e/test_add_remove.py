"""`gpuenv add` / `gpuenv remove` on a commented spec: every byte outside the edited lines
kept, the result checked like any spec, only the touched targets relocked, the
installed ones installed; a failed relock puts the spec back; `lock --upgrade-package`
moves one pin."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable
from pathlib import Path

from gpuenv.lock.format import read_lock
from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.plugin import PkgIndex

SPEC = """#:schema ./schemas/gpuenv.schema.json
# The lab's environment: keep these comments.
[project]
name = "lab"   # shown in prompts

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = false
torchaudio = false

[targets.h100]   # the cluster
gpu = "H100"
driver = "550.54.15"

[targets.cpu]    # laptops and CI
gpu = "none"

[pip]
index-url = "{default}"
torch-index = "{torch}"
dependencies = [
    "transformers>=4.44",  # the models
]
"""


def _changed(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.ndiff(before.splitlines(), after.splitlines())
        if line.startswith(("+ ", "- "))
    ]


def _content(project: Project, target: str) -> str:
    lock = read_lock(project.lock)
    assert lock is not None
    return lock.targets[target].content_hash


def _version(project: Project, target: str, name: str) -> str | None:
    lock = read_lock(project.lock)
    assert lock is not None
    package = lock.targets[target].pip_package(name)
    return package.version if package else None


def test_add_and_remove_keep_the_spec_byte_for_byte_and_install_what_is_installed(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    original = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base)
    project = make_project(original)
    installed = project.gpuenv("install", "--target", "cpu", timeout=300)
    assert installed.returncode == 0, installed.stderr
    h100_before = read_lock(project.lock)
    assert h100_before is None or "h100" not in h100_before.targets

    added = project.gpuenv("add", "pillow>=10", "--json", timeout=300)
    assert added.returncode == 0, added.stderr
    report = json.loads(added.stdout)
    assert report["changed"] == ["pillow>=10"]
    assert (report["locked"], report["installed"]) == (["h100", "cpu"], ["cpu"])
    where = {k: report["edits"][0][k] for k in ("list", "file", "line", "was")}
    assert where == {"list": "pip.dependencies", "file": "gpuenv.toml", "line": 24, "was": None}
    after = project.spec.read_text()
    assert _changed(original, after) == ['+     "pillow>=10",'], "one line added, nothing else"
    assert _version(project, "h100", "pillow") and _version(project, "cpu", "pillow")
    cpu = Path(os.readlink(project.dir / ".gpuenv" / "cpu"))
    assert list(cpu.glob("lib/python3*/site-packages/pillow-*.dist-info"))

    h100_lock = _content(project, "h100")
    target_only = project.gpuenv("add", "--target", "cpu", "anyio", timeout=300)
    assert target_only.returncode == 0, target_only.stderr
    changed = _changed(after, project.spec.read_text())
    assert changed == ["+ [targets.cpu.pip]", '+ dependencies = ["anyio"]', "+ "], changed
    assert _content(project, "h100") == h100_lock, "h100 was not relocked"
    assert _version(project, "cpu", "anyio") and not _version(project, "h100", "anyio")

    refused = project.gpuenv("add", "torch==2.5.0")
    assert refused.returncode == 2 and "[stack] torch" in refused.stderr
    bad = project.gpuenv("add", "pillow>=")
    assert bad.returncode == 2 and "not a requirement" in bad.stderr

    removed = project.gpuenv("remove", "pillow", "anyio", timeout=300)
    assert removed.returncode == 0, removed.stderr
    final = project.spec.read_text()
    assert _changed(original, final) == [
        "+ [targets.cpu.pip]",
        "+ dependencies = []",
        "+ ",
    ], "pillow's line is gone; the table added for cpu stays, empty"
    assert not _version(project, "cpu", "pillow") and not _version(project, "h100", "pillow")
    missing = project.gpuenv("remove", "pillow")
    assert missing.returncode == 2 and "pillow is not in" in missing.stderr


def test_a_failed_relock_puts_the_spec_back_and_upgrade_package_moves_one_pin(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    original = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base)
    project = make_project(original)
    failed = project.gpuenv("add", "no-such-package-anywhere", timeout=300)
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert project.spec.read_text() == original, "the spec is as it was"

    pinned = project.gpuenv("add", "--no-install", "filelock<3.14", timeout=300)
    assert pinned.returncode == 0, pinned.stderr
    assert _version(project, "cpu", "filelock") == "3.13.1"
    project.gpuenv("remove", "--no-install", "filelock", timeout=300, check=True)
    assert _version(project, "cpu", "filelock") == "3.13.1", "transformers' filelock stays pinned"
    numpy = _version(project, "cpu", "numpy")
    upgraded = project.gpuenv("lock", "--upgrade-package", "filelock", timeout=300)
    assert upgraded.returncode == 0, upgraded.stderr
    assert _version(project, "cpu", "filelock") == "3.16.1"
    assert _version(project, "cpu", "numpy") == numpy, "the other pins stay"


def test_add_installs_each_target_again_with_the_groups_it_holds(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """The docs' notebook recipe (a group, installed with --group) broke on the next
    `add`: it installed the default groups only, and the kernel's ipykernel was gone."""
    spec = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base)
    project = make_project(spec + '\n[pip.groups]\nnotebooks = ["pillow"]\n')
    installed = project.gpuenv("install", "--target", "cpu", "--group", "notebooks", timeout=300)
    assert installed.returncode == 0, installed.stderr
    added = project.gpuenv("add", "--target", "cpu", "anyio", timeout=300)
    assert added.returncode == 0, added.stderr
    cpu = Path(os.readlink(project.dir / ".gpuenv" / "cpu"))
    site = next(cpu.glob("lib/python3*/site-packages"))
    assert list(site.glob("anyio-*.dist-info")), "the added package"
    assert list(site.glob("pillow-*.dist-info")), "and the group it held before"
    marker = json.loads((cpu / "etc" / "gpuenv" / "installed.json").read_text())
    assert marker["groups"] == ["notebooks"]


def test_run_says_when_the_spec_changed_since_the_install(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """A dependency added to gpuenv.toml (or pyproject.toml) was just missing at the
    next `gpuenv run`, with no word: uv's and pixi's run would have synced."""
    original = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base)
    project = make_project(original)
    project.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    argv = ("run", "--target", "cpu", "--unverified", "--", "true")
    assert "changed since" not in project.gpuenv(*argv).stderr
    os.utime(project.spec)  # touched, same bytes (a checkout): nothing to say
    assert "changed since" not in project.gpuenv(*argv).stderr
    project.spec.write_text(
        original.replace('"transformers>=4.44",', '"transformers>=4.44", "anyio",')
    )
    warned = project.gpuenv(*argv)
    assert warned.returncode == 0, warned.stderr
    assert "gpuenv.toml changed since this environment was installed" in warned.stderr
    assert "'gpuenv install' locks and installs the change" in warned.stderr
    project.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    assert "changed since" not in project.gpuenv(*argv).stderr
    (project.dir / "pyproject.toml").write_text("[project]\nname = 'lab'\nversion = '1'\n")
    assert "pyproject.toml changed since" in project.gpuenv(*argv).stderr, "a project appeared"


def test_lock_waits_for_an_add_of_the_same_spec(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """A `gpuenv lock` 0.2-0.5 s into a failing `add` read the edit, and wrote a lock
    holding it after the add had put both files back (3 of 6 tries): lock and install
    now take the spec's edit lock, as add and remove do."""
    import time

    from gpuenv.store import Store

    original = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base)
    project = make_project(original)
    with Store(project.home).spec_locked(project.spec):  # an add in progress
        lock = project.popen("lock")
        time.sleep(1.5)
        assert lock.poll() is None, "lock waits while the spec is being edited"
    _out, err = lock.communicate(timeout=300)
    assert lock.returncode == 0, err
    assert project.lock.exists()
