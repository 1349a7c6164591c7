"""`gpuenv lock` with real uv and rattler against the local index and channel."""

from __future__ import annotations

import json
from collections.abc import Callable

from gpuenv.lock.format import read_lock
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import PkgIndex


def test_two_targets_lock_exact_artifacts_from_the_right_indexes(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    result = project.gpuenv("lock", "--json", check=True)
    assert set(json.loads(result.stdout)["targets"]) == {"h100", "cpu"}
    lock = read_lock(project.lock)
    assert lock is not None
    h100, cpu = lock.targets["h100"], lock.targets["cpu"]
    torch = h100.pip_package("torch")
    assert torch is not None and torch.version == "2.4.1+cu124"
    assert torch.url.startswith(pkgindex.torch_index("cu124") + "/")
    assert torch.sha256 == pkgindex.artifact(torch.filename, "whl/cu124").sha256
    assert {"filelock", "typing-extensions", "fsspec"} <= set(torch.requires), "edges recorded"
    cpu_torch = cpu.pip_package("torch")
    assert cpu_torch is not None and cpu_torch.version == "2.4.1+cpu"
    transformers = h100.pip_package("transformers")
    assert transformers is not None and transformers.index == pkgindex.default_index
    assert h100.pip_package("nvidia-cuda-runtime-cu12") is not None
    assert cpu.pip_package("nvidia-cuda-runtime-cu12") is None
    for package in h100.pip + cpu.pip:
        assert len(package.sha256) == 64 and package.url.startswith("http://127.0.0.1")


def test_relock_is_byte_identical_and_check_needs_no_network(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    project.gpuenv("lock", check=True)
    first = project.lock.read_bytes()
    project.gpuenv("lock", check=True)
    assert project.lock.read_bytes() == first
    offline = dict(project.env, http_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    project.env = offline
    assert project.gpuenv("lock", "--check").returncode == 0


def test_a_mislabelled_build_on_the_index_is_caught(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project(spec_text(pkgindex, torch_base=pkgindex.bad_torch_base))
    result = project.gpuenv("lock", "--target", "h100")
    assert result.returncode == 5, result.stderr
    assert "cu121 build (planned cu124)" in result.stderr
    assert not project.lock.exists()


def test_credentials_are_stripped_from_the_lock(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex
) -> None:
    project = make_project(spec_text(pkgindex_auth))
    result = project.gpuenv("lock", "--target", "cpu")
    assert result.returncode == 0, result.stderr
    text = project.lock.read_text()
    assert "s3cret-token" not in text and "gpuenv-user" not in text
    assert "http://127.0.0.1" in text


def test_an_unresolvable_requirement_exits_3_with_uvs_explanation(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project(spec_text(pkgindex, deps='"transformers>=99"'))
    result = project.gpuenv("lock", "--target", "cpu")
    assert result.returncode == 3, result.stderr
    assert "transformers" in result.stderr
    assert "Traceback" not in result.stderr


def test_conda_half_is_solved_for_the_target_with_hashes(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { "cuda-nvcc" = "12.4.*" }\npython = false\n'
    )
    project = make_project(text)
    result = project.gpuenv("lock", "--target", "h100")
    assert result.returncode == 0, result.stderr
    lock = read_lock(project.lock)
    assert lock is not None
    conda = {c.name: c for c in lock.targets["h100"].conda}
    assert conda["cuda-nvcc"].version.startswith("12.4")
    assert len(conda["cuda-nvcc"].sha256) == 64 and len(conda["cuda-nvcc"].md5) == 32
    assert lock.targets["h100"].virtual_packages["__cuda"] == "12.4"


def test_a_conda_package_the_target_gpu_cannot_run_is_unsatisfiable(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    text = spec_text(pkgindex).replace('gpu = "H100"', 'gpu = "T4"') + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { "flash-attn" = "*" }\npython = false\n'
    )
    project = make_project(text)
    result = project.gpuenv("lock", "--target", "h100")
    assert result.returncode == 3, result.stderr
    assert "__cuda_arch" in result.stderr


def test_python_false_with_conda_packages_that_need_python_is_refused(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    text = spec_text(pkgindex) + (
        f'\n[conda]\nchannels = ["{local_channel.url}"]\n'
        'dependencies = { filelock = "*" }\npython = false\n'
    )
    result = make_project(text).gpuenv("lock", "--target", "cpu")
    assert result.returncode == 3, result.stderr
    assert "need conda's Python: filelock" in result.stderr


def test_wheel_metadata_is_recorded_and_a_planted_cudnn_pin_is_reported(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """The lock reads the resolved torch family's own metadata (the fixture index serves
    PEP 658 files) and names the data entry the wheels contradict."""
    text = spec_text(pkgindex, torch_base=pkgindex.planted_torch_base).replace(
        "dependencies = [",
        f'extra-index-urls = ["{pkgindex.planted_extra_index}"]\ndependencies = [',
    )
    project = make_project(text)
    result = project.gpuenv("lock", "--target", "h100", "--json", check=True)
    warnings = json.loads(result.stdout)["warnings"]
    assert any(
        "cuDNN: the torch 2.4.1 (cu124, linux-64) wheel pins 9.9.9.9, the knowledge base says "
        "9.1.0.70 (torch.toml: series 2.4, build cu124 (linux-64))" in w
        for w in warnings
    ), warnings
    lock = read_lock(project.lock)
    assert lock is not None
    facts = lock.targets["h100"].wheel_facts
    assert facts is not None
    assert (facts.cudnn, facts.nccl, facts.cuda_runtime) == ("9.9.9.9", "2.20.5", "12.4.127")
    assert facts.requires_python == ">=3.8.0"
    assert facts.torchvision_requires == "==2.4.1" and facts.torchaudio_requires == "==2.4.1"
    assert "[targets.h100.wheel-facts]" in project.lock.read_text()


def test_wheel_facts_that_agree_with_the_data_give_no_warning(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = make_project()
    result = project.gpuenv("lock", "--target", "h100", "--json", check=True)
    assert json.loads(result.stdout)["warnings"] == []
    lock = read_lock(project.lock)
    assert lock is not None and lock.targets["h100"].wheel_facts is not None
    assert lock.targets["h100"].wheel_facts.cudnn == "9.1.0.70"
