"""Verification of built extensions: the probe imports each one and reads the GPU code of
each shared object (the same fat-binary layout as gpuenv.builds.elfscan), against the fake
torch's GPUs."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from gpuenv.builds.elfscan import gpu_code
from gpuenv.verify import run_probe
from tests.builds.fatbins import ext_suffix, shared_object
from tests.verify.conftest import LOCKED, check, fake_env, load_probe_module

PROBE: ModuleType = load_probe_module()


def test_both_fatbin_readers_agree_on_synthetic_objects(tmp_path: Path) -> None:
    for n, (sass, ptx) in enumerate([((80, 90), (90,)), ((89,), ()), ((), (75,)), ((), ())]):
        so = shared_object(tmp_path / f"lib{n}.so", sass=sass, ptx=ptx)
        code = gpu_code(so)
        assert code is not None and code.sass == set(sass) and code.ptx == set(ptx)
        assert PROBE.fatbin_entries(str(so)) == code.entries()
    assert PROBE.fatbin_entries(str(tmp_path / "lib0.c")) is None, "not an ELF file"


def _probe(
    tmp_path: Path,
    extensions: list[dict[str, object]],
    devices: list[dict[str, object]] | None = None,
):  # type: ignore[no-untyped-def]
    config = {"devices": devices} if devices else {}
    env = fake_env(config)
    env["PYTHONPATH"] += f":{tmp_path / 'site'}"
    expect = type(LOCKED)(**{**LOCKED.__dict__, "extensions": tuple(extensions)})
    return run_probe(Path(sys.executable), expect, env=env, timeout=60, isolated=False)


def _extension(tmp_path: Path, module: str, **kwargs: object) -> dict[str, object]:
    so = shared_object(tmp_path / "site" / f"{module}{ext_suffix()}", module=module, **kwargs)  # type: ignore[arg-type]
    return {
        "name": module.replace("_", "-"),
        "version": "1.0",
        "modules": [module],
        "files": [str(so)],
    }


def test_an_extension_with_code_for_this_gpu_passes(tmp_path: Path) -> None:
    ext = _extension(tmp_path, "good_ext", sass=(80, 90), ptx=(90,))
    result = _probe(tmp_path, [ext])
    found = check(result, "extensions")
    assert found.passed, found.detail
    assert result.passed, result.reason
    assert (
        "extensions"
        in LOCKED.__class__(**{**LOCKED.__dict__, "extensions": (ext,)}).required_checks()
    )


def test_an_extension_built_for_another_gpu_fails_and_says_how_to_rebuild(tmp_path: Path) -> None:
    ext = _extension(tmp_path, "ampere_only", sass=(80, 86))  # no PTX: nothing runs on sm_90
    result = _probe(tmp_path, [ext])
    found = check(result, "extensions")
    assert not found.passed and not result.passed
    assert "sm_80 sm_86" in found.detail and "sm_90" in found.detail
    assert "rebuild it for this GPU" in (found.fix or "")


def test_ptx_of_an_older_arch_is_jit_compiled_for_a_newer_gpu(tmp_path: Path) -> None:
    ext = _extension(tmp_path, "ptx_ext", sass=(80,), ptx=(80,))
    assert check(_probe(tmp_path, [ext]), "extensions").passed


def test_an_extension_built_against_another_torch_fails_to_import_with_the_fix(
    tmp_path: Path,
) -> None:
    missing = "_ZN3c1019UndefinedTensorImpl10_singletonE"
    ext = _extension(tmp_path, "stale_ext", sass=(90,), undefined=(missing,))
    found = check(_probe(tmp_path, [ext]), "extensions")
    assert not found.passed
    assert f"undefined symbol: {missing}" in found.detail
    assert "compiled against another torch" in (found.fix or "")
