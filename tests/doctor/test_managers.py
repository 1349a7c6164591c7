"""conda and pip in one environment."""

from __future__ import annotations

from pathlib import Path

from gpuenv.doctor import Severity
from tests.doctor.conftest import NO_GPU, FakeEnv, Run, codes, only


def conda_env(tmp_path: Path, elf) -> FakeEnv:
    env = FakeEnv(tmp_path / "conda", elf)
    env.site.mkdir(parents=True)
    env.conda("python", "3.11.9", files=["bin/python3.11"])
    return env


def test_clean_conda_env(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    info = "lib/python3.11/site-packages/numpy-1.26.4.dist-info"
    env.dist("numpy", "1.26.4", installer="conda", files=["numpy/__init__.py"])
    env.conda(
        "numpy",
        "1.26.4",
        files=[f"{info}/METADATA", "lib/python3.11/site-packages/numpy/__init__.py"],
    )
    env.dist("requests", "2.32.0", files=["requests/__init__.py"])  # pip-only: fine
    assert run(env).findings == ()


def test_conda_pytorch_and_pip_torch(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    meta = env.conda("pytorch", "2.4.1", build="py3.11_cuda12.4_cudnn9.1.0_0")
    env.torch(cuda=None, version="2.4.1")  # pip's torch dist-info replaced conda's
    finding = only(run(env, facts=NO_GPU), "mixed-managers")
    assert finding.severity is Severity.ERROR
    pair = finding.evidence["pairs"][0]
    assert pair["pip"] == "torch 2.4.1"
    assert pair["installer"] == "pip"
    assert pair["conda_meta"] == str(meta)
    assert "pytorch 2.4.1" in finding.message


def test_cuda_runtime_from_both_is_a_warning(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    env.conda("cudatoolkit", "11.8.0")
    env.dist("nvidia-cuda-runtime-cu11", "11.8.89")
    env.dist("nvidia-cublas-cu11", "11.11.3.6")
    finding = only(run(env), "mixed-managers")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["count"] == 2
    assert {p["conda"].split()[0] for p in finding.evidence["pairs"]} == {"cudatoolkit"}


def test_uv_counts_as_pip(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    env.conda("numpy", "1.26.0")
    env.dist("numpy", "1.26.4", installer="uv")
    finding = only(run(env), "mixed-managers")
    assert finding.evidence["pairs"][0]["installer"] == "uv"


def test_two_dist_infos(clean_env: FakeEnv, run: Run) -> None:
    stale = clean_env.dist("torch", "2.3.0")
    report = run(clean_env)
    finding = only(report, "duplicate-dist-info")
    assert finding.severity is Severity.ERROR
    paths = {c["path"] for c in finding.evidence["copies"]}
    assert str(stale) in paths and len(paths) == 2
    assert "2.3.0" in finding.message


def test_pip_overwrote_conda_files(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    owned = "lib/python3.11/site-packages/fastjson/__init__.py"
    env.conda("fastjson-core", "1.0", files=[owned])
    env.dist("turbojson", "2.0", files=["fastjson/__init__.py", "turbojson/__init__.py"])
    report = run(env)
    finding = only(report, "pip-overwrote-conda-files")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["files"] == [owned]
    assert finding.evidence["conda"] == "fastjson-core"
    assert finding.evidence["pip"] == "turbojson 2.0"
    assert "mixed-managers" not in codes(report)


def test_record_decides_not_top_level(tmp_path: Path, elf, run: Run) -> None:
    """top_level.txt names packages, RECORD names the files pip wrote: RECORD wins."""
    env = conda_env(tmp_path, elf)
    env.conda("fastjson-core", "1.0", files=["lib/python3.11/site-packages/fastjson/__init__.py"])
    info = env.dist("other", "1.0", files=["other/__init__.py"], top_level=["other"])
    (info / "RECORD").write_text("fastjson/__init__.py,,\n")
    assert only(run(env), "pip-overwrote-conda-files").evidence["pip"] == "other 1.0"


def test_cuda13_wheel_names_pair_with_conda(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    env.conda("cuda-cudart", "13.0.96")
    env.dist("nvidia-cuda-runtime", "13.0.96")  # CUDA 13 wheels have no -cu13 suffix
    assert (
        only(run(env), "mixed-managers").evidence["pairs"][0]["pip"]
        == "nvidia-cuda-runtime 13.0.96"
    )


SITE = "lib/python3.11/site-packages"


def test_pip_torch_over_conda_pytorch_is_the_precise_finding(tmp_path: Path, elf, run: Run) -> None:
    """pip replaced conda's torch files: pip-overwrote-conda-files, not mixed-managers,
    and a fix for each way out (conda's files are pip's now)."""
    env = conda_env(tmp_path, elf)
    env.conda("pytorch", "2.4.1", files=[f"{SITE}/torch/__init__.py", f"{SITE}/torch/version.py"])
    env.torch(cuda=None, version="2.4.1")
    env.dist("torch", "2.4.1", files=["torch/__init__.py", "torch/version.py"])
    report = run(env, facts=NO_GPU)
    finding = only(report, "pip-overwrote-conda-files")
    assert "mixed-managers" not in codes(report)
    assert finding.evidence["count"] == 2
    fix = finding.fix
    assert fix.index("pip uninstall -y torch") < fix.index(
        "conda install --force-reinstall pytorch=2.4.1=0"
    )
    assert fix.index("conda remove --force pytorch") < fix.index(
        "--force-reinstall --no-deps torch==2.4.1"
    )
    assert "keep conda's" not in fix.lower()


def test_conda_record_whose_files_are_gone(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    env.conda("pytorch", "2.3.0", files=[f"{SITE}/torch/_old.py"])
    (env.prefix / SITE / "torch" / "_old.py").unlink()
    env.torch(cuda=None, version="2.4.1")
    finding = only(run(env, facts=NO_GPU), "mixed-managers")
    pair = finding.evidence["pairs"][0]
    assert (pair["conda_files"], pair["conda_files_missing"]) == (1, 1)
    assert "only a record now" in finding.fix
    assert "keep conda's" not in finding.fix.lower()
    assert finding.fix.startswith("conda's pytorch is only a record now")
    assert "1. 'conda remove --force pytorch'" in finding.fix


def test_two_intact_copies_offer_keeping_condas(tmp_path: Path, elf, run: Run) -> None:
    env = conda_env(tmp_path, elf)
    env.conda("numpy", "1.26.0", files=[f"{SITE}/numpy/core.py"])
    env.dist("numpy", "1.26.4", files=["numpy/other.py"])
    finding = only(run(env), "mixed-managers")
    assert finding.fix.startswith("Keep conda's numpy: 1. 'python -m pip uninstall -y numpy'.")
