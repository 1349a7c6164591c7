"""`import --check-resolves`, the real resolution: one `uv pip compile` of the pip
dependencies about to be written, run against the fixture index before the spec is
written (`gpuenv.import_check`).

The fixture index (`tests/fixtures/pkgindex/catalog.py`) serves the shapes that matter:
transformers 4.44.2 needs tokenizers <0.20 and 4.45.0 needs >=0.20 (both real); numpy
has cp310/cp311 wheels only, so a pure-Python package that needs numpy resolves on 3.11
and not on 3.12; fixture-pure and fixture-ext are sdists (builds), fixture-ext needs torch.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.import_check import CheckRequest, check_resolves, render_markdown
from tests.conftest import CliResult
from tests.fixtures.pkgindex.plugin import AUTH_PASSWORD, PkgIndex, closed_port
from tests.importers.conftest import Imported


@pytest.fixture
def index_env(pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch) -> PkgIndex:
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", pkgindex.default_index)
    return pkgindex


def _requirements(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "paper" / "requirements.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def _request(
    pkgindex: PkgIndex,
    *requirements: str,
    builds: tuple[str, ...] = (),
    torch: tuple[str, ...] = (),
) -> CheckRequest:
    return CheckRequest(requirements, "3.11", pkgindex.default_index, torch=torch, builds=builds)


# --- through `gpuenv import` ----------------------------------------------------------------


def test_pins_that_resolve_are_said_to_and_the_import_succeeds(
    run_import: Callable[..., Imported], index_env: PkgIndex, tmp_path: Path
) -> None:
    req = _requirements(tmp_path, "torch==2.4.1\ntransformers==4.44.2\nnumpy==1.26.4\n")
    imported = run_import(req, target="cpu")
    assert imported.result.code == 0, imported.result.err
    assert imported.report["resolves"] is True
    resolution = imported.report["resolution"]
    assert resolution["checked"] and resolution["packages"] == []
    assert (resolution["python"], resolution["requirements"]) == ("3.11", 2)
    assert resolution["platform"] == "x86_64-manylinux_2_28"
    assert imported.spec.exists()


def test_a_transitive_conflict_is_reported_with_its_names_and_the_spec_still_written(
    cli: Callable[..., CliResult], index_env: PkgIndex, tmp_path: Path
) -> None:
    # transformers 4.44.2 requires tokenizers>=0.19,<0.20: the paper's 0.20.0 cannot join it.
    req = _requirements(tmp_path, "torch==2.4.1\ntransformers==4.44.2\ntokenizers==0.20.0\n")
    out = tmp_path / "gpuenv.toml"
    result = cli("import", str(req), "--gpu", "none", "-o", str(out))
    assert result.code == 1, result.err  # a check answered "no"
    assert out.exists() and '"tokenizers==0.20.0"' in out.read_text()  # a starting point
    assert "### Does not resolve" in result.out
    assert "transformers<=4.44.2 depends on tokenizers>=0.19,<0.20" in result.out
    assert "Packages named: `transformers`, `tokenizers`." in result.out
    assert "Instead: tokenizers>=0.19,<0.20, which transformers==4.44.2 accepts" in result.out
    assert "next: change the pins named above" in result.out
    as_json = cli("import", str(req), "--gpu", "none", "-o", str(out), "--force", "--json")
    assert as_json.code == 1
    body = json.loads(as_json.out)
    assert body["resolves"] is False and body["written"] == str(out)
    assert body["resolution"]["packages"] == ["transformers", "tokenizers"]
    assert "gpuenv-lock-request" not in as_json.out  # uv's name for the throw-away project


def test_a_dependency_without_a_wheel_for_the_chosen_python_is_reported(
    run_import: Callable[..., Imported], index_env: PkgIndex, tmp_path: Path
) -> None:
    # transformers is pure Python, so the index's pages let 3.12 through; its numpy has
    # cp310/cp311 wheels only, which only a resolution finds.
    req = _requirements(tmp_path, "torch==2.4.1\ntransformers==4.44.2\n")
    imported = run_import(req, target="cpu")
    assert imported.result.code == 1
    resolution = imported.report["resolution"]
    assert resolution["python"] == "3.12" and resolution["resolves"] is False
    assert resolution["packages"] == ["numpy", "transformers"]
    assert "no wheels with a matching Python ABI tag" in resolution["reason"]
    assert resolution["instead"].startswith("a Python 3.10 or 3.11: numpy v2.1.1 has wheels")


def test_an_unreachable_index_is_not_checked_never_fatal(
    run_import: Callable[..., Imported], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"http://u:pw-9f3@127.0.0.1:{closed_port()}/simple")
    req = _requirements(tmp_path, "torch==2.4.1\ntransformers==4.44.2\ntokenizers==0.20.0\n")
    imported = run_import(req, target="cpu")
    assert imported.result.code == 0, imported.result.err
    resolution = imported.report["resolution"]
    assert imported.report["resolves"] is None and resolution["checked"] is False
    assert resolution["reason"].startswith("the index could not be read")
    assert "pw-9f3" not in imported.result.out + imported.result.err


def test_the_check_is_off_with_the_flag_or_the_variable(
    run_import: Callable[..., Imported],
    index_env: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    req = _requirements(tmp_path, "torch==2.4.1\ntransformers==4.44.2\ntokenizers==0.20.0\n")
    off = run_import(req, target="cpu", extra=("--no-check-resolves",))
    assert off.result.code == 0 and off.report["resolution"] is None
    assert off.report["resolves"] is None
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", "off")
    variable = run_import(req, target="cpu")
    assert variable.result.code == 0 and variable.report["resolution"] is None


def test_a_credential_in_the_index_url_reaches_uv_and_no_output(
    cli: Callable[..., CliResult],
    pkgindex_auth: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GPUENV_IMPORT_INDEX", pkgindex_auth.default_index)
    req = _requirements(tmp_path, "torch==2.4.1\ntransformers==4.44.2\ntokenizers==0.20.0\n")
    out = tmp_path / "gpuenv.toml"
    result = cli("import", str(req), "--gpu", "none", "-o", str(out))
    assert result.code == 1, result.err  # resolved behind the index's password
    assert "transformers<=4.44.2 depends on tokenizers" in result.out
    everything = result.out + result.err + out.read_text()
    assert AUTH_PASSWORD not in everything
    assert "gpuenv-user:" not in everything


def test_an_interrupted_check_writes_nothing(
    cli: Callable[..., CliResult],
    index_env: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from gpuenv import import_check

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(import_check, "_run", interrupted)
    req = _requirements(tmp_path, "torch==2.4.1\nnumpy==1.26.4\n")
    out = tmp_path / "gpuenv.toml"
    result = cli("import", str(req), "--gpu", "none", "-o", str(out))
    assert result.code == 130 and not out.exists()


# --- the check itself -----------------------------------------------------------------------


def test_a_package_with_no_wheel_is_named_as_built_from_source_not_a_conflict(
    pkgindex: PkgIndex,
) -> None:
    # fixture-pure has an sdist only, as antlr4-python3-runtime 4.8 (omegaconf 2.1.1's,
    # so stable-diffusion's and ControlNet's) and pathtools (wandb 0.15's) have: `gpuenv
    # lock` locks such a package as a source build, so the check must not call the
    # environment unresolvable (it did, and the import exited 1 for those repositories).
    plain = check_resolves(_request(pkgindex, "fixture-pure==0.3.0"))
    assert plain.resolves is True and plain.built == ("fixture-pure",)
    assert "idna==3.8" in plain.resolved  # the sdist's own dependency was resolved
    assert plain.to_json()["built_from_source"] == ["fixture-pure"]
    shown = render_markdown(plain)
    assert "### Resolves" in shown and "built from them when installed" in shown
    assert "`fixture-pure`" in shown
    # Marked as a build by the import, its sdist is asked for from the start.
    built = check_resolves(_request(pkgindex, "fixture-pure==0.3.0", builds=("fixture-pure",)))
    assert built.resolves is True and built.built == ()
    assert "idna==3.8" in built.resolved


def test_a_package_with_neither_wheel_nor_sdist_still_does_not_resolve(pkgindex: PkgIndex) -> None:
    # numpy 1.26.4 has cp310/cp311 wheels only and no sdist on the fixture index.
    found = check_resolves(dataclasses.replace(_request(pkgindex, "numpy==1.26.4"), python="3.12"))
    assert found.resolves is False and "numpy" in found.packages


def test_the_packages_uv_says_have_no_usable_wheels_are_read_from_its_words() -> None:
    from gpuenv.import_check import _without_wheels

    texts = {
        "Because antlr4-python3-runtime==4.8 has no usable wheels and omegaconf==2.1.1 "
        "depends on antlr4-python3-runtime==4.8, we can conclude": ("antlr4-python3-runtime",),
        "Because all versions of pathtools have no usable wheels and wandb==0.15.12 depends "
        "on pathtools": ("pathtools",),
        "And because all of: pudb>=2022.1.3,<=2024.1 pudb==2025.1.2 have no usable wheels "
        "and the request requires pudb>=2022.1.3": ("pudb",),
        "Because transformers<=4.44.2 depends on tokenizers>=0.19,<0.20": (),
        # a marker in braces names no package (lerobot: 'in' and 'sys-platform' were)
        "Because evdev{'linux' in sys_platform}>=1.3.0 has no usable wheels and "
        "pynput>=1.7.8 depends on evdev{'linux' in sys_platform}>=1.3": ("evdev",),
    }
    for text, names in texts.items():
        assert _without_wheels(text) == names, text


def test_the_torch_family_is_constrained_to_the_plan_without_its_local_label(
    pkgindex: PkgIndex,
) -> None:
    # fixture-ext depends on torch: the planned 2.4.1+cu121 is asked of the index as 2.4.1.
    planned = ("torch==2.4.1+cu121",)
    ext = ("fixture-ext==1.0.0",)
    found = check_resolves(_request(pkgindex, *ext, builds=("fixture-ext",), torch=planned))
    assert found.resolves is True and "torch==2.4.1" in found.resolved
    # A torch the index does not hold is the torch index's business: not checked.
    other = check_resolves(
        _request(pkgindex, *ext, builds=("fixture-ext",), torch=("torch==2.3.0",))
    )
    assert other.resolves is None
    assert other.reason.startswith("the index has no torch==2.3.0 for this target")


def test_a_package_the_index_lacks_is_named(pkgindex: PkgIndex) -> None:
    found = check_resolves(_request(pkgindex, "no-such-package==1.0", "numpy==1.26.4"))
    assert found.resolves is False and found.packages == ("no-such-package",)
    assert found.instead is not None and "not on this index" in found.instead


HOSTILE = (
    "--index-url=http://127.0.0.1:9/evil",  # an option, smuggled as a pin
    "-e .",
    "numpy==1.26.4\n--extra-index-url http://127.0.0.1:9/evil",
    "numpy\x00==1.26.4",
    "numpy" + "x" * 5000,
    "-r /etc/passwd",
    "numpy @ file:///etc/passwd",
    "idna; os.system('true')",
)


def test_hostile_requirements_never_reach_uv(
    pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuenv import _proc

    seen: list[tuple[str, ...]] = []
    real = _proc.run

    def spy(argv: list[object], **kwargs: object) -> _proc.ProcResult:
        seen.append(tuple(str(a) for a in argv))
        return real(argv, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_proc, "run", spy)
    found = check_resolves(_request(pkgindex, *HOSTILE, "numpy==1.26.4"))
    assert found.resolves is True and found.checked == 1
    assert len(found.left_out) == len(HOSTILE)
    (argv,) = seen
    assert not any("evil" in a or "passwd" in a for a in argv)
    assert all(len(reason) < 300 and "\n" not in reason for reason in found.left_out)


def test_no_uv_a_timeout_and_a_silent_index_are_not_checked(
    pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch, silent_port: int
) -> None:
    import time

    from gpuenv.errors import ExternalToolError
    from gpuenv.lock import uv

    silent = CheckRequest(("numpy==1.26.4",), "3.11", f"http://127.0.0.1:{silent_port}/simple")
    started = time.monotonic()
    hung = check_resolves(dataclasses.replace(silent, timeout=2.0))
    assert hung.resolves is None and time.monotonic() - started < 15
    assert hung.reason.endswith("did not finish within 2 s")

    def missing() -> str:
        raise ExternalToolError("uv: program not found")

    monkeypatch.setattr(uv, "find_uv", missing)
    none = check_resolves(_request(pkgindex, "numpy==1.26.4"))
    assert none.resolves is None and "program not found" in none.reason
    assert "### Resolution not checked" in render_markdown(none)


def test_an_index_page_whose_files_are_missing_is_not_checked(tmp_path: Path) -> None:
    # The page lists a wheel the host no longer has (404): uv never got to resolving,
    # so nothing is said of the pins (it read as "does not resolve" with uv's fetch error).
    from tests.fixtures.pkgindex.index import serve

    wheel = "idna-3.8-py3-none-any.whl"
    page = tmp_path / "index" / "simple" / "idna" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../files/{wheel}#sha256={"0" * 64}">{wheel}</a>')
    with serve(tmp_path / "index") as url:
        found = check_resolves(CheckRequest(("idna==3.8",), "3.11", f"{url}/simple"))
    assert found.resolves is None
    assert found.reason.startswith("the index could not be used (not-found")


def test_a_build_whose_metadata_needs_torch_is_read_from_its_declared_dependencies(
    pkgindex: PkgIndex,
) -> None:
    # fixture-attn's setup imports torch to give its dependencies (as flash-attn's does):
    # uv cannot read them in isolation, so without the spec's requires-dist nothing is
    # said; with it, uv takes them as the lock does (dependency-metadata).
    attn = ("fixture-attn==2.0.0",)
    blind = check_resolves(_request(pkgindex, *attn, builds=("fixture-attn",)))
    assert blind.resolves is None and blind.reason.startswith("fixture-attn is a build whose")
    declared = dataclasses.replace(
        _request(pkgindex, *attn, builds=("fixture-attn",)),
        dependency_metadata=(("fixture-attn", ("packaging>=24",)),),
    )
    found = check_resolves(declared)
    assert found.resolves is True and "packaging==24.1" in found.resolved


def test_the_builds_are_the_ones_the_lock_knows_from_the_written_spec() -> None:
    from gpuenv.import_check import _lock_builds

    spec = """
[project]
name = "p"
[stack]
python = "3.11"
torch = "2.4.1"
[targets.cpu]
gpu = "none"
[pip]
dependencies = ["fixture-attn==2.0.0", "flash-attn==2.6.3", "numpy==1.26.4"]
[pip.build.fixture-attn]
requires-dist = ["packaging>=24"]
"""
    found = dict(_lock_builds(spec))
    assert found["fixture-attn"] == ("packaging>=24",)
    assert "flash-attn" in found  # the knowledge base: always compiled against torch
    assert "numpy" not in found
    assert _lock_builds("not = [a spec") == []


def test_uv_refused_by_the_index_is_not_checked() -> None:
    # The pages came from the cache; uv, asking the index itself, is refused.
    index = f"http://u:pw-77e@127.0.0.1:{closed_port()}/simple"
    found = check_resolves(CheckRequest(("numpy==1.26.4",), "3.11", index))
    assert found.resolves is None
    assert found.reason.startswith("the index could not be used (refused")
    assert "pw-77e" not in found.reason + found.index + render_markdown(found)


@pytest.mark.parametrize(
    ("platform", "uv_platform"),
    [
        ("linux-aarch64", "aarch64-manylinux_2_28"),
        ("osx-arm64", "aarch64-apple-darwin"),
        ("win-64", "x86_64-pc-windows-msvc"),
    ],
)
def test_the_target_platform_is_resolved_for_never_this_machine(
    pkgindex: PkgIndex, platform: str, uv_platform: str
) -> None:
    # pillow 10.4.0 has manylinux_2_28, macOS and Windows wheels: each target finds one.
    request = dataclasses.replace(
        _request(pkgindex, "numpy==1.26.4", "pillow==10.4.0"), platform=platform, macos="14.0"
    )
    found = check_resolves(request)
    assert (found.resolves, found.platform) == (True, uv_platform), found.reason
    old_glibc = dataclasses.replace(request, platform="linux-64", glibc="2.17")
    refused = check_resolves(old_glibc)  # pillow 10.4.0 has no manylinux2014 wheel
    assert refused.resolves is False and refused.packages == ("pillow",)  # no wheel tags
    assert refused.instead is not None and "glibc 2.28 or newer" in refused.instead


def test_with_the_spec_on_stdout_the_check_goes_to_stderr_and_sets_the_code(
    cli: Callable[..., CliResult], index_env: PkgIndex, tmp_path: Path
) -> None:
    req = _requirements(tmp_path, "torch==2.4.1\ntransformers==4.44.2\ntokenizers==0.20.0\n")
    result = cli("import", str(req), "--gpu", "none", "-o", "-")
    assert result.code == 1
    assert result.out.startswith("# Written by `gpuenv import`")
    assert "### Does not resolve" in result.err and "### Does not resolve" not in result.out


def test_an_unwritable_folder_is_refused_before_the_index_is_asked(
    cli: Callable[..., CliResult],
    index_env: PkgIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # The suite runs as root, for whom permission bits say nothing: the folder answers
    # access() as a read-only file system does.
    import os

    from gpuenv import import_check

    folder = tmp_path / "read-only"
    folder.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if Path(p) == folder else real(p, m))

    def asked(*_args: object) -> None:
        raise AssertionError("resolved before refusing")

    monkeypatch.setattr(import_check, "check_reproduction", asked)
    req = _requirements(tmp_path, "torch==2.4.1\nnumpy==1.26.4\n")
    result = cli("import", str(req), "--gpu", "none", "-o", str(folder / "sub" / "gpuenv.toml"))
    assert result.code == 2 and f"cannot write in {folder}" in result.err
    assert list(folder.iterdir()) == []


def test_a_pin_moved_for_a_wheel_that_breaks_the_resolution_is_kept_as_a_build(
    run_import: Callable[..., Imported], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real-ESRGAN's cog.yaml pins basicsr==1.4.2, published as an sdist only; the import
    # moved it to 1.3.3.3, the nearest release with a wheel, and its gfpgan>=1.3.5 needs
    # basicsr>=1.4.2: uv found no solution. The paper's pin is kept as a source build.
    import hashlib
    import html
    from urllib.parse import quote

    from tests.fixtures.pkgindex.index import serve, write_index
    from tests.fixtures.pkgindex.wheels import WheelSpec
    from tests.fixtures.sdists import SdistSpec, build_sdist

    root = tmp_path / "index"
    write_index(
        root,
        "simple",
        [
            WheelSpec("restorer", "1.3.3"),
            WheelSpec("faceup", "1.3.5", requires=("restorer>=1.4.2",)),
        ],
        files_path="files",
    )
    sdist = SdistSpec("restorer", "1.4.2", "restorer", needs_torch=False)
    data = build_sdist(sdist)
    (root / "files" / sdist.filename).write_bytes(data)
    page = root / "simple" / "restorer" / "index.html"
    link = (
        f'<a href="../../files/{quote(sdist.filename)}#sha256={hashlib.sha256(data).hexdigest()}">'
        f"{html.escape(sdist.filename)}</a><br/>\n"
    )
    page.write_text(page.read_text().replace("</body>", link + "</body>"))
    req = _requirements(tmp_path, "torch==2.4.1\nrestorer==1.4.2\nfaceup>=1.3.5\n")
    with serve(root) as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        imported = run_import(req, target="cpu")
    assert imported.result.code == 0, imported.result.out + imported.result.err
    assert imported.report["resolves"] is True
    kept = imported.entries("needs_build")["restorer"]
    assert (kept["from"], kept["to"]) == ("1.4.2", "1.4.2")
    assert kept["why"] == (
        "1.4.2 has no wheel on the index (source only); kept and built from its source "
        "archive at install: 1.3.3, the nearest release with a wheel, does not resolve with "
        "the other pins (all versions of faceup depend on restorer>=1.4.2 and the request "
        "requires restorer==1.3.3)"
    )
    assert "restorer" not in imported.entries("changed")
    assert '"restorer==1.4.2"' in imported.spec.read_text()


# uv's words for cuml-cu11's placeholder sdist (dinov2's conda-extras.yaml on a CPU
# target, the NVIDIA index not carried over), trimmed.
CUML_FAILURE = """error: Failed to build `cuml-cu11==24.8.0`
  cause: The build backend returned an error
  cause: Call to `nvidia_stub.buildapi.build_wheel` failed (exit status: 1)

         [stderr]
         Traceback (most recent call last):
         nvidia_stub.error.InstallFailedError:
         The installation of cuml-cu11 for version 24.8.0 failed.

         You might try installing this package via
         ```
         $ pip install --extra-index-url https://pypi.nvidia.com cuml-cu11
         ```

hint: Build failures usually indicate a problem with the package or the build environment
"""


def test_a_package_whose_build_fails_does_not_resolve_and_is_named() -> None:
    """It was "not checked", with uv's closing hint as the only reason."""
    from gpuenv import import_check
    from gpuenv._network import Index

    request = CheckRequest(("cuml-cu11",), "3.9", "http://i.example/simple")
    index = Index.parse("default", request.index)
    found = import_check._build_failure(request, index, "x86_64-manylinux_2_28", CUML_FAILURE)
    assert found is not None and found.resolves is False
    assert found.packages == ("cuml-cu11",)
    assert found.reason.startswith(
        "cuml-cu11 24.8.0 fails to build from its source archive, which uv must do to read "
        "its dependencies (Call to `nvidia_stub.buildapi.build_wheel` failed"
    )
    assert found.instead == (
        "its wheels are on https://pypi.nvidia.com: add that index to [pip] extra-index-urls"
    )
    text = "error: something else entirely\nhint: a hint"
    assert import_check._build_failure(request, index, "x86_64-manylinux_2_28", text) is None


def test_a_dependencys_marker_in_uvs_words_names_no_package() -> None:
    """huggingface/lerobot's check failed with uv's words "torch==2.11.0 depends on
    cuda-bindings{sys_platform == 'linux'}>=13.0.3", and the report listed `sys-platform`
    among the packages named."""
    from gpuenv.import_check import _Inputs, _named

    reason = (
        "Because torch==2.11.0 depends on cuda-bindings{sys_platform == 'linux'}>=13.0.3 and "
        "accelerate==1.14.0 depends on torch==2.11.0, we can conclude that accelerate==1.14.0 "
        "depends on cuda-bindings>=13.0.3. And because the request requires accelerate==1.14.0 "
        "and cuda-bindings==12.9.7, we can conclude that the requirements are unsatisfiable."
    )
    named = _named(reason, _Inputs((), (), (), ()), None)
    assert named == ("torch", "cuda-bindings", "accelerate"), named


def _lerobot_index(root: Path) -> None:
    """huggingface/lerobot's shape: the default index's torch 2.11.0 is the CUDA 13 build
    (``cuda-bindings>=13.0.3``), while its uv.lock holds ``torch 2.11.0+cu128`` (uv.lock:6571,
    from the cu128 index) with ``cuda-bindings 12.9.7`` (uv.lock:1008), and
    ``accelerate 1.14.0`` (uv.lock:44) needs torch."""
    from tests.fixtures.pkgindex.index import write_index
    from tests.fixtures.pkgindex.wheels import WheelSpec

    linux = ("cp312-cp312-manylinux_2_28_x86_64",)
    write_index(
        root,
        "simple",
        [
            WheelSpec(
                "torch", "2.11.0", linux, ("cuda-bindings>=13.0.3; sys_platform == 'linux'",)
            ),
            WheelSpec("cuda-bindings", "12.9.7"),
            WheelSpec("cuda-bindings", "13.0.3"),
            WheelSpec("accelerate", "1.14.0", requires=("torch>=2.0.0",)),
        ],
    )


def test_a_planned_torch_of_another_build_is_not_judged_by_the_index_builds_dependencies(
    tmp_path: Path,
) -> None:
    """huggingface/lerobot on an RTX 4090: the plan keeps torch 2.11.0+cu128, and the
    check read the default index's 2.11.0, the CUDA 13 build, so 'accelerate==1.14.0
    depends on cuda-bindings>=13.0.3' made lerobot's own cuda-bindings==12.9.7 a false
    "does not resolve". The planned build's dependencies are named as not checked."""
    from tests.fixtures.pkgindex.index import serve

    _lerobot_index(tmp_path / "index")
    pins = ("accelerate==1.14.0", "cuda-bindings==12.9.7")
    with serve(tmp_path / "index") as url:
        planned = CheckRequest(
            pins, "3.12", f"{url}/simple", torch=("torch==2.11.0+cu128",), torch_elsewhere=True
        )
        found = check_resolves(planned)
        # the index's own build planned: its dependencies are the planned ones, judged
        default = check_resolves(
            dataclasses.replace(planned, torch=("torch==2.11.0",), torch_elsewhere=False)
        )
    assert found.resolves is True, found.reason
    assert {"accelerate==1.14.0", "cuda-bindings==12.9.7", "torch==2.11.0"} <= set(found.resolved)
    assert found.left_out == (
        "the dependencies of torch 2.11.0+cu128 itself: this index's torch 2.11.0 is another "
        "build, whose dependencies need not be this one's (`gpuenv lock` resolves them from "
        "the build's own index)",
    )
    assert "Not part of the check:\n- the dependencies of torch 2.11.0+cu128" in render_markdown(
        found
    )
    assert default.resolves is False and default.left_out == ()
    assert "cuda-bindings" in default.packages


def test_the_import_says_which_planned_torch_builds_dependencies_are_not_checked(
    run_import: Callable[..., Imported], index_env: PkgIndex, tmp_path: Path
) -> None:
    # PyPI's torch 2.4.1 is the cu121 build: a cu124 plan's dependencies are on its index
    note = "the dependencies of torch 2.4.1+cu124 itself: this index's torch 2.4.1 is another"
    other = run_import(_requirements(tmp_path, "torch==2.4.1+cu124\nnumpy==1.26.4\n"))
    assert other.result.code == 0, other.result.err
    assert other.torch() == "2.4.1+cu124"
    assert [r for r in other.report["resolution"]["left_out"] if r.startswith(note)]
    default = run_import(_requirements(tmp_path, "torch==2.4.1+cu121\nnumpy==1.26.4\n"))
    assert default.result.code == 0, default.result.err
    assert default.torch() == "2.4.1+cu121"
    assert not [r for r in default.report["resolution"]["left_out"] if "itself" in r]


def test_the_count_of_checked_dependencies_is_said_in_the_right_number() -> None:
    """microsoft/LoRA's one dependency (loralib) was "The 1 pip dependencies resolve"."""
    from gpuenv.import_check import ResolveCheck

    one = ResolveCheck(True, "", "https://example.invalid/simple", "3.10", "linux", checked=1)
    assert "The 1 pip dependency resolves for Python 3.10" in render_markdown(one)
    three = dataclasses.replace(one, checked=3)
    assert "The 3 pip dependencies resolve for Python 3.10" in render_markdown(three)
    failed = dataclasses.replace(one, resolves=False, reason="no version of x")
    assert "uv found no set of the 1 pip dependency for Python 3.10" in render_markdown(failed)


# uv 0.13's annotated output (tensorflowjs resolved): who requires each pin
UV_ANNOTATED = """tensorboard==2.19.0
    # via tensorflow
tensorflow==2.19.0
    # via
    #   tensorflow-decision-forests
    #   tensorflowjs
    #   tf-keras
tensorflowjs==4.22.0
    # via -r gpuenv-lock-request/pyproject.toml
"""


def test_the_packages_that_require_each_pin_are_read_from_uvs_annotations() -> None:
    from gpuenv.import_check import _via

    via = dict(_via(UV_ANNOTATED))
    assert via["tensorboard"] == ("tensorflow",)
    assert via["tensorflow"] == ("tensorflow-decision-forests", "tensorflowjs", "tf-keras")
    assert via["tensorflowjs"] == ()


def test_a_framework_left_out_that_a_requirement_brings_back_is_said(
    run_import: Callable[..., Imported], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ultralytics/yolov5: the report said tensorflow was left out, and tensorflowjs,
    written, brought tensorflow 2.21.0 into the lock (outside yolov5's <=2.19.0)."""
    import importlib

    from gpuenv.import_check import ResolveCheck
    from tests.fixtures.pkgindex.index import Serve, serve

    check = importlib.import_module("gpuenv.import_check")
    answer = ResolveCheck(
        True,
        "uv resolved them",
        "http://index.test/simple",
        "3.11",
        "x86_64-manylinux_2_28",
        resolved=("tensorflowjs==3.18.0", "tensorflow==2.21.0"),
        via=(("tensorflow", ("tensorflowjs",)), ("tensorflowjs", ())),
    )
    monkeypatch.setattr(check, "check_reproduction", lambda *args, **kwargs: answer)
    (tmp_path / "index" / "simple").mkdir(parents=True)
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "requirements.txt").write_text(
        "torch==2.4.1\ntensorflow>=2.0.0,<=2.19.0\ntensorflowjs>=3.9.0\n"
    )
    with serve(tmp_path / "index", options=Serve()) as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        imported = run_import(paper)
    assert imported.result.code == 0, imported.result.err
    said = [e["why"] for e in imported.report["assumptions"]]
    assert (
        "tensorflow is left out of the spec, but tensorflowjs requires it: the lock installs "
        "tensorflow 2.21.0 all the same (leave those out too to keep it out)"
    ) in said, said


def test_an_unnamed_python_on_which_less_is_built_from_source_is_taken(
    run_import: Callable[..., Imported], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """guoyww/AnimateDiff names no Python: the newest torch 2.3.1 supports, 3.12, made
    transformers==4.25.1's tokenizers<0.14 a source build (no cp312 wheel; its build
    needs Rust). The next older Python on which less is built is taken, and said."""
    import importlib

    from gpuenv.import_check import ResolveCheck
    from tests.fixtures.pkgindex.index import Serve, serve

    check = importlib.import_module("gpuenv.import_check")
    seen: list[str] = []

    def answer(reproduction, index, failure, cache_dir):  # uv's resolution, stubbed
        python = reproduction.decision.plan.python
        seen.append(python)
        built = ("ffmpy", "tokenizers") if python == "3.12" else ("ffmpy",)
        return ResolveCheck(True, "", index, python, "x86_64-manylinux_2_28", built=built)

    monkeypatch.setattr(check, "check_reproduction", answer)
    (tmp_path / "index" / "simple").mkdir(parents=True)
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "requirements.txt").write_text("torch==2.3.1\ntransformers==4.25.1\n")
    with serve(tmp_path / "index", options=Serve()) as url:
        monkeypatch.setenv("GPUENV_IMPORT_INDEX", f"{url}/simple")
        imported = run_import(paper, target="h100")
        assert imported.result.code == 0, imported.result.err
        assert seen[0] == "3.12" and seen[-1] == "3.11", seen
        said = [e["why"] for e in imported.report["assumptions"] if e.get("package") == "python"]
        assert said == [
            "no Python named in the files: Python 3.11, the newest torch 2.3.1 supports where "
            "fewer dependencies are built from source (tokenizers has no wheel for Python 3.12)"
        ], said
        assert 'python = "3.11"' in imported.spec.read_text()
        # a Python the files name is theirs: nothing else is tried
        seen.clear()
        (paper / "requirements.txt").write_text("torch==2.3.1\ntransformers==4.25.1\n")
        (paper / ".python-version").write_text("3.12\n")
        imported = run_import(paper, target="h100")
        assert imported.result.code == 0, imported.result.err
        assert set(seen) == {"3.12"}, seen
        # a range leaves the choice to gpuenv, within it (openai/whisper: >=3.8)
        seen.clear()
        (paper / ".python-version").unlink()
        (paper / "pyproject.toml").write_text(
            '[project]\nname = "p"\nversion = "1"\nrequires-python = ">=3.11"\n'
        )
        imported = run_import(paper, target="h100")
        assert imported.result.code == 0, imported.result.err
        assert seen[0] == "3.12" and seen[-1] == "3.11" and "3.10" not in seen, seen
        assert 'python = "3.11"' in imported.spec.read_text()
