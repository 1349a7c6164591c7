"""`gpuenv import`: the command's own behaviour (output, flags, the written file)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.spec import load_spec
from tests.cli.test_detect import ONE_H100, answer
from tests.conftest import CliResult
from tests.importers.conftest import IMPORTS

SD = str(IMPORTS / "sd2022" / "environment.yaml")


def test_text_output_is_a_pasteable_report(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    out = tmp_path / "gpuenv.toml"
    result = cli("import", str(IMPORTS / "dinov2" / "conda.yaml"), "--gpu", "H100", "--driver",
                 "550.54.15", "-o", str(out))  # fmt: skip
    assert result.code == 0, result.err
    text = result.out
    assert text.startswith("## Reproduction on h100: H100 (sm_90), driver 550.54.15")
    sections = re.findall(r"^### (.+)$", text, flags=re.M)
    assert sections[:2] == ["Must be built for this target", "Changed"]
    assert "| torch | 2.0.0+cu117 | 2.0.0+cu118 |" in text
    assert "**xformers** 0.0.18" in text and "nvcc 11.8" in text
    assert (
        "| submitit | git+https://github.com/facebookincubator/submitit | the default branch at lock time |"
        in text
    )
    assert f"wrote {out}" in text


def test_the_spec_comments_every_entry_with_its_origin(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    out = tmp_path / "gpuenv.toml"
    assert cli("import", SD, "--gpu", "H100", "--driver", "550.54.15", "-o", str(out)).code == 0
    text = out.read_text()
    assert re.search(
        r'torch = "2\.0\.1" # environment\.yaml:9 pytorch=1\.12\.1 → 2\.0\.1\+cu118: .*sm_90', text
    )
    assert re.search(r'cuda = "11\.8" # environment\.yaml:8 cudatoolkit=11\.3 → 11\.8', text)
    assert '"numpy==1.23.1", # environment.yaml:11 numpy=1.23.1' in text
    dependencies = text.split("dependencies = [", 1)[1].split("]", 1)[0].strip().splitlines()
    assert dependencies and all("# environment.yaml:" in line for line in dependencies)
    loaded = load_spec(out)
    assert loaded.spec.stack.torchvision == "0.15.2"
    assert loaded.spec.targets["h100"].driver == "550.54.15"


def test_target_name_and_json_shape(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    out = tmp_path / "g.toml"
    result = cli("import", SD, "--gpu", "none", "--target", "laptop", "-o", str(out), "--json")
    assert result.code == 0
    body = result.json()
    assert body["written"] == str(out) and body["target"] == "laptop"
    assert set(body) >= {
        "kept", "changed", "needs_build", "unreproducible", "unmanaged", "assumptions",
        "disagreements", "plan_reasons", "inputs", "summary",
    }  # fmt: skip
    assert body["inputs"] == [{"file": "environment.yaml", "format": "conda-env"}]
    assert "[targets.laptop]" in out.read_text()


def test_detect_reproduces_on_this_machine(
    monkeypatch: pytest.MonkeyPatch, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    answer(monkeypatch, ONE_H100)
    out = tmp_path / "gpuenv.toml"
    result = cli("import", SD, "--detect", "-o", str(out), "--json")
    assert result.code == 0, result.out
    assert result.json()["hardware"].startswith("H100 (sm_90), driver 550.54.15")
    text = out.read_text()
    assert 'gpu = "NVIDIA H100 80GB HBM3"' in text and 'driver = "550.54.15"' in text


def test_a_folder_is_searched_and_every_file_cited(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    out = tmp_path / "g.toml"
    result = cli("import", str(IMPORTS / "repo"), "--gpu", "RTX 4090", "--driver", "550.54.15",
                 "-o", str(out), "--json")  # fmt: skip
    assert result.code == 0, result.out
    files = {i["file"] for i in result.json()["inputs"]}
    assert files == {"environment.yaml", "requirements.txt", "setup.py", "pyproject.toml",
                     "docker/Dockerfile"}  # fmt: skip
    text = out.read_text()
    assert 'ffmpeg=4.3", # environment.yaml:10 ffmpeg=4.3' in text, "conda-only tools in [conda]"
    assert "python = false" in text


def test_help_is_cheap() -> None:
    probe = (
        "import sys\nfrom gpuenv.cli import main\n"
        "try:\n    main(['import', '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('pydantic', 'tomlkit', 'yaml', 'conda_lock', 'rattler', 'packaging')\n"
        "print('HEAVY:' + ' '.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "PATH" in out.stdout and "--gpu" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:"


def test_dash_writes_the_spec_to_stdout_and_the_report_to_stderr(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("import", SD, "--gpu", "H100", "--driver", "550.54.15", "-o", "-")
    assert result.code == 0, result.err
    assert result.out.startswith("[project]") or "[stack]" in result.out
    assert result.err.startswith("## Reproduction on")
    assert list(tmp_path.iterdir()) == [], "no file named '-', no gpuenv.toml"
    both = cli("import", SD, "--gpu", "H100", "--driver", "550.54.15", "-o", "-", "--json")
    assert both.code == 2 and "both want stdout" in both.out
