"""macOS and Windows targets (issue #26): planned from their own builds, locked on this
Linux machine with real uv against the local index (uv's --python-platform), exported,
and refused with one line (exit 2) by install, run and verify here."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from gpuenv.lock.format import read_lock
from tests.e2e.conftest import Project
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import PkgIndex

SPEC = """[project]
name = "teamwide"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = "*"
torchaudio = "*"

[targets.h100]
gpu = "H100"
driver = "550.54.15"

[targets.mac]
gpu = "mps"

[targets.win]
gpu = "RTX 4090"
driver = "552.22"
platform = "win-64"

[pip]
index-url = "{default}"
torch-index = "{torch}"
"""


@pytest.fixture
def project(make_project: Callable[..., Project], pkgindex: PkgIndex) -> Project:
    return make_project(SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base))


def test_linux_mac_and_windows_targets_lock_here(project: Project, pkgindex: PkgIndex) -> None:
    result = project.gpuenv("lock", "--json", check=True, timeout=300)
    assert set(json.loads(result.stdout)["targets"]) == {"h100", "mac", "win"}
    lock = read_lock(project.lock)
    assert lock is not None
    h100, mac, win = (lock.targets[n] for n in ("h100", "mac", "win"))
    assert (h100.platform, mac.platform, win.platform) == ("linux-64", "osx-arm64", "win-64")

    torch = mac.pip_package("torch")
    assert torch is not None and torch.version == "2.4.1"  # PyPI's macOS wheel (CPU + MPS)
    assert torch.filename.endswith("-none-macosx_11_0_arm64.whl")
    assert torch.url.startswith(pkgindex.url + "/")
    assert mac.stack.cu_tag == "cpu" and mac.virtual_packages.get("__osx") == "11.0"

    torch = win.pip_package("torch")
    assert torch is not None and torch.version == "2.4.1+cu124"
    assert torch.filename.endswith("-win_amd64.whl")
    assert torch.url.startswith(pkgindex.torch_index("cu124") + "/")
    assert torch.sha256 == pkgindex.artifact(torch.filename, "whl/cu124").sha256
    vision = win.pip_package("torchvision")
    assert vision is not None and vision.filename.endswith("-win_amd64.whl")
    assert "__win" in win.virtual_packages and "__glibc" not in win.virtual_packages

    for target in (mac, win):
        assert not any(p.name.startswith("nvidia-") for p in target.pip), target.name
        numpy = target.pip_package("numpy")
        assert numpy is not None
        assert ("macosx" if target is mac else "win_amd64") in numpy.filename
    h100_torch = h100.pip_package("torch")
    assert h100_torch is not None and h100_torch.filename.endswith("linux_x86_64.whl")

    # relocking changes nothing, and --check needs no network
    first = project.lock.read_bytes()
    project.gpuenv("lock", check=True, timeout=300)
    assert project.lock.read_bytes() == first


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (("install", "--target", "mac"), "install it on a Mac with Apple silicon"),
        (("install", "--target", "win"), "install it on a Windows x86_64 machine"),
        (("run", "--target", "mac", "--", "true"), "run it on a Mac with Apple silicon"),
        (("verify", "--target", "win"), "verify it on a Windows x86_64 machine"),
    ],
)
def test_another_oss_target_is_refused_here_in_one_line(
    project: Project, args: tuple[str, ...], where: str
) -> None:
    result = project.gpuenv(*args)
    assert result.returncode == 2, result.stderr
    first = result.stderr.strip().splitlines()[0]
    assert where in first and "this machine is Linux" in first, result.stderr
    assert "Traceback" not in result.stderr
    assert not project.home.exists() or not any(project.home.rglob("*.whl"))


def test_foreign_targets_export(project: Project) -> None:
    project.gpuenv("lock", check=True, timeout=300)
    pylock = project.gpuenv("export", "pylock", "--target", "mac", check=True).stdout
    assert 'sys_platform == \\"darwin\\" and platform_machine == \\"arm64\\"' in pylock or (
        "sys_platform == 'darwin'" in pylock or 'sys_platform == "darwin"' in pylock
    )
    assert "macosx_11_0_arm64" in pylock
    win_pylock = project.gpuenv("export", "pylock", "--target", "win", check=True).stdout
    assert "win32" in win_pylock and "AMD64" in win_pylock
    requirements = project.gpuenv("export", "requirements", "--target", "win", check=True).stdout
    assert "torch==2.4.1+cu124" in requirements and "--hash=sha256:" in requirements
    environment = project.gpuenv("export", "environment-yml", "--target", "mac", check=True)
    assert "osx-arm64" in environment.stdout
    notes = project.gpuenv("export", "notes", "--target", "win", check=True).stdout
    assert "win-64" in notes


def test_the_conda_half_is_solved_in_each_targets_own_subdir(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    text = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\ndependencies = {{ filelock = "*" }}\n'
    )
    project = make_project(text)
    result = project.gpuenv("lock", "--target", "mac", "--target", "win", timeout=300)
    assert result.returncode == 0, result.stderr
    lock = read_lock(project.lock)
    assert lock is not None
    for name, subdir in (("mac", "osx-arm64"), ("win", "win-64")):
        conda = {c.name: c for c in lock.targets[name].conda}
        assert conda["python"].subdir == subdir and conda["python"].version == "3.11.9"
        assert conda["filelock"].subdir == "noarch"
        torch = lock.targets[name].pip_package("torch")
        assert torch is not None and (subdir == "osx-arm64") == ("macosx" in torch.filename)


def test_a_conda_package_for_unix_only_is_unsatisfiable_on_windows(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    text = SPEC.format(default=pkgindex.default_index, torch=pkgindex.torch_base) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\ndependencies = {{ tqdm = "*" }}\n'
    )
    project = make_project(text)
    assert project.gpuenv("lock", "--target", "mac", timeout=300).returncode == 0
    result = project.gpuenv("lock", "--target", "win", timeout=300)
    assert result.returncode == 3, result.stderr
    assert "__unix" in result.stderr and "win-64" in result.stderr
