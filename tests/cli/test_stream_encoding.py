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
