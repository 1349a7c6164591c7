"""Compiled extensions end to end: fixture sdists locked by real uv, built by `gpuenv
install` against the prefix's torch, cached by build identity, reused, rebuilt when an
input changes; failures that leave nothing installed; hostile options and SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.lock.format import read_lock
from tests.builds.conftest import fake_toolkit, needs_gcc
from tests.conftest import CliResult
from tests.e2e import test_pack
from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.plugin import PkgIndex

private_index = test_pack.private_index  # the fixture: an index server the test can stop

SPEC = """[project]
name = "builds"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = false
torchaudio = false
toolkit = "system:{toolkit}"

[targets.gpu]
gpu = "{gpu}"
driver = "550.54.15"

[pip]
index-url = "{default}"
torch-index = "{torch}"
dependencies = [{deps}]

[pip.build.fixture-ext]
no-build-isolation = true
toolkit = true
{extra}
"""

HOSTILE = "b; $(touch {canary}) `touch {canary}` | & ' \" \\ $HOME > {canary}.2"


def spec(
    index: PkgIndex,
    toolkit: Path,
    *,
    gpu: str = "H100",
    deps: str = '"fixture-ext", "fixture-pure"',
    extra: str = "",
) -> str:
    return SPEC.format(
        default=index.default_index,
        torch=index.torch_base,
        toolkit=toolkit,
        gpu=gpu,
        deps=deps,
        extra=extra,
    )


def _journal(project: Project) -> list[dict[str, str]]:
    path = Path(project.env["GPUENV_FIXTURE_JOURNAL"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _project(make_project: Callable[..., Project], text: str, journal: Path) -> Project:
    project = make_project(text)
    project.env["GPUENV_FIXTURE_JOURNAL"] = str(journal)
    return project


def _prefix(project: Project) -> Path:
    return Path(os.readlink(project.dir / ".gpuenv" / "gpu"))


def _python(prefix: Path, code: str) -> str:
    result = subprocess.run(
        [prefix / "bin" / "python", "-I", "-c", code], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def _install(project: Project) -> dict[str, object]:
    result = project.gpuenv("install", "--json", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)["targets"]["gpu"]


@needs_gcc
def test_a_build_is_locked_built_against_the_prefix_torch_cached_and_rebuilt_for_another_gpu(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    journal = tmp_path / "journal"
    project = _project(make_project, spec(pkgindex, toolkit), journal)
    first = _install(project)
    lock = read_lock(project.lock)
    assert lock is not None
    locked = lock.targets["gpu"]
    builds = {b.name: b for b in locked.builds}
    assert set(builds) == {"fixture-ext", "fixture-pure"}, "declared, and an sdist with no wheel"
    ext = builds["fixture-ext"]
    assert ext.identity.startswith("sha256:") and ext.inputs.arch_list == "9.0+PTX"
    assert ext.inputs.torch == "2.4.1+cu124"
    assert ext.inputs.torch_sha256 == locked.pip_package("torch").sha256  # type: ignore[union-attr]
    assert ext.source.sha256 == pkgindex.sdist_sha256("fixture_ext-1.0.0.tar.gz")
    assert ext.inputs.toolkit == f"12.4 (system:{toolkit})"
    assert locked.pip_package("fixture-ext") is None, "the sdist is in builds, not in pip"
    pure = builds["fixture-pure"]
    assert pure.inputs.no_build_isolation is False and pure.inputs.arch_list is None
    text = project.lock.read_text()
    assert "[[targets.gpu.builds]]" in text and "identity = " in text

    prefix = _prefix(project)
    assert [b["cached"] for b in first["builds"]] == [False, False]  # type: ignore[index]
    recorded = json.loads(
        _python(
            prefix,
            "import fixture_ext, pathlib; print(pathlib.Path(fixture_ext.__file__).with_name('build_env.json').read_text())",
        )
    )
    assert recorded["torch_version"] == "2.4.1+cu124"
    assert recorded["torch_file"].startswith(str(prefix)), "built against the prefix's own torch"
    assert recorded["env"]["CUDA_HOME"] == str(toolkit)
    assert recorded["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0+PTX"
    assert int(recorded["env"]["MAX_JOBS"]) >= 1
    assert _python(prefix, "import fixture_ext._native as n; print(n.answer())") == "42"
    assert len(_journal(project)) == 2
    record = json.loads((prefix / "etc/gpuenv/builds.json").read_text())
    assert {b["identity"] for b in record["builds"]} == {ext.identity, pure.identity}
    ext_record = next(b for b in record["builds"] if b["name"] == "fixture-ext")
    assert ext_record["modules"] == ["fixture_ext._native"]
    # verify imports every built extension (the fixture torch fails its GPU checks).
    verify = json.loads(project.gpuenv("verify", "--json", "--timeout", "60").stdout)
    extensions = next(c for c in verify["checks"] if c["name"] == "extensions")
    assert extensions["passed"], extensions
    assert "fixture-ext 1.0.0" in extensions["detail"]
    # JIT builds in this prefix: the target's archs, its own extensions folder, its toolkit.
    jit = project.gpuenv(
        "run",
        "--unverified",
        "--",
        "python",
        "-c",
        "import os; print(os.environ['TORCH_CUDA_ARCH_LIST'], os.environ['TORCH_EXTENSIONS_DIR'], os.environ['CUDA_HOME'])",
    )
    arch, extensions_dir, home = jit.stdout.split()
    assert arch == "9.0+PTX" and home == str(toolkit)
    assert extensions_dir == str(project.home / "cache" / "torch-extensions" / prefix.name)

    # Another project (another prefix: one more dependency) with the same build inputs.
    other = _project(
        make_project,
        spec(pkgindex, toolkit, deps='"fixture-ext", "fixture-pure", "packaging"'),
        journal,
    )
    second = _install(other)
    assert _prefix(other) != prefix
    assert [b["cached"] for b in second["builds"]] == [True, True]  # type: ignore[index]
    assert len(_journal(project)) == 2, "no build ran"
    assert _python(_prefix(other), "import fixture_ext._native as n; print(n.answer())") == "42"

    # The same project for an RTX 4090: a new identity, built with 8.9.
    project.spec.write_text(spec(pkgindex, toolkit, gpu="RTX 4090"))
    third = _install(project)
    relocked = read_lock(project.lock)
    assert relocked is not None
    ada = next(b for b in relocked.targets["gpu"].builds if b.name == "fixture-ext")
    assert ada.identity != ext.identity and ada.inputs.arch_list == "8.9+PTX"
    cached = {b["name"]: b["cached"] for b in third["builds"]}  # type: ignore[union-attr]
    assert cached == {"fixture-ext": False, "fixture-pure": True}, "pure does not depend on the GPU"
    assert [j["arch"] for j in _journal(project)][-1] == "8.9+PTX"


@needs_gcc
def test_a_failing_build_leaves_no_prefix_marked_installed_and_shows_the_log_tail(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    extra = "env = { FIXTURE_FAIL = \"nvcc fatal   : Unsupported gpu architecture 'compute_90'\" }"
    project = _project(make_project, spec(pkgindex, toolkit, extra=extra), tmp_path / "journal")
    result = project.gpuenv("install", timeout=300)
    assert result.returncode == 5, result.stderr
    assert "fixture-ext 1.0.0 failed to build" in result.stderr
    assert "[40/48]" in result.stderr and "Unsupported gpu architecture" in result.stderr
    assert "wrong-arch-list" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (project.dir / ".gpuenv" / "gpu").exists()
    prefixes = list((project.home / "prefixes").glob("*"))
    assert not any((p / "etc/gpuenv/installed.json").exists() for p in prefixes)
    logs = list((project.home / "builds" / "logs").glob("*.log"))
    assert logs and str(logs[0]) in result.stderr, "the full log stays in the store"
    as_json = project.gpuenv("install", "--json", timeout=300)
    error = json.loads(as_json.stdout)["error"]
    assert error["kind"] == "build" and error["package"] == "fixture-ext"
    assert error["diagnosis"][0]["code"] == "wrong-arch-list"


@needs_gcc
def test_hostile_env_values_reach_the_build_verbatim_and_run_nothing(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    canary = tmp_path / "canary"
    value = HOSTILE.format(canary=canary)
    extra = f'env = {{ HOSTILE_VALUE = {json.dumps(value)}, {json.dumps("HOSTILE_$(x)")} = "1" }}'
    project = _project(make_project, spec(pkgindex, toolkit, extra=extra), tmp_path / "journal")
    bad = project.gpuenv("lock")
    assert bad.returncode == 2 and "not an environment variable name" in bad.stderr
    newline = f"env = {{ HOSTILE_VALUE = {json.dumps('a' + chr(10) + 'b')} }}"
    project.spec.write_text(spec(pkgindex, toolkit, extra=newline))
    refused = project.gpuenv("lock")
    assert refused.returncode == 2 and "control character (U+000A)" in refused.stderr
    extra = f"env = {{ HOSTILE_VALUE = {json.dumps(value)} }}"
    project.spec.write_text(spec(pkgindex, toolkit, extra=extra))
    _install(project)
    recorded = json.loads(
        _python(
            _prefix(project),
            "import fixture_ext, pathlib; print(pathlib.Path(fixture_ext.__file__).with_name('build_env.json').read_text())",
        )
    )
    assert recorded["env"]["HOSTILE_VALUE"] == value
    assert not canary.exists() and not Path(f"{canary}.2").exists(), "no shell saw the value"
    lock = read_lock(project.lock)
    assert lock is not None
    ext = next(b for b in lock.targets["gpu"].builds if b.name == "fixture-ext")
    assert dict(ext.inputs.env)["HOSTILE_VALUE"] == value, "the lock round-trips it"


@needs_gcc
def test_sigkill_during_a_build_then_install_again(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    project = _project(make_project, spec(pkgindex, toolkit), tmp_path / "journal")
    project.gpuenv("lock", check=True, timeout=300)
    project.env["FIXTURE_SLEEP"] = "60"
    victim = project.popen("install")
    logs = project.home / "builds" / "logs"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any("backend pid=" in log.read_text() for log in logs.glob("*.log")):
            break
        time.sleep(0.1)
    text = "".join(log.read_text() for log in logs.glob("*.log"))
    backend = int(text.split("backend pid=", 1)[1].split()[0])
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    for _ in range(100):
        try:
            os.kill(backend, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the build outlived gpuenv")
    assert not (project.dir / ".gpuenv" / "gpu").exists()
    del project.env["FIXTURE_SLEEP"]
    again = _install(project)
    assert again["built"] is True
    assert _python(_prefix(project), "import fixture_ext._native as n; print(n.answer())") == "42"
    gc = json.loads(project.gpuenv("gc", "--json", check=True).stdout)
    assert gc["removed"] == [], "the kept prefix's build entries stay"
    assert not list((project.home / "builds" / ".incoming").glob("*")), (
        "the killed build's folder went"
    )


ATTN = """
[pip.build.fixture-attn]
no-build-isolation = true
{requires}
"""


def test_a_package_whose_metadata_needs_torch_is_locked_from_its_declared_dependencies(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    undeclared = spec(pkgindex, toolkit, deps='"fixture-attn"', extra=ATTN.format(requires=""))
    project = _project(make_project, undeclared, tmp_path / "journal")
    failed = project.gpuenv("lock", timeout=300)
    assert failed.returncode == 5, failed.stderr
    assert "No module named 'torch'" in failed.stderr
    assert "requires-dist" in failed.stderr, "gpuenv says how to declare them"
    declared = ATTN.format(requires='requires-dist = ["torch", "packaging"]')
    project.spec.write_text(spec(pkgindex, toolkit, deps='"fixture-attn"', extra=declared))
    _install(project)
    lock = read_lock(project.lock)
    assert lock is not None
    target = lock.targets["gpu"]
    (build,) = [b for b in target.builds if b.name == "fixture-attn"]
    assert set(build.requires) == {"packaging", "torch"}
    assert target.pip_package("packaging") is not None
    assert _python(_prefix(project), "import fixture_attn, packaging; print('ok')") == "ok"


@needs_gcc
def test_two_concurrent_installs_needing_the_same_build_build_it_once(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    journal = tmp_path / "journal"
    one = _project(make_project, spec(pkgindex, toolkit, deps='"fixture-ext"'), journal)
    two = _project(
        make_project, spec(pkgindex, toolkit, deps='"fixture-ext", "packaging"'), journal
    )
    for project in (one, two):
        project.gpuenv("lock", check=True, timeout=300)
        project.env["FIXTURE_SLEEP"] = "1"
    processes = [one.popen("install", "--json"), two.popen("install", "--json")]
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        outputs.append(json.loads(out)["targets"]["gpu"])
    assert sorted(o["builds"][0]["cached"] for o in outputs) == [False, True]
    assert len(_journal(one)) == 1, "built once"


def _git_repo(directory: Path) -> tuple[Path, str]:
    from tests.fixtures.sdists import SdistSpec

    spec = SdistSpec("fixture-git", "0.5.0", "fixture_git", ("idna",), needs_torch=False)
    for name, data in spec.files().items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    git = ["git", "-C", str(directory), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(directory)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "fixture"], check=True)
    subprocess.run([*git, "tag", "v0.5.0"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return directory, head.stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_requirement_is_locked_at_its_commit_and_built(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    toolkit = fake_toolkit(tmp_path)
    repo, commit = _git_repo(tmp_path / "repo")
    deps = f'"fixture-git @ git+{repo.as_uri()}@v0.5.0"'
    project = _project(make_project, spec(pkgindex, toolkit, deps=deps), tmp_path / "journal")
    _install(project)
    lock = read_lock(project.lock)
    assert lock is not None
    target = lock.targets["gpu"]
    (build,) = [b for b in target.builds if b.name == "fixture-git"]
    assert build.source.kind == "git" and build.source.commit == commit
    assert build.source.url == f"git+{repo.as_uri()}" and build.version == "0.5.0"
    assert target.pip_package("idna") is not None and target.pip_package("fixture-git") is None
    assert _python(_prefix(project), "import fixture_git, idna; print('ok')") == "ok"


def test_a_known_package_found_only_as_an_sdist_gets_its_declared_dependencies(
    cli: Callable[..., CliResult],
    pkgindex: PkgIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Like xformers without a wheel for the locked torch: the knowledge base says how it
    is built and what it depends on; nothing is in the spec. In-process, real uv."""
    from gpuenv.builds import knowledge

    known = knowledge.PackageDefaults(
        "fixture-attn",
        against_torch=True,
        no_build_isolation=True,
        requires_dist=("torch", "packaging"),
        source="https://example.invalid/fixture",
    )
    monkeypatch.setattr(
        knowledge, "defaults_for", lambda name: known if name == "fixture-attn" else None
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    project = tmp_path / "p"
    project.mkdir()
    text = spec(pkgindex, fake_toolkit(tmp_path), deps='"fixture-attn"').split("[pip.build.")[0]
    (project / "gpuenv.toml").write_text(text)
    result = cli("-f", str(project / "gpuenv.toml"), "lock")
    assert result.code == 0, result.err
    lock = read_lock(project / "gpuenv.lock")
    assert lock is not None
    (build,) = lock.targets["gpu"].builds
    assert build.name == "fixture-attn" and build.inputs.no_build_isolation
    assert set(build.requires) == {"packaging", "torch"}


@needs_gcc
def test_pack_carries_the_builds_sdists_and_install_from_builds_them_offline(
    make_project: Callable[..., Project],
    private_index: tuple[PkgIndex, Callable[[], None]],
    tmp_path: Path,
) -> None:
    index, stop = private_index
    toolkit = fake_toolkit(tmp_path)
    project = _project(make_project, spec(index, toolkit), tmp_path / "journal")
    project.gpuenv("lock", check=True, timeout=300)
    archive = tmp_path / "gpu.tar"
    project.gpuenv("pack", "--target", "gpu", "-o", str(archive), check=True, timeout=300)
    with tarfile.open(archive) as tar:
        names = [m.name.rsplit("/", 1)[-1] for m in tar.getmembers()]
    assert {"fixture_ext-1.0.0.tar.gz", "fixture_pure-0.3.0.tar.gz"} <= set(names)
    stop()
    offline = _project(make_project, None, tmp_path / "journal")
    offline.env["GPUENV_HOME"] = str(tmp_path / "air-store")
    (offline.dir / "gpuenv.toml").unlink()
    installed = offline.gpuenv("install", "--from", str(archive), "--json", timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    summary = json.loads(installed.stdout)["targets"]["gpu"]
    assert {b["name"]: b["cached"] for b in summary["builds"]} == {
        "fixture-ext": False,
        "fixture-pure": False,
    }, "built from the archive's sdists, in a fresh store, with the index down"
    prefix = Path(summary["prefix"])
    assert _python(prefix, "import fixture_ext._native as n; print(n.answer())") == "42"
