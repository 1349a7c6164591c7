"""The knowledge base's queries, run against the shipped data."""

from __future__ import annotations

import dataclasses

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpuenv.knowledge import DriverCompat, KnowledgeBase, TorchBuild, gpu_tokens, knowledge_base
from gpuenv.versions import ArchTarget, ComputeCapability, CudaVersion, DriverVersion


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return knowledge_base()


def _build(kb: KnowledgeBase, torch: str, tag: str) -> TorchBuild:
    release = kb.torch_release(torch)
    assert release is not None, torch
    build = release.build(tag)
    assert build is not None, (torch, tag)
    return build


# --- GPU names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("NVIDIA GeForce RTX 4060 Ti", ("rtx", "4060", "ti")),
        ("NVIDIA A100-SXM4-80GB", ("a100", "sxm4", "80gb")),
        ("Tesla V100-SXM2-16GB", ("v100", "sxm2", "16gb")),
        ("  nvidia   tesla  T4 ", ("t4",)),
        ("NVIDIA", ("nvidia",)),
    ],
)
def test_gpu_tokens(text: str, tokens: tuple[str, ...]) -> None:
    assert gpu_tokens(text) == tokens


@pytest.mark.parametrize(
    ("reported", "name", "cc"),
    [
        # as NVML / nvidia-smi report them
        ("NVIDIA H100 80GB HBM3", "H100", "9.0"),
        ("NVIDIA H100 PCIe", "H100", "9.0"),
        ("NVIDIA H100 NVL", "H100", "9.0"),
        ("NVIDIA H200", "H200", "9.0"),
        ("NVIDIA GH200 480GB", "GH200", "9.0"),
        ("NVIDIA H800", "H800", "9.0"),
        ("NVIDIA H20", "H20", "9.0"),
        ("NVIDIA B200", "B200", "10.0"),
        ("NVIDIA B300 SXM6 AC", "B300", "10.3"),
        ("NVIDIA GB200", "GB200", "10.0"),
        ("NVIDIA A100-SXM4-80GB", "A100", "8.0"),
        ("NVIDIA A100-PCIE-40GB", "A100", "8.0"),
        ("NVIDIA A100 80GB PCIe", "A100", "8.0"),
        ("NVIDIA A10G", "A10G", "8.6"),
        ("NVIDIA A10", "A10", "8.6"),
        ("NVIDIA A30", "A30", "8.0"),
        ("NVIDIA L4", "L4", "8.9"),
        ("NVIDIA L40S", "L40S", "8.9"),
        ("Tesla T4", "T4", "7.5"),
        ("Tesla V100-SXM2-16GB", "Tesla V100", "7.0"),
        ("Tesla V100-PCIE-32GB", "Tesla V100", "7.0"),
        ("Tesla V100S-PCIE-32GB", "Tesla V100S", "7.0"),
        ("Tesla P100-PCIE-16GB", "Tesla P100", "6.0"),
        ("Tesla P40", "Tesla P40", "6.1"),
        ("Tesla K80", "Tesla K80", "3.7"),
        ("Tesla K40m", "Tesla K40", "3.5"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", "8.9"),
        ("NVIDIA GeForce RTX 4060 Ti", "RTX 4060 Ti", "8.9"),
        ("NVIDIA GeForce RTX 4060", "RTX 4060", "8.9"),
        ("NVIDIA GeForce RTX 4060 Laptop GPU", "RTX 4060", "8.9"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "RTX 4070 Ti SUPER", "8.9"),
        ("NVIDIA GeForce RTX 5090", "RTX 5090", "12.0"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090", "8.6"),
        ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti", "7.5"),
        ("NVIDIA GeForce GTX 1660 SUPER", "GTX 1660 SUPER", "7.5"),
        ("NVIDIA GeForce GTX 1080 Ti", "GTX 1080 Ti", "6.1"),
        ("NVIDIA GeForce GTX 1060 6GB", "GTX 1060", "6.1"),
        ("NVIDIA GeForce GTX 1050 Ti with Max-Q Design", "GTX 1050 Ti", "6.1"),
        ("NVIDIA GeForce GTX 980 Ti", "GTX 980 Ti", "5.2"),
        ("NVIDIA GeForce GTX 750 Ti", "GTX 750 Ti", "5.0"),
        ("NVIDIA GeForce GT 730", "GT 730", "3.5"),
        ("NVIDIA GeForce GT 710", "GT 710", "3.5"),
        ("NVIDIA GeForce GTX TITAN X", "GTX TITAN X", "5.2"),
        ("NVIDIA TITAN X (Pascal)", "TITAN X (Pascal)", "6.1"),
        ("NVIDIA TITAN V", "TITAN V", "7.0"),
        ("Quadro RTX 6000", "Quadro RTX 6000", "7.5"),
        ("NVIDIA RTX A6000", "RTX A6000", "8.6"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", "8.9"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell", "12.0"),
        (
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            "RTX PRO 6000 Blackwell",
            "12.0",
        ),
        (
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "RTX PRO 6000 Blackwell Server Edition",
            "12.0",
        ),
        ("NVIDIA RTX 4000 SFF Ada Generation", "RTX 4000 SFF Ada", "8.9"),
        ("Quadro P4000", "Quadro P4000", "6.1"),
        ("NVIDIA T1000 8GB", "T1000", "7.5"),
        ("Orin (nvgpu)", "Jetson AGX Orin", "8.7"),
        ("NVIDIA GB10", "GB10", "12.1"),
        # as users write them
        ("H100", "H100", "9.0"),
        ("H100 SXM", "H100", "9.0"),
        ("h100 pcie", "H100", "9.0"),
        ("4060 Ti", "RTX 4060 Ti", "8.9"),
        ("RTX 4060 Ti", "RTX 4060 Ti", "8.9"),
        ("4060", "RTX 4060", "8.9"),
        ("GT 730", "GT 730", "3.5"),
        ("A100", "A100", "8.0"),
        ("V100", "Tesla V100", "7.0"),
        ("T4", "T4", "7.5"),
        ("L4", "L4", "8.9"),
        ("RTX 5090", "RTX 5090", "12.0"),
        ("5090", "RTX 5090", "12.0"),
        ("1080 Ti", "GTX 1080 Ti", "6.1"),
        ("B200", "B200", "10.0"),
        ("DGX Spark", "GB10", "12.1"),
        ("Jetson Nano", "Jetson Nano", "5.3"),
        ("Jetson Orin Nano", "Jetson Orin Nano", "8.7"),
        ("Jetson AGX Xavier", "Jetson AGX Xavier", "7.2"),
        ("Jetson T5000", "Jetson AGX Thor", "11.0"),
        ("Jetson TX2", "Jetson TX2", "6.2"),
    ],
)
def test_find_gpu(kb: KnowledgeBase, reported: str, name: str, cc: str) -> None:
    gpu = kb.find_gpu(reported)
    assert gpu is not None, reported
    assert (gpu.name, gpu.cc) == (name, ComputeCapability.parse(cc))


@pytest.mark.parametrize(
    ("shorter", "longer"),
    [
        ("RTX 4060", "RTX 4060 Ti"),
        ("A10", "A10G"),
        ("L40", "L40S"),
        ("GTX TITAN", "GTX TITAN X"),
        ("H20", "H200"),
        ("T4", "T4G"),
        ("RTX 4070 Ti", "RTX 4070 Ti SUPER"),
    ],
)
def test_related_names_do_not_swallow_each_other(
    kb: KnowledgeBase, shorter: str, longer: str
) -> None:
    short, long = kb.find_gpu(shorter), kb.find_gpu(longer)
    assert short is not None and long is not None
    assert short.name == shorter and long.name == longer


def test_the_four_rtx_6000s_are_told_apart(kb: KnowledgeBase) -> None:
    found = {
        text: (gpu.name, str(gpu.cc)) if (gpu := kb.find_gpu(text)) else None
        for text in (
            "RTX 6000",
            "Quadro RTX 6000",
            "RTX A6000",
            "RTX 6000 Ada",
            "RTX PRO 6000 Blackwell",
        )
    }
    assert found == {
        "RTX 6000": None,
        "Quadro RTX 6000": ("Quadro RTX 6000", "7.5"),
        "RTX A6000": ("RTX A6000", "8.6"),
        "RTX 6000 Ada": ("RTX 6000 Ada", "8.9"),
        "RTX PRO 6000 Blackwell": ("RTX PRO 6000 Blackwell", "12.0"),
    }


@pytest.mark.parametrize("text", ["Radeon RX 7900 XTX", "RTX 9999", "", "NVIDIA", "H"])
def test_unknown_gpus_match_nothing(kb: KnowledgeBase, text: str) -> None:
    assert kb.find_gpu(text) is None


def test_a_known_name_followed_by_noise_still_matches(kb: KnowledgeBase) -> None:
    gpu = kb.find_gpu("NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    assert gpu is not None and gpu.name == "H100"


def test_suggest_gpus_offers_the_near_miss(kb: KnowledgeBase) -> None:
    assert "RTX 4060 Ti" in kb.suggest_gpus("RTX 4060 Tii")
    assert "H100" in kb.suggest_gpus("H10O")
    assert "GT 730" in kb.suggest_gpus("GT730")


def test_suggest_gpus_is_bounded_and_names_each_gpu_once(kb: KnowledgeBase) -> None:
    for limit in (1, 3, 5):
        names = kb.suggest_gpus("RTX 4080", limit=limit)
        assert 0 < len(names) <= limit
        assert len(set(names)) == len(names)
    assert kb.suggest_gpus("zzzz qqqq") == []


def test_architecture_of(kb: KnowledgeBase) -> None:
    names = {
        cc: kb.architecture_of(ComputeCapability.parse(cc))
        for cc in ("3.5", "5.3", "6.1", "7.2", "7.5", "8.7", "8.9", "9.0", "10.3", "11.0", "12.1")
    }
    assert names == {
        "3.5": "Kepler",
        "5.3": "Maxwell",
        "6.1": "Pascal",
        "7.2": "Volta",
        "7.5": "Turing",
        "8.7": "Ampere",
        "8.9": "Ada Lovelace",
        "9.0": "Hopper",
        "10.3": "Blackwell",
        "11.0": "Blackwell",
        "12.1": "Blackwell",
    }
    assert kb.architecture_of(ComputeCapability(2, 1)) is None


# --- CUDA and drivers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("535.104.05", "12.2"),
        ("535.54.03", "12.2"),
        ("535.54.02", "12.1"),
        ("550.54.14", "12.4"),
        ("550.54.15", "12.4"),
        ("560.35.05", "12.6"),
        ("570.86.15", "12.8"),
        ("575.57.08", "12.9"),
        ("580.65.06", "13.0"),
        ("580.95.05", "13.0"),
        ("590.48.01", "13.1"),
        ("595.58.03", "13.2"),
        ("610.43.02", "13.3"),
        ("470.82.01", "11.4"),
        ("520.61.05", "11.8"),
        ("440.33", "10.2"),
    ],
)
def test_newest_cuda_for_driver(kb: KnowledgeBase, driver: str, cuda: str) -> None:
    assert kb.newest_cuda_for_driver(DriverVersion.parse(driver)) == CudaVersion.parse(cuda)


def test_a_driver_older_than_every_toolkit_runs_none(kb: KnowledgeBase) -> None:
    # CUDA 9.2 (torch 1.7's cu92 build) is the oldest toolkit known: 9.2.148 needs 396.37
    assert kb.newest_cuda_for_driver(DriverVersion.parse("390.46")) is None
    assert kb.newest_cuda_for_driver(DriverVersion.parse("396.37")) == CudaVersion(9, 2)
    assert kb.newest_cuda_for_driver(DriverVersion.parse("418.39")) == CudaVersion(10, 1)


@pytest.mark.parametrize(
    ("cuda", "strict", "minor"),
    [
        ("12.4", "550.54.14", "525.60.13"),
        ("12.8", "570.26", "525.60.13"),
        ("12.1", "530.30.02", "525.60.13"),
        ("11.8", "520.61.05", "450.80.02"),
        # NVIDIA's table 2: 13.x runs on ">= 580", any R580 (Jetson Thor's is 580.00)
        ("13.0", "580.65.06", "580.00"),
        ("13.2", "595.45.04", "580.00"),
        ("10.2", "440.33", "440.33"),  # no minor-version compatibility before 11.x
    ],
)
def test_driver_floor_strict_vs_minor(
    kb: KnowledgeBase, cuda: str, strict: str, minor: str
) -> None:
    version = CudaVersion.parse(cuda)
    assert kb.driver_floor(version, DriverCompat.STRICT) == DriverVersion.parse(strict)
    assert kb.driver_floor(version, DriverCompat.MINOR) == DriverVersion.parse(minor)


def test_driver_floor_of_an_unknown_cuda(kb: KnowledgeBase) -> None:
    # 9.2 (torch 1.7's cu92) is the oldest CUDA known
    assert kb.driver_floor(CudaVersion(9, 0), DriverCompat.STRICT) is None
    # the family floor still applies to an unlisted 12.x under minor compatibility
    assert kb.driver_floor(CudaVersion(12, 7), DriverCompat.MINOR) == DriverVersion.parse(
        "525.60.13"
    )


def test_driver_535_reports_12_2_but_runs_12_x_builds_under_minor_compat(kb: KnowledgeBase) -> None:
    driver = DriverVersion.parse("535.104.05")
    cu124 = CudaVersion(12, 4)
    strict_floor = kb.driver_floor(cu124, DriverCompat.STRICT)
    minor_floor = kb.driver_floor(cu124, DriverCompat.MINOR)
    assert strict_floor is not None and minor_floor is not None
    assert driver < strict_floor
    assert minor_floor <= driver


# --- torch releases ---------------------------------------------------------------------


def test_torch_matching_is_newest_first(kb: KnowledgeBase) -> None:
    assert [str(r.version) for r in kb.torch_matching(SpecifierSet("==2.4.*"))] == [
        "2.4.1",
        "2.4.0",
    ]
    found = [r.version for r in kb.torch_matching(SpecifierSet(">=2.0,<3"))]
    assert found == sorted(found, reverse=True)
    assert found[-1] == Version("2.0.0")
    assert len(found) == len(set(found))


def test_torch_matching_never_returns_pre_releases(kb: KnowledgeBase) -> None:
    newest = kb.torch_releases[0]
    rc = dataclasses.replace(newest, version=Version("2.99.0rc1"))
    with_rc = dataclasses.replace(kb, torch_releases=(rc, *kb.torch_releases))
    assert rc not in with_rc.torch_matching(SpecifierSet(">=2.15"))
    assert rc not in with_rc.torch_matching(SpecifierSet(""))
    assert with_rc.torch_matching(SpecifierSet(">=2.15"))[0] == newest


def test_torch_matching_an_impossible_spec(kb: KnowledgeBase) -> None:
    assert kb.torch_matching(SpecifierSet("==3.0.*")) == []


def test_torch_release_lookup(kb: KnowledgeBase) -> None:
    release = kb.torch_release("2.4.1")
    assert release is not None
    assert release.tags == ("cpu", "cu118", "cu121", "cu124")
    assert release.build("cu126") is None
    assert release.pypi_default == "cu121"
    assert kb.torch_release(Version("2.4.1")) == release
    assert kb.torch_release("2.4.7") is None


@pytest.mark.parametrize(
    ("torch", "tags", "pypi"),
    [
        ("1.12.1", ("cpu", "cu102", "cu113", "cu116"), "cu102"),
        ("1.13.1", ("cpu", "cu116", "cu117"), "cu117"),
        ("2.0.1", ("cpu", "cu117", "cu118"), "cu117"),
        ("2.3.1", ("cpu", "cu118", "cu121"), "cu121"),
        ("2.5.1", ("cpu", "cu118", "cu121", "cu124"), "cu124"),
        ("2.6.0", ("cpu", "cu118", "cu124", "cu126"), "cu124"),
        ("2.7.1", ("cpu", "cu118", "cu126", "cu128"), "cu126"),
        ("2.8.0", ("cpu", "cu126", "cu128", "cu129"), "cu128"),
        ("2.9.1", ("cpu", "cu126", "cu128", "cu129", "cu130"), "cu128"),
        ("2.10.0", ("cpu", "cu126", "cu128", "cu129", "cu130"), "cu128"),
        ("2.11.0", ("cpu", "cu126", "cu128", "cu129", "cu130"), "cu130"),
        ("2.12.0", ("cpu", "cu126", "cu130", "cu132"), "cu130"),
        ("2.12.1", ("cpu", "cu126", "cu129", "cu130", "cu132"), "cu130"),  # cu129 off-matrix
        ("2.13.0", ("cpu", "cu126", "cu129", "cu130", "cu132"), "cu130"),
        ("2.14.1", ("cpu", "cu126", "cu130", "cu132"), "cu130"),
    ],
)
def test_builds_and_pypi_default(
    kb: KnowledgeBase, torch: str, tags: tuple[str, ...], pypi: str
) -> None:
    release = kb.torch_release(torch)
    assert release is not None
    assert (release.tags, release.pypi_default) == (tags, pypi)


@pytest.mark.parametrize(
    ("torch", "tags", "pypi"),
    [
        ("2.3.1", ("cpu",), "cpu"),
        ("2.4.1", ("cpu", "cu124"), "cpu"),
        ("2.5.1", ("cpu", "cu124"), "cpu"),
        ("2.6.0", ("cpu", "cu126"), "cpu"),
        ("2.7.1", ("cpu", "cu128"), "cpu"),
        ("2.8.0", ("cpu", "cu129"), "cpu"),
        ("2.9.1", ("cpu", "cu126", "cu128", "cu130"), "cpu"),
        ("2.11.0", ("cpu", "cu126", "cu128", "cu130"), "cu130"),
        ("2.12.1", ("cpu", "cu126", "cu130", "cu132"), "cu130"),  # no aarch64 cu129
        ("2.15.0", ("cpu", "cu130", "cu132"), "cu132"),
    ],
)
def test_aarch64_builds_and_pypi_default(
    kb: KnowledgeBase, torch: str, tags: tuple[str, ...], pypi: str
) -> None:
    release = kb.torch_release(torch)
    assert release is not None
    arm = release.on("linux-aarch64")
    assert (tuple(sorted(arm.tags)), arm.pypi_default) == (tuple(sorted(tags)), pypi)
    assert all(b.platform == "linux-aarch64" for b in arm.builds)
    assert arm.on("linux-64") == release  # round trip


def test_aarch64_arch_lists_differ_from_x86(kb: KnowledgeBase) -> None:
    release = kb.torch_release("2.5.1")
    assert release is not None
    arm = release.on("linux-aarch64").build("cu124")
    assert arm is not None and [str(a) for a in arm.arch] == ["9.0"]
    thor = ComputeCapability(11, 0)
    arm130 = kb.torch_release("2.9.1").on("linux-aarch64").build("cu130")  # type: ignore[union-attr]
    assert arm130 is not None and arm130.covering(thor) is not None


def test_release_for_companion(kb: KnowledgeBase) -> None:
    def torch_for(package: str, version: str) -> str | None:
        release = kb.release_for_companion(package, Version(version))
        return str(release.version) if release else None

    assert torch_for("torchvision", "0.19.1") == "2.4.1"
    assert torch_for("torchvision", "0.20.0") == "2.5.0"
    assert torch_for("torchvision", "0.15.1") == "2.0.0"
    assert torch_for("torchvision", "0.13.0") == "1.12.0"
    assert torch_for("torchvision", "0.27.1") == "2.12.1"
    assert torch_for("torchaudio", "2.4.1") == "2.4.1"
    assert torch_for("torchaudio", "2.0.2") == "2.0.1"
    assert torch_for("torchaudio", "0.13.1") == "1.13.1"
    assert torch_for("torchaudio", "2.11.0") == "2.11.0"
    assert torch_for("torchaudio", "2.12.0") is None
    assert torch_for("torchvision", "0.99.0") is None


# --- arch coverage ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("torch", "tag", "gpu", "entry"),
    [
        ("2.4.1", "cu121", "9.0", "9.0"),  # H100: compiled in
        ("2.5.1", "cu124", "8.9", "8.6"),  # RTX 4060 Ti: sm_86 SASS runs on sm_89
        ("2.9.1", "cu126", "6.1", "6.0"),  # GTX 1080 Ti: sm_60 SASS runs on sm_61
        ("2.7.1", "cu128", "12.0", "12.0+PTX"),  # RTX 5090
        ("2.7.1", "cu128", "12.1", "12.0+PTX"),  # DGX Spark: same-major SASS
        ("1.12.1", "cu102", "7.5", "7.0"),  # T4 on the CUDA 10.2 build
        ("2.1.2", "cu118", "3.7", "3.7"),  # K80
    ],
)
def test_build_covering(kb: KnowledgeBase, torch: str, tag: str, gpu: str, entry: str) -> None:
    assert _build(kb, torch, tag).covering(ComputeCapability.parse(gpu)) == ArchTarget.parse(entry)


@pytest.mark.parametrize(
    ("torch", "tag", "gpu"),
    [
        ("2.9.1", "cu128", "6.1"),  # 2.9's cu128 build has no sm_6x
        ("2.8.0", "cu129", "5.2"),
        ("2.11.0", "cu128", "7.0"),  # 2.11 dropped Volta from cu128
        ("2.7.1", "cu128", "7.0"),  # 2.7's cu128 started at Turing
        ("2.6.0", "cu126", "12.0"),  # no Blackwell before cu128, and no PTX
        ("2.0.1", "cu118", "3.5"),  # GT 730: sm_37 SASS does not run on sm_35
        ("2.14.1", "cu130", "7.0"),  # CUDA 13 cannot target Volta
        ("2.9.1", "cu130", "11.0"),  # Thor: the x86 list has no sm_110 and PTX only for 12.0
    ],
)
def test_build_not_covering(kb: KnowledgeBase, torch: str, tag: str, gpu: str) -> None:
    assert _build(kb, torch, tag).covering(ComputeCapability.parse(gpu)) is None


def test_ptx_carries_a_build_to_newer_majors(kb: KnowledgeBase) -> None:
    future = ComputeCapability(13, 0)
    with_ptx = _build(kb, "2.9.1", "cu130").covering(future)
    assert with_ptx == ArchTarget.parse("12.0+PTX")
    assert "JIT" in with_ptx.how(future)
    assert _build(kb, "2.9.1", "cu128").covering(future) is None


def test_gt_730_has_no_cuda_build_in_torch_2(kb: KnowledgeBase) -> None:
    gpu = kb.find_gpu("GT 730")
    assert gpu is not None
    covered = [
        (str(r.version), b.tag)
        for r in kb.torch_matching(SpecifierSet(">=2,<3"))
        for b in r.cuda_builds
        if b.covering(gpu.cc)
    ]
    assert covered == []


# --- the planner's acceptance scenarios, decided from this data alone -----------------


def _choose(
    kb: KnowledgeBase, gpu: str, driver: str, spec: str, mode: DriverCompat = DriverCompat.STRICT
) -> tuple[str, str] | None:
    """Newest matching release with a build the driver runs and that covers the GPU,
    then the newest such CUDA (the rule issue 2 gives the planner)."""
    found = kb.find_gpu(gpu)
    assert found is not None, gpu
    running = DriverVersion.parse(driver)
    for release in kb.torch_matching(SpecifierSet(spec)):
        usable = [
            b
            for b in release.cuda_builds
            if b.cuda is not None
            and (floor := kb.driver_floor(b.cuda, mode)) is not None
            and floor <= running
            and b.covering(found.cc) is not None
        ]
        if usable:
            best = max(usable, key=lambda b: b.cuda or CudaVersion(0, 0))
            return str(release.version), best.tag
    return None


@pytest.mark.parametrize(
    ("gpu", "driver", "spec", "expected"),
    [
        ("H100", "535.104.05", "==2.4.*", ("2.4.1", "cu121")),
        ("H100", "550.54.15", "==2.4.*", ("2.4.1", "cu124")),
        ("RTX 4060 Ti", "550.54.15", "==2.5.1", ("2.5.1", "cu124")),
        ("GTX 1080 Ti", "570.86.15", "==2.9.*", ("2.9.1", "cu126")),
        ("RTX 5090", "570.86.15", "==2.6.*", None),
        ("RTX 5090", "570.86.15", "==2.7.*", ("2.7.1", "cu128")),
        ("GT 730", "470.82.01", ">=2,<3", None),
        ("Tesla K80", "520.61.05", ">=2,<3", ("2.7.1", "cu118")),
        ("Tesla K80", "515.43.04", ">=2,<3", ("2.0.1", "cu117")),
        ("V100", "580.65.06", ">=2.11,<2.12", ("2.11.0", "cu126")),
        ("B200", "580.65.06", ">=2.12,<2.13", ("2.12.1", "cu130")),
    ],
)
def test_issue_scenarios(
    kb: KnowledgeBase, gpu: str, driver: str, spec: str, expected: tuple[str, str] | None
) -> None:
    assert _choose(kb, gpu, driver, spec) == expected


def test_minor_compat_opens_newer_builds_to_an_older_driver(kb: KnowledgeBase) -> None:
    assert _choose(kb, "H100", "535.104.05", "==2.4.*", DriverCompat.MINOR) == ("2.4.1", "cu124")
    assert _choose(kb, "RTX 5090", "535.104.05", "==2.7.*", DriverCompat.STRICT) is None
    assert _choose(kb, "RTX 5090", "535.104.05", "==2.7.*", DriverCompat.MINOR) == (
        "2.7.1",
        "cu128",
    )
