"""Networks that fail, mirrors, and certificates, with real gpuenv, uv and the local
index: unreachable indexes are loopback ports nothing listens on, never real hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv._network import network_settings
from gpuenv.lock.format import read_lock
from gpuenv.plan import DEFAULT_TORCH_INDEX
from tests.conftest import CliResult
from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.index import Serve, serve
from tests.fixtures.pkgindex.plugin import LocalCA, PkgIndex, closed_port

# h100 with driver 535 gets the cu121 build, which is PyPI's own torch 2.4.1: it locks
# from the default index alone. The cpu build needs the torch index.
TWO_TARGETS = """[project]
name = "net"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = "*"
torchaudio = false

[targets.h100]
gpu = "H100"
driver = "535.104.05"

[targets.cpu]
gpu = "none"

[pip]
index-url = "{default}"
{torch}dependencies = [{deps}]
"""


def spec(default: str, torch: str | None = None, deps: str = "") -> str:
    line = f'torch-index = "{torch}"\n' if torch else ""
    return TWO_TARGETS.format(default=default, torch=line, deps=deps)


def no_retries(project: Project, **extra: str) -> Project:
    project.env.update({"UV_HTTP_RETRIES": "0", "UV_HTTP_TIMEOUT": "5", **extra})
    return project


def python_of(prefix: Path, code: str) -> str:
    run = subprocess.run(
        [str(prefix / "bin/python"), "-I", "-c", code], capture_output=True, text=True, check=True
    )
    return run.stdout.strip()


def test_an_unreachable_torch_index_writes_the_reachable_target_and_names_the_other(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/whl"
    project = no_retries(make_project(spec(pkgindex.default_index)))
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={dead}"
    result = project.gpuenv("lock")
    assert result.returncode == 5, result.stderr
    assert f"target cpu: the torch index {dead}/cpu/ (a mirror" in result.stderr, "not a page"
    assert f"(a mirror of {DEFAULT_TORCH_INDEX}, from GPUENV_MIRRORS)" in result.stderr
    assert "connection was refused" in result.stderr
    assert f"wrote {project.lock} with h100" in result.stderr
    assert "gpuenv install --target h100" in result.stderr and "GPUENV_TORCH_INDEX" in result.stderr
    assert "Traceback" not in result.stderr
    lock = read_lock(project.lock)
    assert lock is not None and set(lock.targets) == {"h100"}
    torch = lock.targets["h100"].pip_package("torch")
    assert torch is not None and torch.url.startswith(pkgindex.url + "/files/")
    as_json = project.gpuenv("lock", "--json")
    assert as_json.returncode == 5
    error = json.loads(as_json.stdout)["error"]
    assert error["kind"] == "network" and error["target"] == "cpu"
    assert error["failed"]["cpu"]["cause"] == "refused"
    # uv asks for the family's pages at once, and whichever failed first was named (another
    # page in each run): a host that fails is named by the index itself
    assert error["failed"]["cpu"]["url"] == f"{dead}/cpu/", error["failed"]["cpu"]["url"]
    assert error["locked"] == ["h100"] and error["written"] is False  # same bytes again
    assert project.gpuenv("lock", "--check").returncode == 1, "cpu is still not locked"


def test_a_failed_target_keeps_its_previous_entry_and_the_lock_keeps_canonical_urls(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    project = no_retries(make_project(spec(pkgindex.default_index)))
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={pkgindex.torch_base}"
    locked = project.gpuenv("lock")
    assert locked.returncode == 0, locked.stderr
    # the wheels' METADATA is read through the mirror too: the canonical host (which
    # nothing here serves) was asked, warned on every lock and left no wheel facts
    assert "could not read the metadata" not in locked.stderr, locked.stderr
    first = project.lock.read_text()
    assert "[targets.cpu.wheel-facts]" in first
    assert f"{DEFAULT_TORCH_INDEX}/cpu/torch-2.4.1%2Bcpu" in first, "the canonical URL"
    assert pkgindex.torch_base not in first, "never the mirror's"
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}=http://127.0.0.1:{closed_port()}"
    result = project.gpuenv("lock", "--upgrade")
    assert result.returncode == 5, result.stderr
    assert "kept the previous lock of cpu" in result.stderr
    assert project.lock.read_text() == first
    assert project.gpuenv("lock", "--check").returncode == 0


def test_a_mirror_in_the_flat_layout_is_exit_5_with_the_url_and_says_so(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    flat = pkgindex.torch_index("cu124")  # <flat>/torch/ exists, <flat>/cpu/torch/ does not
    project = no_retries(make_project(spec(pkgindex.default_index)))
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={flat}"
    result = project.gpuenv("lock", "--target", "cpu")
    assert result.returncode == 5, result.stderr
    assert f"the torch index {flat}/cpu/torch/" in result.stderr
    assert "has no torch (404)" in result.stderr
    assert f"flat layout: {flat}/torch/ exists" in result.stderr
    assert "no set of pip packages fits" not in result.stderr
    assert not project.lock.exists()


def test_install_fetches_through_a_configured_mirror_while_the_lock_holds_canonical_urls(
    make_project: Callable[..., Project], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    canonical = f"http://127.0.0.1:{closed_port()}"  # the real index: down, here
    project = no_retries(make_project(spec(f"{canonical}/simple", f"{canonical}/whl")))
    config = Path(project.env["XDG_CONFIG_HOME"]) / "gpuenv" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[mirrors]\n"{canonical}" = "{pkgindex.url}"\n')
    assert project.gpuenv("lock", "--target", "cpu").returncode == 0
    text = project.lock.read_text()
    assert f"{canonical}/whl/cpu/torch-2.4.1%2Bcpu" in text and pkgindex.url not in text
    result = project.gpuenv("install", "--target", "cpu", "--frozen", "--json")
    assert result.returncode == 0, result.stderr
    prefix = Path(json.loads(result.stdout)["targets"]["cpu"]["prefix"])
    assert python_of(prefix, "import torch; print(torch.__version__)") == "2.4.1+cpu"
    # Another machine, without the mirror: the lock's own URLs, which are down.
    config.unlink()
    project.env["GPUENV_HOME"] = str(tmp_path / "other-store")
    result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.returncode == 5, result.stderr
    assert f"target cpu: pip packages: the default index {canonical}/files/" in result.stderr
    assert "connection was refused" in result.stderr


def test_pack_fetches_through_the_configured_mirror_too(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    canonical = f"http://127.0.0.1:{closed_port()}"  # the real index: down, here
    project = no_retries(make_project(spec(f"{canonical}/simple", f"{canonical}/whl")))
    config = Path(project.env["XDG_CONFIG_HOME"]) / "gpuenv" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[mirrors]\n"{canonical}" = "{pkgindex.url}"\n')
    assert project.gpuenv("lock", "--target", "cpu").returncode == 0
    archive = project.dir / "cpu.tar"
    result = project.gpuenv("pack", "--target", "cpu", "-o", str(archive), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["artifacts"] > 0 and archive.stat().st_size > 0


def test_tls_with_a_private_ca_locks_and_installs_when_ssl_cert_file_names_it(
    make_project: Callable[..., Project],
    serve_index: Callable[..., PkgIndex],
    test_ca: LocalCA,
) -> None:
    index = serve_index(Serve(tls=test_ca.tls))
    assert index.url.startswith("https://")
    project = no_retries(make_project(spec(index.default_index, index.torch_base)))
    result = project.gpuenv("lock", "--target", "cpu")
    assert result.returncode == 5, result.stderr
    assert "TLS certificate was not accepted" in result.stderr
    assert "SSL_CERT_FILE" in result.stderr and "UV_SYSTEM_CERTS=1" in result.stderr
    project.env["SSL_CERT_FILE"] = str(test_ca.ca)
    assert project.gpuenv("lock", "--target", "cpu").returncode == 0
    result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.returncode == 0, result.stderr
    del project.env["SSL_CERT_FILE"]
    project.env["GPUENV_HOME"] = os.fspath(project.home.parent / "store-without-ca")
    result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.returncode == 5 and "SSL_CERT_FILE" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("case", "cause", "words", "fix"),
    [
        ("dns", "dns", "host name does not resolve", "DNS"),
        ("timeout", "timeout", "timed out", "UV_HTTP_TIMEOUT"),
        ("403", "auth", "refused the credentials", "UV_INDEX_GPUENV_TORCH_PASSWORD"),
        ("404", "not-found", "has no torch (404)", "there is no cpu index"),
    ],
)
def test_each_kind_of_failure_is_named_with_its_url_and_fix(
    make_project: Callable[..., Project],
    pkgindex: PkgIndex,
    serve_index: Callable[..., PkgIndex],
    silent_port: int,
    case: str,
    cause: str,
    words: str,
    fix: str,
) -> None:
    base = {
        "dns": "http://gpuenv-test.invalid/whl",
        "timeout": f"http://127.0.0.1:{silent_port}/whl",
        "403": serve_index(Serve(status=403)).torch_base,
        "404": f"{pkgindex.url}/nothing-here",
    }[case]
    project = no_retries(make_project(spec(pkgindex.default_index, base)), UV_HTTP_TIMEOUT="2")
    result = project.gpuenv("lock", "--target", "cpu", "--json")
    assert result.returncode == 5, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "network" and error["cause"] == cause
    assert error["target"] == "cpu" and error["url"].startswith(f"{base}/cpu/")
    assert words in error["message"] and fix in error["hint"]


WRAPPER = """#!{python}
import json, os, sys
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ)}}) + "\\n")
os.execv({uv!r}, [{uv!r}, *sys.argv[1:]])
"""


def test_lock_and_install_give_uv_the_same_proxies_certificates_and_timeouts(
    cli: Callable[..., CliResult],
    pkgindex: PkgIndex,
    test_ca: LocalCA,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stand-in for uv records each call's environment, then runs the real uv."""
    import uv

    log = tmp_path / "uv-calls.jsonl"
    wrapper = tmp_path / "uv"
    wrapper.write_text(WRAPPER.format(python=sys.executable, log=str(log), uv=uv.find_uv_bin()))
    wrapper.chmod(0o755)
    monkeypatch.setattr(uv, "find_uv_bin", lambda: str(wrapper))
    settings = {
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "ALL_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "SSL_CERT_FILE": str(test_ca.ca),
        "SSL_CERT_DIR": str(test_ca.ca.parent),
        "UV_HTTP_TIMEOUT": "61",
        "UV_HTTP_CONNECT_TIMEOUT": "11",
        "UV_HTTP_RETRIES": "2",
        "UV_CONCURRENT_DOWNLOADS": "4",
        "UV_INSECURE_HOST": "127.0.0.1",
    }
    for name, value in {
        **settings,
        "UV_NATIVE_TLS": "1",
        "UV_INDEX_URL": "http://127.0.0.1:9/x",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    project = tmp_path / "gpuenv.toml"
    project.write_text(spec(pkgindex.default_index, pkgindex.torch_base))
    assert cli("-f", str(project), "lock", "--target", "cpu").code == 0
    result = cli("-f", str(project), "install", "--target", "cpu")
    assert result.code == 0, result.err
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    commands = {" ".join(c["argv"][:3]) for c in calls}
    assert {"--no-config pip compile", "pip install --no-config"} <= commands, commands
    assert any(c["argv"][0] == "venv" for c in calls)
    expected = {**settings, "UV_SYSTEM_CERTS": "1", "UV_NO_CONFIG": "1"}  # uv 0.13's name
    for call in calls:
        # install's first try reads uv's cache alone (UV_OFFLINE=1, see _cached_then_online);
        # that flag is not a network setting the user gave, so it is compared apart
        given = network_settings(call["env"])
        offline = given.pop("UV_OFFLINE", None)
        assert given == expected, call["argv"]
        assert offline is None or call["argv"][:2] == ["pip", "install"], call["argv"]
        assert "UV_NATIVE_TLS" not in call["env"] and "UV_INDEX_URL" not in call["env"]


def test_conda_records_install_through_a_mirror_of_their_channel(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    canonical = f"http://127.0.0.1:{closed_port()}/channel"
    text = spec_text(pkgindex, deps="") + (
        f'\n[conda]\nchannels = ["{canonical}"]\n'
        'dependencies = { "cuda-nvcc" = "12.4.*" }\npython = false\n'
    )
    with serve(local_channel.path) as mirror:
        project = no_retries(make_project(text), GPUENV_MIRRORS=f"{canonical}={mirror}")
        result = project.gpuenv("install", "--target", "h100")
        assert result.returncode == 0, result.stderr
    lock = read_lock(project.lock)
    assert lock is not None
    nvcc = next(c for c in lock.targets["h100"].conda if c.name == "cuda-nvcc")
    assert nvcc.url.startswith(canonical + "/") and nvcc.channel.startswith(canonical)
    prefix = Path(os.readlink(project.dir / ".gpuenv" / "h100"))
    assert any((prefix / "conda-meta").glob("cuda-nvcc-*.json"))


def test_doctor_says_when_a_configured_torch_mirror_lacks_the_layout(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """Issue 15: `gpuenv doctor` (not only `lock`) says when a mirror lacks the expected
    layout; a mirror in the right layout, or none, is no finding."""
    project = no_retries(make_project(spec(pkgindex.default_index)))
    flat = pkgindex.torch_index("cu124")  # <flat>/torch/ exists, <flat>/cpu/torch/ does not
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={flat}"
    result = project.gpuenv("doctor", "--python", sys.executable, "--json")
    findings = {f["code"]: f for f in json.loads(result.stdout)["findings"]}
    assert "mirror-layout" in findings, result.stdout
    found = findings["mirror-layout"]
    assert found["severity"] == "warning"
    assert f"flat layout: {flat}/torch/ exists" in found["message"]
    assert "GPUENV_MIRRORS" in found["message"] and DEFAULT_TORCH_INDEX in found["message"]
    assert found["fix"].endswith("(gpuenv docs/how-to/indexes-and-credentials.md#mirrors)")
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={pkgindex.torch_base}"
    result = project.gpuenv("doctor", "--python", sys.executable, "--json")
    assert "mirror-layout" not in result.stdout, result.stdout


def test_a_named_torch_index_that_cannot_be_reached_is_offered_removed_for_pypis_build(
    make_project: Callable[..., Project], pkgindex: PkgIndex
) -> None:
    """h100's cu121 build is on the default index too: with [pip] torch-index (or
    GPUENV_TORCH_INDEX) naming a dead index, the hint named only the key that was set;
    the route that works is to remove it (unset the variable), and --json says the same."""
    dead = f"http://127.0.0.1:{closed_port()}/whl"
    project = no_retries(make_project(spec(pkgindex.default_index, torch=dead)))
    result = project.gpuenv("lock")
    assert result.returncode == 5, result.stderr
    route = (
        "to lock h100 from the default index alone, remove [pip] torch-index (for every "
        "target): torch 2.4.1 cu121 is PyPI's own build"
    )
    assert route in result.stderr
    failed = json.loads(project.gpuenv("lock", "--json").stdout)["error"]["failed"]
    assert failed["h100"]["pypi_route"] == route
    assert "pypi_route" not in failed["cpu"], "the CPU build is not on the default index"
    project.spec.write_text(spec(pkgindex.default_index))
    project.env["GPUENV_TORCH_INDEX"] = dead
    result = project.gpuenv("lock", "--target", "h100")
    assert result.returncode == 5, result.stderr
    assert "to lock h100 from the default index alone, unset GPUENV_TORCH_INDEX:" in result.stderr
    del project.env["GPUENV_TORCH_INDEX"]
    assert project.gpuenv("lock", "--target", "h100").returncode == 0, "the route works"


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_dead_proxy_is_named_as_the_proxy_not_the_index(
    make_project: Callable[..., Project], pkgindex: PkgIndex, variable: str
) -> None:
    """With a proxy set that refuses connections, the error said the index refused the
    connection and never named the proxy: it names the proxy (redacted) and its
    variable, in the text and in --json."""
    proxy = f"http://puser:pr0xy-s3cret@127.0.0.1:{closed_port()}"
    project = no_retries(make_project(spec(pkgindex.default_index)))
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        project.env.pop(name, None)
    project.env[variable] = proxy
    result = project.gpuenv("lock", "--target", "h100")
    assert result.returncode == 5, result.stderr
    shown = proxy.replace("puser:pr0xy-s3cret@", "")
    assert f"the proxy {shown} (from {variable}) refused the connection" in result.stderr
    assert f"check the proxy {variable} names" in result.stderr
    as_json = project.gpuenv("lock", "--target", "h100", "--json")
    error = json.loads(as_json.stdout)["error"]
    assert error["failed"]["h100"]["proxy"] == {"variable": variable, "url": shown}
    assert "pr0xy-s3cret" not in result.stderr + result.stdout + as_json.stdout + as_json.stderr
