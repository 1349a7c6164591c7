"""git requirements: a commit is kept and written for the lock to pin; a tag or branch is
kept with a warning (the lock freezes the commit it has when written); one file's
unpinned git line never erases another file's versioned requirement."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuenv.spec import load_spec
from tests.importers.conftest import Imported

SHA = "0ce1c4a4b6ff8d4a0a0b5a8de6b9b4d1f0a8c3e2"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "paper" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_git_requirements_are_kept_for_the_lock_to_pin(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = _write(
        tmp_path,
        "requirements.txt",
        "torch==2.4.1\n"
        f"clip @ git+https://github.com/openai/CLIP.git@{SHA}\n"
        "-e git+https://github.com/example/taming.git@v0.1.2#egg=taming-transformers\n"
        "git+https://github.com/example/k-diffusion@master#egg=k-diffusion\n"
        "old-tool @ git+git://github.com/example/old-tool.git\n",
    )
    imported = run_import(req, target="cpu")
    assert imported.result.code == 0, imported.result.out
    kept, changed = imported.entries("kept"), imported.entries("changed")
    assert f"commit {SHA}" in kept["clip"]["why"]
    assert "tag v0.1.2" in kept["taming-transformers"]["why"]
    assert changed["k-diffusion"]["risk"] == "high"
    assert "branch master" in changed["k-diffusion"]["why"]
    assert "git+https://" in imported.entries("unreproducible")["old-tool"]["why"]
    spec = load_spec(imported.spec).spec
    deps = list(spec.pip.dependencies)
    assert f"clip @ git+https://github.com/openai/CLIP.git@{SHA}" in deps
    assert "taming-transformers @ git+https://github.com/example/taming.git@v0.1.2" in deps
    assert "k-diffusion @ git+https://github.com/example/k-diffusion@master" in deps
    assert not any("old-tool" in d for d in deps)


def test_an_unpinned_git_line_never_erases_another_files_pin(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    req = _write(tmp_path, "requirements.txt", "torch==2.4.1\nfvcore==0.1.5.post20221221\n")
    docker = _write(
        tmp_path,
        "Dockerfile",
        "FROM pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime\n"
        "RUN pip install 'git+https://github.com/facebookresearch/fvcore'\n",
    )
    imported = run_import(req, docker, target="cpu")
    assert imported.result.code == 0, imported.result.out
    assert imported.entries("kept")["fvcore"]["to"] == "==0.1.5.post20221221"
    (disagreement,) = [d for d in imported.report["disagreements"] if d["subject"] == "fvcore"]
    assert disagreement["why"] == (
        "a versioned requirement beats a git branch or URL that names no version"
    )
    assert disagreement["over"] == [
        "Dockerfile:2 RUN pip install 'git+https://github.com/facebookresearch/fvcore'"
    ]
