"""The build cache under attack: a damaged entry, an interrupted one, two installs that
need the same build at once, and a build whose gpuenv is killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpuenv.builds.cache import BuildCache
from gpuenv.builds.runner import BuildContext, wheel_for
from gpuenv.store import Store
from tests.builds.conftest import entry_for, make_prefix, uv_bin, write_sdist
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.fixtures.sdists import SdistSpec

PURE = SdistSpec("fixture-pure", "0.3.0", "fixture_pure", needs_torch=False)
REPO = Path(__file__).resolve().parents[2]

# Build one entry in a separate process (as a second gpuenv would); args: a JSON file.
BUILDER = """
import json, sys
from pathlib import Path
from gpuenv.builds.cache import BuildCache
from gpuenv.builds.model import BuildEntry, BuildInputs, BuildSource
from gpuenv.builds.runner import BuildContext, wheel_for
from gpuenv.store import Store
args = json.loads(Path(sys.argv[1]).read_text())
e = args["entry"]
entry = BuildEntry(e["name"], e["version"], BuildSource(**e["source"]),
                   BuildInputs(**e["inputs"]), e["identity"])
ctx = BuildContext(prefix=Path(args["prefix"]), uv=Path(args["uv"]), cuda_home=None,
                   environ=args["environ"])
with wheel_for(BuildCache(Store(Path(args["store"]))), entry, ctx) as (wheel, outcome):
    print(json.dumps({"cached": outcome.cached, "sha256": wheel.sha256}))
"""


def _environ(journal: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIXTURE_")}
    env.update(GPUENV_FIXTURE_JOURNAL=str(journal), **more)
    return env


def _setup(tmp_path: Path, pkgindex: PkgIndex) -> tuple[Path, object, BuildCache]:
    prefix = make_prefix(tmp_path, pkgindex)
    sdist, sha = write_sdist(tmp_path, PURE)
    entry = entry_for(sdist, sha, PURE, toolkit=None, arch_list=None, no_build_isolation=False)
    return prefix, entry, BuildCache(Store(tmp_path / "store"))


def _builds(journal: Path) -> int:
    return len(journal.read_text().splitlines()) if journal.exists() else 0


def test_a_damaged_cache_entry_is_detected_and_rebuilt(tmp_path: Path, pkgindex: PkgIndex) -> None:
    prefix, entry, cache = _setup(tmp_path, pkgindex)
    journal = tmp_path / "journal"
    ctx = BuildContext(prefix=prefix, uv=uv_bin(), cuda_home=None, environ=_environ(journal))
    with wheel_for(cache, entry, ctx) as (wheel, _outcome):  # type: ignore[arg-type]
        first = wheel.sha256
    wheel.wheel.write_bytes(wheel.wheel.read_bytes()[:-10] + b"tampered!!")
    with wheel_for(cache, entry, ctx) as (again, outcome):  # type: ignore[arg-type]
        assert outcome.cached is False
        assert any("cached build discarded" in n and "sha256" in n for n in outcome.notes)
        assert again.sha256 != "" and first != ""
    assert _builds(journal) == 2
    # An entry without its completion marker (an interrupted build) is rebuilt too.
    (again.entry_dir / "entry.json").unlink()
    with wheel_for(cache, entry, ctx) as (_w, outcome):  # type: ignore[arg-type]
        assert outcome.cached is False and "interrupted" in outcome.notes[0]
    # A marker naming another identity is not believed.
    marker = again.entry_dir / "entry.json"
    record = json.loads(marker.read_text())
    marker.write_text(json.dumps({**record, "identity": "sha256:" + "0" * 64}))
    with wheel_for(cache, entry, ctx) as (_w, outcome):  # type: ignore[arg-type]
        assert outcome.cached is False
    assert _builds(journal) == 4


def _spawn(
    tmp_path: Path, name: str, prefix: Path, entry: object, environ: dict[str, str]
) -> subprocess.Popen[str]:
    from dataclasses import asdict

    args = tmp_path / f"{name}.json"
    args.write_text(
        json.dumps(
            {
                "entry": asdict(entry),  # type: ignore[call-overload]
                "prefix": str(prefix),
                "uv": str(uv_bin()),
                "store": str(tmp_path / "store"),
                "environ": environ,
            }
        )
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    return subprocess.Popen(
        [sys.executable, "-c", BUILDER, str(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_two_installs_needing_the_same_build_build_it_once(
    tmp_path: Path, pkgindex: PkgIndex
) -> None:
    prefix, entry, _cache = _setup(tmp_path, pkgindex)
    journal = tmp_path / "journal"
    environ = _environ(journal, FIXTURE_SLEEP="1")
    first = _spawn(tmp_path, "a", prefix, entry, environ)
    second = _spawn(tmp_path, "b", prefix, entry, environ)
    results = []
    for process in (first, second):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["cached"] for r in results) == [False, True]
    assert results[0]["sha256"] == results[1]["sha256"]
    assert _builds(journal) == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigkill_midway_leaves_no_entry_and_no_compiler_running(
    tmp_path: Path, pkgindex: PkgIndex
) -> None:
    prefix, entry, cache = _setup(tmp_path, pkgindex)
    journal = tmp_path / "journal"
    victim = _spawn(tmp_path, "victim", prefix, entry, _environ(journal, FIXTURE_SLEEP="60"))
    log = cache.log_path(entry.identity)  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    backend = None
    while time.monotonic() < deadline and backend is None:
        text = log.read_text() if log.exists() else ""
        for line in text.splitlines():
            if line.startswith("backend pid="):
                backend = int(line.split("=", 1)[1])
        time.sleep(0.05)
    assert backend is not None, "the build started"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    gone = time.monotonic() + 10
    while _alive(backend) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not _alive(backend), "the build's processes died with gpuenv"
    assert not list(cache.root.glob("[0-9a-f]*")), "no entry at its real path"
    ctx = BuildContext(prefix=prefix, uv=uv_bin(), cuda_home=None, environ=_environ(journal))
    with wheel_for(cache, entry, ctx) as (_wheel, outcome):  # type: ignore[arg-type]
        assert outcome.cached is False
    assert _builds(journal) == 1
