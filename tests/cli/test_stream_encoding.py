"""Output on a terminal or pipe that cannot show every character: a non-UTF-8 locale
(LC_ALL=C with PYTHONUTF8=0, an old server's en_US.ISO-8859-1) or PYTHONIOENCODING=ascii.
The suite's captured streams are UTF-8, so only a real process shows what a user sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.importers.conftest import IMPORTS


def _gpuenv(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHON"))}
    clean.update(PYTHONPATH=str(REPO / "src"), GPUENV_IMPORT_INDEX="off", **env)
    return subprocess.run(
        [sys.executable, "-m", "gpuenv", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        encoding="utf-8",
        errors="strict",
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "locale",
    [
        {"PYTHONIOENCODING": "ascii"},
        {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
    ],
    ids=["pythonioencoding-ascii", "c-locale-without-utf8-mode"],
)
def test_a_report_with_an_arrow_prints_on_an_ascii_stdout(
    tmp_path: Path, locale: dict[str, str]
) -> None:
    # The import's report says 'torch 2.0.0+cu117 → ...': it ended in a UnicodeEncodeError
    # and exit 70 (an internal error) after the spec was written.
    spec = tmp_path / "gpuenv.toml"
    source = str(IMPORTS / "dinov2" / "conda.yaml")
    result = _gpuenv(["import", source, "--gpu", "none", "-o", str(spec)], tmp_path, **locale)
    assert result.returncode == 0, result.stderr
    assert "internal error" not in result.stderr
    assert result.stdout.isascii()
    assert "torch 2.0.0+cu117 \\u2192 " in result.stdout  # the arrow, as an escape
    assert f"wrote {spec}" in result.stdout
    assert "→" in spec.read_text(encoding="utf-8")  # the file is UTF-8 whatever the locale


def _gpuenv_to(stdout: object, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    clean.update(PYTHONPATH=str(REPO / "src"), GPUENV_IMPORT_INDEX="off")
    return subprocess.run(
        [sys.executable, "-m", "gpuenv", *args],
        cwd=cwd,
        env=clean,
        stdout=stdout,  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_stdout_that_refuses_writes_is_named_as_stdout(
    tmp_path: Path, json_flag: list[str]
) -> None:
    # '> /dev/full' (a full disk under a redirect): "cannot write a file ((unknown path))"
    # with "free space on the file system of ."; under --json a traceback.
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with Path("/dev/full").open("w") as full:
        result = _gpuenv_to(full, ["detect", *json_flag], tmp_path)
    assert result.returncode == 5, result.stderr
    assert "Traceback" not in result.stderr and "unknown path" not in result.stderr
    assert "cannot write gpuenv's output (standard output)" in result.stderr
    assert "redirect" in result.stderr


def test_a_closed_stdout_is_no_traceback(tmp_path: Path) -> None:
    # 'gpuenv detect --json >&-': Python starts with sys.stdout None; it was a traceback.
    result = subprocess.run(
        [sys.executable, "-m", "gpuenv", "detect", "--json"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(1),  # the child's stdout, closed: sys.stdout is None
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
