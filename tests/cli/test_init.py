from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.knowledge import knowledge_base
from gpuenv.spec import load_spec
from tests.conftest import CliResult


def test_init_writes_a_valid_commented_spec(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    path = tmp_path / "gpuenv.toml"
    result = cli(
        "-f", str(path), "init", "--gpu", "H100", "--driver", "550.54.15", "--torch", "2.4", "--cpu"
    )
    assert result.code == 0, result.err
    text = path.read_text()
    assert "#" in text, "the starter explains itself"
    loaded = load_spec(path, kb=knowledge_base())
    assert loaded.spec.stack.torch == "2.4.*"
    assert set(loaded.spec.targets) == {"h100", "cpu"}
    plan = cli("-f", str(path), "plan", "--json")
    assert plan.json()["targets"]["h100"]["cu_tag"] == "cu124"


def test_init_refuses_to_overwrite(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    path = tmp_path / "gpuenv.toml"
    path.write_text("keep me")
    result = cli("-f", str(path), "init")
    assert result.code == 2
    assert "already exists" in result.err
    assert path.read_text() == "keep me"
    assert cli("-f", str(path), "init", "--force").code == 0
    assert path.read_text() != "keep me"


def test_init_with_an_unknown_gpu_writes_nothing(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = tmp_path / "gpuenv.toml"
    result = cli("-f", str(path), "init", "--gpu", "H1000", "--driver", "550.54.15")
    assert result.code == 2
    assert "did you mean 'H100'" in result.err
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_init_pip_adds_dependencies_that_the_spec_keeps(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = tmp_path / "gpuenv.toml"
    result = cli(
        "-f", str(path), "init", "--cpu", "--pip", "transformers>=4.44", "accelerate",
        "--pip", "numpy<2; python_version < '3.12'", "accelerate",
    )  # fmt: skip
    assert result.code == 0, result.err
    loaded = load_spec(path, kb=knowledge_base())
    assert loaded.spec.pip.dependencies == (
        "transformers>=4.44",
        "accelerate",
        "numpy<2; python_version < '3.12'",
    )
    assert cli("-f", str(path), "plan").code == 0


def test_init_pip_refuses_what_is_not_a_requirement_and_writes_nothing(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = tmp_path / "gpuenv.toml"
    result = cli("-f", str(path), "init", "--pip", "transformers>=>4", "--json")
    assert result.code == 2
    error = result.json()["error"]
    assert "--pip 'transformers>=>4' is not a pip requirement" in error["message"]
    torch = cli("-f", str(path), "init", "--pip", "torch==2.4.1")
    assert torch.code == 2 and "torch" in torch.err
    assert not path.exists()


def test_force_never_replaces_what_is_not_a_file(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """`init -f /dev/full --force` (as root) renamed the new spec over the device node;
    a FIFO was replaced the same way. --force replaces a spec file, nothing else."""
    import os
    import stat

    fifo = tmp_path / "gpuenv.toml"
    os.mkfifo(fifo)
    result = cli("init", "-f", str(fifo), "--gpu", "none", "--force")
    assert result.code == 2, result.err
    assert f"{fifo}: a FIFO (named pipe), not a spec file" in result.err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "left as it was"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--gpu", "H100", "--driver", "bad"], '--driver: "bad" is not a driver version'),
        (["--gpu", "none", "--python", "2.7"], '--python: "2.7" is not a Python version'),
        (["--gpu", "none", "--cuda", "99"], '--cuda: "99" is not a CUDA version'),
        (["--gpu", "none", "--name", "bad/name"], '--name: "bad/name" is not a valid name'),
        (["--gpu", "none", "--target", "a.b"], '--target (or the name taken from --gpu): "a.b"'),
        (["--gpu", "Hxyz", "--driver", "550.54.15"], '--gpu: "Hxyz" is not a GPU gpuenv knows'),
    ],
)
def test_a_bad_flag_is_named_not_a_line_of_a_file_never_written(
    cli: Callable[..., CliResult], tmp_path: Path, flags: list[str], said: str
) -> None:
    spec = tmp_path / "gpuenv.toml"
    result = cli("-f", str(spec), "init", *flags)
    assert result.code == 2
    assert said in result.err
    assert "gpuenv.toml:" not in result.err, "no line of a file that does not exist"
    assert f"nothing was written to {spec}" in result.err
    assert not spec.exists()
