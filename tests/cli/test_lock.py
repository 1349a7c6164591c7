"""`gpuenv lock` orchestration with in-memory resolvers (the real backends have their
own tests against the local index and channel)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from unittest.mock import create_autospec

import pytest

from gpuenv.lock import backends
from gpuenv.lock.format import read_lock
from gpuenv.lock.model import PipPackage, PipRequest
from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip

TWO_TARGETS = """[project]
name = "two"

[stack]
python = "3.11"
torch = "2.4.*"
torchvision = "*"

[targets.h100]
gpu = "H100"
driver = "550.54.15"

[targets.cpu]
gpu = "none"

[pip]
dependencies = ["transformers>=1"]
"""


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[FakePip, FakeConda]:
    pip, conda = FakePip(), FakeConda()
    fake = create_autospec(backends.resolvers, return_value=(pip, conda))  # the real signature
    monkeypatch.setattr(backends, "resolvers", fake)
    return pip, conda


@pytest.fixture
def project(tmp_path: Path) -> Path:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(TWO_TARGETS)
    return spec


def test_lock_writes_both_targets_with_the_planned_builds(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    result = cli("-f", str(project), "lock", "--json")
    assert result.code == 0, result.err
    summary = result.json()
    assert summary["written"] is True
    assert summary["targets"]["h100"]["status"] == "added"
    lock = read_lock(project.parent / "gpuenv.lock")
    assert lock is not None
    h100, cpu = lock.targets["h100"], lock.targets["cpu"]
    assert h100.pip_package("torch").version == "2.4.1+cu124"
    assert h100.pip_package("torch").url.startswith("https://download.pytorch.org/whl/cu124/")
    assert cpu.pip_package("torch").version == "2.4.1+cpu"
    assert h100.stack.cu_tag == "cu124" and cpu.stack.cu_tag == "cpu"
    assert h100.virtual_packages["__cuda"] == "12.4"
    pip_requests = fakes[0].requests
    assert {r.torch_index for r in pip_requests} == {
        "https://download.pytorch.org/whl/cu124",
        "https://download.pytorch.org/whl/cpu",
    }


def test_relock_of_an_unchanged_spec_is_byte_identical(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    assert cli("-f", str(project), "lock").code == 0
    lock_file = project.parent / "gpuenv.lock"
    first = lock_file.read_bytes()
    result = cli("-f", str(project), "lock", "--json")
    assert result.json()["written"] is False
    assert lock_file.read_bytes() == first


def test_check_detects_a_missing_then_a_changed_spec_without_network(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    missing = cli("-f", str(project), "lock", "--check", "--json")
    assert missing.code == 1
    assert missing.json()["error"]["stale"]["h100"] == ["no lock file"]
    assert cli("-f", str(project), "lock").code == 0
    resolved = len(fakes[0].requests)
    fresh = cli("-f", str(project), "lock", "--check")
    assert fresh.code == 0, fresh.err
    project.write_text(TWO_TARGETS.replace("transformers>=1", "transformers>=2"))
    stale = cli("-f", str(project), "lock", "--check", "--json")
    assert stale.code == 1
    assert set(stale.json()["error"]["stale"]) == {"h100", "cpu"}
    assert len(fakes[0].requests) == resolved, "--check never resolves"


def test_comments_and_order_do_not_make_the_lock_stale(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    assert cli("-f", str(project), "lock").code == 0
    project.write_text(
        "# a comment\n"
        + TWO_TARGETS.replace('[project]\nname = "two"\n', "")
        + '[project]\nname = "two"\n'
    )
    assert cli("-f", str(project), "lock", "--check").code == 0


def test_target_relocks_one_and_leaves_the_other_byte_identical(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    assert cli("-f", str(project), "lock").code == 0
    lock_file = project.parent / "gpuenv.lock"
    cpu_before = lock_file.read_text().split("[targets.cpu]")[1].split("[targets.h100]")[0]
    project.write_text(TWO_TARGETS.replace('driver = "550.54.15"', 'driver = "535.104.05"'))
    result = cli("-f", str(project), "lock", "--target", "h100", "--json")
    assert result.code == 0, result.err
    assert list(result.json()["targets"]) == ["h100"]
    text = lock_file.read_text()
    assert text.split("[targets.cpu]")[1].split("[targets.h100]")[0] == cpu_before
    lock = read_lock(lock_file)
    assert lock is not None and lock.targets["h100"].stack.cu_tag == "cu121"


def test_existing_pins_are_kept_until_upgrade(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    pip = fakes[0]
    pip.newest = "1.0.0"
    assert cli("-f", str(project), "lock").code == 0
    pip.newest = "2.0.0"  # a newer transformers appears on the index
    project.write_text(TWO_TARGETS + "\n# touched\n")
    cli("-f", str(project), "lock")
    lock = read_lock(project.parent / "gpuenv.lock")
    assert lock is not None and lock.targets["h100"].pip_package("transformers").version == "1.0.0"
    result = cli("-f", str(project), "lock", "--upgrade", "--json")
    changes = result.json()["targets"]["h100"]["changes"]
    assert {"name": "transformers", "from": "1.0.0", "to": "2.0.0"} in changes


def test_a_mislabelled_build_on_the_index_is_caught(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    fakes[0].mislabel = "cu121"
    result = cli("-f", str(project), "lock", "--target", "h100")
    assert result.code == 5
    assert "cu121 build (planned cu124)" in result.err
    assert not (project.parent / "gpuenv.lock").exists(), "nothing half-written"


def test_pypi_default_build_comes_from_the_default_index(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        TWO_TARGETS.replace('driver = "550.54.15"', 'driver = "535.104.05"').replace(
            '[targets.cpu]\ngpu = "none"\n', ""
        )
    )
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    request = fakes[0].requests[-1]
    assert request.torch_index is None, "PyPI's torch 2.4.1 is the cu121 build"
    lock = read_lock(tmp_path / "gpuenv.lock")
    assert (
        lock is not None
        and lock.targets["h100"].pip_package("nvidia-cuda-runtime-cu12") is not None
    )


def test_conda_half_gets_the_target_virtual_packages_and_supplies_python(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        TWO_TARGETS
        + '\n[conda]\nchannels = ["file:///channel"]\ndependencies = { "cuda-nvcc" = "12.4.*" }\n'
    )
    assert cli("-f", str(spec), "lock").code == 0
    h100 = next(r for r in fakes[1].requests if "__cuda" in r.virtual_packages)
    assert h100.virtual_packages["__cuda"] == "12.4"
    assert h100.virtual_packages["__cuda_arch"] == "9.0"
    assert "python 3.11.*" in h100.specs
    cpu = next(r for r in fakes[1].requests if "__cuda" not in r.virtual_packages)
    assert cpu.virtual_packages["__glibc"] == "2.28"
    assert {r.python for r in fakes[0].requests} == {"3.11.9"}, "pip resolves for conda's Python"


def test_credentials_never_reach_the_lock(
    cli: Callable[..., CliResult],
    project: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUENV_TORCH_INDEX", "https://user:secret@mirror.invalid/whl")
    assert cli("-f", str(project), "lock").code == 0
    text = (project.parent / "gpuenv.lock").read_text()
    assert "secret" not in text
    assert "https://mirror.invalid/whl/cu124" in text


def test_a_toolkit_is_locked_with_the_wheels_cuda(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(TWO_TARGETS.replace('torchvision = "*"', 'torchvision = "*"\ntoolkit = "auto"'))
    assert cli("-f", str(spec), "lock").code == 0
    by_index = {r.torch_index: r.requirements for r in fakes[0].requests}
    assert "nvidia-cuda-nvcc-cu12==12.4.*" in by_index["https://download.pytorch.org/whl/cu124"]
    assert not any("nvcc" in r for r in by_index["https://download.pytorch.org/whl/cpu"])
    conda = tmp_path / "conda" / "gpuenv.toml"
    conda.parent.mkdir()
    conda.write_text(spec.read_text() + '\n[conda]\nchannels = ["file:///channel"]\n')
    assert cli("-f", str(conda), "lock", "--target", "h100").code == 0
    assert {"cuda-nvcc 12.4.*", "cuda-cudart-dev 12.4.*"} <= set(fakes[1].requests[-1].specs)


def test_lock_records_what_the_wheels_say_and_reports_contradictions(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    pip, _conda = fakes
    pip.cudnn, pip.nccl = "9.9.9.9", "2.20.5"  # the data says 9.1.0.70 and 2.20.5
    result = cli("-f", str(project), "lock")
    assert result.code == 0, result.err
    assert (
        "warning: target h100: cuDNN: the torch 2.4.1 (cu124, linux-64) wheel pins 9.9.9.9, "
        "the knowledge base says 9.1.0.70 (torch.toml: series 2.4, build cu124 (linux-64))"
    ) in result.err
    assert "NCCL" not in result.err
    lock = read_lock(project.parent / "gpuenv.lock")
    assert lock is not None
    facts = lock.targets["h100"].wheel_facts
    assert facts is not None and (facts.cudnn, facts.cuda_runtime) == ("9.9.9.9", "12.4.127")
    assert facts.torchvision_requires == "==2.4.1"
    assert sorted(set(pip.metadata_reads)) == ["torch", "torchaudio", "torchvision"]


def test_unreadable_metadata_is_a_warning_not_a_failure(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    pip, _conda = fakes
    pip.unreadable = True
    result = cli("-f", str(project), "lock", "--json")
    assert result.code == 0, result.err
    warnings = result.json()["warnings"]
    assert any("could not read the metadata of torch-2.4.1+cu124" in w for w in warnings)
    lock = read_lock(project.parent / "gpuenv.lock")
    assert lock is not None and lock.targets["h100"].wheel_facts is None


def test_an_aarch64_gpu_is_resolved_for_aarch64_from_its_own_build(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    pip, _conda = fakes
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        '[project]\nname = "g"\n[stack]\npython = "3.12"\ntorch = "2.9.*"\n'
        '[targets.gh200]\ngpu = "GH200"\ndriver = "580.95.05"\n'
    )
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    (request,) = pip.requests
    assert request.platform == "linux-aarch64"
    assert request.torch_index is not None and request.torch_index.endswith("/cu130")
    lock = read_lock(tmp_path / "gpuenv.lock")
    assert lock is not None and lock.targets["gh200"].platform == "linux-aarch64"
    assert lock.targets["gh200"].stack.arch_list[-1] == "12.0+PTX"


def test_one_torch_for_all_targets_also_when_one_target_is_relocked(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    project.write_text(project.read_text().replace('torch = "2.4.*"', 'torch = "*"'))
    assert cli("-f", str(project), "lock", "--target", "cpu").code == 0
    lock = read_lock(project.parent / "gpuenv.lock")
    assert lock is not None
    assert lock.targets["cpu"].stack.torch == "2.7.1"  # the H100 on R550 holds it back


def test_with_one_torch_another_targets_change_makes_a_target_stale(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    assert cli("-f", str(project), "lock").code == 0
    project.write_text(project.read_text().replace('driver = "550.54.15"', 'driver = "570.86.15"'))
    result = cli("-f", str(project), "lock", "--check", "--json")
    assert result.code == 1
    assert set(result.json()["error"]["stale"]) == {"h100", "cpu"}


def test_check_of_bytes_found_fresh_before_parses_nothing_and_any_change_is_checked(
    cli: Callable[..., CliResult],
    project: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cli("-f", str(project), "lock").code == 0
    assert cli("-f", str(project), "lock", "--check").code == 0  # the full check: noted
    calls = _no_full_check(monkeypatch)
    again = cli("-f", str(project), "lock", "--check", "--json")
    assert again.code == 0 and again.json() == {
        "lock": str(project.parent / "gpuenv.lock"),
        "fresh": True,
        "stale": {},
    }
    assert calls == [], "the full check ran"
    lock_file = project.parent / "gpuenv.lock"
    text = lock_file.read_text()
    lock_file.write_text(text.replace("2.0.0", "2.0.1", 1))  # an edited pin
    edited = cli("-f", str(project), "lock", "--check")
    assert edited.code == 1 and "fails gpuenv's checks" in edited.err
    lock_file.write_text(text)
    project.write_text(TWO_TARGETS.replace("transformers>=1", "transformers>=2"))
    stale = cli("-f", str(project), "lock", "--check")
    assert stale.code == 1 and "changed since it was locked" in stale.err


def test_a_fresh_check_is_not_believed_once_the_projects_own_files_change(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """The marker named the spec's and the lock's bytes only: after an edit of the
    project's pyproject.toml dependencies (or a setup.py appearing), ``lock --check``
    still said "up to date" from the cache."""
    root = project.parent
    pyproject = root / "pyproject.toml"
    pyproject.write_text("[project]\nname = 'paper'\nversion = '1'\ndependencies = []\n")
    assert cli("-f", str(project), "lock").code == 0
    assert cli("-f", str(project), "lock", "--check").code == 0  # the full check: noted
    assert cli("-f", str(project), "lock", "--check").code == 0  # the marker
    pyproject.write_text(pyproject.read_text().replace("[]", "['einops']"))
    stale = cli("-f", str(project), "lock", "--check", "--json")
    assert stale.code == 1, stale.err
    pyproject.write_text(pyproject.read_text().replace("['einops']", "[]"))
    assert cli("-f", str(project), "lock", "--check").code == 0  # the same bytes again
    pyproject.unlink()  # the project disappears: its dependencies go too
    assert cli("-f", str(project), "lock", "--check").code == 1


def _no_full_check(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record each full check (``inputs.stale_reasons``) while it still runs."""
    from gpuenv.lock import inputs

    calls: list[object] = []
    real = inputs.stale_reasons

    def counted(*args: object, **kwargs: object) -> dict[str, list[str]]:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "stale_reasons", counted)
    return calls


def test_the_first_check_after_a_lock_answers_from_the_note_the_lock_left(
    cli: Callable[..., CliResult],
    project: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`gpuenv lock` leaves lock._fresh's note for the lock it wrote: the whole check,
    each target alone and both together (install --all) answer without a full check,
    as they do once a check found the lock fresh; other bytes are checked in full."""
    assert cli("-f", str(project), "lock").code == 0
    calls = _no_full_check(monkeypatch)
    for targets in ([], ["-t", "h100"], ["-t", "cpu"], ["-t", "cpu", "-t", "h100"]):
        result = cli("-f", str(project), "lock", "--check", *targets, "--json")
        assert result.code == 0 and result.json()["fresh"] is True, (targets, result.err)
    assert calls == []
    lock_file = project.parent / "gpuenv.lock"
    lock_file.write_text(lock_file.read_text().replace("2.0.0", "2.0.1", 1))  # an edited pin
    edited = cli("-f", str(project), "lock", "--check")
    assert edited.code == 1 and "fails gpuenv's checks" in edited.err
    assert calls, "bytes no lock wrote are checked in full"


def test_a_lock_of_one_target_notes_that_target_only_when_another_is_stale(
    cli: Callable[..., CliResult],
    project: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cli("-f", str(project), "lock").code == 0
    project.write_text(TWO_TARGETS + "\n[targets.a100]\ngpu = 'A100'\ndriver = '550.54.15'\n")
    # with one torch for all, the new target makes every target stale; only cpu relocked
    assert cli("-f", str(project), "lock", "--target", "cpu").code == 0
    calls = _no_full_check(monkeypatch)
    assert cli("-f", str(project), "lock", "--check", "--target", "cpu").code == 0
    assert calls == []  # the note of cpu alone
    whole = cli("-f", str(project), "lock", "--check", "--json")
    assert whole.code == 1 and set(whole.json()["error"]["stale"]) == {"h100", "a100"}
    assert calls, "no note says the whole lock is fresh"
    alone = cli("-f", str(project), "lock", "--check", "--target", "h100")
    assert alone.code == 1


@pytest.mark.parametrize("moved", ["gpuenv.toml", "pyproject.toml"])
def test_a_file_edited_while_the_lock_resolves_leaves_no_note(
    cli: Callable[..., CliResult],
    project: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
    moved: str,
) -> None:
    """The spec or the project's pyproject.toml edited while uv resolved: the lock holds
    what was read before, so the next check is the full one (and finds the project's
    new dependency stale) instead of a note saying "up to date"."""
    root = project.parent
    pyproject = root / "pyproject.toml"
    pyproject.write_text("[project]\nname = 'paper'\nversion = '1'\ndependencies = []\n")
    pip, _conda = fakes
    real = pip.resolve
    edits = {
        "gpuenv.toml": lambda: project.write_text(project.read_text() + "# edited\n"),
        "pyproject.toml": lambda: pyproject.write_text(
            pyproject.read_text().replace("[]", "['einops']")
        ),
    }

    # Edited once, by the first resolution to start; every resolution passes the guard,
    # so none (the lock's own or one started ahead in a thread) ends before the edit
    # does. Editing at every call let a resolution started ahead and never used edit
    # after the lock had returned, and the check found the note (1 run in 3).
    guard, edited = threading.Lock(), []

    def editing(request: PipRequest) -> tuple[PipPackage, ...]:
        with guard:
            if not edited:
                edits[moved]()
                edited.append(moved)
        return real(request)

    monkeypatch.setattr(pip, "resolve", editing)
    assert cli("-f", str(project), "lock").code == 0
    calls = _no_full_check(monkeypatch)
    check = cli("-f", str(project), "lock", "--check")
    assert calls, "checked in full"
    assert check.code == (1 if moved == "pyproject.toml" else 0), check.err


def test_check_of_a_detect_target_is_never_taken_from_the_cache(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(TWO_TARGETS)
    assert cli("-f", str(spec), "lock").code == 0
    assert cli("-f", str(spec), "lock", "--check").code == 0
    import os

    cache = Path(os.environ["XDG_CACHE_HOME"]) / "gpuenv" / "lock-check"
    marks = sorted(cache.iterdir())
    assert marks, "a fresh check of declared targets is noted"
    detect = tmp_path / "detect"
    detect.mkdir()
    (detect / "gpuenv.toml").write_text(
        TWO_TARGETS.replace('gpu = "H100"\ndriver = "550.54.15"', 'gpu = "detect"')
    )
    cli("-f", str(detect / "gpuenv.toml"), "lock")
    cli("-f", str(detect / "gpuenv.toml"), "lock", "--check")
    assert sorted(cache.iterdir()) == marks


def test_upgrade_package_takes_a_name_and_says_when_the_lock_pins_nothing_of_it(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """A requirement where a name goes, or a misspelt name, moved nothing and said
    nothing: the first is refused by flag, the second warned about by name."""
    assert cli("-f", str(project), "lock").code == 0
    for value in ("", "transformers>=2", "../x"):
        result = cli("-f", str(project), "lock", "--upgrade-package", value)
        assert result.code == 2, result.err
        assert f"--upgrade-package {value!r}: not a package name" in result.err
    typo = cli("-f", str(project), "lock", "--upgrade-package", "transformer")
    assert typo.code == 0, typo.err
    assert "--upgrade-package transformer: not locked in" in typo.err
    assert "check the spelling" in typo.err
    known = cli("-f", str(project), "lock", "--upgrade-package", "Transformers")
    assert known.code == 0 and "not locked" not in known.err


def test_upgrade_package_says_a_name_nothing_pins_when_there_is_no_lock_yet(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """With no gpuenv.lock, ``lock -P transformer`` exited 0 in silence: the lock-less
    case is warned about as the locked one is (a warning, exit 0, the lock written)."""
    lock = project.parent / "gpuenv.lock"
    typo = cli("-f", str(project), "lock", "-P", "transformer")
    assert typo.code == 0, typo.err
    assert "--upgrade-package transformer: in neither" in typo.err
    assert "check the spelling" in typo.err and lock.is_file()
    lock.unlink()
    known = cli("-f", str(project), "lock", "-P", "Transformers", "--json")
    assert known.code == 0 and "--upgrade-package" not in known.err, known.err
    assert lock.is_file()
    assert not any("--upgrade-package" in w for w in known.json()["warnings"])
    lock.unlink()
    # a script reading --json finds the warning there, not only on stderr
    scripted = cli("-f", str(project), "lock", "-P", "transformer", "--json")
    (warning,) = [w for w in scripted.json()["warnings"] if "--upgrade-package" in w]
    assert warning.startswith("--upgrade-package transformer: in neither")
    relocked = cli("-f", str(project), "lock", "-P", "transformer", "--json")  # with a lock
    assert any("--upgrade-package transformer" in w for w in relocked.json()["warnings"])


@pytest.mark.parametrize(
    "flags", [["--check", "--upgrade"], ["--check", "-P", "x"], ["--upgrade", "-P", "x"]]
)
def test_check_upgrade_and_upgrade_package_exclude_each_other(
    cli: Callable[..., CliResult], project: Path, fakes: tuple[FakePip, FakeConda], flags: list[str]
) -> None:
    """``lock --check --upgrade-package idna`` answered "up to date" and moved nothing;
    ``--upgrade -P idna`` moved every pin. Each pair is refused by name."""
    result = cli("-f", str(project), "lock", *flags)
    assert result.code == 2 and "not allowed with argument" in result.err, result.err
    assert not (project.parent / "gpuenv.lock").exists()


def test_an_interrupted_freshness_note_leaves_no_stray_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C between the note's temporary file and its rename (seen once in 180
    interrupted locks): the interrupt goes on, and no '.<name>.<pid>.tmp' stays in
    the cache."""
    import os

    from gpuenv.lock import _fresh

    def interrupted(*_args: object, **_kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fdopen", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _fresh.remember_fresh(str(tmp_path), "lock")
    monkeypatch.undo()
    assert not list(tmp_path.rglob("*.tmp"))
    _fresh.remember_fresh(str(tmp_path), "lock")  # and an uninterrupted one is written
    assert not list(tmp_path.rglob("*.tmp")) and list(tmp_path.rglob("*.fresh"))


OVERRIDDEN = TWO_TARGETS.replace(
    "[pip]\n",
    '[pip]\nindex-url = "https://pkgs.invalid/simple"\ntorch-index = "https://torch.invalid/whl"\n',
)


def test_an_index_override_the_lock_was_not_made_with_makes_the_lock_stale(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GPUENV_TORCH_INDEX and GPUENV_INDEX_URL are not in the input hash: with another
    index in one of them `lock` rewrote every URL while `lock --check` (its note of a
    check without the variable, or the full check) and `install --frozen` said "up to
    date", and the same once it was unset again. The index the lock records is compared,
    without credentials."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(OVERRIDDEN)
    assert cli("-f", str(spec), "lock").code == 0
    assert cli("-f", str(spec), "lock", "--check").code == 0  # leaves the note
    same = "https://user:s3cret-9@torch.invalid/whl/"  # credentials and a slash: the same
    monkeypatch.setenv("GPUENV_TORCH_INDEX", same)
    assert cli("-f", str(spec), "lock", "--check").code == 0
    monkeypatch.setenv("GPUENV_TORCH_INDEX", "https://user:s3cret-9@mirror.invalid/whl")
    checked = cli("-f", str(spec), "lock", "--check")
    assert checked.code == 1, checked.err
    assert (
        "h100: the torch index is now https://mirror.invalid/whl/cu124 (GPUENV_TORCH_INDEX), "
        "the lock was made from https://torch.invalid/whl/cu124"
    ) in checked.err
    stale = cli("-f", str(spec), "lock", "--check", "--json").json()["error"]["stale"]
    assert "GPUENV_TORCH_INDEX" in stale["cpu"][0]
    frozen = cli("-f", str(spec), "install", "--frozen", "--target", "cpu")
    assert frozen.code == 1 and "GPUENV_TORCH_INDEX" in frozen.err, frozen.err
    assert "s3cret-9" not in checked.err + checked.out + str(stale) + frozen.err + frozen.out
    assert cli("-f", str(spec), "lock").code == 0
    assert cli("-f", str(spec), "lock", "--check").code == 0, "locked with it: fresh with it"
    monkeypatch.delenv("GPUENV_TORCH_INDEX")
    unset = cli("-f", str(spec), "lock", "--check")
    assert unset.code == 1
    assert "([pip] torch-index; GPUENV_TORCH_INDEX is not set)" in unset.err
    assert cli("-f", str(spec), "lock").code == 0

    monkeypatch.setenv("GPUENV_INDEX_URL", "https://other.invalid/simple")
    checked = cli("-f", str(spec), "lock", "--check")
    assert checked.code == 1
    assert (
        "the default index is now https://other.invalid/simple (GPUENV_INDEX_URL), "
        "the lock's packages come from https://pkgs.invalid/simple"
    ) in checked.err
    assert cli("-f", str(spec), "lock").code == 0
    assert cli("-f", str(spec), "lock", "--check").code == 0
    monkeypatch.delenv("GPUENV_INDEX_URL")
    unset = cli("-f", str(spec), "lock", "--check")
    assert unset.code == 1 and "([pip] index-url; GPUENV_INDEX_URL is not set)" in unset.err
