"""A project whose ``setup.py`` computes ``install_requires`` from a requirements file
(most paper repositories do) locks with that file's requirements: the file is found in
the syntax tree (setup.py is never run) and read as pip reads it. The shapes below are
those of real repositories' setup.py files of several eras, in our own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.errors import SpecError, UsageError
from gpuenv.lock.extras import project_requirements
from gpuenv.spec import load_spec
from gpuenv.spec._local import read_project, read_setup_py

SPEC = '[project]\nname = "p"\n[stack]\npython = "3.11"\n[targets.cpu]\ngpu = "none"\n'

REQUIREMENTS = "# runtime\nnumpy>=1.20\neinops  # tensors\n\n--extra-index-url https://example.invalid/simple\n"

# One-liner of the 2018-2020 research template.
ONE_LINER = """
from setuptools import setup, find_packages
setup(
    name="paper",
    packages=find_packages(),
    install_requires=open("requirements.txt").read().splitlines(),
)
"""

# A with-block inside try/except, the path joined with os.path (cookiecutter-era).
WITH_BLOCK = """
import os
from setuptools import setup
this_directory = os.path.abspath(os.path.dirname(__file__))
try:
    with open(os.path.join(this_directory, 'requirements.txt'), 'r') as fh:
        requirements = [line.strip() for line in fh.read().split() if line and '#' not in line]
except Exception:
    requirements = []
setup(name='paper', install_requires=requirements)
"""

# openmmlab's helper: a default path in the function, another passed at the call.
HELPER = """
from setuptools import setup

def parse_requirements(fname='requirements.txt', with_version=True):
    import re
    def parse_line(line):
        if line.startswith('-r '):
            yield from parse_require_file(line.split(' ')[1])
        else:
            yield line
    def parse_require_file(fpath):
        with open(fpath) as f:
            for line in f.readlines():
                line = line.strip()
                if line and not line.startswith('#'):
                    yield from parse_line(line)
    return list(parse_require_file(fname))

setup(
    name='mmpaper',
    install_requires=parse_requirements('requirements/runtime.txt'),
    extras_require={'all': parse_requirements('requirements.txt')},
)
"""

# pathlib, the file one folder down (2023+).
PATHLIB = """
from pathlib import Path
from setuptools import setup
requirements = [
    line.strip()
    for line in (Path(__file__).parent / "requirements" / "base.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
setup(name="paper", install_requires=requirements)
"""

# A module-level name bound to a literal list, and a sum of two such names.
NAMED_LITERAL = """
from setuptools import setup
requirements = ["six", "numpy>=1.16.5, !=1.21.*"]
extra = ["tqdm"]
setup(name="brainy", install_requires=requirements + extra)
"""


def _project(tmp_path: Path, setup_py: str, files: dict[str, str]) -> Path:
    (tmp_path / "setup.py").write_text(setup_py)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    return tmp_path


@pytest.mark.parametrize(
    ("setup_py", "where"),
    [
        (ONE_LINER, "requirements.txt"),
        (WITH_BLOCK, "requirements.txt"),
        (PATHLIB, "requirements/base.txt"),
    ],
)
def test_the_requirements_file_setup_py_reads_is_the_projects_dependencies(
    tmp_path: Path, setup_py: str, where: str
) -> None:
    root = _project(tmp_path, setup_py, {where: REQUIREMENTS})
    assert read_setup_py(setup_py).requirement_files == (where,)
    local = load_spec(root / "gpuenv.toml").spec.local
    assert local is not None and local.requirements == ("numpy>=1.20", "einops")
    assert project_requirements(load_spec(root / "gpuenv.toml").spec) == ("numpy>=1.20", "einops")


def test_a_helpers_call_argument_wins_over_its_default_and_r_includes_are_followed(
    tmp_path: Path,
) -> None:
    files = {
        "requirements.txt": "-r requirements/runtime.txt\npytest\n",
        "requirements/runtime.txt": "-r build.txt\nmatplotlib\nterminaltables\n",
        "requirements/build.txt": "cython\nnumpy\n",
    }
    root = _project(tmp_path, HELPER, files)
    local = read_project(root, "gpuenv.toml")
    assert local is not None
    assert local.requirements == ("cython", "numpy", "matplotlib", "terminaltables")


def test_names_bound_to_literals_and_their_sums_are_read_without_a_file(tmp_path: Path) -> None:
    facts = read_setup_py(NAMED_LITERAL)
    assert facts.install_requires == ("six", "numpy>=1.16.5, !=1.21.*", "tqdm")


@pytest.mark.parametrize(
    "setup_py",
    [
        # two candidate files: nothing is guessed
        "from setuptools import setup\n"
        "reqs = open('a.txt').read().split() + open('b.txt').read().split()\n"
        "setup(install_requires=reqs)\n",
        # no file at all
        "from setuptools import setup\nimport x\nsetup(install_requires=x.requirements())\n",
        # a file that is not there
        "from setuptools import setup\n"
        "setup(install_requires=open('missing.txt').read().splitlines())\n",
        # outside the project
        "from setuptools import setup\n"
        "setup(install_requires=open('../outside.txt').read().splitlines())\n",
        # a link out of the project
        "from setuptools import setup\n"
        "setup(install_requires=open('linked.txt').read().splitlines())\n",
    ],
)
def test_what_cannot_be_known_is_still_refused_at_lock_time_naming_the_fix(
    tmp_path: Path, setup_py: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "outside.txt").write_text("evil\n")
    (project / "linked.txt").symlink_to(tmp_path / "outside.txt")
    for name in ("a.txt", "b.txt"):
        (project / name).write_text("numpy\n")
    root = _project(project, setup_py, {})
    spec = load_spec(root / "gpuenv.toml").spec
    assert spec.local is not None and spec.local.requirements is None
    with pytest.raises(UsageError, match=r"computes its dependencies in setup\.py"):
        project_requirements(spec)


def test_a_line_that_is_not_a_requirement_names_the_file(tmp_path: Path) -> None:
    root = _project(
        tmp_path, ONE_LINER, {"requirements.txt": "numpy\ngit+https://example.invalid/x.git\n"}
    )
    with pytest.raises(SpecError) as caught:
        load_spec(root / "gpuenv.toml")
    (problem,) = caught.value.problems
    assert problem.file.endswith("requirements.txt") and "is not a requirement" in problem.message


def test_an_include_cycle_ends(tmp_path: Path) -> None:
    files = {
        "requirements.txt": "-r other.txt\nnumpy\n",
        "other.txt": "-r requirements.txt\nscipy\n",
    }
    root = _project(tmp_path, ONE_LINER, files)
    local = read_project(root, "gpuenv.toml")
    assert local is not None and local.requirements == ("scipy", "numpy")  # pip's order
