"""Behind a mirror nothing goes around it: the lock's courtesy reads of the torch pages
(the newest torch on the index, the builds it lists) asked the canonical hosts while the
resolution went through the mirror."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.lock import backends, project, seen
from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip
from tests.lock.test_lock_messages import SPEC


@pytest.mark.parametrize("mirrored", [False, True])
def test_the_courtesy_reads_stay_home_behind_a_mirror(
    mirrored: bool,
    cli: Callable[..., CliResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pip, conda = FakePip(), FakeConda()
    monkeypatch.setattr(backends, "resolvers", lambda: (pip, conda))
    asked: list[str] = []
    monkeypatch.setattr(seen, "newest_torch_on", lambda index, pages=None: asked.append(index))
    monkeypatch.setattr(project, "_remember_index_builds", lambda *a, **k: asked.append("builds"))
    if mirrored:
        monkeypatch.setenv(
            "GPUENV_MIRRORS", "https://index.invalid/simple=https://mirror.invalid/simple"
        )
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC + '[pip]\nindex-url = "https://index.invalid/simple"\n')
    assert cli("-f", str(spec), "lock").code == 0
    assert bool(asked) is not mirrored, asked
