"""tools/check_wheel_facts.py: the wheels' metadata against the data files.

Hermetic tests run it against the local fixture indexes (real HTTP, PEP 658 files, range
requests); the ``network`` test runs it against the default index uv uses and expects no
difference for the releases it covers.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from gpuenv.knowledge._data import read_data
from tests.fixtures.pkgindex.plugin import PkgIndex

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "src" / "gpuenv" / "knowledge" / "data" / "torch.toml"


@pytest.fixture(scope="module")
def tool() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location(
        "check_wheel_facts", REPO / "tools" / "check_wheel_facts.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_wheel_facts"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("check_wheel_facts", None)


def test_it_reads_the_fixture_index_and_finds_what_differs(
    tool: ModuleType, pkgindex: PkgIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "torch.toml"
    shutil.copy(DATA, copy)
    code = tool.main(
        [
            "--index-url",
            pkgindex.default_index,
            "--torch-index",
            pkgindex.torch_base,
            "--release",
            "2.4.1",
            "--release",
            "2.5.0",
            "--data",
            str(copy),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    # The fixture's 2.5.0 (cu124) pins NCCL 2.20.5; the data says 2.21.5.
    assert "torch.toml: series 2.5, build cu124 (linux-64): nccl: data 2.21.5, wheels 2.20.5" in out
    # The fixture has wheels for Python 3.10 and 3.11 only.
    assert (
        "torch.toml: series 2.4, release 2.4.1: python: data <3.13,>=3.8, wheels >=3.10,<3.12"
        in out
    )
    # torch index builds are read too (their +cuXYZ wheels), without a PyPI default.
    assert "build cu121 (linux-64): nccl" not in out


def test_write_puts_the_wheels_values_into_the_data_and_then_agrees(
    tool: ModuleType, pkgindex: PkgIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "torch.toml"
    shutil.copy(DATA, copy)
    args = [
        "--index-url",
        pkgindex.default_index,
        "--no-torch-index",
        "--release",
        "2.5.0",
        "--data",
        str(copy),
    ]
    assert tool.main([*args, "--write"]) == 0, capsys.readouterr().out
    text = copy.read_text()
    assert 'nccl = "2.20.5"' in text.split('minor = "2.5"')[1].split("[[series]]")[0]
    assert "checked = " in text
    capsys.readouterr()
    assert tool.main(args) == 0
    assert "no difference from the data" in capsys.readouterr().out
    # comments and the rest of the file survive
    assert text.count("# ") >= DATA.read_text().count("# ") - 1


def test_an_unreachable_index_is_exit_5(
    tool: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool.main(["--index-url", "http://127.0.0.1:9/simple", "--no-torch-index"]) == 5


def test_arch_flags_are_read_from_the_binary_string(tool: ModuleType) -> None:
    from gpuenv.knowledge.wheelfacts import arch_flags_in_binary, arch_list_from_flags

    blob = b"\x00std::string ipc_hsm_70 sm_90 sm_120 compute_120\x00/torch/csrc/cuda/Module.cpp\x00"
    flags = arch_flags_in_binary(blob)
    assert flags == "sm_70 sm_90 sm_120 compute_120"
    assert arch_list_from_flags(flags) == ("7.0", "9.0", "12.0+PTX")
    assert arch_flags_in_binary(b"\x00no arch here\x00") is None


@pytest.mark.network
@pytest.mark.slow
def test_the_default_index_agrees_with_the_data(
    tool: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every torch, torchvision and torchaudio release from 1.12 on the index uv uses by
    default, and the measured arch lists of the newest series: no difference."""
    try:
        index = tool.default_index()
        tool.project_files(index, "torchaudio")
    except (tool.MetadataUnavailable, SystemExit) as exc:
        pytest.skip(f"the default index is not reachable: {exc}")
    assert read_data("torch.toml")["schema"] == 1
    code = tool.main(["--no-torch-index"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "no difference from the data" in out
    code = tool.main(["--no-torch-index", "--arch", "--release", "2.15"])
    out = capsys.readouterr().out
    assert code == 0, out


def test_an_unreachable_torch_index_still_checks_the_default_index(
    tool: ModuleType, pkgindex: PkgIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tool.main(
        [
            "--index-url",
            pkgindex.default_index,
            "--torch-index",
            "http://127.0.0.1:9/whl",
            "--release",
            "2.5.0",
        ]
    )
    out = capsys.readouterr().out
    assert code == 5
    assert "error: torch index not read: http://127.0.0.1:9/whl/" in out
    assert "build cu124 (linux-64): nccl: data 2.21.5, wheels 2.20.5" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--since", "9.x"], "--since: '9.x' is not a version"),
        (["--release", "banana"], "--release: 'banana' is not a version"),
        (["--data", "/nonexistent/torch.toml"], "/nonexistent/torch.toml: cannot read"),
    ],
)
def test_bad_arguments_are_exit_2_without_a_traceback(
    tool: ModuleType, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        tool.main(["--index-url", "http://127.0.0.1:9/simple", "--no-torch-index", *args])
    assert caught.value.code == 2
    assert expected in capsys.readouterr().err


def test_a_data_file_that_is_not_valid_is_exit_2_naming_it(
    tool: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "torch.toml"
    bad.write_text("schema = 1\n[[series]\n")
    with pytest.raises(SystemExit) as caught:
        tool.main(["--no-torch-index", "--data", str(bad)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert f"{bad}: not valid TOML" in err and "Traceback" not in err


def test_a_release_the_indexes_do_not_have_is_not_reported_as_agreeing(
    tool: ModuleType, pkgindex: PkgIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    """'--release 2.99' read nothing and said "no difference from the data" (exit 0)."""
    code = tool.main(
        ["--index-url", pkgindex.default_index, "--no-torch-index", "--release", "2.99"]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "no difference" not in out
    assert "no torch wheels of the selected releases (2.99) on the indexes" in out


def test_macos_and_windows_wheels_are_read(
    tool: ModuleType, pkgindex: PkgIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "torch.toml"
    shutil.copy(DATA, copy)
    args = ["--index-url", pkgindex.default_index, "--torch-index", pkgindex.torch_base]
    code = tool.main([*args, "--release", "2.4.1", "--data", str(copy)])
    out = capsys.readouterr().out
    assert code == 1, out
    # the fixture's macOS and Windows wheels are for Python 3.10 and 3.11 only
    for platform in ("osx-arm64", "win-64"):
        assert f"build cpu ({platform}): python: data <3.13,>=3.8, wheels >=3.10,<3.12" in out
    assert "build cu124 (win-64): python" in out  # the torch index's Windows build
    assert "macos:" not in out  # macosx_11_0 wheels: the data's 11.0
    assert "pypi_default_win" not in out and "pypi_default_osx" not in out  # both "cpu"


def test_wheel_platforms(tool: ModuleType) -> None:
    assert tool.wheel_platform("macosx_14_0_arm64") == ("osx-arm64", "14.0")
    assert tool.wheel_platform("win_amd64") == ("win-64", None)
    assert tool.wheel_platform("manylinux_2_28_aarch64") == ("linux-aarch64", None)
    assert tool.wheel_platform("macosx_10_9_x86_64") is None  # Intel Macs: not planned
    assert tool.wheel_platform("win32") is None
