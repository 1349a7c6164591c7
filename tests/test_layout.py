"""tests/ mirrors src/gpuenv/ (docs/dev/development.md, "Where a test goes"): a package's
tests in ``tests/<package>/``, a top-level module's in ``tests/test_<module>*.py`` (or
``tests/<module>/`` once it has several files), and no catch-all folder such as the old
``tests/unit/``, whose 36 files of a dozen packages and modules moved out."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Folders that test no single package, each with what it holds.
KEPT = {
    "e2e": "whole commands with real uv and rattler against the local index and channel",
    "faults": "full disks, signals, read-only trees and hostile files across packages",
    "fixtures": "test inputs (wheels, channel, hardware captures, specs), no tests",
    "golden": "activation scripts compared byte for byte",
    "nvml": "the stand-in NVML library the hardware and doctor tests load",
    "shells": "activation scripts sourced in real bash, zsh, fish, sh and dash",
    "tools": "the repository's tools/ scripts, which are not in src/",
}

# Top-level tests about the whole code base rather than one package or module.
CROSS_CUTTING = {
    "test_docs.py",  # the docs pages against the parser and errors.py
    "test_errors_table.py",  # errors.py's table against every error class
    "test_import_cycles.py",  # every module's imports
    "test_layout.py",  # this file
    "test_no_expansion.py",  # "${" through the locker, install and every export
    "test_startup.py",  # the import budget of the `gpuenv run` path
}


def _source_names(src: Path) -> tuple[set[str], set[str]]:
    """The packages and the top-level modules of ``src`` (a module's leading ``_`` dropped)."""
    packages = {p.name for p in src.iterdir() if (p / "__init__.py").is_file()}
    modules = {
        p.stem.removeprefix("_") for p in src.glob("*.py") if p.stem not in {"__init__", "__main__"}
    }
    return packages, modules


def _files(folder: Path) -> list[str]:
    """The files git would see under ``folder``, relative to it (byte-code left out)."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def layout_problems(tests: Path, src: Path) -> list[str]:
    """Each folder or top-level test file of ``tests`` that has no place in the layout."""
    packages, modules = _source_names(src)
    problems = []
    for entry in sorted(tests.iterdir()):
        name = entry.name
        if entry.is_dir() and not name.startswith((".", "__")):
            if not (files := _files(entry)):
                continue  # what git leaves of a moved folder: empty, or byte-code only
            if name == "unit":
                problems.append(
                    f"tests/unit/ is gone: move {files} to the folder of the package each tests"
                )
            elif name not in packages | modules and name not in KEPT:
                problems.append(
                    f"tests/{name}/ has no src/gpuenv/{name}/ or {name}.py: name it after "
                    "what it tests, or list it in KEPT with what it holds"
                )
        elif name.startswith("test_") and name.endswith(".py") and name not in CROSS_CUTTING:
            words = name.removeprefix("test_").removesuffix(".py").split("_")
            prefixes = {"_".join(words[:n]) for n in range(1, len(words) + 1)}
            if not prefixes & modules:
                problems.append(
                    f"tests/{name} names no top-level module of src/gpuenv: move it to "
                    "tests/<package>/, or list it in CROSS_CUTTING"
                )
    return problems


def test_tests_mirror_src() -> None:
    assert layout_problems(ROOT / "tests", ROOT / "src" / "gpuenv") == []


def test_kept_folders_exist() -> None:
    """A kept folder that was removed or renamed leaves a stale exemption behind."""
    assert sorted(n for n in KEPT if not (ROOT / "tests" / n).is_dir()) == []
    assert sorted(n for n in CROSS_CUTTING if not (ROOT / "tests" / n).is_file()) == []


def test_a_catch_all_folder_or_a_stray_file_is_named(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "plan").mkdir(parents=True)
    (src / "plan" / "__init__.py").touch()
    (src / "_network.py").touch()
    (src / "store.py").touch()
    tests = tmp_path / "tests"
    for folder in ("unit/compat", "plan", "planner", "store", "e2e", "__pycache__", "gone"):
        (tests / folder).mkdir(parents=True)
        (tests / folder / "__init__.py").touch()
    (tests / "unit" / "compat" / "test_x.py").touch()
    (tests / "gone" / "__init__.py").unlink()
    (tests / "gone" / "__pycache__").mkdir()  # a moved folder's leftovers count as nothing
    (tests / "gone" / "__pycache__" / "test_y.cpython-311.pyc").touch()
    for name in ("test_network_bounds.py", "test_store.py", "test_stores.py", "conftest.py"):
        (tests / name).touch()
    assert layout_problems(tests, src) == [
        "tests/planner/ has no src/gpuenv/planner/ or planner.py: name it after what it "
        "tests, or list it in KEPT with what it holds",
        "tests/test_stores.py names no top-level module of src/gpuenv: move it to "
        "tests/<package>/, or list it in CROSS_CUTTING",
        "tests/unit/ is gone: move ['compat/__init__.py', 'compat/test_x.py'] "
        "to the folder of the package each tests",
    ]
