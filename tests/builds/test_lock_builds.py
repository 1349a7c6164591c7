"""Locking builds with in-memory resolvers: which packages are builds, what the
resolution is asked for on their behalf, and what each lock entry records."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv.errors import LockIntegrityError
from gpuenv.lock import backends
from gpuenv.lock.format import parse_lock_text, read_lock, render_lock
from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip

SPEC = """[project]
name = "attn"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = false
torchaudio = false

[targets.h100]
gpu = "H100"
driver = "550.54.15"

[targets.cpu]
gpu = "none"

[pip]
dependencies = [{deps}]
{extra}
"""


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[FakePip, FakeConda]:
    pip, conda = FakePip(), FakeConda()
    monkeypatch.setattr(backends, "resolvers", lambda: (pip, conda))
    monkeypatch.setenv(
        "PATH", "/nonexistent"
    )  # no gcc here: the lock names the newest nvcc accepts
    return pip, conda


def _lock(cli: Callable[..., CliResult], tmp_path: Path, deps: str, extra: str = "") -> Path:
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC.format(deps=deps, extra=extra))
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    return tmp_path / "gpuenv.lock"


def test_the_lock_names_what_is_built_at_install(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """A build needs a compiler on the installing machine: each target's line says so
    (LAVIS's lock counted 236 pip packages and never named its 9 builds)."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC.format(deps='"flash-attn==2.6.3"', extra=""))
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    h100 = next(line for line in result.out.splitlines() if line.startswith("h100:"))
    assert h100.endswith("conda; 1 built at install: flash-attn)"), h100
    spec.write_text(spec.read_text() + "# edited\n")
    result = cli("-f", str(spec), "lock", "--json")
    targets = json.loads(result.out)["targets"]
    assert targets["h100"]["builds"] == ["flash-attn"]
    assert all(isinstance(t["builds"], list) for t in targets.values())


def test_flash_attn_needs_nothing_in_the_spec(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    lock = read_lock(_lock(cli, tmp_path, '"flash-attn==2.6.3"'))
    assert lock is not None
    request = next(
        r for r in fakes[0].requests if r.torch_index and r.torch_index.endswith("cu124")
    )
    assert request.no_binary == ("flash-attn",)
    assert ("flash-attn", ("torch", "einops")) in request.dependency_metadata
    assert "nvidia-cuda-nvcc-cu12==12.4.*" in request.requirements, "a toolkit of torch's CUDA"
    assert {"ninja", "packaging", "psutil", "setuptools", "wheel"} <= set(request.requirements)
    h100 = lock.targets["h100"]
    (build,) = h100.builds
    assert build.name == "flash-attn" and build.version == "2.6.3"
    assert build.source.kind == "sdist" and build.source.url.endswith("flash_attn-2.6.3.tar.gz")
    assert h100.pip_package("flash-attn") is None
    inputs = build.inputs
    assert inputs.against_torch and inputs.no_build_isolation
    assert inputs.torch == "2.4.1+cu124" and inputs.cuda == "12.4"
    nvcc = h100.pip_package("nvidia-cuda-nvcc-cu12")
    assert nvcc is not None and inputs.toolkit == nvcc.version, "the locked nvcc wheel's version"
    assert inputs.arch_list == "9.0+PTX"
    assert inputs.host_compiler == "gcc-13", "nvcc 12.4's newest, when this machine has none"
    assert ("FLASH_ATTENTION_FORCE_BUILD", "TRUE") in inputs.env
    assert inputs.build_requires == ("ninja", "packaging", "psutil", "setuptools", "wheel")
    # The CPU target: built against the CPU torch, no toolkit, no arch list.
    (cpu,) = lock.targets["cpu"].builds
    assert cpu.inputs.toolkit is None and cpu.inputs.arch_list is None
    assert cpu.identity != build.identity


def test_the_lock_with_builds_round_trips_and_refuses_an_edited_identity(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    path = _lock(
        cli,
        tmp_path,
        '"flash-attn==2.6.3"',
        '[pip.build.flash-attn]\nenv = { A = "x; y = \\"1\\" $(id)" }\nmax-jobs = 3\nextra-archs = ["8.0"]',
    )
    text = path.read_text()
    lock = parse_lock_text(text).require()
    assert render_lock(lock) == text, "reading and writing gives the same bytes"
    (build,) = lock.targets["h100"].builds
    assert dict(build.inputs.env)["A"] == 'x; y = "1" $(id)' and build.max_jobs == 3
    assert build.inputs.arch_list == "8.0;9.0+PTX"
    again = _lock(
        cli,
        tmp_path,
        '"flash-attn==2.6.3"',
        '[pip.build.flash-attn]\nenv = { A = "x; y = \\"1\\" $(id)" }\nmax-jobs = 3\nextra-archs = ["8.0"]',
    )
    assert again.read_text() == text, "relocking is byte-identical"
    tampered = text.replace('arch-list = "8.0;9.0+PTX"', 'arch-list = "9.0+PTX"', 1)
    reading = parse_lock_text(tampered)  # the target is refused, named, by the one reader
    assert "h100" in reading.damaged and "h100" not in reading.lock.targets
    with pytest.raises(LockIntegrityError, match="h100"):
        reading.require()


def test_max_jobs_is_not_a_build_input_but_env_is(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    def identity(extra: str) -> str:
        lock = read_lock(_lock(cli, tmp_path, '"flash-attn==2.6.3"', extra))
        assert lock is not None
        return lock.targets["h100"].builds[0].identity

    base = identity("")
    assert identity("[pip.build.flash-attn]\nmax-jobs = 2") == base
    assert identity('[pip.build.flash-attn]\nenv = { NVCC_THREADS = "2" }') != base


def test_an_sdist_without_wheels_is_an_isolated_build_and_wheels_are_not(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    fakes[0].sdist_only = frozenset({"oldpkg"})
    lock = read_lock(_lock(cli, tmp_path, '"oldpkg==1.0", "transformers==4.44.2"'))
    assert lock is not None
    (build,) = lock.targets["h100"].builds
    assert build.name == "oldpkg"
    assert not build.inputs.against_torch and not build.inputs.no_build_isolation
    assert build.inputs.toolkit is None and build.inputs.host_compiler is None
    assert lock.targets["h100"].pip_package("transformers") is not None
    assert not any("nvcc" in r for req in fakes[0].requests for r in req.requirements)


def test_a_declared_build_whose_index_has_no_sdist_is_refused(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class WheelsOnly(FakePip):
        def resolve(self, request):  # type: ignore[no-untyped-def]
            return super().resolve(type(request)(**{**request.__dict__, "no_binary": ()}))

    pip = WheelsOnly()
    monkeypatch.setattr(backends, "resolvers", lambda: (pip, FakeConda()))
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        SPEC.format(deps='"mypkg==1.0"', extra="[pip.build.mypkg]\nno-build-isolation = true")
    )
    result = cli("-f", str(spec), "lock")
    assert result.code == 3
    assert "no sdist" in result.err and "remove [pip.build.mypkg]" in result.err


def test_builds_change_the_prefix_but_a_lock_without_builds_keeps_its_hashes(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    lock = read_lock(_lock(cli, tmp_path, '"transformers==4.44.2"'))
    assert lock is not None
    plain = lock.targets["h100"]
    assert "builds" not in (tmp_path / "gpuenv.lock").read_text()
    payload_hash = plain.content_hash
    from dataclasses import replace

    assert replace(plain, builds=()).content_hash == payload_hash


def test_new_build_knowledge_makes_a_lock_with_builds_stale_and_no_other(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    fakes: tuple[FakePip, FakeConda],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuenv.builds import knowledge

    with_builds = tmp_path / "a"
    plain = tmp_path / "b"
    with_builds.mkdir()
    plain.mkdir()
    _lock(cli, with_builds, '"flash-attn==2.6.3"')
    _lock(cli, plain, '"transformers==4.44.2"')
    assert cli("-f", str(with_builds / "gpuenv.toml"), "lock", "--check").code == 0
    from gpuenv.knowledge import _data

    # New build knowledge, as both readers of it see it: the lock's builds check
    # (builds.knowledge.digest) and lock --check's fresh-marker key (files_digest).
    real = _data.files_digest
    monkeypatch.setattr(knowledge, "digest", lambda: "0" * 64)
    monkeypatch.setattr(
        _data,
        "files_digest",
        lambda names, *more: (
            "0" * 64 if tuple(names) == tuple(_data.BUILD_FILES) else real(names, *more)
        ),
    )
    assert cli("-f", str(with_builds / "gpuenv.toml"), "lock", "--check").code == 1
    assert cli("-f", str(plain / "gpuenv.toml"), "lock", "--check").code == 0


def test_exports_say_that_they_leave_the_builds_out(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    _lock(cli, tmp_path, '"flash-attn==2.6.3"')
    spec = str(tmp_path / "gpuenv.toml")
    result = cli("-f", spec, "export", "requirements", "--target", "h100")
    assert result.code == 0, result.err
    assert "flash-attn" not in result.out
    assert "compiles flash-attn 2.6.3 at install" in result.err
    dockerfile = cli("-f", spec, "export", "dockerfile", "--target", "h100")
    assert "compiles flash-attn 2.6.3 at install" in dockerfile.err


def test_a_gpu_newer_than_the_toolkit_gets_the_arch_torchs_build_runs_it_with(
    cli: Callable[..., CliResult], tmp_path: Path, fakes: tuple[FakePip, FakeConda]
) -> None:
    """torch 1.12.1+cu116 runs on an RTX 4090 (8.9) through its 8.6 kernels, but nvcc 11.6
    knows no arch above 8.7: TORCH_CUDA_ARCH_LIST=8.9+PTX failed every build ('nvcc fatal:
    Unsupported gpu architecture compute_89'). The build gets 8.6, as torch has."""
    spec = tmp_path / "gpuenv.toml"
    text = (
        SPEC.format(
            deps='"mypkg==1.0"', extra="[pip.build.mypkg]\nagainst-torch = true\ntoolkit = true"
        )
        .replace('torch = "2.4.1"', 'torch = "1.12.1"\ntoolkit = "system:/usr/local/cuda-11.6"')
        .replace('python = "3.11"', 'python = "3.10"')
        .replace('gpu = "H100"', 'gpu = "RTX 4090"')
    )  # NVIDIA's nvcc wheels start at 11.7: the machine's own toolkit
    spec.write_text(text)
    fakes[0].sdist_only = frozenset({"mypkg"})
    result = cli("-f", str(spec), "lock")
    assert result.code == 0, result.err
    lock = read_lock(tmp_path / "gpuenv.lock")
    assert lock is not None
    (build,) = lock.targets["h100"].builds
    assert build.inputs.cuda == "11.6"
    assert build.inputs.arch_list == "8.6+PTX"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        # git reads a URL that starts with "-" as an option: --upload-pack runs a command.
        (
            {"source": "git", "url": "git+--upload-pack=touch${IFS}PWNED", "commit": "a" * 40},
            "is not a git+https://, git+ssh:// or git+file:// URL",
        ),
        # git's ext:: transport runs a command; ssh reads a host "-o..." as an option
        (
            {"source": "git", "url": "git+ext::sh -c touch%20PWNED", "commit": "a" * 40},
            "git+ssh://",
        ),
        (
            {
                "source": "git",
                "url": "git+ssh://-oProxyCommand=touch%20PWNED/x",
                "commit": "a" * 40,
            },
            "starting with '-'",
        ),
        (
            {"source": "git", "url": "git+ssh://u@-oProxyCommand=id/x", "commit": "a" * 40},
            "starting with '-'",
        ),
        ({"url": "/etc/passwd"}, "is not an http(s):// or file:// URL"),
        ({"version": "1.0/../../x"}, "is not a version"),
        ({"python": "3.11;touch PWNED"}, "is not a Python version"),
        ({"platform": 'x" or "1"=="1'}, "is not a known platform"),
        ({"arch-list": "9.0+PTX $(id)"}, "is not a CUDA architecture list"),
        ({"host-compiler": "--version"}, "is not a compiler name"),
    ],
)
def test_a_build_entry_with_a_hostile_value_and_a_recomputed_identity_is_refused(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    fakes: tuple[FakePip, FakeConda],
    changes: dict[str, str],
    why: str,
) -> None:
    import tomlkit

    from gpuenv.builds.model import compute_identity
    from gpuenv.lock import _integrity
    from gpuenv.lock.format import _build

    raw = tomlkit.parse(_lock(cli, tmp_path, '"flash-attn==2.6.3"').read_text()).unwrap()
    table = raw["targets"]["h100"]
    entry = table["builds"][0]
    entry.update(changes)
    if entry["source"] == "git":
        entry.pop("sha256", None)
    hashes = {p["name"]: p["sha256"] for p in table["pip"]}
    build = _build(entry)  # what someone who knows the format would do to hide the edit
    entry["identity"] = compute_identity(
        build.name, build.version, build.source, build.inputs, hashes
    )
    table["content-hash"] = _integrity.content_hash("h100", table)
    reading = parse_lock_text(tomlkit.dumps(raw))
    assert "h100" not in reading.lock.targets
    assert any(why in problem for problem in reading.damaged["h100"]), reading.damaged


def test_git_gets_the_source_url_as_an_operand_never_an_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from gpuenv.builds import fetch
    from gpuenv.builds.model import BuildSource
    from gpuenv.errors import BuildError, ExternalToolError

    seen: list[list[str]] = []

    def run(argv: list[object], **_: object) -> object:
        seen.append([str(a) for a in argv])
        if "fetch" in seen[-1]:
            raise ExternalToolError("git fetch failed")
        return SimpleNamespace(stdout="", stderr="", returncode=0)

    monkeypatch.setattr(fetch._proc, "run", run)
    source = BuildSource("git", "git+--upload-pack=touch PWNED", commit="a" * 40)
    with pytest.raises(BuildError):
        fetch.git_checkout(source, tmp_path)
    fetch_argv = next(a for a in seen if "fetch" in a)
    at = fetch_argv.index("--upload-pack=touch PWNED")
    assert fetch_argv[at - 1] == "--", fetch_argv


@pytest.mark.parametrize(
    "url",
    [
        "git+https://example.org/org/repo.git",
        "git+ssh://git@example.org/org/repo.git",
        "git+file:///srv/checkouts/repo",  # a local repository, as a file:// wheel is
    ],
)
def test_a_git_source_over_https_ssh_or_a_local_repository_is_a_lockable_value(url: str) -> None:
    from gpuenv.lock._integrity import url_problem

    assert url_problem(url, git=True) is None
    assert url_problem(url + "${HOME}", git=True) is not None  # expansion is still refused
