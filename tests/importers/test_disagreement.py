"""Files that disagree never stop an import: PEP 440 equality, other platforms' files set
aside and named, the documented precedence (``merge.PRECEDENCE``), ``--prefer``, git
recency, and every disagreement listed with both sides."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.importers import read_inputs
from gpuenv.importers.merge import merge
from gpuenv.knowledge.foreign import foreign_knowledge
from tests.importers.conftest import IMPORTS, Imported

BAD = IMPORTS / "bad"


def _files(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "paper"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _merged(root: Path, *names: str, **options: object) -> object:
    readings, _ = read_inputs(tuple(root / n for n in names), foreign_knowledge())
    return merge(readings, **options)  # type: ignore[arg-type]


def test_equal_versions_under_pep_440_agree(tmp_path: Path) -> None:
    root = _files(
        tmp_path,
        {
            "requirements.txt": "torchmetrics==0.6\ntorch==1.10.0\n",
            "environment.yml": "dependencies:\n  - pip:\n    - torchmetrics==0.6.0\n",
        },
    )
    merged = _merged(root, "requirements.txt", "environment.yml")
    assert merged.disagreements == ()  # type: ignore[attr-defined]
    assert merged.packages["torchmetrics"].specifier == "==0.6"  # type: ignore[attr-defined]


def test_two_equal_files_that_contradict_are_decided_and_listed(
    run_import: Callable[..., Imported],
) -> None:
    # requirements-a.txt pins torch 1.12.1, requirements-b.txt 1.13.1: nothing ranks one
    # above the other, so the first one named wins, and the report says so.
    imported = run_import(BAD / "requirements-a.txt", BAD / "requirements-b.txt", target="cpu")
    assert imported.result.code == 0, imported.result.err
    (torch,) = [d for d in imported.report["disagreements"] if d["subject"] == "torch"]
    assert torch["winner"] == "requirements-a.txt:1 torch==1.12.1"
    assert torch["over"] == ["requirements-b.txt:2 torch==1.13.1"]
    assert torch["why"] == "requirements-a.txt was read first"
    assert imported.torch().startswith("1.12.1")
    swapped = run_import(
        BAD / "requirements-a.txt",
        BAD / "requirements-b.txt",
        target="cpu",
        extra=("--prefer", "requirements-b.txt"),
    )
    (torch,) = [d for d in swapped.report["disagreements"] if d["subject"] == "torch"]
    assert torch["why"] == "--prefer names requirements-b.txt"
    assert swapped.torch().startswith("1.13.1")


def test_prefer_naming_a_file_not_read_is_exit_2(run_import: Callable[..., Imported]) -> None:
    result = run_import(BAD / "requirements-a.txt", extra=("--prefer", "setup.py")).result
    assert result.code == 2 and "--prefer setup.py: no such file was imported" in result.out


@pytest.mark.parametrize("name", ["", "  "])
def test_prefer_with_an_empty_name_is_exit_2(
    run_import: Callable[..., Imported], name: str
) -> None:
    """``--prefer ''`` was read as the folder "." and reported so."""
    result = run_import(BAD / "requirements-a.txt", extra=("--prefer", name)).result
    assert result.code == 2 and f"--prefer {name!r}: an empty file name" in result.out


def test_an_exact_pin_beats_a_range_of_the_same_weight(tmp_path: Path) -> None:
    root = _files(
        tmp_path,
        {"requirements.txt": "scipy>=1.8\n", "requirements/base.txt": "scipy==1.7.1\n"},
    )
    merged = _merged(root, "requirements.txt", "requirements/base.txt")
    (disagreement,) = merged.disagreements  # type: ignore[attr-defined]
    assert disagreement.winner.file == "requirements/base.txt"
    assert disagreement.why == "an exact pin beats a range"


def test_the_projects_own_exact_pin_beats_a_stale_cog_file(tmp_path: Path) -> None:
    # A replicate cog.yaml left at an old pin, the package's pyproject moved on: `pip
    # install -e .` of the project would refuse the cog pin.
    root = _files(
        tmp_path,
        {
            "cog.yaml": 'build:\n  gpu: true\n  python_version: "3.10"\n'
            '  python_packages:\n    - "torch==2.0.1"\n    - "transformers==4.30.2"\n',
            "pyproject.toml": '[project]\nname = "paper"\nversion = "0.1"\n'
            'dependencies = ["torch>=2.0", "transformers==4.44.2"]\n',
        },
    )
    merged = _merged(root, "cog.yaml", "pyproject.toml")
    resolved = merged.packages["transformers"]  # type: ignore[attr-defined]
    assert resolved.specifier == "==4.44.2"
    (disagreement,) = merged.disagreements  # type: ignore[attr-defined]
    assert "project's own exact pin" in disagreement.why
    assert "environment definition" in disagreement.why


def test_a_record_still_beats_the_projects_own_pin(tmp_path: Path) -> None:
    root = _files(
        tmp_path,
        {
            "pip-freeze.txt": "numpy==1.26.4\n",
            "setup.cfg": "[options]\ninstall_requires =\n    numpy==1.24.0\n",
        },
    )
    merged = _merged(root, "pip-freeze.txt", "setup.cfg")
    assert merged.packages["numpy"].specifier == "==1.26.4"  # type: ignore[attr-defined]


def test_the_more_recently_committed_file_wins_a_tie(tmp_path: Path) -> None:
    root = _files(
        tmp_path,
        {"requirements.txt": "einops==0.3.0\n", "requirements/base.txt": "einops==0.6.1\n"},
    )
    when = {"requirements.txt": 1_600_000_000.0, "requirements/base.txt": 1_700_000_000.0}
    merged = _merged(root, "requirements.txt", "requirements/base.txt", recency=when.get)
    (disagreement,) = merged.disagreements  # type: ignore[attr-defined]
    assert disagreement.winner.file == "requirements/base.txt"
    assert disagreement.why == "requirements/base.txt was changed more recently (git)"


def test_git_recency_from_a_real_checkout(
    run_import: Callable[..., Imported], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _files(tmp_path, {"requirements.txt": "torch==1.13.1\n"})

    def git(*args: str, date: str = "2021-01-01T00:00:00") -> None:
        env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "HOME": str(tmp_path)}
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=root,
            check=True,
            capture_output=True,
            env={**env, "PATH": "/usr/bin:/bin"},
        )

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "old")
    (root / "docker").mkdir()
    (root / "docker" / "requirements.txt").write_text("torch==1.12.1\n")
    git("add", ".")
    git("commit", "-qm", "new", date="2023-06-01T00:00:00")
    imported = run_import(root / "requirements.txt", root / "docker" / "requirements.txt")
    (torch,) = [d for d in imported.report["disagreements"] if d["subject"] == "torch"]
    assert torch["why"] == "docker/requirements.txt was changed more recently (git)"


def test_another_platforms_files_are_set_aside_and_named(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    root = _files(
        tmp_path,
        {
            "environment.yml": "name: p\ndependencies:\n  - python=3.9\n  - pytorch=1.12.1\n",
            "environment-macos.yml": "name: p\ndependencies:\n  - python=3.10\n"
            "  - pytorch=1.13.0\n",
        },
    )
    imported = run_import(root, target="cpu")
    assert imported.result.code == 0, imported.result.err
    assert imported.report["disagreements"] == []
    notes = [a["why"] for a in imported.report["assumptions"]]
    assert "environment-macos.yml set aside: it is for macOS, not Linux" in notes
    assert imported.torch().startswith("1.12.1")


def test_a_ppc64le_conda_lock_beside_a_linux_one_is_set_aside(tmp_path: Path) -> None:
    linux = (IMPORTS / "conda-lock" / "conda-lock.yml").read_text()
    root = _files(
        tmp_path,
        {
            "conda-lock.yml": linux,
            "conda-lock-ppc64le.yml": linux.replace("linux-64", "linux-ppc64le"),
        },
    )
    readings, _ = read_inputs((root,), foreign_knowledge())
    merged = merge(readings)
    assert merged.disagreements == ()
    assert any(
        n.message == "conda-lock-ppc64le.yml set aside: it is for linux-ppc64le, not Linux"
        for n in merged.notes
    )


def test_an_invalid_version_is_listed_as_not_read(run_import: Callable[..., Imported]) -> None:
    text = (IMPORTS / "collect-env" / "collect_env.txt").read_text()
    imported = run_import(IMPORTS / "collect-env" / "collect_env.txt", target="cpu")
    assert imported.result.code == 0
    hostile = Path(imported.spec.parent / "in" / "collect_env.txt")
    hostile.parent.mkdir()
    hostile.write_text(text.replace("1.13.1+cu117", "1.13.1!cu117", 1))
    broken = run_import(hostile, target="cpu")
    assert broken.result.code == 0, broken.result.out
    (note,) = [a for a in broken.report["assumptions"] if "not read" in a["why"]]
    assert note["file"] == "collect_env.txt:2" and "not a version" in note["why"]


def test_two_equally_specific_lines_of_one_file_say_the_first_is_taken(tmp_path: Path) -> None:
    """Tencent/HunyuanVideo's README installs one CUDA build or the other; 'the most
    authoritative, most specific statement wins' explained nothing of the choice."""
    root = _files(
        tmp_path,
        {
            "README.md": (
                "```shell\n"
                "# For CUDA 11.8\n"
                "conda install pytorch==2.4.0 torchvision==0.19.0 torchaudio==2.4.0 "
                "pytorch-cuda=11.8 -c pytorch -c nvidia\n"
                "# For CUDA 12.4\n"
                "conda install pytorch==2.4.0 torchvision==0.19.0 torchaudio==2.4.0 "
                "pytorch-cuda=12.4 -c pytorch -c nvidia\n"
                "```\n"
            )
        },
    )
    merged = _merged(root, "README.md")
    (build,) = [d for d in merged.disagreements if d.subject == "torch-build"]  # type: ignore[attr-defined]
    assert (build.winner.line, [o.line for o in build.losers]) == (3, [5])
    assert build.why == "equally specific lines of README.md: the first in the file is taken"


@pytest.mark.parametrize(
    ("files", "subject", "why"),
    [
        (
            {"environment.yml": "dependencies:\n  - python=3.8\n",
             "environment-gpu.yml": "dependencies:\n  - python=3.9\n"},
            "python",
            "equally specific statements of equal authority: the file read first is taken",
        ),
        (
            {"Dockerfile": "FROM pytorch/pytorch:1.12.1-cuda11.3-cudnn8-runtime\n",
             "environment.yml": "dependencies:\n  - python=3.9\n"},
            "python",
            "what the files state outright beats what a base image implies",
        ),
        (
            {"environment.yml": "dependencies:\n  - python=3.9\n",
             "env-export.yml": "name: x\ndependencies:\n  - python=3.8.5=h7579374_1\n"
                               "prefix: /opt/conda/envs/x\n"},
            "python",
            "the most authoritative, most specific statement wins",
        ),
    ],
)  # fmt: skip
def test_each_rule_that_decides_a_fact_is_the_one_named(
    tmp_path: Path, files: dict[str, str], subject: str, why: str
) -> None:
    merged = _merged(_files(tmp_path, files), *files)
    (found,) = [d for d in merged.disagreements if d.subject == subject]  # type: ignore[attr-defined]
    assert found.why == why


def test_the_same_python_range_in_two_files_agrees(tmp_path: Path) -> None:
    """facebookresearch/fairseq2's setup.py and native/python/setup.py both say
    python_requires='>=3.10': "Where the files disagree" listed them, one 'over' the other."""
    setup = (
        'from setuptools import setup\n\nsetup(\n    name="{}",\n    python_requires=">=3.10",\n)\n'
    )
    root = _files(
        tmp_path,
        {"setup.py": setup.format("fairseq2"), "native/python/setup.py": setup.format("fairseq2n")},
    )
    merged = _merged(root, "setup.py", "native/python/setup.py")
    assert [d for d in merged.disagreements if d.subject == "python"] == []  # type: ignore[attr-defined]
    other = _files(
        tmp_path / "other",
        {"setup.py": setup.format("a"), "b/setup.py": setup.format("b").replace("3.10", "3.8")},
    )
    merged = _merged(other, "setup.py", "b/setup.py")
    assert [d.subject for d in merged.disagreements] == ["python"]  # type: ignore[attr-defined]
