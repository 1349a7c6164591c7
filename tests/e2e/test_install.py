"""`gpuenv install`, `run`, `activate`, `list`, `gc`, `rollback` with real uv, from the
lock only, into a store under the test's temp dir."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from gpuenv.lock.format import read_lock, write_lock
from tests.conftest import CliResult
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import PkgIndex


def installed_prefix(project: Project, target: str = "cpu") -> Path:
    return Path(os.readlink(project.dir / ".gpuenv" / target))


def python_of(prefix: Path, code: str) -> str:
    out = subprocess.run(
        [str(prefix / "bin" / "python"), "-I", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_install_materialises_the_lock_and_its_python_imports_the_packages(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    result = project.gpuenv("install", "--target", "cpu", "--json", check=True)
    summary = json.loads(result.stdout)["targets"]["cpu"]
    assert summary["built"] is True
    prefix = Path(summary["prefix"])
    assert prefix == installed_prefix(project)
    assert prefix.is_relative_to(project.home)
    versions = python_of(
        prefix,
        "import torch, torchvision, transformers; print(torch.__version__, torchvision.__version__, transformers.__version__)",
    )
    assert versions.split()[:2] == ["2.4.1+cpu", "0.19.1+cpu"]
    assert (prefix / "etc/gpuenv/installed.json").is_file()
    assert (prefix / "etc/gpuenv/activate.sh").is_file()
    again = json.loads(project.gpuenv("install", "--target", "cpu", "--json", check=True).stdout)
    assert again["targets"]["cpu"]["built"] is False, "a second install reuses the prefix"


def test_frozen_refuses_a_stale_lock_and_a_plain_install_relocks(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    project.gpuenv("lock", check=True)
    project.spec.write_text(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    frozen = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert frozen.returncode == 1, frozen.stderr
    assert "out of date" in frozen.stderr
    assert not (project.dir / ".gpuenv").exists()
    relocked = project.gpuenv("install", "--target", "cpu", check=True)
    assert (
        "cpu: gpuenv.lock is out of date (the spec (or gpuenv's knowledge base) changed since "
        "it was locked): relocking" in relocked.stderr
    )
    lock = read_lock(project.lock)
    assert lock is not None and lock.targets["cpu"].pip_package("transformers").version == "4.44.2"


def test_an_install_of_a_lock_found_fresh_before_hashes_nothing_again(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """install judges the lock as `lock --check --target` does and leaves the same note
    (lock._fresh): the next install of the same bytes does not hash the spec's inputs
    again (the build declarations are not even imported), `lock --check --target cpu`
    answers from the note, and a spec changed since is judged in full (--frozen refuses
    it). Neither loads packaging's requirement parser: the names of a cached spec's
    dependencies are read by names.requirement_name."""
    project = make_project()
    project.gpuenv("lock", check=True)
    probe = (
        "import sys\n"
        "from gpuenv.cli import main\n"
        "code = main(['install', '--target', 'cpu', '--frozen', '--json'])\n"
        "print(code, ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )

    def install() -> set[str]:
        out = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=project.dir,
            env=project.env,
            capture_output=True,
            text=True,
            check=True,
        )
        code, *loaded = out.stderr.splitlines()[-1].split()
        assert code == "0", out.stderr
        return set(loaded)

    hashing = {"gpuenv.lock.builds"}
    notes = Path(project.env["XDG_CACHE_HOME"]) / "gpuenv" / "lock-check"
    after_lock = install()
    assert not hashing & after_lock, "the note the lock left answers (lock._noted)"
    shutil.rmtree(notes)  # no note: as before a lock left one
    first, second = install(), install()
    assert hashing <= first, "with no note the first install checks the lock in full"
    assert not hashing & second, "the same bytes again: the note answers"
    assert "gpuenv.lock.target" not in after_lock | first | second, "nothing is relocked"
    assert "packaging.requirements" not in after_lock | first | second
    assert len(list(notes.iterdir())) == 1
    check = project.gpuenv("lock", "--check", "--target", "cpu", check=True)
    assert "up to date" in check.stderr
    assert len(list(notes.iterdir())) == 1, "the same note: the check found it"
    project.spec.write_text(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    frozen = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert frozen.returncode == 1 and "out of date" in frozen.stderr, frozen.stderr


def test_several_targets_need_a_choice(make_project: Callable[..., Project]) -> None:
    result = make_project().gpuenv("install")
    assert result.returncode == 2
    assert "--target" in result.stderr


def test_run_is_gated_on_verification_and_passes_exit_codes(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    refused = project.gpuenv("run", "--", "python", "-c", "pass")
    assert refused.returncode == 4
    assert "gpuenv verify" in refused.stderr
    ran = project.gpuenv(
        "run",
        "--unverified",
        "--",
        "python",
        "-c",
        "import sys, torch; print(sys.prefix); sys.exit(7)",
    )
    assert ran.returncode == 7
    assert ran.stdout.strip() == str(installed_prefix(project))
    assert "--unverified" in ran.stderr


def test_a_failed_verification_never_unlocks_run(make_project: Callable[..., Project]) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    # The fixture's torch is a stub with no tensors: the probe must fail, and say so.
    verify = project.gpuenv("verify", "--target", "cpu", "--json", "--timeout", "60")
    assert verify.returncode == 1, verify.stderr
    assert json.loads(verify.stdout)["passed"] is False
    records = list((installed_prefix(project) / "etc/gpuenv/verify").glob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["passed"] is False
    assert project.gpuenv("run", "--", "true").returncode == 4
    # list says what run says ("its last verification here failed"), not "not verified"
    listing = json.loads(project.gpuenv("list", "--json", check=True).stdout)["prefixes"]
    assert [(p["verified_machines"], p["failed_here"]) for p in listing] == [(0, True)]
    assert "failed here" in project.gpuenv("list", check=True).stdout


def test_run_environment_is_activated(make_project: Callable[..., Project]) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    prefix = installed_prefix(project)
    project.env.update(CUDA_HOME="/usr/local/cuda-11.8", LD_LIBRARY_PATH="relative/lib:/usr/lib")
    ran = project.gpuenv(
        "run",
        "--unverified",
        "--",
        "python",
        "-c",
        "import os, json; print(json.dumps({k: os.environ.get(k) for k in ('PATH', 'CUDA_HOME', 'LD_LIBRARY_PATH')}))",
    )
    env = json.loads(ran.stdout)
    assert env["PATH"].startswith(str(prefix / "bin") + ":")
    assert env["CUDA_HOME"] is None, "a prefix without a toolkit unsets CUDA_HOME"
    assert "relative/lib" not in (env["LD_LIBRARY_PATH"] or "")
    assert 'dropped LD_LIBRARY_PATH entry "relative/lib"' in ran.stderr


def test_run_says_when_pythonpath_puts_another_torch_before_the_prefixs(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    """A torch on PYTHONPATH is imported before the verified prefix's own (verify's probe
    runs without PYTHONPATH, so it passed): run said nothing and ran the other torch."""
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    prefix = installed_prefix(project)
    stray = tmp_path / "stray"
    (stray / "torch").mkdir(parents=True)
    (stray / "torch" / "__init__.py").write_text("")
    plain = tmp_path / "plain"
    plain.mkdir()
    site = next(prefix.glob("lib/python3*/site-packages"))
    project.env["PYTHONPATH"] = f"{plain}:{stray}:{site}"  # the prefix's own: no word
    ran = project.gpuenv("run", "--unverified", "--", "true")
    assert ran.returncode == 0, ran.stderr
    (warning,) = [line for line in ran.stderr.splitlines() if "PYTHONPATH" in line]
    assert f"PYTHONPATH entry 2 ({stray}) holds torch" in warning
    project.env["PYTHONPATH"] = f"{plain}:{site}"
    assert "PYTHONPATH" not in project.gpuenv("run", "--unverified", "--", "true").stderr


def test_activate_prints_a_script_that_real_bash_can_source(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    refused = project.gpuenv("activate", "--shell", "bash")
    assert refused.returncode == 4 and refused.stdout == "", "one gate: activate refuses too"
    assert refused.stderr == project.gpuenv("run", "--", "true").stderr, "the same message"
    unverified = project.gpuenv("activate", "--shell", "bash", "--unverified", check=True)
    assert "--unverified" in unverified.stderr
    script = unverified.stdout
    probe = subprocess.run(
        [
            "bash",
            "-c",
            f"{script}\ncommand -v python; gpuenv_deactivate; command -v python || true",
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(project.dir)},
        check=True,
    )
    first, *rest = probe.stdout.split()
    assert first == str(installed_prefix(project) / "bin" / "python")
    assert all(str(project.home) not in line for line in rest)


def test_a_tampered_artifact_is_refused_and_nothing_is_marked_installed(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    project.gpuenv("lock", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    from dataclasses import replace

    cpu = lock.targets["cpu"]
    bad = tuple(replace(p, sha256="0" * 64) if p.name == "transformers" else p for p in cpu.pip)
    write_lock(project.lock, replace(lock, targets={**lock.targets, "cpu": replace(cpu, pip=bad)}))
    result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.returncode == 5, result.stderr
    assert "does not match the sha256" in result.stderr
    assert not (project.dir / ".gpuenv" / "cpu").exists()
    prefixes = list((project.home / "prefixes").glob("*"))
    assert all(not (p / "etc/gpuenv/installed.json").exists() for p in prefixes)
    assert prefixes == [], "the half-built prefix was removed"


def test_conda_tools_beside_a_venv(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { "cuda-nvcc" = "12.4.*" }\npython = false\n'
    )
    project = make_project(text)
    result = project.gpuenv("install", "--target", "h100")
    assert result.returncode == 0, result.stderr
    prefix = installed_prefix(project, "h100")
    assert (prefix / "conda-meta").is_dir() and any(
        (prefix / "conda-meta").glob("cuda-nvcc-*.json")
    )
    assert python_of(prefix, "import torch; print(torch.__version__)") == "2.4.1+cu124"


def test_reinstall_after_a_lock_change_keeps_a_generation_and_rolls_back(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    first = installed_prefix(project)
    project.spec.write_text(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    project.gpuenv("install", "--target", "cpu", check=True)
    second = installed_prefix(project)
    assert second != first and first.exists()
    listing = json.loads(project.gpuenv("list", "--json", check=True).stdout)
    assert {p["path"] for p in listing["prefixes"]} == {str(first), str(second)}
    back = json.loads(project.gpuenv("rollback", "--target", "cpu", "--json", check=True).stdout)
    assert back["to"] == str(first) and installed_prefix(project) == first
    gc = json.loads(project.gpuenv("gc", "--json", check=True).stdout)
    assert gc["removed"] == [], "both generations are still referenced"
    for link in (project.dir / ".gpuenv").glob("cpu*"):
        link.unlink()
    gc = json.loads(project.gpuenv("gc", "--json", check=True).stdout)
    assert set(gc["removed"]) == {str(first), str(second)} and gc["freed_bytes"] > 0


def _snapshot(root: Path) -> dict[str, int]:
    out = {}
    for path in sorted(root.rglob("*")) if root.exists() else []:
        if path.is_file() or path.is_symlink():
            out[str(path.relative_to(root))] = path.lstat().st_size
    return out


def test_install_writes_nothing_outside_the_store_project_and_caches(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    home = Path(project.env["HOME"])
    (home / ".bashrc").write_text("# user's own\n")
    (home / ".config" / "pip").mkdir(parents=True, exist_ok=True)
    usr_local = _snapshot(Path("/usr/local"))
    before = _snapshot(home)
    project.gpuenv("install", "--target", "cpu", check=True)
    after = _snapshot(home)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(k.startswith(".cache/gpuenv/") for k in changed), changed
    assert _snapshot(Path("/usr/local")) == usr_local
    outside = {p.name for p in project.dir.iterdir()}
    assert outside == {"gpuenv.toml", "gpuenv.lock", ".gpuenv"}


@pytest.mark.parametrize("seed", range(10))
def test_an_install_killed_at_any_point_is_never_reported_installed_and_is_completed_later(
    make_project: Callable[..., Project], tmp_path: Path, seed: int
) -> None:
    import random
    import signal
    import time

    project = make_project(home=tmp_path / f"store{seed}")
    project.gpuenv("lock", check=True)
    rng = random.Random(seed)
    process = project.popen("install", "--target", "cpu", "--frozen")
    time.sleep(rng.uniform(0.05, 1.5))
    process.send_signal(signal.SIGKILL)
    process.wait()
    pointer = project.dir / ".gpuenv" / "cpu"
    for prefix in (project.home / "prefixes").glob("*"):
        if (prefix / "etc/gpuenv/installed.json").exists():
            # Reported installed: then it must be complete.
            assert (
                python_of(prefix, "import torch, transformers; print(torch.__version__)")
                == "2.4.1+cpu"
            )
    if not pointer.exists():
        assert project.gpuenv("run", "--unverified", "--", "true").returncode == 4
    project.gpuenv("install", "--target", "cpu", "--frozen", check=True)
    assert python_of(installed_prefix(project), "import transformers; print('ok')") == "ok"


def test_eight_concurrent_installs_build_once(make_project: Callable[..., Project]) -> None:
    project = make_project()
    project.gpuenv("lock", check=True)
    processes = [
        project.popen("install", "--target", "cpu", "--frozen", "--json") for _ in range(8)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err for _, err in outputs]
    built = [json.loads(out)["targets"]["cpu"]["built"] for out, _ in outputs]
    assert built.count(True) == 1
    assert len(list((project.home / "prefixes").glob("*"))) == 1


def test_install_verify_records_a_failed_probe_and_exits_1(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    result = project.gpuenv("install", "--target", "cpu", "--verify", "--json", timeout=300)
    assert result.returncode == 1, result.stderr
    summary = json.loads(result.stdout)["targets"]["cpu"]
    assert summary["built"] is True and summary["verified"] is False
    assert project.gpuenv("run", "--", "true").returncode == 4


def test_a_passing_verification_unlocks_run_on_this_machine_only_for_this_lock(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    import shutil

    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    prefix = installed_prefix(project)
    # Give the prefix a torch the probe can exercise (the test stand-in, as a CPU build).
    site = next(prefix.glob("lib/python3*/site-packages"))
    fake = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torch"
    for name in ("torch", "torchvision", "torchaudio"):
        shutil.rmtree(site / name)
        shutil.copytree(fake / name, site / name)
    project.env["GPUENV_FAKE_TORCH"] = json.dumps(
        {
            "version": "2.4.1+cpu",
            "cuda": None,
            "devices": [],
            "torchvision": "0.19.1+cpu",
            "torchaudio": "2.4.1+cpu",
        }
    )
    verify = project.gpuenv("verify", "--target", "cpu", "--json", timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert project.gpuenv("run", "--", "true").returncode == 0
    listing = json.loads(project.gpuenv("list", "--json", check=True).stdout)
    assert listing["prefixes"][0]["verified_machines"] == 1
    # A new lock is a new prefix: it is not verified by the old record.
    project.spec.write_text(spec_text(pkgindex, deps='"transformers==4.44.2"'))
    project.gpuenv("install", "--target", "cpu", check=True)
    assert project.gpuenv("run", "--", "true").returncode == 4


def test_shell_starts_bash_activated_and_passes_its_exit_code(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    project.gpuenv("install", "--target", "cpu", check=True)
    (Path(project.env["HOME"]) / ".bashrc").write_text("export FROM_USER_RC=yes\n")
    shell = subprocess.run(
        [sys.executable, "-m", "gpuenv", "shell", "--unverified", "--shell", "bash"],
        cwd=project.dir,
        env=project.env,
        input='command -v python; echo "rc=$FROM_USER_RC"; exit 3\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shell.returncode == 3, shell.stderr
    lines = shell.stdout.split()
    assert lines[0] == str(installed_prefix(project) / "bin" / "python")
    assert "rc=yes" in lines, "the user's own bashrc ran first"
    refused = subprocess.run(
        [sys.executable, "-m", "gpuenv", "shell", "--shell", "bash"],
        cwd=project.dir,
        env=project.env,
        input="exit 0\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 4


def test_a_reinstall_reads_every_artifact_from_uv_cache_without_asking_the_index(
    make_project: Callable[..., Project], serve_index
) -> None:
    import shutil

    from tests.fixtures.pkgindex.index import Seen

    seen = Seen()
    index = serve_index(seen=seen)
    project = make_project(spec_text(index))
    project.gpuenv("lock", "--target", "cpu", check=True)
    seen.requests.clear()
    project.gpuenv("install", "--target", "cpu", check=True)  # a cold cache: online
    wheels = {path for path, _auth in seen.requests if path.endswith(".whl")}
    assert "torch-2.4.1%2Bcpu-cp311-cp311-linux_x86_64.whl" in {
        w.rsplit("/", 1)[-1] for w in wheels
    }
    shutil.rmtree(project.home / "prefixes")  # the environment goes, uv's cache stays
    shutil.rmtree(project.dir / ".gpuenv")
    seen.requests.clear()
    project.gpuenv("install", "--target", "cpu", check=True)
    assert seen.requests == [], "nothing asked of the index: every wheel from the cache"
    prefix = installed_prefix(project)
    assert python_of(prefix, "import torch, transformers; print(torch.__version__)") == "2.4.1+cpu"


def test_the_environment_begun_before_its_prefix_is_known_becomes_the_prefix(
    make_project: Callable[..., Project],
    monkeypatch: pytest.MonkeyPatch,
    cli: Callable[..., CliResult],
) -> None:
    """install.headstart: ``uv venv`` starts as the install does, in a folder beside the
    prefixes; the install takes it as its prefix's environment (activate names the
    prefix) and leaves no such folder behind. A no-op install begins none."""
    from gpuenv.install import headstart

    project = make_project()
    project.gpuenv("lock", check=True)
    monkeypatch.setenv("GPUENV_HOME", str(project.home))
    taken: list[bool] = []
    real_claim = headstart.claim

    def claim(argv: Sequence[str], env: Mapping[str, str]) -> headstart.Claimed | None:
        claimed = real_claim(argv, env)
        taken.append(claimed is not None)
        return claimed

    monkeypatch.setattr(headstart, "claim", claim)
    result = cli("-f", str(project.spec), "install", "--target", "cpu", "--frozen")
    assert result.code == 0, result.err
    assert taken == [True]
    prefix = installed_prefix(project)
    assert f"'{prefix}'" in (prefix / "bin" / "activate").read_text()
    assert python_of(prefix, "import sys, transformers; print(sys.prefix)") == str(prefix)
    assert [p.name for p in (project.home / "prefixes").iterdir()] == [prefix.name]
    began: list[object] = []
    monkeypatch.setattr(headstart, "HeadStart", lambda *a: began.append(a))
    assert cli("-f", str(project.spec), "install", "--target", "cpu", "--frozen").code == 0
    assert began == [] and taken == [True]


def _processes_naming(text: str) -> list[str]:
    """The command lines of this machine's processes that mention ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in argv:
            found.append(f"{entry.name}: {argv.strip()}")
    return found


# `python -m gpuenv` with early runs whatever the download's size (this index's few MB
# are below install.early.EARLY_MIN, where a real install runs none)
_EARLY_ALWAYS = (
    "import gpuenv; gpuenv._guard_start_up(force=True); import sys; "
    "import gpuenv.install.early as early; early.EARLY_MIN = 0; "
    "from gpuenv.cli import entry; sys.exit(entry())"
)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
@pytest.mark.parametrize("seed", range(8))
def test_ctrl_c_at_any_point_of_a_cold_install_leaves_no_child_and_no_partial_file(
    make_project: Callable[..., Project], tmp_path: Path, seed: int
) -> None:
    """SIGINT or SIGTERM while the store fills and uv unpacks beside the downloads (half
    the seeds: the early runs start uv from threads of their own): one line and 130 or
    143, no uv left running, no half-written artifact in the store or scratch folder in
    the prefix, and the next install completes."""
    import random
    import signal
    import subprocess
    import sys
    import time

    home = tmp_path / f"store{seed}"
    project = make_project(home=home)
    project.gpuenv("lock", check=True)
    rng = random.Random(seed)
    signum = (signal.SIGINT, signal.SIGTERM)[seed % 2]
    argv = ["install", "--target", "cpu", "--frozen"]
    if seed < 4:
        process = project.popen(*argv)
    else:
        process = subprocess.Popen(
            [sys.executable, "-c", _EARLY_ALWAYS, *argv],
            cwd=project.dir,
            env=project.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    time.sleep(rng.uniform(0.05, 0.45))  # a cold install of this lock takes about 0.5 s
    process.send_signal(signum)
    _out, err = process.communicate(timeout=60)
    assert process.returncode in (0, 128 + signum), err
    assert "Traceback" not in err
    deadline = time.monotonic() + 5
    while _processes_naming(str(home)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_naming(str(home)) == []
    assert list(home.rglob(".incoming.*")) == []
    project.gpuenv("install", "--target", "cpu", "--frozen", check=True)
    assert python_of(installed_prefix(project), "import transformers; print('ok')") == "ok"
    assert list(home.rglob(".gpuenv-early")) == []
