"""The uv backend against the local index: real uv, real wheels, served on loopback."""

from __future__ import annotations

import dataclasses
import re
import socket
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from gpuenv._redact import redact
from gpuenv.errors import NetworkError, NoCompatiblePlan
from gpuenv.lock._uv_output import explain_unsatisfiable
from gpuenv.lock.model import PipPackage, PipRequest
from gpuenv.lock.uv import (
    UvResolver,
    parse_annotated,
    target_platform,
    target_tags,
)
from tests.fixtures.pkgindex.plugin import AUTH_PASSWORD, AUTH_USER, PkgIndex

FAMILY = {"torch", "torchvision", "torchaudio", "triton"}


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture(scope="module")
def resolver() -> UvResolver:
    return UvResolver(timeout=120)


@pytest.fixture
def resolve(resolver: UvResolver, pkgindex: PkgIndex, uv_cache: Path):
    """Resolve against the local index; returns ``{name: PipPackage}``."""

    def run(*requirements: str, tag: str | None = "cu124", **kwargs) -> dict[str, PipPackage]:
        kwargs.setdefault("python", "3.11")
        kwargs.setdefault("default_index", pkgindex.default_index)
        kwargs.setdefault("torch_index", pkgindex.torch_index(tag) if tag else None)
        kwargs.setdefault("cache_dir", uv_cache)
        request = PipRequest(requirements=requirements, **kwargs)
        return {p.name: p for p in resolver.resolve(request)}

    return run


def expected_url(base: str, filename: str) -> str:
    return f"{base}/{quote(filename)}"


# -- the right build, from the right index, exactly ----------------------------------------


@pytest.mark.parametrize(
    ("tag", "runtime", "cublas"),
    [("cu121", "12.1.105", "12.1.3.1"), ("cu124", "12.4.127", "12.4.5.8")],
)
def test_cu_build_resolved_exactly_from_its_sub_index(
    resolve, pkgindex: PkgIndex, tag: str, runtime: str, cublas: str
) -> None:
    got = resolve("torch==2.4.1", "torchvision==0.19.1", "torchaudio==2.4.1", tag=tag)

    torch = got["torch"]
    assert torch.version == f"2.4.1+{tag}"
    assert torch.filename == f"torch-2.4.1+{tag}-cp311-cp311-linux_x86_64.whl"
    art = pkgindex.artifact(torch.filename, f"whl/{tag}")
    assert torch.url == expected_url(pkgindex.torch_index(tag), torch.filename)
    assert torch.sha256 == art.sha256
    assert torch.index == pkgindex.torch_index(tag)
    assert got["torchvision"].version == f"0.19.1+{tag}"
    assert got["torchaudio"].version == f"2.4.1+{tag}"
    assert got["nvidia-cuda-runtime-cu12"].version == runtime
    assert got["nvidia-cublas-cu12"].version == cublas
    # Edges: what torch and its companions require in this resolution.
    assert {"nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12", "nvidia-nccl-cu12", "triton"} <= set(
        torch.requires
    )
    assert "torch" in got["torchvision"].requires
    assert got["torchaudio"].requires == ("torch",)
    assert got["nvidia-cudnn-cu12"].requires == ("nvidia-cublas-cu12",)
    # Every package is pinned by URL and sha256, each a file the index really serves.
    for package in got.values():
        index_path = urlsplit(package.index or "").path.strip("/")
        artifact = pkgindex.artifact(package.filename, index_path)
        assert package.sha256 == artifact.sha256, package.name
        assert re.fullmatch(r"[0-9a-f]{64}", package.sha256)


def test_torch_family_never_taken_from_the_default_index(resolve, pkgindex: PkgIndex) -> None:
    # The default index has a newer torch (2.5.0) and its own triton; the torch index
    # has older filelock/numpy/fsspec copies. Neither may leak across.
    got = resolve("torch>=2.4", "torchvision", "transformers>=4.44")

    assert got["torch"].version == "2.4.1+cu124"
    for name in FAMILY & set(got):
        assert got[name].index == pkgindex.torch_index("cu124"), name
        assert got[name].url.startswith(pkgindex.torch_index("cu124") + "/"), name
    # triton is only a transitive requirement (of torch): still from the torch index.
    assert "triton" in got and "triton" in got["torch"].requires
    for name, package in got.items():
        if name not in FAMILY:
            assert package.index == pkgindex.default_index, name
    assert got["filelock"].version == "3.16.1"  # the torch index's copy is 3.13.1
    assert got["transformers"].requires == (
        "filelock",
        "huggingface-hub",
        "numpy",
        "packaging",
        "safetensors",
        "tokenizers",
    )


def test_without_torch_index_the_default_index_serves_torch(resolve, pkgindex: PkgIndex) -> None:
    got = resolve("torch==2.4.1", tag=None)
    assert got["torch"].version == "2.4.1"  # PyPI's own build (cu121 runtime)
    assert got["torch"].index == pkgindex.default_index
    assert got["nvidia-cuda-runtime-cu12"].version == "12.1.105"


def test_mislabelled_build_on_a_mirror_is_reported_as_found(resolve, pkgindex: PkgIndex) -> None:
    """The backend reports what the index holds; the lock's check against the plan
    catches the +cu121 wheel sitting in the cu124 index."""
    got = resolve(
        "torch==2.4.1", "torchvision==0.19.1", torch_index=f"{pkgindex.bad_torch_base}/cu124"
    )
    assert got["torch"].version == "2.4.1+cu121"
    assert got["torch"].index == f"{pkgindex.bad_torch_base}/cu124"
    assert got["nvidia-cuda-runtime-cu12"].version == "12.1.105"
    assert got["torchvision"].version == "0.19.1+cu124"


# -- for the target, not this machine ------------------------------------------------------


@pytest.mark.parametrize("python", ["3.10", "3.11"])
def test_python_version_picks_matching_wheels_and_markers(resolve, python: str) -> None:
    got = resolve("torch==2.4.1", "anyio", python=python)
    cp = "cp" + python.replace(".", "")
    assert got["torch"].filename == f"torch-2.4.1+cu124-{cp}-{cp}-linux_x86_64.whl"
    assert f"-{cp}-" in got["triton"].filename
    old = python == "3.10"
    assert ("exceptiongroup" in got) is old
    assert ("exceptiongroup" in got["anyio"].requires) is old


def test_exact_python_version_is_accepted(resolve) -> None:
    got = resolve("torch==2.4.1", python="3.11.9")
    assert "-cp311-" in got["torch"].filename


@pytest.mark.parametrize(
    ("platform", "filename"),
    [
        ("linux-64", "torch-2.4.1+cpu-cp311-cp311-linux_x86_64.whl"),
        (
            "linux-aarch64",
            "torch-2.4.1-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
        ),
    ],
)
def test_platform_picks_matching_wheels(
    resolve, pkgindex: PkgIndex, platform: str, filename: str
) -> None:
    got = resolve("torch==2.4.1", "torchvision", "numpy", tag="cpu", platform=platform)
    assert got["torch"].filename == filename
    assert got["torch"].index == pkgindex.torch_index("cpu")
    arch = "aarch64" if platform == "linux-aarch64" else "x86_64"
    assert arch in got["numpy"].filename
    assert not any(name.startswith("nvidia-") for name in got)


@pytest.mark.parametrize(
    ("glibc", "pillow"), [("2.17", "10.3.0"), ("2.28", "10.4.0"), ("2.35", "10.4.0")]
)
def test_glibc_level_limits_manylinux_wheels(resolve, glibc: str, pillow: str) -> None:
    got = resolve("pillow", tag=None, glibc=glibc)
    assert got["pillow"].version == pillow


# -- preferences ----------------------------------------------------------------------------


def _pin(name: str, version: str) -> PipPackage:
    return PipPackage(
        name=name, version=version, url="http://example.invalid/x.whl", sha256="0" * 64
    )


def test_preferences_keep_an_older_pin_that_still_fits(resolve) -> None:
    assert resolve("transformers>=4.44", tag=None)["transformers"].version == "4.45.0"

    got = resolve(
        "transformers>=4.44",
        tag=None,
        preferences=(_pin("transformers", "4.44.2"), _pin("tokenizers", "0.19.1")),
    )
    assert got["transformers"].version == "4.44.2"
    assert got["tokenizers"].version == "0.19.1"


def test_preferences_that_no_longer_fit_are_dropped(resolve) -> None:
    got = resolve("transformers>=4.45", tag=None, preferences=(_pin("transformers", "4.44.2"),))
    assert got["transformers"].version == "4.45.0"


# -- failures -------------------------------------------------------------------------------


def test_unresolvable_request_says_why_in_plain_words(resolve) -> None:
    with pytest.raises(NoCompatiblePlan) as caught:
        resolve("transformers==4.44.2", "tokenizers>=0.20", tag=None)
    err = caught.value
    assert err.exit_code == 3
    assert "tokenizers" in err.message and "transformers" in err.message
    assert "Python 3.11" in err.message
    assert "\n" not in err.message
    for noise in ("\u00d7", "\u2570", "cause:", "gpuenv-lock-request"):
        assert noise not in err.message


def test_no_wheel_for_the_target_platform_is_unsatisfiable(resolve) -> None:
    with pytest.raises(NoCompatiblePlan) as caught:
        resolve("torch==2.4.1", platform="linux-aarch64")  # cu124 has x86_64 wheels only
    assert "torch" in caught.value.message
    assert "aarch64" in caught.value.message


def test_a_missing_build_index_is_a_404_naming_the_url_not_unsatisfiable(
    resolve, pkgindex: PkgIndex
) -> None:
    with pytest.raises(NetworkError) as caught:
        resolve("torch==2.4.1", torch_index=pkgindex.torch_index("cu126"))
    error = caught.value
    assert error.exit_code == 5 and error.cause == "not-found"
    assert f"{pkgindex.torch_index('cu126')}/torch/" in error.message
    assert error.url == f"{pkgindex.torch_index('cu126')}/torch/"
    assert "there is no cu126 index" in (error.hint or "")


# -- credentials -----------------------------------------------------------------------------


def test_credentials_are_used_but_never_returned(
    resolver: UvResolver, pkgindex_auth: PkgIndex, uv_cache: Path
) -> None:
    assert AUTH_PASSWORD in pkgindex_auth.default_index  # the fixture's URLs carry them
    request = PipRequest(
        requirements=("torch==2.4.1", "transformers"),
        python="3.11",
        default_index=pkgindex_auth.default_index,
        torch_index=pkgindex_auth.torch_index("cu124"),
        cache_dir=uv_cache,
    )
    got = {p.name: p for p in resolver.resolve(request)}
    assert got["torch"].version == "2.4.1+cu124"
    for package in got.values():
        for text in (package.url, package.index or ""):
            assert AUTH_PASSWORD not in text and AUTH_USER not in text and "@" not in text


def test_unresolvable_with_credentials_does_not_leak_them(
    resolver: UvResolver, pkgindex_auth: PkgIndex, uv_cache: Path
) -> None:
    request = PipRequest(
        requirements=("torch==9.9",),
        python="3.11",
        default_index=pkgindex_auth.default_index,
        torch_index=pkgindex_auth.torch_index("cu124"),
        cache_dir=uv_cache,
    )
    with pytest.raises(NoCompatiblePlan) as caught:
        resolver.resolve(request)
    assert AUTH_PASSWORD not in str(caught.value) + (caught.value.hint or "")


# -- pieces, without uv ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "glibc", "expected"),
    [
        ("linux-64", "2.28", "x86_64-manylinux_2_28"),
        ("linux-64", "2.30", "x86_64-manylinux_2_28"),
        ("linux-64", "2.35", "x86_64-manylinux_2_35"),
        ("linux-64", "2.17", "x86_64-manylinux_2_17"),
        ("linux-aarch64", "2.31", "aarch64-manylinux_2_31"),
    ],
)
def test_target_platform(platform: str, glibc: str, expected: str) -> None:
    request = PipRequest(requirements=(), python="3.11", platform=platform, glibc=glibc)
    assert target_platform(request) == expected


@pytest.mark.parametrize(("platform", "glibc"), [("linux-64", "2.12"), ("linux-ppc64le", "2.28")])
def test_target_platform_refuses_what_it_cannot_resolve_for(platform: str, glibc: str) -> None:
    with pytest.raises(NoCompatiblePlan):
        target_platform(PipRequest(requirements=(), python="3.11", platform=platform, glibc=glibc))


def test_target_tags_rank_newest_manylinux_first() -> None:
    tags = [str(t) for t in target_tags(PipRequest(requirements=(), python="3.10", glibc="2.28"))]
    assert tags[0] == "cp310-cp310-manylinux_2_28_x86_64"
    assert tags.index("cp310-cp310-manylinux2014_x86_64") < tags.index("cp310-cp310-linux_x86_64")
    assert "py3-none-any" in tags
    assert not any("aarch64" in t or "cp311" in t for t in tags)


def test_parse_annotated_reads_versions_indexes_and_parents() -> None:
    text = """\
filelock==3.16.1
    # via
    #   huggingface-hub
    #   torch
    # from http://u:p@127.0.0.1:1/simple
torch==2.4.1+cu124
    # via
    #   gpuenv-lock-request (pyproject.toml)
    #   torchvision[extra]
    # from http://127.0.0.1:1/whl/cu124
idna==3.8
    # via -r requirements.in
"""
    got = parse_annotated(text)
    assert got["filelock"].parents == ("huggingface-hub", "torch")
    assert got["filelock"].index == "http://127.0.0.1:1/simple"
    assert got["torch"].version == "2.4.1+cu124"
    assert got["torch"].parents == ("torchvision",)
    assert got["idna"].parents == () and got["idna"].index is None


def test_explain_unsatisfiable_flattens_uv_output() -> None:
    text = """error: No solution found when resolving dependencies
  cause: Because torch==2.4.1+cu124 has no wheels with a matching platform tag and gpuenv-lock-request depends on torch==2.4.1, we can conclude that
         your project's requirements are unsatisfiable.

hint: Wheels are available for `torch` on https://user:pw@mirror.invalid/whl: `linux_x86_64`"""
    message, hint = explain_unsatisfiable(text)
    assert message.startswith("Because torch==2.4.1+cu124 has no wheels")
    assert "the request requires torch==2.4.1" in message
    assert "the request's requirements are unsatisfiable" in message
    assert hint == "Wheels are available for `torch` on https://mirror.invalid/whl: `linux_x86_64`"


def test_credentials_in_uv_text_are_redacted() -> None:
    assert (
        redact("see http://a:b@h/x and https://tok@h2/y?token=t1&v=1, ftp://h3/")
        == "see http://h/x and https://h2/y?v=1, ftp://h3/"
    )


# -- the real default index (network) --------------------------------------------------------


def _default_index_host(resolver: UvResolver) -> str | None:
    """The host of uv's default index, read from uv itself (never written here)."""
    from gpuenv import _proc

    text = _proc.run([resolver.uv_bin, "pip", "compile", "--help"], timeout=30).stdout
    match = re.search(r"by default: <(https?://[^>]+)>", text)
    return urlsplit(match.group(1)).hostname if match else None


@pytest.mark.network
def test_resolves_a_small_real_requirement_against_the_default_index(
    resolver: UvResolver, tmp_path: Path
) -> None:
    host = _default_index_host(resolver)
    if host is None:
        pytest.skip("cannot tell uv's default index")
    try:
        socket.create_connection((host, 443), timeout=2).close()
    except OSError:
        pytest.skip(f"offline: {host} not reachable")
    request = PipRequest(requirements=("idna==3.8",), python="3.11", cache_dir=tmp_path)
    (idna,) = resolver.resolve(request)
    assert idna.name == "idna" and idna.version == "3.8"
    assert idna.filename == "idna-3.8-py3-none-any.whl"
    assert re.fullmatch(r"[0-9a-f]{64}", idna.sha256)
    assert idna.index and idna.index.startswith("https://")
    default = resolver.default_index_url(timeout=0)  # stated by that resolution itself
    assert default is not None and urlsplit(default).hostname == host


# -- relocking ---------------------------------------------------------------------------


@pytest.fixture
def uv_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    from unittest.mock import create_autospec

    from gpuenv import _proc
    from gpuenv.lock import uv as uv_module

    calls: list[tuple[str, ...]] = []
    real = _proc.run

    def record(argv, **kwargs):
        calls.append(tuple(str(a) for a in argv))
        return real(argv, **kwargs)

    # A spy with _proc.run's own signature: a call the real one refuses fails here too.
    monkeypatch.setattr(uv_module._proc, "run", create_autospec(real, side_effect=record))
    return calls


def test_relock_with_the_previous_pins_is_identical_and_takes_one_attempt(
    resolver: UvResolver, pkgindex: PkgIndex, uv_cache: Path, uv_calls: list[tuple[str, ...]]
) -> None:
    request = PipRequest(
        requirements=("torch==2.4.1", "transformers"),
        python="3.11",
        default_index=pkgindex.default_index,
        torch_index=pkgindex.torch_index("cu124"),
        cache_dir=uv_cache,
    )
    first = resolver.resolve(request)
    assert len(uv_calls) == 2  # a CUDA build on x86_64: triton is pinned to its index at once
    assert any(p.name == "triton" and p.index == pkgindex.torch_index("cu124") for p in first)
    uv_calls.clear()

    again = resolver.resolve(dataclasses.replace(request, preferences=first))
    assert again == first
    assert len(uv_calls) == 2  # triton promoted from the start


def test_stale_family_pin_is_dropped_when_nothing_needs_it(resolve) -> None:
    cuda = tuple(resolve("torch==2.4.1", tag="cu124").values())
    assert any(p.name == "triton" for p in cuda)
    # The same request relocked for the CPU build: torch+cpu needs no triton.
    got = resolve("torch==2.4.1", tag="cpu", preferences=cuda)
    assert got["torch"].version == "2.4.1+cpu"
    assert "triton" not in got


def test_without_a_default_index_uv_chooses_and_nothing_names_one(tmp_path: Path) -> None:
    from gpuenv._network import Index
    from gpuenv.lock.uv import _Run, _write_project

    request = PipRequest(requirements=("idna",), python="3.11")
    run = _Run(request, tmp_path, "x86_64-manylinux_2_28", None, (), None)
    argv = [str(a) for a in UvResolver(uv_bin="uv")._base_argv(run, tmp_path / "p.toml")]
    assert "--default-index" not in argv and "--index" not in argv
    assert "--no-config" in argv
    env = run.env()
    assert env["UV_NO_CONFIG"] == "1" and env["UV_PYTHON_DOWNLOADS"] == "never"

    with_creds = Index.parse("gpuenv-torch", "https://me:tok%40en@mirror.invalid/whl/cu124")
    assert with_creds.url == "https://mirror.invalid/whl/cu124"
    assert with_creds.env() == {
        "UV_INDEX_GPUENV_TORCH_USERNAME": "me",
        "UV_INDEX_GPUENV_TORCH_PASSWORD": "tok@en",
    }
    run = _Run(request, tmp_path, "x86_64-manylinux_2_28", None, (), with_creds)
    text = _write_project(tmp_path, run, frozenset({"triton"})).read_text()
    assert "me:" not in text and "tok" not in text and "@" not in text
    assert 'triton = { index = "gpuenv-torch" }' in text


def test_user_uv_settings_in_the_environment_are_ignored(
    resolve, pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_EXTRA_INDEX_URL", "http://127.0.0.1:9/extra")
    monkeypatch.setenv("UV_CONSTRAINT", "/nonexistent/constraints.txt")
    monkeypatch.setenv("UV_INDEX_STRATEGY", "unsafe-best-match")
    got = resolve("torch==2.4.1")
    assert got["torch"].version == "2.4.1+cu124"
    assert got["filelock"].index == pkgindex.default_index


# -- one resolution's cost -----------------------------------------------------------------


def test_the_artifacts_are_read_offline_from_what_the_first_run_fetched(
    resolver: UvResolver, serve_index, tmp_path: Path, uv_calls: list[tuple[str, ...]]
) -> None:
    from tests.fixtures.pkgindex.index import Seen

    seen = Seen()
    index = serve_index(seen=seen)
    request = PipRequest(
        requirements=("torch==2.4.1", "transformers"),
        python="3.11",
        default_index=index.default_index,
        torch_index=index.torch_index("cu124"),
        cache_dir=tmp_path,  # a cold cache
    )
    got = {p.name: p for p in resolver.resolve(request)}
    assert got["torch"].version == "2.4.1+cu124" and "transformers" in got
    annotated, pylock = uv_calls
    assert "--emit-index-annotation" in annotated and "--offline" not in annotated
    assert "pylock.toml" in pylock and "--offline" in pylock
    paths = [path for path, _auth in seen.requests]
    assert paths, "the first run reads the index"
    assert len(paths) == len(set(paths)), "no page or metadata file is fetched twice"


def test_what_the_cache_cannot_answer_is_read_online(
    resolver: UvResolver,
    pkgindex: PkgIndex,
    uv_cache: Path,
    uv_calls: list[tuple[str, ...]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = UvResolver._run_uv

    def no_cache(self: UvResolver, run, argv) -> None:
        if "--offline" in [str(a) for a in argv]:
            raise NoCompatiblePlan("Because triton was not found in the cache, ...")
        real(self, run, argv)

    monkeypatch.setattr(UvResolver, "_run_uv", no_cache)
    request = PipRequest(
        requirements=("torch==2.4.1",),
        python="3.11",
        default_index=pkgindex.default_index,
        torch_index=pkgindex.torch_index("cu124"),
        cache_dir=uv_cache,
    )
    got = {p.name: p for p in resolver.resolve(request)}
    assert got["torch"].sha256 == pkgindex.artifact(got["torch"].filename, "whl/cu124").sha256
    assert ["--offline" in call for call in uv_calls] == [False, False]  # the offline try raised


def test_the_default_index_is_read_from_the_resolution_not_asked_of_uv_apart(
    pkgindex: PkgIndex, uv_cache: Path, uv_calls: list[tuple[str, ...]]
) -> None:
    import threading

    from gpuenv.lock.uv import emitted_index_url

    text = "--index-url https://me:tok@idx.invalid/simple\n\nidna==3.8\n    # via x\n"
    assert emitted_index_url(text) == "https://idx.invalid/simple"
    assert set(parse_annotated(text)) == {"idna"}

    resolver = UvResolver(timeout=120)
    waited: list[str | None] = []
    waiter = threading.Thread(target=lambda: waited.append(resolver.default_index_url()))
    waiter.start()
    request = PipRequest(
        requirements=("idna==3.8",),
        python="3.11",
        default_index=pkgindex.default_index,
        cache_dir=uv_cache,
    )
    resolver.resolve(request)
    waiter.join(10)
    assert waited == [None], "a configured default index is not uv's own: nothing learned"
    assert len(uv_calls) == 2 and all("compile" in c and "-o" in c for c in uv_calls)


def test_the_default_index_is_known_before_the_artifacts_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The look at the newest torch waits for uv's default index: it gets it as soon as
    the annotated run states it, so the page is read while the offline pass runs."""
    import subprocess

    from gpuenv.lock import uv as uv_module

    resolver = UvResolver(uv_bin="uv", timeout=30)
    seen_in_second_pass: list[str | None] = []

    class Stop(Exception):
        pass

    def fake_run(argv, **kwargs):
        output = Path(str(argv[list(map(str, argv)).index("-o") + 1]))
        if "--emit-index-url" in map(str, argv):
            output.write_text(
                "--index-url https://me:tok@idx.invalid/simple\n\nidna==3.8\n    # via x\n",
                encoding="utf-8",
            )
            return subprocess.CompletedProcess(argv, 0, "", "")
        seen_in_second_pass.append(resolver.default_index_url(timeout=0))
        raise Stop

    monkeypatch.setattr(uv_module._proc, "run", fake_run)
    request = PipRequest(requirements=("idna==3.8",), python="3.11", cache_dir=tmp_path)
    with pytest.raises(Stop):
        resolver.resolve(request)
    assert seen_in_second_pass == ["https://idx.invalid/simple"]


def test_settle_ends_a_wait_for_the_default_index() -> None:
    import threading

    resolver = UvResolver(uv_bin="uv")
    waited: list[str | None] = []
    waiter = threading.Thread(target=lambda: waited.append(resolver.default_index_url()))
    waiter.start()
    resolver.settle()
    waiter.join(10)
    assert waited == [None] and not waiter.is_alive()


@pytest.fixture
def uv_spans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, float, float]]:
    """Each uv run as (offline, start, end), in the order they ended."""
    import time
    from unittest.mock import create_autospec

    from gpuenv import _proc
    from gpuenv.lock import uv as uv_module

    spans: list[tuple[bool, float, float]] = []
    real = _proc.run

    def record(argv, **kwargs):
        start = time.monotonic()
        try:
            return real(argv, **kwargs)
        finally:
            spans.append(("--offline" in [str(a) for a in argv], start, time.monotonic()))

    monkeypatch.setattr(uv_module._proc, "run", create_autospec(real, side_effect=record))
    return spans


def test_a_request_resolved_minutes_ago_reads_its_artifacts_beside_the_resolution(
    resolver: UvResolver, pkgindex: PkgIndex, tmp_path: Path, uv_spans: list
) -> None:
    """A first resolution reads the artifacts offline after the annotated run (from what
    it fetched); the same request again within RESOLVED_FRESH reads them beside it, the
    two uv runs overlapping, with the same answer; an older note is not trusted."""
    import os
    import time

    from gpuenv.lock.uv import RESOLVED_FRESH

    request = PipRequest(
        requirements=("torch==2.4.1", "transformers"),
        python="3.11",
        default_index=pkgindex.default_index,
        torch_index=pkgindex.torch_index("cu124"),
        cache_dir=tmp_path,  # a cold cache of its own
    )
    first = resolver.resolve(request)
    (online, _, end), (offline, after, _) = uv_spans
    assert not online and offline and after >= end, "first: one after the other"
    notes = list((tmp_path / "uv-resolved").iterdir())
    assert len(notes) == 1 and notes[0].stat().st_mode & 0o777 == 0o600

    uv_spans.clear()
    assert resolver.resolve(request) == first
    by_kind = {offline: (start, end) for offline, start, end in uv_spans}
    assert len(uv_spans) == 2 and set(by_kind) == {True, False}
    assert by_kind[True][0] < by_kind[False][1], "the offline read started before the end"

    uv_spans.clear()
    old = time.time() - RESOLVED_FRESH - 60
    os.utime(notes[0], (old, old))
    assert resolver.resolve(request) == first
    (online, _, end), (offline, after, _) = uv_spans
    assert not online and offline and after >= end, "an old note: one after the other"
    assert notes[0].stat().st_mtime > old, "and the note is renewed"

    # a new note removes the notes too old to be believed (another request's, days ago)
    stale = tmp_path / "uv-resolved" / ("0" * 64)
    stale.touch()
    os.utime(stale, (old, old))
    resolver.resolve(dataclasses.replace(request, requirements=("torch==2.4.1",)))
    assert not stale.exists()
    assert len(list((tmp_path / "uv-resolved").iterdir())) == 2


def test_an_offline_read_beside_that_fails_is_read_again_after(
    resolver: UvResolver,
    pkgindex: PkgIndex,
    tmp_path: Path,
    uv_spans: list,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cache cannot answer the read beside (uv's cache emptied since the note, say):
    the artifacts are read after the resolution as on a first one, with the same answer."""
    import threading

    request = PipRequest(
        requirements=("torch==2.4.1",),
        python="3.11",
        default_index=pkgindex.default_index,
        torch_index=pkgindex.torch_index("cu124"),
        cache_dir=tmp_path,
    )
    first = resolver.resolve(request)
    real = UvResolver._run_uv
    beside: list[str] = []

    def cache_miss_beside(self: UvResolver, run, argv) -> None:
        if threading.current_thread() is not threading.main_thread():
            beside.append(threading.current_thread().name)
            raise NoCompatiblePlan("Because torch was not found in the cache, ...")
        real(self, run, argv)

    monkeypatch.setattr(UvResolver, "_run_uv", cache_miss_beside)
    uv_spans.clear()
    assert resolver.resolve(request) == first
    assert beside == ["gpuenv-uv"], "the read beside was tried"
    (online, _, end), (offline, after, _) = uv_spans
    assert not online and offline and after >= end, "then read after, offline"


def test_an_interrupted_resolution_does_not_wait_for_ever_on_the_read_beside(
    resolver: UvResolver, pkgindex: PkgIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C can land inside a lock the main thread holds (logging's, which every fork
    takes): the read beside then never starts its uv, and the interrupted lock waited
    for it for ever (1 to 2 of 100 interrupted relocks hung). It waits a while, then
    leaves with the interrupt."""
    import threading
    import time

    from gpuenv.lock import uv as uv_module

    request = PipRequest(
        requirements=("torch==2.4.1",),
        python="3.11",
        default_index=pkgindex.default_index,
        torch_index=pkgindex.torch_index("cu124"),
        cache_dir=tmp_path,
    )
    resolver.resolve(request)  # a fresh note: the next resolution reads beside
    never = threading.Event()
    beside: list[str] = []

    def stuck_beside_interrupted_main(self: UvResolver, run, argv) -> None:
        if threading.current_thread() is not threading.main_thread():
            beside.append("waiting")
            never.wait()  # a lock nobody will release
        else:
            while not beside:  # the read beside has started
                time.sleep(0.01)
            raise KeyboardInterrupt

    monkeypatch.setattr(UvResolver, "_run_uv", stuck_beside_interrupted_main)
    monkeypatch.setattr(uv_module, "INTERRUPTED_WAIT", 0.5)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        resolver.resolve(request)
    assert time.monotonic() - started < 10
    never.set()
