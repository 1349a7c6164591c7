"""`gpuenv plan`: the acceptance scenarios, the JSON contract, and the invalid-spec corpus."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, CliResult


def spec(torch: str, gpu: str, driver: str | None, *, extra_stack: str = "") -> str:
    target = f'gpu = "{gpu}"\n' + (f'driver = "{driver}"\n' if driver else "")
    return (
        '[project]\nname = "scenario"\n\n'
        f'[stack]\npython = "3.11"\ntorch = "{torch}"\n{extra_stack}\n'
        f"[targets.t]\n{target}"
    )


@pytest.mark.parametrize(
    ("torch", "gpu", "driver", "extra", "tag"),
    [
        ("2.4.*", "H100", "535.104.05", "", "cu121"),
        ("2.4.*", "H100", "550.54.15", "", "cu124"),
        ("2.5.1", "RTX 4060 Ti", "550.54.15", "", "cu124"),
        ("2.9.*", "GTX 1080 Ti", "570.86.15", "", "cu126"),
        ("2.7.*", "RTX 5090", "570.86.15", "", "cu128"),
        ("2.4.*", "H100", "550.54.15", 'cuda = "12.1"\n', "cu121"),
        ("2.4.*", "NVIDIA H100 80GB HBM3", "550.54.15", "", "cu124"),
    ],
)
def test_scenarios_choose_the_expected_build(
    cli: Callable[..., CliResult],
    write_spec: Callable[[str], Path],
    torch: str,
    gpu: str,
    driver: str,
    extra: str,
    tag: str,
) -> None:
    path = write_spec(spec(torch, gpu, driver, extra_stack=extra))
    result = cli("-f", str(path), "plan", "--json")
    assert result.code == 0, result.err + result.out
    target = result.json()["targets"]["t"]
    assert target["cu_tag"] == tag
    assert target["cuda"] == f"{tag[2:-1]}.{tag[-1]}"
    assert target["reasons"], "every decision has reasons"


def test_h100_driver_535_torch_24_json_matches_contract(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.4.*", "H100", "535.104.05"))
    data = cli("-f", str(path), "plan", "--json").json()
    target = data["targets"]["t"]
    for key in ("cuda", "cu_tag", "torch", "torchvision", "torchaudio", "python", "reasons"):
        assert key in target
    assert (target["cuda"], target["cu_tag"], target["torch"]) == ("12.1", "cu121", "2.4.1")
    assert (target["torchvision"], target["torchaudio"], target["python"]) == (
        "0.19.1",
        "2.4.1",
        "3.11",
    )
    joined = "\n".join(target["reasons"])
    assert "cu124: needs driver >= 550.54.14" in joined
    assert "cu121 chosen" in joined


def test_cpu_target_has_null_cuda_and_cpu_tag(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.4.*", "none", None))
    target = cli("-f", str(path), "plan", "--json").json()["targets"]["t"]
    assert target["cuda"] is None
    assert target["cu_tag"] == "cpu"
    assert target["index_url"].endswith("/cpu")


def unsatisfiable(result: CliResult) -> dict:
    assert result.code == 3, result.out + result.err
    error = result.json()["error"]
    assert error["kind"] == "unsatisfiable"
    assert error["target"] == "t"
    assert error["alternatives"], "a refusal lists what would work instead"
    return error


def test_driver_535_with_cuda_126_names_the_driver_fix(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.4.*", "H100", "535.104.05", extra_stack='cuda = "12.6"\n'))
    error = unsatisfiable(cli("-f", str(path), "plan", "--json"))
    assert "560.28.03" in error["message"]
    drivers = [a for a in error["alternatives"] if "targets.t.driver" in a["changes"]]
    assert drivers and drivers[0]["changes"]["targets.t.driver"] == ">=560.28.03"


def test_torch_241_has_no_cu126_build_and_offers_cu124(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.4.1", "H100", "550.54.15", extra_stack='cuda = "12.6"\n'))
    error = unsatisfiable(cli("-f", str(path), "plan", "--json"))
    assert "no torch 2.4.1 build for cu126" in error["message"]
    assert "cu118, cu121, cu124" in error["message"]
    assert {"stack.cuda": "12.4"} in [a["changes"] for a in error["alternatives"]]


def test_rtx_5090_with_torch_26_is_refused_with_a_newer_torch_offered(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.6.*", "RTX 5090", "570.86.15"))
    error = unsatisfiable(cli("-f", str(path), "plan", "--json"))
    assert "sm_120" in error["message"]
    torches = [a["changes"].get("stack.torch") for a in error["alternatives"]]
    assert any(t and t.startswith("==2.") for t in torches)


def test_gt_730_with_torch_2_suggests_a_cpu_target(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.*", "GT 730", "470.256.02"))
    error = unsatisfiable(cli("-f", str(path), "plan", "--json"))
    assert "sm_35" in error["message"]
    assert {"targets.t.gpu": "none"} in [a["changes"] for a in error["alternatives"]]


def test_unpaired_torchvision_pin_names_the_paired_series(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.4.1", "H100", "550.54.15", extra_stack='torchvision = "0.20.0"\n'))
    result = cli("-f", str(path), "plan", "--json")
    assert result.code in (2, 3)
    error = result.json()["error"]
    assert "0.19.1" in error["message"] or "0.19" in str(error["alternatives"])
    assert "0.19." in error["message"]


def test_human_output_lists_the_table_and_reasons(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.4.*", "H100", "550.54.15"))
    result = cli("-f", str(path), "plan")
    assert result.code == 0
    assert re.search(
        r"^t\s+H100 \(sm_90\)\s+550\.54\.15\s+12\.4\s+cu124\s+2\.4\.1", result.out, re.M
    )
    assert "cu124 chosen" in result.out


def test_human_refusal_lists_alternatives(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.6.*", "RTX 5090", "570.86.15"))
    result = cli("-f", str(path), "plan")
    assert result.code == 3
    assert "what would work instead:" in result.err
    assert "Traceback" not in result.err


def test_unknown_target_is_a_usage_error(
    cli: Callable[..., CliResult], write_spec: Callable[[str], Path]
) -> None:
    path = write_spec(spec("2.4.*", "H100", "550.54.15"))
    result = cli("-f", str(path), "plan", "--target", "nope", "--json")
    assert result.code == 2
    assert result.json()["error"]["kind"] == "usage"


def test_missing_spec_file_exits_2(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    result = cli("-f", str(tmp_path / "absent.toml"), "plan")
    assert result.code == 2
    assert "no such file" in result.err


def test_target_flag_plans_one_target(cli: Callable[..., CliResult]) -> None:
    example = FIXTURES.parent.parent / "examples" / "h100-and-cpu" / "gpuenv.toml"
    data = cli("-f", str(example), "plan", "--target", "cpu", "--json").json()
    assert list(data["targets"]) == ["cpu"]


INVALID = sorted((FIXTURES / "specs" / "invalid").glob("*.toml"))


def test_corpus_is_large_enough() -> None:
    assert len(INVALID) >= 30


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_spec_gives_one_clear_located_message(
    cli: Callable[..., CliResult], path: Path, tmp_path: Path
) -> None:
    header = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    expect = header[0].removeprefix("# expect: ")
    line = header[1].removeprefix("# line:").strip()
    local = tmp_path / path.name
    local.write_bytes(path.read_bytes())
    before = sorted(p.name for p in tmp_path.iterdir())
    result = cli("-f", str(local), "plan")
    assert result.code == 2, result.err
    assert result.out == ""
    assert "Traceback" not in result.err
    assert result.err.startswith("gpuenv: error: ")
    matching = [ln for ln in result.err.splitlines() if expect in ln]
    assert matching, f"{expect!r} not in:\n{result.err}"
    location = f"{local}:{line}:" if line else f"{local}:"
    assert any(location in ln for ln in matching), result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing written"


@pytest.mark.parametrize("path", INVALID[:5], ids=lambda p: p.stem)
def test_invalid_spec_json_error(cli: Callable[..., CliResult], path: Path) -> None:
    result = cli("-f", str(path), "plan", "--json")
    assert result.code == 2
    error = result.json()["error"]
    assert error["kind"] == "spec"
    assert error["problems"][0]["file"] == str(path)
