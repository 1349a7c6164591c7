"""A password holding a raw "@" (issue 24, finding 6): with an index URL
``http://u2:pa@ss-LEAKY-42@host/...``, uv and pip take the userinfo up to the LAST "@"
before the host; the redaction rule stopped at the first, and ``ss-LEAKY-42@host`` was
left in the committed lock, ``plan``, the cache and the pack archive. The lock is made
against an index that really requires that password, so the credentials are used too."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import spec_text
from tests.fixtures.pkgindex.index import serve
from tests.fixtures.pkgindex.plugin import Artifact, PkgIndex

USER, PASSWORD = "u2", "pa@ss-LEAKY-42"


@pytest.fixture(scope="module")
def raw_at_index(_pkgindex_tree: tuple[Path, dict[str, Artifact]]) -> Iterator[PkgIndex]:
    root, artifacts = _pkgindex_tree
    with serve(root, credentials=f"{USER}:{PASSWORD}") as url:
        yield PkgIndex(root, url.replace("://", f"://{USER}:{PASSWORD}@"), artifacts)


def test_nothing_of_a_raw_at_password_is_left_anywhere(
    raw_at_index: PkgIndex, tmp_path: Path
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "gpuenv.toml").write_text(spec_text(raw_at_index))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "GPUENV_"))}
    env.update(
        GPUENV_HOME=str(tmp_path / "store"),
        HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"),
    )

    def gpuenv(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gpuenv", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    outputs = []
    for args in (("lock",), ("plan",), ("plan", "--json"), ("pack", "-t", "cpu", "-o", "a.tar")):
        result = gpuenv(*args)
        assert result.returncode == 0, (args, result.stderr[-2000:])
        outputs.append(result.stdout + result.stderr)
    files = [project / "gpuenv.lock", project / "a.tar"]
    files += [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    files += [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    leaks = [str(p) for p in files if b"LEAKY" in p.read_bytes() or b"pa@ss" in p.read_bytes()]
    assert leaks == [], leaks
    for text in outputs:
        assert "LEAKY" not in text and "pa@ss" not in text
    lock = (project / "gpuenv.lock").read_text()
    assert "127.0.0.1" in lock and "u2" not in lock.split("127.0.0.1")[0].rsplit("://", 1)[-1]
