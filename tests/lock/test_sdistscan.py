"""Extensions found, not declared: an sdist whose setup.py uses torch's cpp_extension (read
through ast, never run) or that carries .cu sources is locked as a build in the prefix
with a toolkit; [pip.build.<name>] still overrides; what cannot be read changes nothing."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from gpuenv.lock import builds as build_lock
from gpuenv.lock.model import PipPackage
from gpuenv.lock.sdistscan import scan, scan_file
from gpuenv.spec import parse_spec_text

# Shaped like a paper's kernels package: gsplat / detectron2 style.
SETUP = b"""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
raise SystemExit("never run")
setup(
    name="paper-ops",
    ext_modules=[CUDAExtension("paper_ops._C", ["csrc/ops.cpp", "csrc/ops_kernel.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""

SPEC = """[project]
name = "p"
path = false
[stack]
python = "3.11"
[targets.h100]
gpu = "H100"
driver = "550.54.15"
{extra}"""


def _sdist(directory: Path, files: dict[str, bytes], name: str = "paper_ops-0.1") -> PipPackage:
    path = directory / f"{name}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, data in files.items():
            info = tarfile.TarInfo(f"{name}/{member}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return PipPackage("paper-ops", "0.1", path.as_uri(), sha)


def _found(package: PipPackage, cache: Path, extra: str = "") -> build_lock.Wanted:
    spec = parse_spec_text(SPEC.format(extra=extra), file="gpuenv.toml").spec
    found = build_lock.found(spec, (package,), {}, lambda p: scan(p, cache))
    return found["paper-ops"]


def test_a_cuda_extension_sdist_is_a_toolkit_build_in_the_prefix(tmp_path: Path) -> None:
    package = _sdist(tmp_path, {"setup.py": SETUP, "csrc/ops_kernel.cu": b"__global__ void k(){}"})
    wanted = _found(package, tmp_path / "cache")
    assert wanted.toolkit and wanted.no_build_isolation and wanted.against_torch
    assert wanted.build_requires == ("setuptools",)
    assert list((tmp_path / "cache" / "sdists").glob("*/paper_ops-0.1.tar.gz")), "fetched once"
    needs = build_lock.needs({"paper-ops": wanted}, cuda="12.4")
    assert needs.toolkit and needs.requirements == ("setuptools",)


def test_the_spec_still_overrides_what_was_found(tmp_path: Path) -> None:
    package = _sdist(tmp_path, {"setup.py": SETUP})
    extra = "[pip.build.paper-ops]\ntoolkit = false\nbuild-requires = ['ninja']\n"
    wanted = _found(package, tmp_path / "cache", extra)
    assert not wanted.toolkit and wanted.no_build_isolation
    assert wanted.build_requires == ("ninja",)


def test_plain_unreadable_or_oversized_sdists_keep_the_isolated_default(tmp_path: Path) -> None:
    plain = _sdist(tmp_path, {"setup.py": b"from setuptools import setup\nsetup(name='x')\n"})
    wanted = _found(plain, tmp_path / "cache")
    assert not wanted.toolkit and not wanted.no_build_isolation
    huge = b"from torch.utils.cpp_extension import CUDAExtension\n" + b"#" * (2 << 20)
    big = _sdist(tmp_path, {"setup.py": huge}, name="big-0.1")
    assert scan_file(Path(big.url.removeprefix("file://"))) == scan_file(
        Path(plain.url.removeprefix("file://"))
    ), "a setup.py over 1 MB is not read"
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a tar")
    assert scan_file(broken) is None
    wrong = PipPackage("paper-ops", "0.1", plain.url, "0" * 64)  # the hash does not match
    assert scan(wrong, tmp_path / "other") is None


def test_the_sdist_is_fetched_once_and_what_cannot_be_had_is_no_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuenv.lock import sdistscan

    package = _sdist(tmp_path, {"setup.py": SETUP})
    first = scan(package, tmp_path / "cache")
    Path(package.url.removeprefix("file://")).unlink()
    assert first is not None and scan(package, tmp_path / "cache") == first, "from the cache"
    assert scan(package, tmp_path / "empty") is None, "gone at its URL, not in this cache"
    other = _sdist(tmp_path, {"setup.py": SETUP}, name="other-0.1")
    monkeypatch.setattr(sdistscan, "MAX_SDIST", 64)
    assert scan(other, tmp_path / "small") is None, "over the size limit"
    assert not list((tmp_path / "small").rglob("*.tar.gz")), "nothing half-written is kept"
