"""Readers that read as the tools do: a valid shell line with nested quotes, pip's options
after a requirement on the same line, and setup.py values that would grow without bound."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from gpuenv.importers import read_inputs
from gpuenv.knowledge.foreign import foreign_knowledge
from tests.conftest import CliResult


def _read(tmp_path: Path, name: str, text: str) -> dict[str, object]:
    path = tmp_path / name
    path.write_text(text)
    (reading,) = read_inputs((path,), foreign_knowledge())[0]
    return {
        "asks": {a.name: a for a in reading.asks},
        "facts": {f.key: f.value for f in reading.facts},
        "notes": [n.message for n in reading.notes],
    }


def test_a_run_line_with_nested_quotes_is_split_as_the_shell_does(tmp_path: Path) -> None:
    # Shaped like a research image that rewrites a list variable before installing.
    dockerfile = (
        "FROM nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04\n"
        'ARG ARCHS="8.0;8.6;9.0"\n'
        "RUN export TORCH_CUDA_ARCH_LIST=\"$(echo \"$ARCHS\" | tr ';' ' ')\" && \\\n"
        "    pip install --no-cache-dir torch==2.2.2 'einops>=0.7' ; echo done | tee /log\n"
    )
    read = _read(tmp_path, "Dockerfile", dockerfile)
    asks = read["asks"]
    assert asks["torch"].specifier == "==2.2.2"  # type: ignore[index]
    assert asks["einops"].specifier == ">=0.7"  # type: ignore[index]
    assert not [n for n in read["notes"] if "not read" in n]  # type: ignore[union-attr]


def test_options_after_a_requirement_are_parsed_as_pip_does(tmp_path: Path) -> None:
    read = _read(
        tmp_path,
        "requirements.txt",
        "torch==2.2.2 --index-url https://download.pytorch.org/whl/cu121\n"
        "numpy==1.26.4 --hash=sha256:0123 --hash=sha256:4567\n"
        "einops>=0.7; python_version >= '3.8' --config-settings=x=y\n",
    )
    asks = read["asks"]
    assert asks["torch"].specifier == "==2.2.2"  # type: ignore[index]
    assert read["facts"]["torch-build"] == "cu121"  # type: ignore[index]
    assert asks["numpy"].specifier == "==1.26.4"  # type: ignore[index]
    assert asks["einops"].marker == 'python_version >= "3.8"'  # type: ignore[index]
    notes = read["notes"]
    assert "--hash pins dropped: the lock records its own" in notes  # type: ignore[operator]


def test_nested_string_sums_in_setup_py_are_bounded(tmp_path: Path) -> None:
    # 6 KB of names, each the sum of the previous one twice: 2^40 characters if followed.
    literal = ['b0 = "torch>=1.0,"'] + [f"b{i} = b{i - 1} + b{i - 1}" for i in range(1, 41)]
    literal += ["from setuptools import setup", "setup(name='p', install_requires=[b40])"]
    started = time.monotonic()
    read = _read(tmp_path, "setup.py", "\n".join(literal) + "\n")
    assert time.monotonic() - started < 5
    assert any("is computed when setup.py runs" in n for n in read["notes"])  # type: ignore[union-attr]


def test_a_folder_with_one_broken_dockerfile_still_imports(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.4.1\n")
    (tmp_path / "Dockerfile").write_text('FROM python:3.10\nRUN echo "unclosed\n')
    out = tmp_path / "g.toml"
    result = cli("import", str(tmp_path), "--gpu", "none", "-o", str(out), "--json")
    assert result.code == 0, result.out
    notes = [(a["file"], a["why"]) for a in json.loads(result.out)["assumptions"]]
    assert any(f == "Dockerfile:2" and "cannot split the shell line" in w for f, w in notes)


def test_a_found_file_that_cannot_be_read_at_all_is_listed_not_fatal(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.4.1\n")
    (tmp_path / "environment.yml").write_text("name: x\ndependencies: [a\n  - b\n")
    out = tmp_path / "g.toml"
    result = cli("import", str(tmp_path), "--gpu", "none", "-o", str(out), "--json")
    assert result.code == 0, result.out
    notes = [a["why"] for a in json.loads(result.out)["assumptions"]]
    assert any(n.startswith("not read: environment.yml:") and "YAML" in n for n in notes), notes
    named = cli("import", str(tmp_path / "environment.yml"), "--gpu", "none", "-o", str(out))
    assert named.code == 2, "a file named on the command line is refused"
