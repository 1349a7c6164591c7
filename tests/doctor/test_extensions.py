"""Doctor's findings about compiled extensions, on fixture environments: one built against
another torch (by gpuenv's build record, and by the c10 symbols it needs), one for another
CUDA major, one without code for this machine's GPU; and a good one with no finding."""

from __future__ import annotations

import json

from tests.builds.fatbins import shared_object
from tests.doctor.conftest import H100, FakeEnv, Run, hardware, needs_gcc

C10_OLD = "_ZN3c1019UndefinedTensorImpl10_singletonE"  # what torch 2.3 exported
C10_NEW = "_ZN3c106detail14torchCheckFailEPKcS2_jS2_"


def _torch_libs(env: FakeEnv) -> None:
    shared_object(env.site / "torch" / "lib" / "libc10.so", defined=(C10_NEW,))


def _extension(
    env: FakeEnv, name: str, *, record: dict[str, object] | None = None, **so: object
) -> None:
    module = name.replace("-", "_")
    rel = f"{module}/_C.so"
    info = env.dist(name, "1.0.0", files=[rel])
    shared_object(env.site / rel, **so)  # type: ignore[arg-type]
    if record is not None:
        (info / "gpuenv-build.json").write_text(json.dumps(record))


@needs_gcc
def test_an_extension_recorded_as_built_against_another_torch(clean_env: FakeEnv, run: Run) -> None:
    _torch_libs(clean_env)
    _extension(
        clean_env,
        "flash-attn",
        record={"torch": "2.3.0+cu121", "cuda": "12.1"},
        sass=(90,),
        undefined=(C10_NEW,),
    )
    report = run(clean_env)
    (finding,) = [f for f in report.findings if f.code == "extension-other-torch"]
    assert "built against torch 2.3.0+cu121" in finding.message
    assert finding.evidence["torch"] == "2.4.1+cu124"
    assert finding.evidence["record"].endswith("gpuenv-build.json")
    assert "--no-build-isolation" in finding.fix
    assert report.has_errors


@needs_gcc
def test_an_extension_needing_c10_symbols_this_torch_lacks(clean_env: FakeEnv, run: Run) -> None:
    _torch_libs(clean_env)
    _extension(clean_env, "someext", undefined=(C10_OLD, C10_NEW))
    (finding,) = [f for f in run(clean_env).findings if f.code == "extension-other-torch"]
    assert finding.evidence["missing_symbols"] == [C10_OLD]
    assert f"undefined symbol: {C10_OLD}" in finding.message


@needs_gcc
def test_an_extension_for_another_cuda_major(clean_env: FakeEnv, run: Run) -> None:
    _torch_libs(clean_env)
    _extension(clean_env, "xformers", record={"torch": "2.4.1+cu124", "cuda": "11.8"}, sass=(90,))
    codes = [f.code for f in run(clean_env).findings]
    assert "extension-other-cuda" in codes and "extension-other-torch" not in codes


@needs_gcc
def test_an_extension_without_code_for_this_gpu(clean_env: FakeEnv, run: Run) -> None:
    _torch_libs(clean_env)
    _extension(
        clean_env, "ampere-ext", record={"torch": "2.4.1+cu124", "cuda": "12.4"}, sass=(80, 86)
    )
    (finding,) = [f for f in run(clean_env).findings if f.code == "extension-no-gpu-code"]
    assert finding.evidence["gpu_code"] == ["sm_80", "sm_86"] and "sm_90" in finding.message
    ada = run(clean_env, facts=hardware(cc="8.9", name="NVIDIA GeForce RTX 4090"))
    assert "extension-no-gpu-code" not in [f.code for f in ada.findings], "sm_86 SASS runs on 8.9"


@needs_gcc
def test_a_good_extension_has_no_finding(clean_env: FakeEnv, run: Run) -> None:
    _torch_libs(clean_env)
    _extension(
        clean_env,
        "good-ext",
        record={"torch": "2.4.1+cu124", "cuda": "12.4"},
        sass=(90,),
        ptx=(90,),
        undefined=(C10_NEW,),
    )
    codes = [f.code for f in run(clean_env, facts=H100).findings]
    assert not [c for c in codes if c.startswith("extension-")], codes
