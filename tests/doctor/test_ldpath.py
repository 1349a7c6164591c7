"""LD_LIBRARY_PATH and LD_PRELOAD as the invoking process has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv.doctor import Severity
from tests.doctor.conftest import FakeEnv, Run, codes, only


@pytest.mark.parametrize("value", [":/opt/lib", "/opt/lib:", "/opt/lib::/usr/lib", "lib64"])
def test_relative_or_empty_entry(clean_env: FakeEnv, run: Run, tmp_path: Path, value: str) -> None:
    report = run(clean_env, environ={"LD_LIBRARY_PATH": value})
    finding = only(report, "ld-library-path-relative")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["LD_LIBRARY_PATH"] == value
    bad = finding.evidence["entries"][0]
    assert bad["entry"] in ("", "lib64")
    assert bad["resolves_to"].startswith(str(tmp_path))  # the current directory


def test_missing_directory(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    gone = str(tmp_path / "nowhere" / "lib")
    finding = only(run(clean_env, environ={"LD_LIBRARY_PATH": gone}), "ld-library-path-missing-dir")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["entries"] == [{"position": 0, "entry": gone}]


def test_entry_inside_another_environment(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    other = tmp_path / "miniconda3" / "envs" / "old"
    (other / "conda-meta").mkdir(parents=True)
    (other / "lib").mkdir()
    finding = only(
        run(clean_env, environ={"LD_LIBRARY_PATH": str(other / "lib")}),
        "ld-library-path-foreign-env",
    )
    assert finding.evidence["entries"][0]["environment"] == str(other.resolve())
    assert finding.evidence["environment"] == str(clean_env.prefix)


def test_entry_with_another_cuda(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    old = tmp_path / "cuda-11.8" / "lib64"
    clean_env.lib(old, "libcudart.so.11.8.89", "libcudart.so.11.0", ["libcudart.so.11.0"])
    report = run(clean_env, environ={"LD_LIBRARY_PATH": str(old)})
    finding = only(report, "ld-library-path-cuda-version")
    # torch needs libcudart.so.12: the loader can never take libcudart.so.11.0 for it
    assert finding.severity is Severity.INFO
    hit = finding.evidence["entries"][0]
    assert hit["entry"] == str(old)
    assert hit["version"] == "11.8.89"
    assert hit["torch_loads_this_name"] is False
    assert finding.evidence["torch_cuda"] == "12.4"
    assert "duplicate-cuda-library" not in codes(report)
    assert not report.has_errors


def test_entry_with_the_same_soname_of_another_cuda(
    clean_env: FakeEnv, run: Run, tmp_path: Path
) -> None:
    old = tmp_path / "cuda-12.1" / "lib64"
    clean_env.lib(old, "libcudart.so.12.1.105", "libcudart.so.12", ["libcudart.so.12"])
    report = run(clean_env, environ={"LD_LIBRARY_PATH": str(old)})
    finding = only(report, "ld-library-path-cuda-version")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["entries"][0]["torch_loads_this_name"] is True
    assert only(report, "duplicate-cuda-library").severity is Severity.ERROR


def test_duplicate_entry(clean_env: FakeEnv, run: Run, tmp_path: Path) -> None:
    lib = tmp_path / "extra"
    lib.mkdir()
    report = run(clean_env, environ={"LD_LIBRARY_PATH": f"{lib}:{lib}/"})
    finding = only(report, "ld-library-path-duplicate")
    assert finding.severity is Severity.INFO
    assert finding.evidence["entries"][0]["positions"] == [0, 1]
    assert not report.has_errors


def test_ld_preload(clean_env: FakeEnv, run: Run) -> None:
    report = run(clean_env, environ={"LD_PRELOAD": "/opt/hook/libhook.so"})
    finding = only(report, "ld-preload-set")
    assert finding.evidence["entries"] == ["/opt/hook/libhook.so"]
    assert codes(report) == {"ld-preload-set"}
