"""torchvision and torchaudio against torch: pairing and build."""

from __future__ import annotations

import shutil

from gpuenv.doctor import Severity
from tests.doctor.conftest import FakeEnv, Run, codes, only


def replace(env: FakeEnv, name: str, version: str) -> None:
    for info in env.site.glob(f"{name}-*.dist-info"):
        shutil.rmtree(info)
    env.dist(name, version)


def test_torchvision_of_another_release(clean_env: FakeEnv, run: Run) -> None:
    replace(clean_env, "torchvision", "0.18.1+cu124")
    report = run(clean_env)
    finding = only(report, "trio-mismatch")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["torchvision"] == "0.18.1+cu124"
    assert finding.evidence["expected_torchvision"] == "0.19.1"
    assert finding.evidence["torchvision_dist_info"].endswith("torchvision-0.18.1+cu124.dist-info")
    assert codes(report) == {"trio-mismatch"}


def test_torchaudio_of_another_major_cuda(clean_env: FakeEnv, run: Run) -> None:
    replace(clean_env, "torchaudio", "2.4.1+cu118")
    finding = only(run(clean_env), "trio-cu-tag-mismatch")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["torchaudio_build"] == "cu118"
    assert finding.evidence["torch_build"] == "cu124"


def test_pypi_torchvision_with_index_torch(clean_env: FakeEnv, run: Run) -> None:
    """A plain PyPI torchvision 0.19.1 is the cu121 build: same major, a warning."""
    replace(clean_env, "torchvision", "0.19.1")
    finding = only(run(clean_env), "trio-cu-tag-mismatch")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["torchvision_build"] == "cu121"
    assert "PyPI default" in finding.evidence["torchvision_build_from"]


def test_cpu_companion_of_cuda_torch(clean_env: FakeEnv, run: Run) -> None:
    replace(clean_env, "torchvision", "0.19.1+cpu")
    assert only(run(clean_env), "trio-cu-tag-mismatch").severity is Severity.ERROR


def test_unknown_torch_release_uses_the_companions_pairing(clean_env: FakeEnv, run: Run) -> None:
    clean_env.torch(version="2.4.99+cu124")  # not in the knowledge base
    shutil.rmtree(next(clean_env.site.glob("torch-2.4.1*.dist-info")))
    found = {
        f.evidence.get("torchvision_pairs_with_torch")
        or f.evidence.get("torchaudio_pairs_with_torch")
        for f in run(clean_env).findings
        if f.code == "trio-mismatch"
    }
    assert found == {"2.4.1"}


def test_a_same_day_re_release_of_torchvision_pairs_too(clean_env: FakeEnv, run: Run) -> None:
    """torchvision 0.11.0 and 0.11.1 were both made for torch 1.10.0 (torchvision_also)."""
    clean_env.torch(version="1.10.0+cu111")
    shutil.rmtree(next(clean_env.site.glob("torch-2.4.1*.dist-info")))
    replace(clean_env, "torchaudio", "0.10.0+cu111")
    for paired in ("0.11.0+cu111", "0.11.1+cu111"):
        replace(clean_env, "torchvision", paired)
        assert "trio-mismatch" not in codes(run(clean_env)), paired
    replace(clean_env, "torchvision", "0.10.1+cu111")
    finding = only(run(clean_env), "trio-mismatch")
    assert finding.evidence["expected_torchvision"] == "0.11.1"
