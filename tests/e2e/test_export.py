"""`gpuenv export`: each format read back by the tool it is written for, against the local
index and channel fixtures: conda-lock's own parser, uv installing the pylock.toml into a
fresh venv, pip installing the requirements with --require-hashes, the official
Dockerfile parser (building needs a registry: not done), conda-lock's environment.yml
parser; notes and credentials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuenv.lock.format import read_lock, write_lock
from gpuenv.lock.model import Lock, LockedTarget
from tests.conftest import CliResult
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import AUTH_PASSWORD, AUTH_USER, PkgIndex


def _project(root: Path, text: str) -> Project:
    root.mkdir(parents=True)
    (root / "gpuenv.toml").write_text(text)
    home = root.parent / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "GPUENV_"))}
    env.update(
        GPUENV_HOME=str(root.parent / "store"),
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"),
    )
    return Project(root, root.parent / "store", env)


@pytest.fixture(scope="module")
def pip_project(tmp_path_factory: pytest.TempPathFactory, pkgindex: PkgIndex) -> Iterator[Project]:
    project = _project(tmp_path_factory.mktemp("export") / "pip", spec_text(pkgindex))
    project.gpuenv("lock", check=True, timeout=300)
    yield project


@pytest.fixture(scope="module")
def conda_project(
    tmp_path_factory: pytest.TempPathFactory, pkgindex: PkgIndex, local_channel: LocalChannel
) -> Iterator[Project]:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\ndependencies = {{ "cuda-nvcc" = "12.4.*" }}\n'
    )
    project = _project(tmp_path_factory.mktemp("export") / "conda", text)
    project.gpuenv("lock", check=True, timeout=300)
    yield project


def _target(project: Project, name: str) -> LockedTarget:
    lock = read_lock(project.lock)
    assert lock is not None
    return lock.targets[name]


def _export(project: Project, fmt: str, target: str, out: Path | None = None) -> str:
    args = ["export", fmt, "--target", target] + (["-o", str(out)] if out else [])
    result = project.gpuenv(*args, check=True)
    return out.read_text() if out else result.stdout


def _installed(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, re;"
        "print(json.dumps({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version"
        " for d in m.distributions()}))"
    )
    found = json.loads(
        subprocess.run(
            [python, "-I", "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    return {k: v for k, v in found.items() if k not in ("pip", "setuptools", "wheel")}


def test_conda_lock_is_read_back_by_conda_lock_with_the_same_packages_and_hashes(
    conda_project: Project, tmp_path: Path
) -> None:
    from conda_lock.lockfile import parse_conda_lock_file

    target = _target(conda_project, "h100")
    path = tmp_path / "conda-lock.yml"
    _export(conda_project, "conda-lock", "h100", path)
    parsed = parse_conda_lock_file(path)
    found = {(p.manager, p.name, p.version, p.hash.sha256, p.hash.md5) for p in parsed.package}
    expected = {("conda", c.name, c.version, c.sha256, c.md5) for c in target.conda}
    expected |= {("pip", p.name, p.version, p.sha256, None) for p in target.pip}
    assert found == expected
    assert {p.url for p in parsed.package} == {c.url for c in target.conda} | {
        p.url for p in target.pip
    }
    assert parsed.metadata.platforms == ["linux-64"]


def test_conda_lock_without_the_extra_says_how_to_add_it(
    conda_project: Project, tmp_path: Path
) -> None:
    """A plain `pip install gpuenv` has no conda-lock: the export says which extra adds it."""
    stub = tmp_path / "site" / "conda_lock"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'conda_lock'\", name='conda_lock')\n"
    )
    env = dict(conda_project.env)
    env["PYTHONPATH"] = os.pathsep.join([str(stub.parent), env["PYTHONPATH"]])
    out = tmp_path / "conda-lock.yml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuenv",
            "export",
            "conda-lock",
            "--target",
            "h100",
            "-o",
            str(out),
        ],
        cwd=conda_project.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "gpuenv export conda-lock needs conda-lock" in result.stderr
    assert "pip install 'gpuenv[conda-lock]'" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def test_conda_lock_refuses_a_target_whose_pip_packages_have_no_conda_python(
    pip_project: Project,
) -> None:
    result = pip_project.gpuenv("export", "conda-lock", "--target", "cpu")
    assert result.returncode == 2
    assert "no conda Python" in result.stderr and "Traceback" not in result.stderr


def test_pylock_is_installed_by_uv_into_a_fresh_venv_with_the_same_packages(
    pip_project: Project, tmp_path: Path
) -> None:
    import uv

    target = _target(pip_project, "cpu")
    pylock = tmp_path / "pylock.toml"
    _export(pip_project, "pylock", "cpu", pylock)
    import tomllib
    from packaging.pylock import Pylock

    Pylock.from_dict(tomllib.loads(pylock.read_text())).validate()  # packaging's own reader
    env = {**pip_project.env, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    venv = tmp_path / "venv"
    binary = uv.find_uv_bin()
    subprocess.run(
        [binary, "venv", "--python", sys.executable, str(venv)],
        env=env,
        check=True,
        capture_output=True,
    )
    install = subprocess.run(
        [binary, "pip", "install", "--python", str(venv / "bin/python"), "-r", str(pylock)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    assert _installed(venv / "bin/python") == {p.name: p.version for p in target.pip}


def test_requirements_are_installed_by_pip_with_require_hashes(
    pip_project: Project, tmp_path: Path
) -> None:
    target = _target(pip_project, "cpu")
    requirements = tmp_path / "requirements.txt"
    text = _export(pip_project, "requirements", "cpu", requirements)
    pins = [line for line in text.splitlines() if line and not line.startswith(("#", "--"))]
    assert len(pins) == len(target.pip) and all("--hash=sha256:" in line for line in pins)
    venv = tmp_path / "venv"  # a fresh environment, filled by this interpreter's pip
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {
        **pip_project.env,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_CACHE_DIR": str(tmp_path / "pip-cache"),
    }
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install"]
    install = subprocess.run(
        [*pip, "--require-hashes", "-r", requirements],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert _installed(venv / "bin/python") == {p.name: p.version for p in target.pip}


def _parse_dockerfile(text: str) -> list[object]:
    dockerfile = pytest.importorskip("dockerfile")
    return list(dockerfile.parse_string(text))


def test_dockerfile_base_image_matches_the_lock_and_installs_exactly_it(
    pip_project: Project, conda_project: Project
) -> None:
    h100 = _target(pip_project, "h100")
    commands = _parse_dockerfile(_export(pip_project, "dockerfile", "h100"))
    froms = [c for c in commands if c.cmd == "FROM"]  # type: ignore[attr-defined]
    image = froms[0].value[0]
    repository, tag = image.split(":")
    version, cudnn, flavour, os_name = tag.split("-")
    assert repository == "nvidia/cuda" and os_name == "ubuntu22.04"
    assert version.startswith(f"{h100.stack.cuda}.")  # 12.4.1 for the lock's 12.4
    assert h100.stack.cudnn and h100.stack.cudnn.startswith("9.") and cudnn == "cudnn"
    assert flavour == "runtime", "no toolkit is locked"
    heredocs = {h.name: h.content for c in commands for h in c.heredocs}  # type: ignore[attr-defined]
    lines = set(heredocs["GPUENV_PIP"].splitlines())
    assert lines == {f"{p.name} @ {p.url} --hash=sha256:{p.sha256}" for p in h100.pip}
    runs = " ".join(" ".join(c.value) for c in commands if c.cmd == "RUN")  # type: ignore[attr-defined]
    assert "--require-hashes" in runs and "--python 3.11" in runs

    # A locked toolkit (conda's cuda-nvcc) makes it a devel image; conda records go in exactly.
    conda = _target(conda_project, "h100")
    commands = _parse_dockerfile(_export(conda_project, "dockerfile", "h100"))
    image = next(c for c in commands if c.cmd == "FROM").value[0]  # type: ignore[attr-defined]
    assert image == "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"
    heredocs = {h.name: h.content for c in commands for h in c.heredocs}  # type: ignore[attr-defined]
    assert heredocs["GPUENV_CONDA"].splitlines() == ["@EXPLICIT"] + [
        f"{c.url}#{c.md5}" for c in sorted(conda.conda, key=lambda c: c.name)
    ]
    # The CPU target needs no CUDA base.
    cpu = _parse_dockerfile(_export(pip_project, "dockerfile", "cpu"))
    assert next(c for c in cpu if c.cmd == "FROM").value == ("ubuntu:22.04",)  # type: ignore[attr-defined]


def test_environment_yml_is_read_by_conda_lock_with_exact_pins(
    conda_project: Project, tmp_path: Path
) -> None:
    import yaml

    target = _target(conda_project, "cpu")
    path = tmp_path / "environment.yml"
    _export(conda_project, "environment-yml", "cpu", path)
    data = yaml.safe_load(path.read_text())
    conda_deps = [d for d in data["dependencies"] if isinstance(d, str)]
    for c in target.conda:
        assert f"{c.channel.rstrip('/')}::{c.name}=={c.version}={c.build}" in conda_deps
    pip_lines = next(d["pip"] for d in data["dependencies"] if isinstance(d, dict))
    for p in target.pip:
        assert f"{p.name} @ {p.url}#sha256={p.sha256}" in pip_lines
    from conda_lock.src_parser.environment_yaml import parse_environment_file

    mapping = tmp_path / "mapping.json"  # conda-lock's PyPI-to-conda names (here: none differ)
    mapping.write_text("{}")
    spec = parse_environment_file(path, platforms=["linux-64"], mapping_url=str(mapping))
    found = {(d.manager, d.name) for d in spec.dependencies["linux-64"]}
    assert {("conda", c.name) for c in target.conda} <= found
    assert {("pip", p.name) for p in target.pip} <= found


def _with_credentials(lock: Lock) -> Lock:
    """The same lock with user:password@ in every URL (as if edited by hand)."""
    from dataclasses import replace

    def dirty(url: str | None) -> str | None:
        return url.replace("://", f"://{AUTH_USER}:{AUTH_PASSWORD}@") if url else url

    targets = {
        name: replace(
            t,
            pip=tuple(replace(p, url=dirty(p.url), index=dirty(p.index)) for p in t.pip),
            conda=tuple(replace(c, url=dirty(c.url), channel=dirty(c.channel)) for c in t.conda),
            stack=replace(t.stack, index=dirty(t.stack.index)),
        )
        for name, t in lock.targets.items()
    }
    return replace(lock, targets=targets)


def test_no_export_carries_a_credential_even_from_a_hand_edited_lock(
    tmp_path: Path,
    pkgindex_auth: PkgIndex,
    local_channel: LocalChannel,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = spec_text(pkgindex_auth) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\ndependencies = {{ "cuda-nvcc" = "12.4.*" }}\n'
    )
    project = _project(tmp_path / "auth", text)
    project.gpuenv("lock", check=True, timeout=300)
    lock = read_lock(project.lock)
    assert lock is not None and AUTH_PASSWORD not in project.lock.read_text()
    write_lock(project.lock, _with_credentials(lock))
    assert AUTH_PASSWORD in project.lock.read_text()
    formats = (
        "conda-lock",
        "pylock",
        "requirements",
        "environment-yml",
        "dockerfile",
        "notes",
        "slurm",
    )
    for key, value in project.env.items():
        if key.startswith(("GPUENV_", "XDG_")):
            monkeypatch.setenv(key, value)
    checked = 0
    for fmt in formats:
        for target in ("cpu", "h100"):
            result = cli("-f", str(project.spec), "export", fmt, "--target", target)
            assert result.code == 0, (fmt, result.err)
            for secret in (AUTH_PASSWORD, f"{AUTH_USER}:", f"{AUTH_USER}@"):
                assert secret not in result.out + result.err, (fmt, target)
            checked += 1
    assert checked == 14


def test_notes_hold_the_stack_every_package_and_each_machines_latest_result(
    pip_project: Project, tmp_path: Path
) -> None:
    import shutil

    project = _project(tmp_path / "notes", pip_project.spec.read_text())
    shutil.copy(pip_project.lock, project.lock)
    target = _target(project, "cpu")
    before = _export(project, "notes", "cpu")
    assert "Not verified yet" in before and target.content_hash in before
    for p in target.pip:
        assert f"`{p.sha256}`" in before
    project.gpuenv("install", "--target", "cpu", check=True, timeout=300)
    prefix = Path(os.readlink(project.dir / ".gpuenv" / "cpu"))
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
    project.gpuenv("verify", "--target", "cpu", check=True, timeout=300)
    after = _export(project, "notes", "cpu")
    row = next(line for line in after.splitlines() if "| pass |" in line)
    assert "float32" in row and "T" in row.split("|")[-2]  # the rate, then when (ISO time)
    assert after == _export(project, "notes", "cpu"), "the same records give the same bytes"


@pytest.mark.parametrize("fmt", ["requirements", "pylock"])
def test_a_conda_target_exported_to_a_pip_format_says_what_is_left_out(
    conda_project: Project, fmt: str
) -> None:
    result = conda_project.gpuenv("export", fmt, "--target", "cpu", check=True)
    assert "conda packages" in result.stderr


def test_export_needs_a_target_when_there_are_several(pip_project: Project) -> None:
    result = pip_project.gpuenv("export", "requirements")
    assert result.returncode == 2 and "--target" in result.stderr


def test_the_slurm_script_refuses_to_start_another_lock_than_its_own(
    pip_project: Project, tmp_path: Path
) -> None:
    script = tmp_path / "job.sh"
    _export(pip_project, "slurm", "cpu", script)
    assert os.access(script, os.X_OK)
    bare = subprocess.run(["bash", script], capture_output=True, text=True, check=False)
    assert bare.returncode == 2 and "usage" in bare.stderr
    # Not installed (the project points at no prefix): refused before srun is asked.
    env = {**pip_project.env, "PATH": "/usr/bin:/bin"}
    refused = subprocess.run(
        ["bash", script, "true"], capture_output=True, text=True, env=env, check=False
    )
    assert refused.returncode == 4 and "not the lock this script was exported for" in refused.stderr


def test_an_output_that_is_not_a_file_is_refused_and_a_link_is_written_through(
    pip_project: Project, tmp_path: Path
) -> None:
    # `-o` replaces a file by renaming a complete one over it: over a FIFO or a device
    # (`-o /dev/stdout`, `/dev/full`) that would put a regular file in the device's place.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused = pip_project.gpuenv("export", "requirements", "--target", "cpu", "-o", str(fifo))
    assert refused.returncode == 2, refused.stderr
    assert str(fifo) in refused.stderr and "not a regular file" in refused.stderr
    assert fifo.is_fifo()
    # A link to a file: the file it names gets the export, the link stays a link.
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "requirements.txt"
    link.symlink_to(real)
    _export(pip_project, "requirements", "cpu", link)
    assert link.is_symlink() and "--hash=sha256:" in real.read_text()


def test_dash_and_dev_stdout_are_stdout(pip_project: Project) -> None:
    """`-o -` wrote a file named '-', and `-o /dev/stdout` was refused: both are stdout."""
    for output in ("-", "/dev/stdout"):
        result = pip_project.gpuenv("export", "requirements", "--target", "cpu", "-o", output)
        assert result.returncode == 0, result.stderr
        assert "--hash=sha256:" in result.stdout
    assert not (pip_project.dir / "-").exists()
    packed = pip_project.gpuenv("pack", "-o", "-")
    assert packed.returncode == 2 and "an archive is not written to stdout" in packed.stderr


def _names(requirements: str) -> set[str]:
    return {line.split("==")[0] for line in requirements.splitlines() if "==" in line}


def test_an_export_writes_the_groups_install_installs(tmp_path: Path, pkgindex: PkgIndex) -> None:
    """The default is install's (``dev`` and no other group); a group left out is named
    with how to add it; the lock's content hash heads every choice. An export wrote every
    group's packages, the notebook recipe's among them, into one requirements.txt."""
    text = spec_text(pkgindex) + '\n[pip.groups]\ndev = ["anyio"]\nnotebooks = ["exceptiongroup"]\n'
    project = _project(tmp_path / "groups", text)
    project.gpuenv("lock", check=True, timeout=300)
    target = _target(project, "cpu")
    assert {"anyio", "exceptiongroup"} <= {p.name for p in target.pip}

    default = project.gpuenv("export", "requirements", "--target", "cpu", check=True)
    assert "anyio" in _names(default.stdout) and "exceptiongroup" not in _names(default.stdout)
    assert (
        "note: left out the dependency groups not chosen: notebooks (1 package); "
        "--group NAME or --all-groups exports them" in default.stderr
    )
    chosen = project.gpuenv(
        "export", "requirements", "--target", "cpu", "--group", "notebooks", "--no-dev", check=True
    )
    assert "exceptiongroup" in _names(chosen.stdout) and "anyio" not in _names(chosen.stdout)
    every = project.gpuenv("export", "pylock", "--target", "cpu", "--all-groups", check=True)
    assert 'name = "exceptiongroup"' in every.stdout and 'name = "anyio"' in every.stdout
    assert "left out" not in every.stderr
    for out in (default.stdout, chosen.stdout, every.stdout):
        assert target.content_hash in out  # the lock's, whatever the export leaves out
    unknown = project.gpuenv("export", "requirements", "--target", "cpu", "--group", "nope")
    assert unknown.returncode == 2
    assert "no dependency group 'nope' (groups: dev, notebooks)" in unknown.stderr
    slurm = project.gpuenv("export", "slurm", "--target", "cpu", "--all-groups")
    assert slurm.returncode == 2  # the job runs the prefix as installed: groups are install's
    assert "its groups are the ones it was installed with" in slurm.stderr


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs Linux's /sys")
def test_an_export_that_cannot_be_written_says_to_write_it_elsewhere(
    pip_project: Project,
) -> None:
    """-o into a folder that takes no files told the user to point GPUENV_HOME and
    GPUENV_CACHE_DIR elsewhere, neither of which the export writes to."""
    out = "/sys/gpuenv-export.txt"
    result = pip_project.gpuenv("export", "requirements", "--target", "cpu", "-o", out)
    assert result.returncode == 5, result.stderr
    assert "cannot write the requirements export (/sys/gpuenv-export.txt)" in result.stderr
    assert "-o PATH in a writable folder" in result.stderr
    assert "GPUENV_HOME" not in result.stderr
