"""The project beside gpuenv.toml, read without running it: pyproject metadata, PEP 735
groups, setup.py through ast (torch's cpp_extension found, never executed), the source
tree's build key, the editable wheel composed from a built one."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from gpuenv._srctree import tree_key
from gpuenv.editable.wheel import OVERLAY, compose
from gpuenv.errors import SpecError
from gpuenv.spec import load_spec
from gpuenv.spec._local import read_project, read_setup_py

SPEC = """[project]
name = "p"
{extra}
[stack]
python = "3.11"

[targets.cpu]
gpu = "none"
{more}"""

# Shaped like detectron2's and gsplat's setup.py: the extension classes imported from
# torch.utils.cpp_extension, install_requires a literal, the sources globbed.
SETUP_PY = """
import glob
import os
from setuptools import find_packages, setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension, CppExtension

def get_extensions():
    sources = glob.glob(os.path.join("csrc", "*.cpp"))
    cls = CUDAExtension if CUDA_HOME else CppExtension
    return [cls("kernels._C", sources)]

setup(
    name="paper-kernels",
    version="0.3",
    packages=find_packages(exclude=("tests",)),
    install_requires=["numpy>=1.20", "einops"],
    ext_modules=get_extensions(),
    cmdclass={"build_ext": BuildExtension},
)
raise SystemExit("gpuenv must never run this file")
"""


def _spec(root: Path, extra: str = "", more: str = "") -> Path:
    path = root / "gpuenv.toml"
    path.write_text(SPEC.format(extra=extra, more=more))
    return path


def test_setup_py_is_read_through_ast_and_never_run() -> None:
    facts = read_setup_py(SETUP_PY)
    assert facts.name == "paper-kernels"
    assert facts.install_requires == ("numpy>=1.20", "einops")
    assert facts.torch_extension and facts.cuda_extension and facts.ext_modules


def test_a_computed_install_requires_is_unknown_not_guessed() -> None:
    facts = read_setup_py("from setuptools import setup\nsetup(install_requires=open('r').read())")
    assert facts.install_requires is None and not facts.torch_extension
    plain = read_setup_py("import setuptools\nsetuptools.setup(name='x')")
    assert plain.install_requires == () and plain.name == "x"


def test_a_setup_py_project_beside_the_spec_is_the_default_project(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(SETUP_PY)
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "k.cu").write_text("__global__ void k() {}\n")
    local = load_spec(_spec(tmp_path)).spec.local
    assert local is not None
    assert local.root == tmp_path.resolve() and local.name == "paper-kernels"
    assert local.requirements == ("numpy>=1.20", "einops")
    assert local.uses_torch and local.cuda and local.compiled
    assert local.build_requires == ("setuptools>=40.8.0",)


def test_pyproject_metadata_and_pep735_groups_with_includes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[build-system]\nrequires = ['hatchling']\nbuild-backend = 'hatchling.build'\n"
        "[project]\nname = 'Paper_Kernels'\nversion = '1'\ndependencies = ['numpy']\n"
        "[dependency-groups]\ntest = ['pytest']\n"
        "Dev = [{include-group = 'test'}, 'ruff']\n"
    )
    local = load_spec(_spec(tmp_path)).spec.local
    assert local is not None and local.name == "paper-kernels"
    assert local.requirements == ("numpy",) and not local.compiled
    assert dict(local.groups) == {"dev": ("pytest", "ruff"), "test": ("pytest",)}
    assert local.build_requires == ("hatchling",)


def test_groups_that_include_each_other_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n[dependency-groups]\n"
        "a = [{include-group = 'b'}]\nb = [{include-group = 'a'}]\n"
    )
    with pytest.raises(SpecError) as caught:
        read_project(tmp_path, "gpuenv.toml")
    assert "cycle" in str(caught.value)


def test_no_project_tool_config_only_opt_out_and_a_wrong_path(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    assert load_spec(_spec(tmp_path)).spec.local is None, "tool settings only: no project"
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    assert load_spec(_spec(tmp_path, extra="path = false\n")).spec.local is None
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(tmp_path, extra='path = "sub"\n'))
    problem = caught.value.problems[0]
    assert problem.path == "project.path" and problem.line == 3
    with pytest.raises(SpecError) as absolute:
        load_spec(_spec(tmp_path, extra='path = "/etc"\n'))
    assert "relative to gpuenv.toml" in str(absolute.value)


def test_torch_in_a_group_or_a_targets_dependencies_is_refused(tmp_path: Path) -> None:
    from gpuenv.knowledge import knowledge_base

    more = '[targets.cpu.pip]\ndependencies = ["torch"]\n[pip.groups]\ndev = ["triton"]\n'
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(tmp_path, more=more), kb=knowledge_base)
    paths = {p.path for p in caught.value.problems}
    assert paths == {"targets.cpu.pip.dependencies[0]", "pip.groups.dev[0]"}


def test_the_tree_key_ignores_python_edits_and_sees_native_ones(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "k.cu").write_text("// v1\n")
    (tmp_path / "setup.py").write_text("setup()\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "obj.cpp").write_text("stale\n")
    first = tree_key(tmp_path)
    (tmp_path / "pkg" / "__init__.py").write_text("x = 2\n")
    (tmp_path / "build" / "obj.cpp").write_text("changed\n")
    os.mkfifo(tmp_path / "pkg" / "pipe.h")  # a FIFO is never opened (it would block)
    assert tree_key(tmp_path) == first
    (tmp_path / "pkg" / "k.cu").write_text("// v2\n")
    assert tree_key(tmp_path) != first
    second = tree_key(tmp_path)
    (tmp_path / "setup.py").write_text("setup(name='y')\n")
    assert tree_key(tmp_path) != second, "the build's own script is an input"


def _built_wheel(path: Path) -> Path:
    wheel = path / "paper_kernels-0.1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("paper_kernels/__init__.py", "built copy\n")
        archive.writestr("paper_kernels/_C.cpython-311-x86_64-linux-gnu.so", b"\x7fELF")
        archive.writestr("paper_kernels/version.py", "generated = True\n")
        archive.writestr("paper_kernels-0.1.0.dist-info/METADATA", "Name: paper-kernels\n")
        archive.writestr("paper_kernels-0.1.0.dist-info/RECORD", "")
    return wheel


def test_the_editable_wheel_maps_the_tree_and_keeps_this_prefixs_compiled_files(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    (root / "src" / "paper_kernels").mkdir(parents=True)
    (root / "src" / "paper_kernels" / "__init__.py").write_text("tree copy\n")
    out = tmp_path / "out"
    out.mkdir()
    wheel, modules = compose(_built_wheel(tmp_path), root, out)
    assert modules == ["paper_kernels._C"]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        finder = archive.read("__editable___gpuenv_paper_kernels_finder.py").decode()
        direct = json.loads(archive.read("paper_kernels-0.1.0.dist-info/direct_url.json"))
    overlay = f"{OVERLAY}/paper_kernels/paper_kernels"
    assert f"{overlay}/_C.cpython-311-x86_64-linux-gnu.so" in names
    assert f"{overlay}/version.py" in names, "generated: not in the tree"
    assert "paper_kernels/__init__.py" not in names and f"{overlay}/__init__.py" not in names
    assert "__editable__.gpuenv_paper_kernels.pth" in names
    assert repr(str(root / "src" / "paper_kernels")) in finder
    assert direct == {"url": root.as_uri(), "dir_info": {"editable": True}}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"pyproject.toml": "[project]\nname = 'x'\ndependencies = ['numpy>=']\n"}, "numpy>="),
        ({"pyproject.toml": "[project]\nname = 'x'\ndependencies = 'numpy'\n"}, "array"),
        ({"pyproject.toml": "[project\nname = 'x'\n"}, "not valid TOML"),
        (
            {
                "pyproject.toml": "[project]\nname='x'\n[dependency-groups]\nd = [{include-group='e'}]\n"
            },
            "not a group",
        ),
        ({"pyproject.toml": "[project]\nname='x'\n[dependency-groups]\nd = [3]\n"}, "neither"),
        ({"setup.py": "setup(install_requires=['a b c'])\n"}, "not a requirement"),
        ({"setup.py": "def (:\n"}, "not Python"),
        ({"setup.py": "x = " + "(" * 5000 + ")" * 5000 + "\n"}, "not Python"),
    ],
)
def test_hostile_project_files_are_located_errors_not_crashes(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(tmp_path))
    assert expected in str(caught.value)


def test_links_and_special_files_in_the_tree_are_never_followed_out(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("// v1\n")
    (tmp_path / "loop").symlink_to(tmp_path)  # a directory link: not walked
    (tmp_path / "zero.cu").symlink_to("/dev/zero")  # never read (it would never end)
    (tmp_path / "gone.h").symlink_to(tmp_path / "missing")
    first = tree_key(tmp_path)
    assert tree_key(tmp_path) == first


# x-transformers' own layout: extras in [project] optional-dependencies, one of which a
# user (or a PEP 735 group, as uv allows) names through the project's own name.
X_TRANSFORMERS = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"
[project]
name = "x-transformers"
version = "2.26.4"
dependencies = ["einx>=0.3.0", "einops>=0.8.0"]
[project.optional-dependencies]
examples = ["lion-pytorch", "tqdm"]
test = ["pytest", "x-transformers[examples]"]
[dependency-groups]
dev = ["x-transformers[test]", "ruff"]
"""


def test_a_requirement_naming_the_project_itself_is_its_extras_not_the_index_release(
    tmp_path: Path,
) -> None:
    """``gpuenv add "x-transformers[examples]"`` inside x-transformers locked the
    index's 2.31.10 over the editable 2.26.4 checkout, and every export said 2.31.10."""
    (tmp_path / "pyproject.toml").write_text(X_TRANSFORMERS)
    more = '[pip.groups]\nnotebooks = ["X_Transformers[examples]", "ipykernel"]\n'
    spec = load_spec(
        _spec(tmp_path, more='[pip]\ndependencies = ["x-transformers", "numpy"]\n' + more)
    ).spec
    assert spec.pip.dependencies == ("numpy",), "the bare name is the checkout itself"
    assert spec.pip.groups["notebooks"] == ("lion-pytorch", "tqdm", "ipykernel")
    assert spec.local is not None
    assert spec.local.groups["dev"] == ("pytest", "lion-pytorch", "tqdm", "ruff")


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("x-transformers[nope]", "has no extra 'nope'"),
        ("x-transformers==2.31.10", "with a version, URL or marker"),
        ("x-transformers[examples]>=2", "with a version, URL or marker"),
    ],
)
def test_the_project_itself_with_a_version_or_an_unknown_extra_is_refused_by_line(
    tmp_path: Path, line: str, said: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(X_TRANSFORMERS)
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(tmp_path, more=f'[pip]\ndependencies = ["numpy", "{line}"]\n'))
    problem = caught.value.problems[0]
    assert said in problem.message and problem.path == "pip.dependencies"
    assert problem.line is not None


def test_a_virtual_project_leaves_its_name_to_the_index(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x-transformers'\nversion = '1'\n")
    spec = load_spec(_spec(tmp_path, more='[pip]\ndependencies = ["x-transformers==2.31.10"]\n'))
    assert spec.spec.pip.dependencies == ("x-transformers==2.31.10",)


@pytest.mark.parametrize(
    "inner", ['x-transformers[examples]; python_version >= "3.8"', "x-transformers[examples]>=0.1"]
)
def test_the_project_itself_with_a_marker_inside_an_extra_is_refused_too(
    tmp_path: Path, inner: str
) -> None:
    """At top level such a line was refused; inside an extra it locked the index's
    unrelated project of that name and left the extra out."""
    text = X_TRANSFORMERS.replace(
        'test = ["pytest", "x-transformers[examples]"]', f"test = ['pytest', '{inner}']"
    )
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(tmp_path, more='[pip]\ndependencies = ["x-transformers[test]"]\n'))
    problem = caught.value.problems[0]
    assert problem.path == "project.optional-dependencies.test"
    assert "with a version, URL or marker" in problem.message


def test_spaces_inside_the_brackets_of_the_project_itself_are_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(X_TRANSFORMERS)
    spec = load_spec(
        _spec(tmp_path, more='[pip]\ndependencies = [" X_Transformers [ Examples ] "]\n')
    ).spec
    assert spec.pip.dependencies == ("lion-pytorch", "tqdm")
