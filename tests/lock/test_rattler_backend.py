"""The rattler backend against a local channel of real conda archives (file://)."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from gpuenv._network import Mirror, Mirrors
from gpuenv._redact import redact, redact_url
from gpuenv.errors import ExternalToolError, NetworkError, NoCompatiblePlan, UsageError
from gpuenv.lock.model import CondaPackage, CondaRequest
from gpuenv.lock.rattler import RattlerSolver, explain_unsolvable
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.index import serve
from tests.fixtures.pkgindex.plugin import closed_port

LINUX = {"__glibc": "2.28", "__linux": "5.15", "__unix": "0"}
H100 = {**LINUX, "__cuda": "12.4", "__cuda_arch": "9.0"}


@pytest.fixture(scope="module")
def solver() -> RattlerSolver:
    return RattlerSolver(timeout=120)


@pytest.fixture
def solve(solver: RattlerSolver, local_channel: LocalChannel, tmp_path: Path):
    def run(*specs: str, virtual=H100, **kwargs) -> dict[str, CondaPackage]:
        request = CondaRequest(
            specs=specs,
            channels=(local_channel.url,),
            virtual_packages=virtual,
            cache_dir=tmp_path,
            **kwargs,
        )
        return {p.name: p for p in solver.resolve(request)}

    return run


def test_cuda_12_2_rejects_a_package_that_needs_cuda_12_4(solve) -> None:
    with pytest.raises(NoCompatiblePlan) as caught:
        solve("pytorch * cuda*", virtual={**H100, "__cuda": "12.2"})
    message = caught.value.message
    assert caught.value.exit_code == 3
    assert "__cuda >=12.4" in message
    assert "the target has __cuda 12.2" in message
    assert "\n" not in message and "\u2514" not in message


def test_cuda_12_4_solves_with_exact_records(solve, local_channel: LocalChannel) -> None:
    got = solve("pytorch * cuda*", "cuda-nvcc 12.4.*")

    torch = got["pytorch"]
    assert (torch.version, torch.build, torch.build_number) == ("2.4.1", "cuda124_py311_0", 1)
    assert got["cuda-cudart"].version == "12.4.127"
    assert got["cuda-version"].version == "12.4"
    assert got["python"].version == "3.11.9"
    assert "__cuda >=12.4" in torch.depends
    assert "__cuda >=12" in got["cuda-version"].constrains
    assert not any(name.startswith("__") for name in got)  # virtual packages are not records
    for package in got.values():
        archive = local_channel.path / package.subdir / Path(package.url).name
        data = archive.read_bytes()
        assert package.url == f"{local_channel.url}/{package.subdir}/{archive.name}"
        assert package.sha256 == hashlib.sha256(data).hexdigest()
        assert package.md5 == hashlib.md5(data).hexdigest()
        assert package.size == len(data)
        assert package.channel.rstrip("/") == local_channel.url
    assert got["cuda-version"].subdir == "noarch"


def test_no_cuda_on_the_target_is_modelled_not_detected(solve) -> None:
    # A CPU target: no __cuda at all. Asking for the CUDA build fails and says so...
    with pytest.raises(NoCompatiblePlan) as caught:
        solve("pytorch * cuda*", virtual=LINUX)
    assert "the target has no __cuda" in caught.value.message
    # ...while an unqualified request quietly gets the CPU build: the orchestration must
    # ask for the build it planned.
    assert solve("pytorch", virtual=LINUX)["pytorch"].build == "cpu_py311_0"


@pytest.mark.parametrize(("arch", "ok"), [("7.5", False), ("8.0", True), ("9.0", True)])
def test_cuda_arch_is_the_targets(solve, arch: str, ok: bool) -> None:
    virtual = {**H100, "__cuda_arch": arch}
    if ok:
        assert solve("flash-attn", virtual=virtual)["flash-attn"].version == "2.6.3"
    else:
        with pytest.raises(NoCompatiblePlan, match=r"the target has __cuda_arch 7\.5"):
            solve("flash-attn", virtual=virtual)


def test_glibc_comes_only_from_the_request(solve) -> None:
    with pytest.raises(NoCompatiblePlan, match="the target has no __glibc"):
        solve("python 3.11.*", virtual={"__linux": "5.15", "__unix": "0"})


def test_platform_selects_the_subdir(solve) -> None:
    got = solve("python 3.10.*", "tqdm", platform="linux-aarch64")
    assert got["python"].subdir == "linux-aarch64"
    assert got["python"].url.endswith("/linux-aarch64/python-3.10.14-h0_0_cpython.tar.bz2")
    assert got["tqdm"].subdir == "noarch"


def test_preferences_keep_an_older_pin_that_still_fits(solve) -> None:
    assert solve("cuda-nvcc 12.4.*")["cuda-nvcc"].version == "12.4.131"
    locked = solve("cuda-nvcc ==12.4.99")["cuda-nvcc"]

    got = solve("cuda-nvcc 12.4.*", preferences=(locked,))
    assert got["cuda-nvcc"].version == "12.4.99"
    assert got["cuda-nvcc"] == locked


def test_preferences_that_no_longer_fit_are_dropped(solve) -> None:
    old = solve("cuda-nvcc 12.1.*")["cuda-nvcc"]
    assert solve("cuda-nvcc 12.4.*", preferences=(old,))["cuda-nvcc"].version == "12.4.131"


def test_unknown_package_is_unsatisfiable(solve) -> None:
    with pytest.raises(NoCompatiblePlan, match="nosuchpkg"):
        solve("nosuchpkg")


def test_bad_match_spec_is_a_usage_error(solve) -> None:
    with pytest.raises(UsageError):
        solve("cuda-nvcc >=>12")


def test_missing_channel_is_an_external_failure(solver: RattlerSolver, tmp_path: Path) -> None:
    request = CondaRequest(
        specs=("python",),
        channels=((tmp_path / "nowhere").as_uri(),),
        virtual_packages=H100,
        cache_dir=tmp_path,
    )
    with pytest.raises(ExternalToolError, match="nowhere"):
        solver.resolve(request)


def test_describe_names_the_version(solver: RattlerSolver) -> None:
    assert solver.describe().startswith("py-rattler 0.")


def test_importing_the_backend_does_not_import_rattler() -> None:
    code = "import sys, gpuenv.lock.rattler; assert 'rattler' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://user:pw@conda.example/chan", "https://conda.example/chan"),
        (
            "https://conda.example/t/abc-123/chan/linux-64/x.conda",
            "https://conda.example/chan/linux-64/x.conda",
        ),
        ("file:///srv/channel/noarch/x.tar.bz2", "file:///srv/channel/noarch/x.tar.bz2"),
    ],
)
def test_credentials_are_stripped(url: str, clean: str) -> None:
    assert redact_url(url) == clean
    assert redact(f"failed: {url} (404)") == f"failed: {clean} (404)"


def test_explain_unsolvable_flattens_the_tree() -> None:
    text = """Cannot solve the request because of: pytorch ==2.4.1 cuda* cannot be installed because there are no viable options:
\u2514\u2500 pytorch 2.4.1 would require
   \u2514\u2500 __cuda >=12.4, for which no candidates were found.
"""
    message = explain_unsolvable(text, {"__cuda": "12.2=0"}, "linux-64")
    assert message == (
        "no set of conda packages fits the target (linux-64): pytorch ==2.4.1 cuda* cannot be"
        " installed because there are no viable options: pytorch 2.4.1 would require"
        " __cuda >=12.4, for which no candidates were found. (the target has __cuda 12.2)"
    )


@pytest.mark.parametrize("by_name", [False, True])
def test_a_mirrored_channel_is_solved_through_the_mirror_and_locked_canonical(
    solver: RattlerSolver, local_channel: LocalChannel, tmp_path: Path, by_name: bool
) -> None:
    # The canonical channel is never reached: a closed port, or a name whose URL is mirrored.
    canonical = (
        "https://conda.anaconda.org/conda-forge"
        if by_name
        else f"http://127.0.0.1:{closed_port()}/conda-forge"
    )
    with serve(local_channel.path) as mirror:
        mirrors = Mirrors((Mirror(canonical, mirror, "test"),))
        request = CondaRequest(
            specs=("cuda-nvcc 12.4.*",),
            channels=("conda-forge",) if by_name else (canonical,),
            virtual_packages=H100,
            cache_dir=tmp_path,
            mirrors=mirrors,
        )
        got = {p.name: p for p in solver.resolve(request)}
        again = solver.resolve(dataclasses.replace(request, preferences=tuple(got.values())))
    nvcc = got["cuda-nvcc"]
    assert nvcc.url == f"{canonical}/{nvcc.subdir}/{Path(nvcc.url).name}"
    assert all(p.url.startswith(canonical + "/") and mirror not in p.url for p in got.values())
    assert {p.name: p.url for p in again} == {n: p.url for n, p in got.items()}, "pins kept"


def test_an_unreachable_channel_is_a_network_error_naming_it(
    solver: RattlerSolver, tmp_path: Path
) -> None:
    channel = f"http://u:pw@127.0.0.1:{closed_port()}/chan"
    request = CondaRequest(
        specs=("python",), channels=(channel,), virtual_packages=H100, cache_dir=tmp_path
    )
    with pytest.raises(NetworkError) as caught:
        solver.resolve(request)
    error = caught.value
    assert error.exit_code == 5 and error.cause == "refused"
    assert error.message.startswith(f"the conda channel {redact_url(channel)}/")
    assert "pw" not in str(error.to_json())
