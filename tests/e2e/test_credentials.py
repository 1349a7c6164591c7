"""Authenticated indexes with real gpuenv and uv: every way of passing credentials locks
and installs, and no secret reaches any output (text or JSON), error, cache file, the
store or the lock."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import quote

from tests.e2e.conftest import Project, spec_text
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.index import Serve, serve
from tests.fixtures.pkgindex.plugin import AUTH_PASSWORD, AUTH_USER, PkgIndex

TOKEN = "tok-Q9aZ7-index"
LINK_TOKEN = "tok-L1nk-file"
SIGNATURE = "sig-X4mz-0b1e"


def _files(*roots: Path) -> Iterable[Path]:
    for root in roots:
        if root.exists():
            yield from (p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def leaks(
    project: Project, runs: list[subprocess.CompletedProcess[str]], *secrets: str
) -> list[str]:
    """Where any of ``secrets`` (or its percent-encoded form) appears: outputs, the
    lock, the project's .gpuenv, gpuenv's cache, the store."""
    forms = {s for secret in secrets for s in (secret, quote(secret, safe=""))}
    found = []
    for run in runs:
        for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
            found += [f"{' '.join(run.args[3:])} {name}" for f in forms if f in text]
    cache = Path(project.env["XDG_CACHE_HOME"]) / "gpuenv"
    for path in _files(project.dir, cache, project.home):
        if path == project.spec or private_uv_cache(cache) in path.parents:
            continue  # the user's own file; uv's private cache of what indexes served
        if path.stat().st_size < 50_000_000:
            data = path.read_bytes()
            found += [str(path) for f in forms if f.encode() in data]
    return found


def private_uv_cache(cache: Path) -> Path:
    """The lock's uv cache: pages as the indexes served them (links' tokens and all),
    in a directory only its owner can enter."""
    uv = cache / "uv"
    assert not uv.exists() or stat.S_IMODE(uv.stat().st_mode) == 0o700
    return uv


def private_cache_files(project: Project) -> list[str]:
    """gpuenv's own cache files that others could read (they must all be 0600)."""
    cache = Path(project.env["XDG_CACHE_HOME"]) / "gpuenv"
    return [
        str(p)
        for p in _files(cache / "spec", cache / "kb", cache / "lock")
        if stat.S_IMODE(p.stat().st_mode) & 0o077
    ]


def bare(index: PkgIndex) -> str:
    return index.url.replace(f"{AUTH_USER}:{AUTH_PASSWORD}@", "")


def test_credentials_in_the_spec_lock_and_install_and_leak_nowhere(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex
) -> None:
    project = make_project(spec_text(pkgindex_auth, deps='"transformers>=4.44"'))
    runs = [
        project.gpuenv("plan"),
        project.gpuenv("plan", "--json"),
        project.gpuenv("-v", "plan", "--target", "cpu"),
        project.gpuenv("lock", "--target", "cpu"),
        project.gpuenv("lock", "--target", "cpu", "--json"),
        project.gpuenv("install", "--target", "cpu"),
        project.gpuenv("install", "--target", "cpu", "--json"),
        project.gpuenv("lock", "--check", "--json"),
    ]
    assert [r.returncode for r in runs][:7] == [0] * 7, [r.stderr for r in runs]
    assert bare(pkgindex_auth) in runs[1].stdout, "the URL is shown, without its credentials"
    assert leaks(project, runs, AUTH_PASSWORD, f"{AUTH_USER}:") == []
    spec_cache = Path(project.env["XDG_CACHE_HOME"]) / "gpuenv" / "spec"
    assert not any(spec_cache.glob("*.json")), "a spec holding credentials is never cached"
    assert private_cache_files(project) == []


def test_a_spec_error_that_echoes_a_password_does_not_print_it(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex
) -> None:
    text = spec_text(pkgindex_auth).replace('index-url = "http://', 'index-url = "ftp://')
    text = text.replace(
        "dependencies = [",
        f'extra-index-urls = ["https://u:{AUTH_PASSWORD}@h", 3]\ndependencies = [',
    )
    project = make_project(text)
    runs = [project.gpuenv("plan"), project.gpuenv("plan", "--json"), project.gpuenv("-v", "lock")]
    assert [r.returncode for r in runs] == [2, 2, 2], [r.stderr for r in runs]
    assert "index-url" in runs[0].stderr and "ftp://127.0.0.1" in runs[0].stderr
    assert leaks(project, runs, AUTH_PASSWORD) == []


def test_a_wrong_password_is_exit_5_naming_the_index_never_exit_3(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex
) -> None:
    wrong = "wr0ng-passw0rd"
    project = make_project(spec_text(pkgindex_auth).replace(AUTH_PASSWORD, wrong))
    project.env["UV_HTTP_RETRIES"] = "0"
    runs = [project.gpuenv("lock", "--target", "cpu"), project.gpuenv("lock", "--json")]
    assert runs[0].returncode == 5, runs[0].stderr
    assert f"index {bare(pkgindex_auth)}/" in runs[0].stderr
    assert "refused the credentials" in runs[0].stderr and "pass credentials" in runs[0].stderr
    error = json.loads(runs[1].stdout)["error"]
    assert runs[1].returncode == 5 and error["cause"] == "auth"
    assert set(error["failed"]) == {"h100", "cpu"} and error["locked"] == []
    assert not project.lock.exists()
    assert leaks(project, runs, wrong, AUTH_PASSWORD) == []


def test_credentials_from_uv_index_variables_reach_lock_and_install(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex, tmp_path: Path
) -> None:
    index = PkgIndex(pkgindex_auth.root, bare(pkgindex_auth), pkgindex_auth.artifacts)
    project = make_project(spec_text(index, deps=""))
    for name in ("DEFAULT", "TORCH"):
        project.env[f"UV_INDEX_GPUENV_{name}_USERNAME"] = AUTH_USER
        project.env[f"UV_INDEX_GPUENV_{name}_PASSWORD"] = AUTH_PASSWORD
    runs = [project.gpuenv("lock", "--target", "cpu"), project.gpuenv("install", "--target", "cpu")]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    # Another machine with a wrong password: the lock is fresh, install itself is refused.
    project.env["UV_INDEX_GPUENV_DEFAULT_PASSWORD"] = "wr0ng-passw0rd"
    project.env["UV_INDEX_GPUENV_TORCH_PASSWORD"] = "wr0ng-passw0rd"
    project.env["GPUENV_HOME"] = str(tmp_path / "other-store")
    refused = project.gpuenv("install", "--target", "cpu", "--frozen", "--json")
    assert refused.returncode == 5, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["cause"] == "auth" and error["target"] == "cpu"
    assert error["message"].startswith("target cpu: pip packages: the ")
    assert "UV_INDEX_GPUENV_" in error["hint"] and "_PASSWORD" in error["hint"]
    assert leaks(project, [*runs, refused], AUTH_PASSWORD, "wr0ng-passw0rd") == []


def test_a_token_index_and_secrets_in_file_links_never_reach_the_lock(
    make_project: Callable[..., Project], pkgindex: PkgIndex, serve_index: Callable[..., PkgIndex]
) -> None:
    links = f"token={LINK_TOKEN}&X-Amz-Signature={SIGNATURE}&X-Amz-Credential=c%2F1&v=1"
    token_index = serve_index(Serve(token=TOKEN, link_query=links))
    text = spec_text(pkgindex, deps='"transformers>=4.44"').replace(
        pkgindex.default_index, f"{token_index.default_index}?token={TOKEN}"
    )
    project = make_project(text)
    runs = [
        project.gpuenv("plan", "--json"),
        project.gpuenv("lock", "--target", "cpu", "--json"),
        project.gpuenv("install", "--target", "cpu", "--json"),
    ]
    assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr for r in runs]
    lock = project.lock.read_text()
    assert f"{token_index.url}/files/" in lock and "?v=1" in lock, "other query parameters stay"
    assert leaks(project, runs, TOKEN, LINK_TOKEN, SIGNATURE) == []


def test_netrc_credentials_lock_and_install(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex, tmp_path: Path
) -> None:
    index = PkgIndex(pkgindex_auth.root, bare(pkgindex_auth), pkgindex_auth.artifacts)
    project = make_project(spec_text(index, deps=""))
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {AUTH_USER} password {AUTH_PASSWORD}\n")
    netrc.chmod(0o600)
    project.env["NETRC"] = str(netrc)
    runs = [project.gpuenv("lock", "--target", "cpu"), project.gpuenv("install", "--target", "cpu")]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert leaks(project, runs, AUTH_PASSWORD) == []


def test_keyring_credentials_where_uv_supports_them(
    make_project: Callable[..., Project], pkgindex_auth: PkgIndex, tmp_path: Path
) -> None:
    """uv's subprocess provider runs ``keyring get URL USER``: a username in the URL."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    keyring = bin_dir / "keyring"
    keyring.write_text(
        f'#!/bin/sh\n[ "$1" = get ] && [ "$3" = {AUTH_USER} ] && echo {AUTH_PASSWORD}\n'
    )
    keyring.chmod(0o755)
    url = pkgindex_auth.url.replace(f":{AUTH_PASSWORD}@", "@")
    project = make_project(spec_text(PkgIndex(pkgindex_auth.root, url, {}), deps=""))
    project.env.update(UV_KEYRING_PROVIDER="subprocess", PATH=f"{bin_dir}:{os.environ['PATH']}")
    runs = [project.gpuenv("lock", "--target", "cpu"), project.gpuenv("install", "--target", "cpu")]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert leaks(project, runs, AUTH_PASSWORD) == []


def test_a_redirect_to_a_url_with_credentials_leaks_nothing(
    make_project: Callable[..., Project],
    pkgindex_auth: PkgIndex,
    serve_index: Callable[..., PkgIndex],
) -> None:
    hop = serve_index(Serve(redirect=pkgindex_auth.url))  # Location: http://user:pw@...
    project = make_project(spec_text(hop, deps=""))
    project.env["UV_HTTP_RETRIES"] = "0"
    runs = [project.gpuenv("lock", "--target", "cpu"), project.gpuenv("-v", "lock", "--json")]
    assert {r.returncode for r in runs} <= {0, 5}, [r.stderr for r in runs]
    assert "Traceback" not in runs[0].stderr
    assert leaks(project, runs, AUTH_PASSWORD) == []


def test_a_conda_channel_with_credentials_locks_and_installs(
    make_project: Callable[..., Project], pkgindex: PkgIndex, local_channel: LocalChannel
) -> None:
    """rattler gets them in a temporary auth file: never in a URL, which it would keep
    in its cache and in the prefix's conda-meta."""
    with serve(
        local_channel.path, options=Serve(credentials=f"{AUTH_USER}:{AUTH_PASSWORD}")
    ) as url:
        channel = url.replace("://", f"://{AUTH_USER}:{AUTH_PASSWORD}@")
        text = spec_text(pkgindex, deps="") + (
            f'\n[conda]\nchannels = ["{channel}"]\n'
            'dependencies = { "cuda-nvcc" = "12.4.*" }\npython = false\n'
        )
        project = make_project(text)
        runs = [
            project.gpuenv("lock", "--target", "h100"),
            project.gpuenv("install", "--target", "h100"),
        ]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert f"{url}/linux-64/cuda-nvcc-" in project.lock.read_text()
    assert "RATTLER_AUTH_FILE" not in os.environ
    assert leaks(project, runs, AUTH_PASSWORD) == []
