"""Twelve environments shaped like real repositories' files, each imported for an H100 on
driver 550, an RTX 4090 and a CPU-only machine: the decisions in the report (which torch,
which build, what moved and why), and that every written spec plans to the same stack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from gpuenv.names import normalize_name
from gpuenv.spec import load_spec
from tests.conftest import CliResult
from tests.importers.conftest import Imported


@dataclass(frozen=True)
class Expect:
    torch: str
    python: str
    changed: frozenset[str] = frozenset()
    kept: frozenset[str] = frozenset()
    needs_build: dict[str, str | None] = field(default_factory=dict)  # package -> nvcc
    unreproducible: frozenset[str] = frozenset()
    why: dict[str, str] = field(default_factory=dict)  # package -> text in its reason
    toolkit: bool = False


def fs(*names: str) -> frozenset[str]:
    return frozenset(names)


CASES: dict[tuple[str, str], Expect] = {
    # 1. Stable Diffusion 2 (2022): conda, cudatoolkit 11.3, pytorch 1.12.1
    ("sd2022/environment.yaml", "h100"): Expect(
        "2.0.1+cu118", "3.8", changed=fs("torch", "torchvision"),
        kept=fs("numpy", "transformers", "python"),
        why={"torch": "sm_90", "torchvision": "paired with torch 2.0.1"},
    ),
    ("sd2022/environment.yaml", "rtx4090"): Expect(
        "1.12.1+cu113", "3.8", kept=fs("torch", "torchvision", "numpy"),
    ),
    ("sd2022/environment.yaml", "cpu"): Expect(
        "1.12.1+cpu", "3.8", changed=fs("torch"), kept=fs("torchvision"),
        why={"torch": "no GPU"},
    ),
    # 2. detectron2: Dockerfile (nvidia/cuda 11.1 devel, torch 1.10 cu111) + setup.py
    ("detectron2", "h100"): Expect(
        "2.0.1+cu118", "3.8", changed=fs("torch", "torchvision", "python"),
        needs_build={"detectron2": "11.8"}, unreproducible=fs("panopticapi"),
        why={"torch": "no torch 1.10.0 build for linux-64 has kernels for sm_90",
             "python": "3.8 is the nearest"}, toolkit=True,
    ),
    ("detectron2", "rtx4090"): Expect(  # the cu111 build's sm_86 kernels run on sm_89
        "1.10.0+cu111", "3.8", kept=fs("torch", "torchvision"), changed=fs("python"),
        needs_build={"detectron2": "11.1"}, toolkit=True,
        why={"torch": "runs on this target as built"},
    ),
    ("detectron2", "cpu"): Expect(
        "1.10.0+cpu", "3.8", needs_build={"detectron2": None}, kept=fs("fvcore", "torchvision"),
    ),
    # 3. requirements with +cu111 pins and -f torch_stable.html
    ("cu111/requirements.txt", "h100"): Expect(
        # numpy>=1.19,<1.22 already stays below 2 (torch 2.0's NumPy 1.x): kept, not changed
        "2.0.1+cu118", "3.10", changed=fs("torch", "torchvision", "torchaudio"),
        kept=fs("scipy", "tensorboard", "pyyaml", "numpy"),
    ),
    ("cu111/requirements.txt", "rtx4090"): Expect(
        "1.10.0+cu111", "3.9", kept=fs("torch", "torchvision", "torchaudio", "scipy"),
        why={"torchvision": "released with torch 1.10.0"},  # 0.11.0 and 0.11.1 both were
    ),
    ("cu111/requirements.txt", "cpu"): Expect(
        "1.10.0+cpu", "3.9", changed=fs("torch"), kept=fs("torchaudio"),
    ),
    # 4. pyproject with extras and flash-attn
    ("llm-pyproject/pyproject.toml", "h100"): Expect(
        # bitsandbytes 0.41.3's LLM.int8() does not run on Hopper: 0.45.0's does
        "2.2.2+cu121", "3.12", kept=fs("torch", "transformers"),
        needs_build={"flash-attn": "12.1", "deepspeed": "12.1"}, changed=fs("numpy", "bitsandbytes"),
        toolkit=True,
    ),
    ("llm-pyproject/pyproject.toml", "rtx4090"): Expect(
        "2.2.2+cu121", "3.12", needs_build={"flash-attn": "12.1"}, toolkit=True,
    ),
    ("llm-pyproject/pyproject.toml", "cpu"): Expect(
        "2.2.2+cpu", "3.12", unreproducible=fs("flash-attn"), kept=fs("bitsandbytes"),
        why={"flash-attn": "no CPU implementation", "bitsandbytes": "no GPU"},
    ),
    # 5. dinov2: pytorch-cuda=11.7, xformers 0.0.18 from conda
    ("dinov2/conda.yaml", "h100"): Expect(
        "2.0.0+cu118", "3.9", changed=fs("torch", "torchvision", "submitit"),
        needs_build={"xformers": "11.8"},
        why={"torch": "no sm_90 kernels", "xformers": "0.0.21", "torchvision": "0.15.1"},
        toolkit=True,
    ),
    ("dinov2/conda.yaml", "rtx4090"): Expect(
        "2.0.0+cu117", "3.9", kept=fs("torch", "xformers"), changed=fs("torchvision"),
    ),
    ("dinov2/conda.yaml", "cpu"): Expect(
        "2.0.0+cpu", "3.9", kept=fs("xformers"), why={"xformers": "no GPU"},
    ),
    # 6. a Dockerfile FROM NGC's 22.10 container
    ("ngc/Dockerfile", "h100"): Expect(
        "2.0.1+cu118", "3.8", changed=fs("torch"), kept=fs("timm", "einops"), toolkit=True,
    ),
    ("ngc/Dockerfile", "rtx4090"): Expect(
        "1.13.0+cu117", "3.8", changed=fs("torch"), why={"torch": "no cu118 build"},
        toolkit=True,
    ),
    ("ngc/Dockerfile", "cpu"): Expect("1.13.0+cpu", "3.8", changed=fs("torch")),
    # 7. a nightly installed with --pre
    ("nightly/requirements.txt", "h100"): Expect(
        "2.2.0+cu121", "3.12", changed=fs("torch", "torchvision"), unreproducible=fs("torch"),
        why={"torch": "is a nightly of 2023-10-10; 2.2.0 (published 2024-01-30) is the release"},
    ),
    ("nightly/requirements.txt", "rtx4090"): Expect(
        "2.2.0+cu121", "3.12", unreproducible=fs("torch"),
    ),
    ("nightly/requirements.txt", "cpu"): Expect("2.2.0+cpu", "3.12", unreproducible=fs("torch")),
    # 8. pip freeze
    ("freeze/pip-freeze.txt", "h100"): Expect(
        "2.1.2+cu121", "3.11", kept=fs("torch", "transformers", "numpy", "paper-code"),
        changed=fs("triton", "nvidia-cudnn-cu12"),
    ),
    ("freeze/pip-freeze.txt", "rtx4090"): Expect("2.1.2+cu121", "3.11", kept=fs("torch")),
    ("freeze/pip-freeze.txt", "cpu"): Expect("2.1.2+cpu", "3.11", changed=fs("torch")),
    # 9. conda env export
    ("conda-export/environment.yml", "h100"): Expect(
        "2.1.0+cu118", "3.10", kept=fs("torch", "torchvision", "numpy", "ffmpeg", "timm"),
        changed=fs("triton"),
    ),
    ("conda-export/environment.yml", "rtx4090"): Expect("2.1.0+cu118", "3.10", kept=fs("torch")),
    ("conda-export/environment.yml", "cpu"): Expect("2.1.0+cpu", "3.10", changed=fs("torch")),
    # 10. collect_env output pasted into an issue
    ("collect-env/collect_env.txt", "h100"): Expect(
        "2.0.1+cu118", "3.10", changed=fs("torch", "torchvision"), kept=fs("numpy"),
    ),
    ("collect-env/collect_env.txt", "rtx4090"): Expect(
        "1.13.1+cu117", "3.10", kept=fs("torch", "torchvision"),
    ),
    ("collect-env/collect_env.txt", "cpu"): Expect("1.13.1+cpu", "3.10", changed=fs("torch")),
    # 11. conda-lock.yml
    ("conda-lock/conda-lock.yml", "h100"): Expect(
        "2.0.1+cu118", "3.9", changed=fs("torch"), kept=fs("numpy", "einops"),
    ),
    ("conda-lock/conda-lock.yml", "rtx4090"): Expect("1.12.1+cu116", "3.9", kept=fs("torch")),
    ("conda-lock/conda-lock.yml", "cpu"): Expect("1.12.1+cpu", "3.9", changed=fs("torch")),
    # 12. a repository folder: environment.yaml, requirements.txt, setup.py, pyproject.toml,
    #     docker/Dockerfile (and a requirements-dev.txt that is left out)
    ("repo", "h100"): Expect(
        "2.0.1+cu118", "3.8", changed=fs("torch", "torchvision", "xformers"),
        kept=fs("numpy", "einops", "ffmpeg"), why={"xformers": "0.0.22"},
    ),
    ("repo", "rtx4090"): Expect(
        "1.12.1+cu113", "3.8", kept=fs("torch", "torchvision"), needs_build={"xformers": "11.3"},
        toolkit=True,
    ),
    ("repo", "cpu"): Expect("1.12.1+cpu", "3.8", changed=fs("torch"), needs_build={"xformers": None}),
}  # fmt: skip


def _check_report(imported: Imported, expect: Expect) -> None:
    assert imported.result.code == 0, imported.result.err or imported.result.out
    report = imported.report
    assert imported.torch() == expect.torch, report["summary"]
    changed, kept = imported.entries("changed"), imported.entries("kept")
    builds, lost = imported.entries("needs_build"), imported.entries("unreproducible")
    assert expect.changed <= set(changed), (set(changed), report["summary"])
    assert expect.kept <= set(kept), set(kept)
    assert not (expect.kept & set(changed)), "kept means kept"
    for package, nvcc in expect.needs_build.items():
        assert package in builds, set(builds)
        assert builds[package]["nvcc"] == nvcc
    assert expect.unreproducible <= set(lost), set(lost)
    for package, text in expect.why.items():
        entry = changed.get(package) or builds.get(package) or lost.get(package) or kept[package]
        assert text in entry["why"], entry
    for entry in report["changed"] + report["kept"]:
        if entry["from"] != "not asked":  # added by gpuenv (numpy<2 before torch 2.3)
            assert entry["file"], f"every requirement cites its file: {entry}"


def _check_spec(cli: Callable[..., CliResult], imported: Imported, expect: Expect) -> None:
    text = imported.spec.read_text()
    loaded = load_spec(imported.spec)
    stack = loaded.spec.stack
    assert stack.python == expect.python
    assert (stack.toolkit is not None) is expect.toolkit, stack.toolkit
    if stack.toolkit not in (None, "auto"):  # a CUDA NVIDIA has no nvcc wheel for
        assert stack.toolkit == f"system:/usr/local/cuda-{stack.cuda}", stack.toolkit
        assert loaded.spec.conda is None
    plan = cli("-f", str(imported.spec), "plan", "--json")
    assert plan.code == 0, plan.err
    (target,) = plan.json()["targets"].values()
    assert f"{target['torch']}+{target['cu_tag']}" == expect.torch, "the spec plans to it"
    for line in text.splitlines():
        if line.strip().startswith('"') and line.rstrip().endswith(","):
            pytest.fail(f"a dependency without its provenance comment: {line}")


@pytest.mark.parametrize(("inputs", "target"), list(CASES), ids=[f"{i}-{t}" for i, t in CASES])
def test_import_decides_the_nearest_reproduction(
    run_import: Callable[..., Imported],
    cli: Callable[..., CliResult],
    inputs: str,
    target: str,
) -> None:
    expect = CASES[(inputs, target)]
    imported = run_import(inputs, target=target)
    _check_report(imported, expect)
    _check_spec(cli, imported, expect)


def test_a_paper_that_pins_no_torch_says_so(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    """The reason read "no release in '' fits this target" when no file named torch."""
    path = tmp_path / "requirements.txt"
    path.write_text("numpy==1.26.4\n")
    imported = run_import(path)
    assert imported.result.code == 0, imported.result.out
    why = imported.entries("changed")["torch"]["why"]
    assert why.startswith("nothing in the files asks for torch; ") and "''" not in why


@pytest.mark.parametrize("python_requires", [None, ">=3.8"])
def test_a_free_python_never_moves_a_pinned_torch(
    run_import: Callable[..., Imported], tmp_path: Path, python_requires: str | None
) -> None:
    """torch==1.13.1 for a CPU target moved to 2.0.1: the Python was fixed first at 3.11,
    the series' newest, which torch 1.13's CPU wheels lack. With no exact Python named,
    the Python is chosen for the torch build, not the other way round."""
    (tmp_path / "requirements.txt").write_text("torch==1.13.1\nnumpy==1.24.4\n")
    if python_requires:
        (tmp_path / "setup.py").write_text(
            f"from setuptools import setup\nsetup(name='x', python_requires={python_requires!r})\n"
        )
    imported = run_import(tmp_path, target="cpu")
    assert imported.result.code == 0, imported.result.out
    assert imported.torch() == "1.13.1+cpu"
    spec = imported.spec.read_text()
    assert 'python = "3.10"' in spec and 'torch = "1.13.1"' in spec


@pytest.mark.parametrize(
    "lines",
    [
        # naver/dust3r's requirements_optional.txt beside torch 2.2.0: numpy<2 was written
        # over numpy-quaternion's line (a prefix match on "numpy")
        "torch==2.2.0\nnumpy-quaternion\nscipy\n",
        "torch==2.2.0\nnumpy_quaternion>=2022\nnumpy==2.0.1\n",  # and beside numpy's own pin
        "torch==2.1.2\ntransformers-stream-generator\ntransformers>=4.30\n",
    ],
)
def test_a_constraint_replaces_only_its_own_packages_line(
    run_import: Callable[..., Imported], tmp_path: Path, lines: str
) -> None:
    (tmp_path / "requirements.txt").write_text(lines)
    imported = run_import(tmp_path / "requirements.txt")
    assert imported.result.code == 0, imported.result.out
    spec = load_spec(imported.spec).spec
    written = {normalize_name(Requirement(r).name) for r in spec.pip.dependencies}
    asked = {normalize_name(Requirement(r).name) for r in lines.split()[1:]}
    assert asked <= written, spec.pip.dependencies
