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


# Folders of flash-attention built one by one, as 2023 training images did (the lines
# of a RAG fine-tuning image and of an NGC 24.02 one): each folder is its own project.
FLASH_FOLDERS = """\
torch==2.1.2
flash-attn @ git+https://github.com/Dao-AILab/flash-attention@v2.3.3
git+https://github.com/Dao-AILab/flash-attention@v2.3.3#subdirectory=csrc/layer_norm
git+https://github.com/HazyResearch/flash-attention@v2.3.3#subdirectory=csrc/rotary
git+https://github.com/NVlabs/nvdiffrast@v0.3.1
git+https://github.com/NVlabs/nvdiffrast@v0.3.1#subdirectory=extra/thing
"""


def test_each_folder_of_a_repository_is_the_project_it_builds(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """Named after the repository, every folder's build was flash-attn, merged into the
    first and lost, unsaid. A folder the knowledge base names is its own project; one it
    does not name is reported as left out, with the command that builds it."""
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "requirements.txt").write_text(FLASH_FOLDERS)
    imported = run_import(paper, target="h100", extra=("--no-check-resolves", "--json"))
    assert imported.result.code == 0, imported.result.out
    spec = load_spec(imported.spec).spec
    deps = {str(r).split(" @ ")[0]: str(r) for r in spec.pip.dependencies}
    assert deps["dropout-layer-norm"].endswith("@v2.3.3#subdirectory=csrc/layer_norm")
    assert deps["rotary-emb"].endswith("@v2.3.3#subdirectory=csrc/rotary")
    assert deps["flash-attn"].endswith("flash-attention@v2.3.3")
    assert deps["nvdiffrast"].endswith("nvdiffrast@v0.3.1")
    (left,) = [d for d in imported.report["disagreements"] if d["subject"] == "nvdiffrast"]
    assert "another folder of the same repository" in left["why"]
    assert "#subdirectory=extra/thing'` builds it" in left["why"]
