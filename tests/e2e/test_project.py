"""The project itself in its environment, end to end: a repository with a C extension
and one with a CUDA kernel, beside their gpuenv.toml, locked with their own
dependencies and installed editable into two targets, each with its own archs; a .py
edit is seen at once with no build, a native edit is rebuilt once; per-target and
group dependencies land where they belong."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.builds.elfscan import gpu_code
from gpuenv.builds.runner import nvcc_release
from gpuenv.lock.format import read_lock
from tests.builds.conftest import fake_toolkit, needs_gcc
from tests.builds.test_nvcc import TOOLKIT, needs_nvcc
from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.fixtures.sdists import SOURCES

SPEC = """# a paper's kernels, on two kinds of machines
[project]
name = "paper"

[stack]
python = "3.11"
torch = "{torch}"
torchvision = false
torchaudio = false
{cuda}toolkit = "system:{toolkit}"

[targets.h100]
gpu = "H100"
driver = "{driver}"

[targets.ada]
gpu = "RTX 4090"
driver = "{driver}"

[targets.ada.pip]
dependencies = ["pillow"]   # this target only

[pip]
index-url = "{default}"
torch-index = "{torch_base}"
dependencies = []
"""

PYPROJECT = """[build-system]
requires = []
build-backend = "fixture_backend"
backend-path = ["_backend"]

[project]
name = "paper-kernels"
version = "0.1.0"
dependencies = ["packaging>=20"]

[dependency-groups]
dev = ["anyio"]
"""


def write_repository(root: Path, *, kind: str, cuda_file: bool) -> None:
    """A research repository: its package, a native source, an in-tree backend that
    compiles it (C with $CC, CUDA with $CUDA_HOME/bin/nvcc)."""
    (root / "pyproject.toml").write_text(PYPROJECT)
    config = {
        "name": "paper-kernels",
        "version": "0.1.0",
        "module": "paper_kernels",
        "requires": ["packaging>=20"],
        "extension": kind,
        "needs_torch": False,
    }
    (root / "fixture.json").write_text(json.dumps(config))
    (root / "_backend").mkdir()
    shutil.copy(SOURCES / "fixture_backend.py", root / "_backend" / "fixture_backend.py")
    shutil.copy(SOURCES / "native.c", root / "native.c")
    if cuda_file:
        shutil.copy(SOURCES / "kernel.cu", root / "kernel.cu")
    (root / "paper_kernels").mkdir()
    (root / "paper_kernels" / "__init__.py").write_text('def hello():\n    return "v1"\n')
    (root / "tests").mkdir()  # not a package of the project: never importable
    (root / "tests" / "__init__.py").write_text("")


def _journal(project: Project) -> list[dict[str, str]]:
    path = Path(project.env["GPUENV_FIXTURE_JOURNAL"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _prefix(project: Project, target: str) -> Path:
    return Path(os.readlink(project.dir / ".gpuenv" / target))


def _python(prefix: Path, code: str) -> str:
    result = subprocess.run(
        [prefix / "bin" / "python", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=prefix,  # not this repository, whose tests/ is a package too
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _install(project: Project, *args: str) -> dict[str, dict[str, object]]:
    result = project.gpuenv("install", "--all", "--json", *args, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    targets: dict[str, dict[str, object]] = json.loads(result.stdout)["targets"]
    return targets


def _project(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    toolkit: Path,
    tmp_path: Path,
    *,
    kind: str = "c",
    cuda_file: bool = True,
    torch: str = "2.4.1",
    cuda: str = "",
    driver: str = "550.54.15",
) -> Project:
    text = SPEC.format(
        torch=torch,
        cuda=cuda,
        toolkit=toolkit,
        driver=driver,
        default=pkgindex.default_index,
        torch_base=pkgindex.torch_base,
    )
    project = make_project(text)
    write_repository(project.dir, kind=kind, cuda_file=cuda_file)
    project.env["GPUENV_FIXTURE_JOURNAL"] = str(tmp_path / f"journal-{project.dir.name}")
    return project


@needs_gcc
def test_the_project_is_locked_and_installed_editable_into_each_target_with_its_archs(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    project = _project(make_project, pkgindex, toolkit, tmp_path)
    first = _install(project)

    # The lock holds the project's own dependencies, its group, the target's own.
    lock = read_lock(project.lock)
    assert lock is not None
    for name in ("h100", "ada"):
        locked = lock.targets[name]
        assert locked.pip_package("packaging") is not None, "from the project's pyproject"
        assert locked.pip_package("anyio") is not None, "the dev group is locked"
        assert set(locked.groups["dev"]) == {"anyio", "idna", "sniffio"}
        assert locked.pip_package("paper-kernels") is None, "the project is not a locked wheel"
    assert lock.targets["ada"].pip_package("pillow") is not None
    assert lock.targets["h100"].pip_package("pillow") is None, "pillow is ada's only"

    # Each target's build had the target's archs (the tree has a .cu file: a CUDA build).
    archs = sorted(j["arch"] for j in _journal(project))
    assert archs == ["8.9+PTX", "9.0+PTX"]
    for target, arch in (("h100", "9.0+PTX"), ("ada", "8.9+PTX")):
        prefix = _prefix(project, target)
        record = json.loads((prefix / "etc/gpuenv/project.json").read_text())
        assert record["arch_list"] == arch and record["root"] == str(project.dir)
        assert first[target]["project"]["installed"] is True  # type: ignore[index]
        code = "import paper_kernels as p, paper_kernels._native as n; print(p.hello(), n.answer(), n.__file__)"
        hello, answer, where = _python(prefix, code).split()
        assert (hello, answer) == ("v1", "42")
        assert where.startswith(str(prefix)), "each target's compiled module is its own"
        anyio = "import importlib.metadata as m; print(m.version('anyio'))"
        assert _python(prefix, anyio) == "4.4.0", "dev: installed by default"
        assert not list(project.dir.glob("paper_kernels/*.so")), "nothing compiled in the tree"
        metadata = "import importlib.metadata as m; print(m.version('paper-kernels'))"
        assert _python(prefix, metadata) == "0.1.0"
        hidden = subprocess.run(
            [prefix / "bin" / "python", "-c", "import tests"],
            capture_output=True,
            check=False,
            cwd=prefix,
        )
        assert hidden.returncode != 0, "the project's tests/ folder is not on sys.path"
    pillow = "import importlib.metadata as m; print(m.version('pillow'))"
    assert _python(_prefix(project, "ada"), pillow) == "10.4.0"

    # A .py edit: seen at once, nothing rebuilt.
    init = project.dir / "paper_kernels" / "__init__.py"
    init.write_text('def hello():\n    return "v2"\n')
    assert _python(_prefix(project, "h100"), "import paper_kernels as p; print(p.hello())") == "v2"
    again = _install(project)
    assert len(_journal(project)) == 2, "a .py edit rebuilds nothing"
    assert again["h100"]["project"]["installed"] is False  # type: ignore[index]

    # A .cu edit: run says the build is stale; install rebuilds once per target.
    kernel = project.dir / "kernel.cu"
    kernel.write_text(kernel.read_text() + "\n// tuned\n")
    run = project.gpuenv(
        "run", "--target", "h100", "--unverified", "--", "python", "-c", "print('ran')"
    )
    assert run.returncode == 0 and run.stdout.strip() == "ran"
    assert "compiled parts changed" in run.stderr and "gpuenv install" in run.stderr
    _install(project)
    assert len(_journal(project)) == 4, "rebuilt once for each target's archs"
    _install(project)
    assert len(_journal(project)) == 4, "and not again"
    rerun = project.gpuenv("run", "--target", "h100", "--unverified", "--", "true")
    assert "compiled parts changed" not in rerun.stderr


@needs_gcc
def test_groups_are_installed_when_asked_and_another_checkout_gets_its_own_prefix(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    project = _project(make_project, pkgindex, toolkit, tmp_path, cuda_file=False)
    _install(project, "--no-dev")
    h100 = _prefix(project, "h100")
    anyio = "import importlib.metadata as m; print(m.version('anyio'))"
    missing = subprocess.run([h100 / "bin/python", "-c", anyio], check=False, cwd=h100)
    assert missing.returncode != 0, "--no-dev leaves the dev group out"
    assert len(_journal(project)) == 1, "a C extension without a .cu: one build for both"
    _install(project, "--group", "dev")
    assert _python(_prefix(project, "h100"), anyio) == "4.4.0"
    bad = project.gpuenv("install", "--all", "--group", "docs")
    assert bad.returncode == 2 and "no dependency group 'docs'" in bad.stderr

    other = _project(make_project, pkgindex, toolkit, tmp_path, cuda_file=False)
    _install(other)
    assert _prefix(other, "h100") != _prefix(project, "h100"), "one prefix per checkout"
    where = "import paper_kernels as p; print(p.__file__)"
    assert _python(_prefix(other, "h100"), where).startswith(str(other.dir))
    assert _python(_prefix(project, "h100"), where).startswith(str(project.dir))
    calm = other.gpuenv("run", "--target", "h100", "--unverified", "--", "true")
    assert calm.returncode == 0 and "editable install" not in calm.stderr

    # A checkout moved keeps its pointers, whose prefix maps the old path: run says so.
    moved = other.dir.with_name(other.dir.name + "-moved")
    other.dir.rename(moved)
    run = Project(moved, other.home, other.env).gpuenv(
        "run", "--target", "h100", "--unverified", "--", "true"
    )
    assert run.returncode == 0, run.stderr
    assert f"maps {other.dir}" in run.stderr and f"not this one ({moved})" in run.stderr
    assert "run 'gpuenv install'" in run.stderr


def test_path_false_opts_out_and_a_missing_path_is_a_located_error(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    project = _project(make_project, pkgindex, toolkit, tmp_path, cuda_file=False)
    text = project.spec.read_text()
    project.spec.write_text(text.replace('name = "paper"', 'name = "paper"\npath = "nowhere"'))
    result = project.gpuenv("plan")
    assert result.returncode == 2
    assert "gpuenv.toml:4: project.path" in result.stderr and "no such directory" in result.stderr
    project.spec.write_text(text.replace('name = "paper"', 'name = "paper"\npath = false'))
    lock = project.gpuenv("lock")
    assert lock.returncode == 0, lock.stderr
    locked = read_lock(project.lock)
    assert locked is not None
    assert locked.targets["h100"].pip_package("packaging") is None, "no project: no deps"


def installed_cuda_project(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> Project:
    """The CUDA-kernel repository, installed into both targets by real nvcc 13.0 (the
    fixture index's CUDA torch); skips with another toolkit."""
    assert TOOLKIT is not None
    cuda = nvcc_release(TOOLKIT)
    if cuda != "13.0":
        pytest.skip(f"the fixture index has a torch for CUDA 13.0, this toolkit is {cuda}")
    project = _project(
        make_project,
        pkgindex,
        TOOLKIT,
        tmp_path,
        kind="cuda",
        torch="2.9.0",
        cuda=f'cuda = "{cuda}"\n',
        driver="580.65.06",
    )
    _install(project)
    return project


@needs_nvcc
def test_a_cuda_project_is_compiled_by_real_nvcc_for_each_targets_gpu(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    project = installed_cuda_project(make_project, pkgindex, tmp_path)
    for target, gpu in (("h100", (9, 0)), ("ada", (8, 9))):
        prefix = _prefix(project, target)
        builds = json.loads((prefix / "etc/gpuenv/builds.json").read_text())["builds"]
        (build,) = [b for b in builds if b.get("project")]
        (so,) = build["extensions"]
        code = gpu_code(prefix / so)
        assert code is not None
        assert code.sass == {gpu[0] * 10 + gpu[1]}, f"{target}: {code.entries()}"
        assert code.runs_on(*gpu)
        assert _python(prefix, "import paper_kernels._native as n; print(n.answer())") == "42"
    # verify imports the project's compiled module and reads its GPU code too.
    verify = project.gpuenv("verify", "--target", "h100", "--json", "--timeout", "60")
    extensions = next(c for c in json.loads(verify.stdout)["checks"] if c["name"] == "extensions")
    assert "paper-kernels" in extensions["detail"]


def test_pip_in_a_prefix_refuses_and_names_gpuenv_add(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    result = project.gpuenv("install", "--target", "cpu", timeout=300)
    assert result.returncode == 0, result.stderr
    for argv in (["pip", "install", "six"], ["pip3", "install", "six"]):
        run = project.gpuenv("run", "--target", "cpu", "--unverified", "--", *argv)
        assert run.returncode == 1, run.stderr
        assert "managed by gpuenv.lock" in run.stderr and "gpuenv add" in run.stderr
    module = project.gpuenv(
        "run", "--target", "cpu", "--unverified", "--", "python", "-m", "pip", "install", "six"
    )
    assert module.returncode == 1 and "gpuenv add" in module.stderr
    probe = "try:\n    import pip\nexcept ImportError:\n    print('no pip')\n"
    code = project.gpuenv("run", "--target", "cpu", "--unverified", "--", "python", "-c", probe)
    assert code.stdout.strip() == "no pip", "code probing for pip carries on without it"
    prefix = _prefix(project, "cpu")
    assert not list(prefix.glob("lib/python3*/site-packages/six*")), "nothing was installed"


def test_a_setup_py_that_reads_requirements_txt_locks_with_that_files_requirements(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    """The research repository's usual setup.py (``install_requires`` read from
    requirements.txt when it runs) locked as "computes its dependencies": exit 2 on
    the first lock. The file is found in setup.py's syntax and read as pip reads it;
    an edit of it makes the lock stale."""
    toolkit = fake_toolkit(tmp_path)
    project = _project(make_project, pkgindex, toolkit, tmp_path, cuda_file=False)
    (project.dir / "pyproject.toml").unlink()
    (project.dir / "setup.py").write_text(
        "import os\nfrom setuptools import setup, find_packages\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "with open(os.path.join(here, 'requirements.txt')) as f:\n"
        "    requirements = [l.strip() for l in f if l.strip() and not l.startswith('#')]\n"
        "setup(name='paper-kernels', packages=find_packages(), install_requires=requirements)\n"
    )
    (project.dir / "requirements.txt").write_text("# what the paper needs\npackaging>=20\n")
    lock = project.gpuenv("lock")
    assert lock.returncode == 0, lock.stderr
    locked = read_lock(project.lock)
    assert locked is not None and locked.targets["h100"].pip_package("packaging") is not None
    assert project.gpuenv("lock", "--check").returncode == 0
    (project.dir / "requirements.txt").write_text("packaging>=20\nanyio\n")
    check = project.gpuenv("lock", "--check")
    assert check.returncode != 0, "an edit of the file setup.py reads makes the lock stale"
    assert project.gpuenv("lock").returncode == 0
    relocked = read_lock(project.lock)
    assert relocked is not None and relocked.targets["h100"].pip_package("anyio") is not None
