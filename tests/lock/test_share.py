"""Identical per-target requests are resolved once within a lock and shared."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from unittest.mock import create_autospec

import pytest

from gpuenv.errors import NetworkError
from gpuenv.lock import backends
from gpuenv.lock._share import SharedPip, SharedPipWithMetadata, shared_conda, shared_pip
from gpuenv.lock.format import read_lock
from gpuenv.lock.model import PipRequest
from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip, torch_index_down

# Four nodes of one cluster (the same GPU and driver) and a CPU login node, modelled on
# the multi-node layouts of cluster repositories: targets per machine class.
CLUSTER = """[project]
name = "cluster"

[stack]
python = "3.11"
torch = "2.4.*"
torchvision = "*"

[targets.node-a]
gpu = "H100"
driver = "550.54.15"

[targets.node-b]
gpu = "H100"
driver = "550.54.15"

[targets.node-c]
gpu = "H100"
driver = "550.54.15"

[targets.node-d]
gpu = "H100"
driver = "550.54.15"

[targets.login]
gpu = "none"

[pip]
dependencies = ["transformers>=1"]

[conda]
channels = ["conda-forge"]
dependencies = ["ffmpeg"]
"""


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[FakePip, FakeConda]:
    pip, conda = FakePip(), FakeConda()
    fake = create_autospec(backends.resolvers, return_value=(pip, conda))
    monkeypatch.setattr(backends, "resolvers", fake)
    return pip, conda


def test_identical_targets_are_resolved_once_and_locked_alike(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    pip, conda = fakes
    assert len(pip.requests) == 2, "one resolution for the four nodes, one for login"
    assert len(conda.requests) == 2
    lock = read_lock(tmp_path / "gpuenv.lock")
    assert lock is not None and len(lock.targets) == 5
    nodes = [lock.targets[f"node-{n}"] for n in "abcd"]
    assert all(t.pip == nodes[0].pip and t.conda == nodes[0].conda for t in nodes)
    assert nodes[0].pip_package("torch").version.endswith("+cu124")
    assert lock.targets["login"].pip_package("torch").version.endswith("+cpu")
    assert len({t.content_hash for t in nodes}) == 4, "each target is still its own entry"


def test_only_what_changes_the_request_splits_it(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    spec = tmp_path / "gpuenv.toml"
    # Another driver that runs the same build: the same request. Another glibc: not.
    text = CLUSTER.replace('driver = "550.54.15"', 'driver = "560.35.03"', 1)
    text = text.replace(
        '[targets.node-d]\ngpu = "H100"', '[targets.node-d]\nglibc = "2.17"\ngpu = "H100"'
    )
    spec.write_text(text)
    assert cli("-f", str(spec), "lock").code == 0
    requests = fakes[0].requests
    assert sorted((r.torch_index or "").rsplit("/", 1)[-1] + "/" + r.glibc for r in requests) == [
        "cpu/2.28",
        "cu124/2.17",
        "cu124/2.28",
    ]


def test_an_unreachable_index_fails_every_target_that_shares_the_request_once(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pip = fakes[0]
    real = FakePip.resolve
    calls: list[str | None] = []

    def flaky(self: FakePip, request: PipRequest):
        calls.append(request.torch_index)
        if request.torch_index and request.torch_index.endswith("cu124"):
            raise NetworkError("cannot reach the index", cause="refused", url=request.torch_index)
        return real(self, request)

    monkeypatch.setattr(FakePip, "resolve", flaky)
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    result = cli("-f", str(spec), "lock", "--json")
    assert result.code == 5
    failed = result.json()["error"]["failed"]
    assert sorted(failed) == ["node-a", "node-b", "node-c", "node-d"]
    assert len(calls) == 2, "the failing request was tried once, not once per target"
    lock = read_lock(tmp_path / "gpuenv.lock")
    assert lock is not None and set(lock.targets) == {"login"}
    assert pip.requests and all(not r.torch_index.endswith("cu124") for r in pip.requests)


def test_concurrent_askers_of_one_request_wait_for_one_resolution() -> None:
    started, release = threading.Event(), threading.Event()
    count = 0

    class Slow(FakePip):
        def resolve(self, request: PipRequest):
            nonlocal count
            count += 1
            started.set()
            release.wait(10)
            return super().resolve(request)

    shared = shared_pip(Slow())
    request = PipRequest(requirements=("torch==2.4.1",), python="3.11")
    answers: list[object] = []
    threads = [threading.Thread(target=lambda: answers.append(shared.resolve(request)))]
    threads[0].start()
    assert started.wait(10)
    threads += [threading.Thread(target=lambda: answers.append(shared.resolve(request)))]
    threads[1].start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert count == 1 and len(answers) == 2 and answers[0] == answers[1]


def test_the_wrapper_reads_metadata_only_through_a_resolver_that_can() -> None:
    class NoMetadata:
        def resolve(self, request: PipRequest):
            return ()

        def describe(self) -> str:
            return "plain"

    plain = shared_pip(NoMetadata())
    assert type(plain) is SharedPip and not hasattr(plain, "wheel_metadata")
    assert isinstance(shared_pip(FakePip()), SharedPipWithMetadata)
    assert shared_pip(plain) is plain and plain.describe() == "plain"
    conda = shared_conda(FakeConda())
    assert shared_conda(conda) is conda and conda.describe() == "fake-conda"


TWO_MACHINES = """[project]
name = "two"

[stack]
python = "3.11"
torch = "2.4.*"

[targets.gpu]
gpu = "H100"
driver = "550.54.15"

[targets.cpu]
gpu = "none"
"""


def test_distinct_targets_resolve_side_by_side_and_lock_as_serially(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each resolution waits until the other has started: one after the other, the
    first would wait alone (and fail); side by side, both go on."""
    meeting = threading.Barrier(2, timeout=20)

    class Meeting(FakePip):
        def resolve(self, request: PipRequest):
            meeting.wait()
            return super().resolve(request)

    pip = Meeting()
    fake = create_autospec(backends.resolvers, return_value=(pip, FakeConda()))
    monkeypatch.setattr(backends, "resolvers", fake)
    monkeypatch.setattr("gpuenv.lock._share.os.cpu_count", lambda: 2)
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(TWO_MACHINES)
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    assert len(pip.requests) == 2
    serial = tmp_path / "serial"
    serial.mkdir()
    (serial / "gpuenv.toml").write_text(TWO_MACHINES)
    monkeypatch.setattr(backends, "resolvers", lambda: (FakePip(), FakeConda()))
    assert cli("-f", str(serial / "gpuenv.toml"), "lock").code == 0  # one at a time
    assert (serial / "gpuenv.lock").read_text() == (tmp_path / "gpuenv.lock").read_text()


def test_with_one_cpu_nothing_runs_beside(monkeypatch: pytest.MonkeyPatch) -> None:
    running = 0
    most = 0
    guard = threading.Lock()

    class Counting(FakePip):
        def resolve(self, request: PipRequest):
            nonlocal running, most
            with guard:
                running += 1
                most = max(most, running)
            try:
                threading.Event().wait(0.05)
                return super().resolve(request)
            finally:
                with guard:
                    running -= 1

    shared = shared_pip(Counting())
    requests = [
        PipRequest(requirements=(f"torch=={v}",), python="3.11") for v in ("2.4.1", "2.3.1")
    ]
    shared.prefetch(requests, limit=1)
    answers = [shared.resolve(r) for r in requests]
    assert most == 1 and [a[0].version for a in answers] == ["2.4.1", "2.3.1"]
    assert shared.resolutions == 2


def test_a_target_that_cannot_be_planned_fails_the_lock_as_a_serial_lock_does(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(TWO_MACHINES + '\n[targets.old]\ngpu = "K80"\ndriver = "470.82.01"\n')
    result = cli("-f", str(spec), "lock")
    assert result.code == 3, result.err
    assert "old" in result.err
    assert not (tmp_path / "gpuenv.lock").exists()


def test_a_relock_where_every_target_fails_leaves_the_lock_byte_for_byte(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lock was rewritten with the new spec's hash over the old targets (a lock of a
    spec never locked; after a failed ``add`` of a misspelt name, of a spec that no
    longer exists either)."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    assert cli("-f", str(spec), "lock").code == 0
    before = (tmp_path / "gpuenv.lock").read_bytes()

    def down(self: FakePip, request: PipRequest):
        raise NetworkError("cannot reach the index", cause="refused", url="http://i.example/")

    monkeypatch.setattr(FakePip, "resolve", down)
    spec.write_text(CLUSTER.replace('"transformers>=1"', '"transformers>=1", "nonexistpkg"'))
    result = cli("-f", str(spec), "lock", "--json")
    assert result.code == 5
    error = result.json()["error"]
    assert error["written"] is False and error["locked"] == []
    assert sorted(error["kept"]) == ["login", "node-a", "node-b", "node-c", "node-d"]
    assert (tmp_path / "gpuenv.lock").read_bytes() == before
    assert cli("-f", str(spec), "lock", "--check").code == 1, "still stale for the new spec"


def test_after_a_partial_relock_the_lock_stays_stale_until_every_target_is_locked(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    assert cli("-f", str(spec), "lock").code == 0
    real = FakePip.resolve
    torch_index_down(monkeypatch)
    spec.write_text(CLUSTER.replace('"transformers>=1"', '"transformers>=1", "tokenizers"'))
    result = cli("-f", str(spec), "lock", "--json")
    assert result.code == 5 and result.json()["error"]["locked"] == ["login"]
    assert cli("-f", str(spec), "lock", "--check").code == 1, "node-a..d hold the old spec's"
    monkeypatch.setattr(FakePip, "resolve", real)
    assert cli("-f", str(spec), "lock").code == 0
    assert cli("-f", str(spec), "lock", "--check").code == 0


def test_a_relock_that_moves_no_package_says_what_changed(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """The line said "login: updated (N pip, M conda)" and nothing under it, when only a
    requirement's text changed: it now says so."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    assert cli("-f", str(spec), "lock").code == 0
    spec.write_text(CLUSTER.replace('"transformers>=1"', '"transformers>=0.5"'))
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    updated = [line for line in result.out.splitlines() if ": updated" in line]
    assert updated and all(
        line.endswith("; the requirements changed, the packages did not") for line in updated
    ), result.out


def test_a_second_spec_beside_gpuenv_toml_is_refused_before_anything_is_written(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """`gpuenv -f b.toml lock` replaced gpuenv.toml's lock with b.toml's targets (one
    gpuenv.lock and one .gpuenv/ per folder)."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(CLUSTER)
    assert cli("-f", str(spec), "lock").code == 0
    before = (tmp_path / "gpuenv.lock").read_bytes()
    other = tmp_path / "b.toml"
    other.write_text(CLUSTER.replace("[targets.login]", "[targets.gateway]"))
    for command in (("lock",), ("install", "--target", "gateway")):
        result = cli("-f", str(other), *command)
        assert result.code == 2, (command, result.err)
        assert "shares its folder with" in result.err
    assert (tmp_path / "gpuenv.lock").read_bytes() == before
    elsewhere = tmp_path / "b" / "gpuenv.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(other.read_text())
    assert cli("-f", str(elsewhere), "lock").code == 0, "in a folder of its own it locks"
