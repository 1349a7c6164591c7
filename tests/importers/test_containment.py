"""`gpuenv import` stays in its folder (issue 24, item 4): every file it opens resolves
inside the folders imported; links, includes and Dockerfile/cog paths that point
elsewhere are listed as "not read (outside the repository)" and their contents never
reach the output; a netrc-shaped line's password is never shown."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

SECRET = "hunter2-LEAKY-42"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A repository beside a folder of things it must never read."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}==1.0\nmachine h login u password {SECRET}\n")
    (outside / "env.yml").write_text(f"dependencies:\n  - {SECRET}\n")
    return repo, outside


def _run(cli: Callable[..., CliResult], *paths: Path, out: Path) -> CliResult:
    result = cli("import", *map(str, paths), "--gpu", "none", "-o", str(out), "--json")
    assert SECRET not in result.out + result.err, "nothing from outside reaches the output"
    if out.exists():
        assert SECRET not in out.read_text()
    return result


def _notes(result: CliResult) -> list[str]:
    return [str(a["why"]) for a in json.loads(result.out)["assumptions"]]


@pytest.mark.parametrize(
    "line",
    ["-r ../outside/secret.txt", "-r {outside}/secret.txt", "-c ../outside/secret.txt",
     "-r /etc/passwd", "--requirement=../outside/secret.txt"],
)  # fmt: skip
def test_includes_outside_are_listed_not_read(
    cli: Callable[..., CliResult], layout: tuple[Path, Path], line: str
) -> None:
    repo, outside = layout
    (repo / "requirements.txt").write_text(f"torch==2.4.1\n{line.format(outside=outside)}\n")
    result = _run(cli, repo / "requirements.txt", out=repo / "g.toml")
    assert result.code == 0, result.out
    assert "root:x:" not in result.out
    assert any(n.startswith("not read (outside the repository)") for n in _notes(result))


def test_a_linked_file_pointing_outside_is_not_read(
    cli: Callable[..., CliResult], layout: tuple[Path, Path]
) -> None:
    repo, outside = layout
    (repo / "requirements.txt").write_text("torch==2.4.1\n")
    (repo / "environment.yml").symlink_to(outside / "env.yml")
    (repo / "requirements-gpu.txt").symlink_to("/etc/passwd")
    found = _run(cli, repo, out=repo / "g.toml")
    assert found.code == 0, found.out
    notes = _notes(found)
    assert "not read (outside the repository): environment.yml" in notes
    assert "not read (outside the repository): requirements-gpu.txt" in notes
    named = _run(cli, repo / "environment.yml", out=repo / "h.toml")
    assert named.code == 2 and "outside the repository" in named.out


def test_a_linked_folder_is_not_followed(
    cli: Callable[..., CliResult], layout: tuple[Path, Path]
) -> None:
    repo, outside = layout
    (repo / "requirements.txt").write_text("torch==2.4.1\n")
    (repo / "docker").symlink_to(outside, target_is_directory=True)
    (outside / "Dockerfile").write_text(f"FROM python:3.10\nRUN pip install {SECRET}\n")
    assert _run(cli, repo, out=repo / "g.toml").code == 0


def test_dockerfile_and_cog_paths_outside_are_not_read(
    cli: Callable[..., CliResult], layout: tuple[Path, Path]
) -> None:
    repo, outside = layout
    (repo / "Dockerfile").write_text(
        "FROM pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime\n"
        f"RUN pip install -r {outside}/secret.txt && pip install -r ../outside/secret.txt\n"
    )
    (repo / "cog.yaml").write_text(
        'build:\n  gpu: true\n  python_version: "3.10"\n'
        "  python_requirements: ../outside/secret.txt\n"
    )
    result = _run(cli, repo, out=repo / "g.toml")
    assert result.code == 0, result.out
    notes = [n for n in _notes(result) if n.startswith("not read (outside the repository)")]
    assert len(notes) >= 2, _notes(result)


def test_a_netrc_shaped_file_never_shows_its_password(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    (tmp_path / "requirements.txt").write_text(
        f"torch==2.4.1\nmachine pypi.example login alice password {SECRET}\n"
    )
    result = _run(cli, tmp_path / "requirements.txt", out=tmp_path / "g.toml")
    assert result.code == 0
    (note,) = [n for n in _notes(result) if "not read" in n]
    assert "password ***" in note
    netrc = tmp_path / ".netrc"
    netrc.write_text(f"machine h\n  login u\n  password {SECRET}\n")
    refused = _run(cli, netrc, out=tmp_path / "h.toml")
    assert refused.code == 2


def test_a_link_swapped_in_after_the_check_is_still_refused(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuenv.errors import ForeignFileError
    from gpuenv.importers import _text

    repo, outside = layout
    target = repo / "requirements.txt"
    target.write_text("torch==2.4.1\n")
    real_open = os.open

    def swap(path: object, flags: int, *args: object) -> int:
        if Path(str(path)) == target:
            target.unlink()
            target.symlink_to(outside / "secret.txt")
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_text.os, "open", swap)
    with pytest.raises(ForeignFileError) as error:
        _text.read_text(target, "requirements.txt", (repo.resolve(),))
    assert "outside the repository" in str(error.value) and SECRET not in str(error.value)


def test_an_include_that_is_a_symlink_loop_is_listed(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """-r of a link loop was a RuntimeError from Path.resolve (exit 70)."""
    (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")
    (tmp_path / "b.txt").symlink_to(tmp_path / "a.txt")
    (tmp_path / "requirements.txt").write_text("-r a.txt\ntorch==2.4.1\n")
    (tmp_path / "cog.yaml").write_text("build:\n  python_requirements: a.txt\n")
    result = _run(cli, tmp_path, out=tmp_path / "g.toml")
    assert result.code == 0, result.out
    notes = [n for n in _notes(result) if "a symbolic link loop" in n]
    # one sentence, said by both files: the second is named where the first is said
    assert len(notes) == 1 and "(said again at " in notes[0], _notes(result)
