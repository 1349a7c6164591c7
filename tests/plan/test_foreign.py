"""macOS (osx-arm64: CPU or MPS) and Windows (win-64: CUDA as PyTorch publishes it, or
CPU) targets, planned from their own builds (issue #26)."""

from __future__ import annotations

import pytest

from gpuenv import _foreign
from gpuenv.errors import NoCompatiblePlan, SpecError, UsageError
from gpuenv.knowledge import DriverCompat, knowledge_base
from gpuenv.lock._tags import foreign_tags
from gpuenv.lock.model import PipRequest
from gpuenv.lock.uv import target_platform, target_tags
from gpuenv.plan import Plan, make_plan
from gpuenv.spec import Spec, parse_spec_text
from gpuenv.versions import CudaVersion, DriverVersion


def spec_of(stack: str, *targets: str) -> Spec:
    tables = "".join(f"[targets.t{i}]\n{t}\n" for i, t in enumerate(targets))
    text = f'[project]\nname = "t"\n[stack]\n{stack}\n{tables}'
    return parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec


def plan_of(stack: str, *targets: str) -> Plan:
    return make_plan(spec_of(stack, *targets), knowledge_base())


def test_a_mac_with_mps_gets_the_macos_wheel() -> None:
    plan = plan_of('python = "3.12"', 'gpu = "mps"').target("t0")
    assert (plan.torch, plan.cu_tag, plan.hardware.platform) == ("2.15.0", "cpu", "osx-arm64")
    assert plan.pypi_default  # PyPI's plain torch on macOS is this build
    assert plan.virtual_packages == {"__osx": "14.0", "__unix": "0"}  # 2.15's wheels: macOS 14
    assert any("runs on the Apple GPU through MPS" in r for r in plan.reasons)
    assert plan.to_json()["hardware"]["platform"] == "osx-arm64"


def test_an_older_torch_on_a_mac_needs_an_older_macos() -> None:
    plan = plan_of('python = "3.11"\ntorch = "2.4.*"', 'gpu = "none"\nplatform = "osx-arm64"')
    assert plan.target("t0").virtual_packages["__osx"] == "11.0"


@pytest.mark.parametrize(
    ("driver", "torch", "tag"),
    [
        ("552.22", "2.4.*", "cu124"),  # Windows minimum of 12.4 is 551.61
        ("537.58", "2.4.*", "cu121"),  # below 12.4's Windows minimum, above 12.1's
        ("581.57", "*", "cu130"),  # R580 on Windows: 13.0 (its Linux minimum's branch)
        ("596.36", "*", "cu132"),
    ],
)
def test_windows_cuda_builds_are_judged_by_windows_drivers(
    driver: str, torch: str, tag: str
) -> None:
    plan = plan_of(
        f'python = "3.12"\ntorch = "{torch}"',
        f'gpu = "RTX 4090"\ndriver = "{driver}"\nplatform = "win-64"',
    ).target("t0")
    assert (plan.cu_tag, plan.hardware.platform) == (tag, "win-64")
    assert "__win" in plan.virtual_packages and "__glibc" not in plan.virtual_packages
    assert not plan.pypi_default  # PyPI's plain torch on Windows is the CPU build
    assert any(
        r.startswith(f"index https://download.pytorch.org/whl/{tag}: PyPI") for r in plan.reasons
    )


def test_the_windows_driver_floors() -> None:
    kb = knowledge_base()
    strict, minor = DriverCompat.STRICT, DriverCompat.MINOR
    assert kb.driver_floor(CudaVersion(12, 4), strict, "win-64") == DriverVersion.parse("551.61")
    assert kb.driver_floor(CudaVersion(12, 4), minor, "win-64") == DriverVersion.parse("527.41")
    assert kb.driver_floor(CudaVersion(13, 2), strict, "win-64") == DriverVersion.parse("595.00")
    assert kb.driver_floor(CudaVersion(13, 2), minor, "win-64") == DriverVersion.parse("580.00")
    assert kb.newest_cuda_for_driver(DriverVersion.parse("581.57"), "win-64") == CudaVersion(13, 0)


def test_a_windows_cpu_target_and_the_torch_every_target_shares() -> None:
    plan = plan_of(
        'python = "3.12"',
        'gpu = "H100"\ndriver = "580.65.06"',
        'gpu = "mps"',
        'gpu = "none"\nplatform = "win-64"',
    )
    assert {t.torch for t in plan.targets} == {"2.15.0"}
    assert [t.cu_tag for t in plan.targets] == ["cu130", "cpu", "cpu"]


def test_windows_has_no_off_matrix_cu129_build() -> None:
    with pytest.raises(NoCompatiblePlan):
        plan_of(
            'python = "3.12"\ntorch = "2.13.*"',
            'gpu = "RTX 5090"\ndriver = "576.02"\nplatform = "win-64"',
        )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ('gpu = "mps"\nplatform = "linux-64"', 'gpu = "mps" is a Mac\'s Apple GPU'),
        ('gpu = "H100"\ndriver = "550.54.15"\nplatform = "osx-arm64"', "has no NVIDIA GPU"),
        ('gpu = "mps"\ndriver = "550.54.15"', "plans a CPU build, but driver is set"),
        ('gpu = "detect"\ndriver = "detect"\nplatform = "win-64"', '"detect" reads this machine'),
        ('gpu = "RTX 4090"\ndriver = "detect"\nplatform = "win-64"', "a win-64 target"),
    ],
)
def test_contradictory_foreign_targets_are_spec_errors(target: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        spec_of('python = "3.12"', target)


# --- locking and refusing -------------------------------------------------------------------


def test_uv_is_asked_for_the_foreign_platforms() -> None:
    mac = PipRequest(requirements=(), python="3.11", platform="osx-arm64", macos="14.0")
    win = PipRequest(requirements=(), python="3.11", platform="win-64")
    assert target_platform(mac) == "aarch64-apple-darwin"
    assert target_platform(win) == "x86_64-pc-windows-msvc"
    mac_tags = [str(t) for t in target_tags(mac)]
    assert "cp311-none-macosx_14_0_arm64" in mac_tags and "cp311-none-macosx_11_0_arm64" in mac_tags
    assert not any("macosx_15_0" in t or "linux" in t for t in mac_tags)
    assert str(target_tags(win)[0]) == "cp311-cp311-win_amd64"
    older = [str(t) for t in foreign_tags("osx-arm64", (3, 11), (11, 0))]
    assert not any("macosx_14_0" in t for t in older)


@pytest.mark.parametrize(
    ("platform", "system", "refused"),
    [
        ("osx-arm64", "Linux", True),
        ("osx-arm64", "Windows", True),
        ("osx-arm64", "Darwin", False),
        ("win-64", "Linux", True),
        ("win-64", "Windows", False),
        ("linux-64", "Linux", False),
        (None, "Linux", False),
    ],
)
def test_foreign_targets_are_refused_on_other_systems(
    monkeypatch: pytest.MonkeyPatch, platform: str | None, system: str, refused: bool
) -> None:
    import platform as platform_module

    monkeypatch.setattr(platform_module, "system", lambda: system)
    if refused:
        with pytest.raises(UsageError) as caught:
            _foreign.refuse("t", platform, "install")
        assert caught.value.exit_code == 2
        assert "\n" not in caught.value.message
        assert f"this machine is {system}" in caught.value.message
    else:
        _foreign.refuse("t", platform, "install")


def test_mps_implies_a_mac() -> None:
    assert _foreign.platform_of(None, " MPS ") == "osx-arm64"
    assert _foreign.platform_of("win-64", "RTX 4090") == "win-64"
    assert _foreign.platform_of(None, "H100") is None


def test_the_plan_table_names_another_systems_targets() -> None:
    from gpuenv.cli.plan_cmd import render

    plan = plan_of(
        'python = "3.12"',
        'gpu = "H100"\ndriver = "580.65.06"',
        'gpu = "mps"',
        'gpu = "RTX 4090"\ndriver = "581.57"\nplatform = "win-64"',
    )
    rows = render(plan, verbose=False).splitlines()
    assert "Apple GPU (MPS), osx-arm64" in rows[2] and "RTX 4090 (sm_89), win-64" in rows[3]
    assert "linux-64" not in rows[1]
