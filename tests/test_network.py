"""Network settings shared by lock and install: uv's environment, indexes, mirrors, and
what a failure was (classified from uv's and rattler's own words, captured from runs
against closed ports, unresolvable names, a 403 server, an untrusted certificate)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuenv._network import (
    Index,
    Mirror,
    Mirrors,
    index_of,
    is_fetchable_url,
    join_index,
    literal_url,
    load_mirrors,
    network_error,
    network_settings,
    pip_indexes,
    user_config,
    uv_environment,
)
from gpuenv.errors import UsageError
from gpuenv.lock._uv_output import classify
from tests.conftest import CliResult

NETWORK = {
    "HTTPS_PROXY": "http://proxy.invalid:3128",
    "http_proxy": "http://proxy.invalid:3128",
    "ALL_PROXY": "socks5://proxy.invalid:1080",
    "NO_PROXY": "127.0.0.1,localhost",
    "SSL_CERT_FILE": "/etc/corp/ca.pem",
    "SSL_CERT_DIR": "/etc/corp/certs",
    "UV_SYSTEM_CERTS": "1",
    "UV_HTTP_TIMEOUT": "90",
    "UV_HTTP_CONNECT_TIMEOUT": "20",
    "UV_HTTP_RETRIES": "7",
    "UV_OFFLINE": "1",
    "UV_INSECURE_HOST": "mirror.invalid",
    "UV_KEYRING_PROVIDER": "subprocess",
    "NETRC": "/home/u/.netrc",
    "UV_INDEX_GPUENV_TORCH_USERNAME": "me",
    "UV_INDEX_GPUENV_TORCH_PASSWORD": "pw",
}
RESOLUTION = {
    "UV_INDEX_URL": "http://127.0.0.1:9/simple",
    "UV_EXTRA_INDEX_URL": "http://127.0.0.1:9/x",
    "UV_CONSTRAINT": "/nonexistent",
    "UV_INDEX_STRATEGY": "unsafe-best-match",
    "UV_INDEX_OTHER_PASSWORD": "not ours",
    "PIP_INDEX_URL": "http://127.0.0.1:9/pip",
    "VIRTUAL_ENV": "/somewhere/venv",
}


def test_uv_environment_keeps_network_settings_and_drops_resolution_ones() -> None:
    env = uv_environment({**NETWORK, **RESOLUTION, "PATH": "/bin"}, UV_CACHE_DIR="/c")
    for key, value in NETWORK.items():
        assert env[key] == value, key
    for key in RESOLUTION:
        assert key not in env, key
    assert env["UV_NO_CONFIG"] == "1" and env["UV_CACHE_DIR"] == "/c" and env["PATH"] == "/bin"
    assert network_settings(env) == {**NETWORK, "UV_NO_CONFIG": "1"}


def test_the_old_native_tls_name_becomes_uvs_current_one() -> None:
    assert uv_environment({"UV_NATIVE_TLS": "true"})["UV_SYSTEM_CERTS"] == "true"
    both = uv_environment({"UV_NATIVE_TLS": "true", "UV_SYSTEM_CERTS": "false"})
    assert both["UV_SYSTEM_CERTS"] == "false"


def test_index_credentials_go_to_uvs_variables_not_the_url() -> None:
    index = Index.parse("gpuenv-extra-2", "https://me:p%40ss@h/simple?token=tk-1234")
    assert index.url == "https://h/simple?token=tk-1234"  # uv needs the query
    assert index.shown == "https://h/simple"
    env = uv_environment({}, [index])
    assert env["UV_INDEX_GPUENV_EXTRA_2_USERNAME"] == "me"
    assert env["UV_INDEX_GPUENV_EXTRA_2_PASSWORD"] == "p@ss"
    names = [
        i.name for i in pip_indexes("https://d/simple", ["https://e/simple"], "https://t/cu124")
    ]
    assert names == ["gpuenv-default", "gpuenv-extra-1", "gpuenv-torch"]


def test_a_raw_at_in_a_password_goes_whole_to_uv_and_nowhere_else() -> None:
    index = Index.parse("gpuenv-default", "https://u2:pa@ss-LEAKY-42@h/simple")
    assert (index.url, index.shown) == ("https://h/simple", "https://h/simple")
    env = uv_environment({}, [index])
    assert env["UV_INDEX_GPUENV_DEFAULT_PASSWORD"] == "pa@ss-LEAKY-42"


def test_a_url_written_for_uv_holds_no_expandable_variable() -> None:
    assert (
        literal_url("https://h/x.whl?x=${SECRET}&y=${A}")
        == "https://h/x.whl?x=%24{SECRET}&y=%24{A}"
    )
    assert literal_url("https://h/$HOME/x.whl") == "https://h/$HOME/x.whl"  # uv expands ${} only


# --- mirrors ----------------------------------------------------------------------------------

MIRRORS = Mirrors(
    (
        Mirror("https://download.pytorch.org/whl", "https://m:pw@mirror.invalid/pt", "test"),
        Mirror("https://download.pytorch.org/whl/cu124", "https://fast.invalid/cu124", "test"),
        Mirror("https://conda.anaconda.org/conda-forge/", "http://mirror.invalid/cf/", "test"),
    )
)


@pytest.mark.parametrize(
    ("canonical", "fetched"),
    [
        ("https://download.pytorch.org/whl/cpu/torch-2.4.1%2Bcpu.whl", "https://m:pw@mirror.invalid/pt/cpu/torch-2.4.1%2Bcpu.whl"),
        ("https://download.pytorch.org/whl/cu124/torch.whl", "https://fast.invalid/cu124/torch.whl"),
        ("https://conda.anaconda.org/conda-forge/noarch/x.conda", "http://mirror.invalid/cf/noarch/x.conda"),
        ("https://download.pytorch.org/whlx/a.whl", "https://download.pytorch.org/whlx/a.whl"),
        ("https://elsewhere.invalid/a.whl", "https://elsewhere.invalid/a.whl"),
    ],
)  # fmt: skip
def test_mirrors_rewrite_prefixes_both_ways(canonical: str, fetched: str) -> None:
    assert MIRRORS.fetch_url(canonical) == fetched
    plain = fetched.replace("m:pw@", "")
    assert MIRRORS.canonical_url(plain) == canonical
    assert MIRRORS.canonical_url(fetched) == canonical


def test_mirror_credentials_are_an_index_of_their_own() -> None:
    first = MIRRORS.indexes()[0]
    assert (first.name, first.url, first.username, first.password) == (
        "gpuenv-mirror-1",
        "https://mirror.invalid/pt",
        "m",
        "pw",
    )


def _config(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_load_mirrors_variable_then_user_then_site(tmp_path: Path) -> None:
    site = _config(
        tmp_path / "etc" / "config.toml",
        '[mirrors]\n"https://a.invalid/x" = "https://site.invalid/x"\n'
        '"https://b.invalid/y" = "https://site.invalid/y"\n',
    )
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    _config(
        user_config(environ),
        '[mirrors]\n"https://a.invalid/x" = "https://user.invalid/x"\n'
        '"https://c.invalid/z/" = "https://user.invalid/z/"\n',
    )
    environ["GPUENV_MIRRORS"] = "https://c.invalid/z=https://env.invalid/z ; "
    got = load_mirrors(environ, site=site)
    by_canonical = {m.canonical.rstrip("/"): (m.mirror, m.source) for m in got.entries}
    assert by_canonical == {
        "https://c.invalid/z": ("https://env.invalid/z", "GPUENV_MIRRORS"),
        "https://a.invalid/x": ("https://user.invalid/x", str(user_config(environ))),
        "https://b.invalid/y": ("https://site.invalid/y", str(site)),
    }
    assert load_mirrors({"HOME": str(tmp_path / "nohome")}, site=tmp_path / "none").entries == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[mirrors]\n'https://a.invalid' = 3\n", "expected a URL = URL pair"),
        ("[mirrors]\n'not-a-url' = 'https://m.invalid'\n", "expected a URL = URL pair"),
        ("[mirror]\n", "unknown key 'mirror'"),
        ("mirrors = 1\n", "mirrors must be a table"),
        ("[mirrors\n", "cannot be read as TOML"),
        ("[mirrors]\n'https://a.invalid' = 'https://u:pw@m.invalid/?token=zz x'\n", "expected"),
    ],
)
def test_a_bad_config_file_is_a_usage_error_naming_it(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _config(tmp_path / "config.toml", text)
    with pytest.raises(UsageError) as caught:
        load_mirrors({"HOME": str(tmp_path)}, site=path)
    assert str(path) in caught.value.message and message in caught.value.message
    assert "pw" not in caught.value.message and "zz" not in caught.value.message


def test_a_config_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        load_mirrors({"HOME": str(tmp_path)}, site=fifo)


@pytest.mark.parametrize("value", ["https://a.invalid", "a=b", "https://u:pw@a.invalid=ftp"])
def test_a_bad_mirrors_variable_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="GPUENV_MIRRORS") as caught:
        load_mirrors({"GPUENV_MIRRORS": value, "HOME": "/nonexistent"}, site=Path("/none"))
    assert "pw" not in caught.value.message


# --- classification ------------------------------------------------------------------------

UV_DNS = """error: Request failed after 3 retries in 4.7s
  cause: Failed to fetch: http://nonexistent.invalid/simple/filelock/
  cause: error sending request for url (http://nonexistent.invalid/simple/filelock/)
  cause: client error (Connect)
  cause: dns error
  cause: error resolving DNS
  cause: failed to lookup address information: Name or service not known"""
UV_REFUSED = """error: Request failed after 3 retries in 8.5s
  cause: Failed to fetch: http://127.0.0.1:1/simple/filelock/
  cause: error sending request for url (http://127.0.0.1:1/simple/filelock/)
  cause: client error (Connect)
  cause: tcp connect error
  cause: Connection refused (os error 111)"""
UV_AUTH = """error: No solution found when resolving dependencies
  cause: Because filelock was not found in the package registry and you require filelock, we can conclude that your requirements are unsatisfiable.

hint: An index URL (http://127.0.0.1:46717/simple) could not be queried due to a lack of valid authentication credentials (401 Unauthorized)"""
UV_403 = """error: No solution found when resolving dependencies
  cause: Because filelock was not found in the package registry and you require filelock, we can conclude that your requirements are unsatisfiable.

hint: An index (http://127.0.0.1:44347/forbid/simple) returned a 403 Forbidden error. Check that the index URL is correct and the credentials are valid."""
UV_404 = """error: No solution found when resolving dependencies
  cause: Because torch was not found in the package registry and you require torch==2.4.1, we can conclude that your requirements are unsatisfiable."""
UV_TLS = """error: Failed to fetch: https://127.0.0.1:35613/simple/filelock/
  cause: error sending request for url (https://127.0.0.1:35613/simple/filelock/)
  cause: client error (Connect)
  cause: invalid peer certificate: UnknownIssuer"""
UV_TLS_PLAIN = """  cause: client error (Connect)
  cause: received corrupt message of type InvalidContentType"""
UV_TIMEOUT = """error: Failed to fetch: http://127.0.0.1:50497/simple/filelock/
  cause: error sending request for url (http://127.0.0.1:50497/simple/filelock/)
  cause: operation timed out"""
UV_INSTALL_401 = """error: Failed to fetch: http://u:pw@127.0.0.1:46717/files/filelock-3.16.1-py3-none-any.whl
  cause: HTTP status client error (401 Unauthorized) for url (http://u:pw@127.0.0.1:46717/files/filelock-3.16.1-py3-none-any.whl)"""
RATTLER_404 = """could not find subdir 'noarch' in channel 'http://127.0.0.1:42211/nochan/'
Caused by: HTTP status client error (404 File not found) for url (http://127.0.0.1:42211/nochan/noarch/repodata.json)"""
RATTLER_403 = "HTTP status client error (403 Forbidden) for url (http://h/forbid/chan/noarch/repodata_shards.msgpack.zst)"
UNSATISFIABLE = """error: No solution found when resolving dependencies
  cause: Because only transformers<=4.44.2 is available and you require transformers>=99, we can conclude that your requirements are unsatisfiable."""


@pytest.mark.parametrize(
    ("text", "cause", "url"),
    [
        (UV_DNS, "dns", "http://nonexistent.invalid/simple/filelock/"),
        (UV_REFUSED, "refused", "http://127.0.0.1:1/simple/filelock/"),
        (UV_AUTH, "auth", "http://127.0.0.1:46717/simple"),
        (UV_403, "auth", "http://127.0.0.1:44347/forbid/simple"),
        (UV_404, "not-found", None),
        (UV_TLS, "tls", "https://127.0.0.1:35613/simple/filelock/"),
        (UV_TLS_PLAIN, "tls", None),
        (UV_TIMEOUT, "timeout", "http://127.0.0.1:50497/simple/filelock/"),
        (UV_INSTALL_401, "auth", "http://127.0.0.1:46717/files/filelock-3.16.1-py3-none-any.whl"),
        (RATTLER_404, "not-found", "http://127.0.0.1:42211/nochan/noarch/repodata.json"),
        (RATTLER_403, "auth", "http://h/forbid/chan/noarch/repodata_shards.msgpack.zst"),
    ],
)
def test_failures_are_classified_with_their_url(text: str, cause: str, url: str | None) -> None:
    failure = classify(text)
    assert failure is not None and failure.cause == cause
    assert failure.url == url
    assert "pw" not in failure.detail and "u:pw" not in (failure.url or "")


def test_an_unsatisfiable_request_is_not_a_network_failure() -> None:
    assert classify(UNSATISFIABLE) is None
    assert classify("error: some 1.404.0 thing broke") is None


def test_a_404_names_the_missing_packages() -> None:
    failure = classify(
        UV_404.replace("torch was", "torch was not found in the package registry and triton was")
    )
    assert failure is not None and failure.packages[:2] == ("torch", "triton")


def test_the_error_names_the_index_by_role_and_the_fix() -> None:
    indexes = pip_indexes("http://u:pw@127.0.0.1:46717/simple", [], "https://t.invalid/whl/cu124")
    failure = classify(UV_INSTALL_401)
    assert failure is not None
    index = index_of(failure.url, indexes)
    assert index is not None and index.name == "gpuenv-default"  # files under the index root
    error = network_error(failure, index=index)
    assert error.exit_code == 5 and error.kind == "network"
    assert error.message.startswith("the default index http://127.0.0.1:46717/files/")
    assert "UV_INDEX_GPUENV_DEFAULT_USERNAME" in (error.hint or "")
    refused = classify(
        UV_REFUSED.replace("http://127.0.0.1:1/simple", "https://t.invalid/whl/cu124")
    )
    assert refused is not None
    torch = network_error(refused, index=index_of(refused.url, indexes))
    assert torch.message.startswith("the torch index https://t.invalid/whl/cu124/filelock/")
    assert "GPUENV_TORCH_INDEX" in (torch.hint or "")


def test_a_failing_mirror_says_what_it_mirrors() -> None:
    failure = classify(
        UV_TIMEOUT.replace("http://127.0.0.1:50497/simple", "https://fast.invalid/cu124")
    )
    assert failure is not None
    error = network_error(failure, index=None, mirrors=MIRRORS)
    assert "a mirror of https://download.pytorch.org/whl/cu124, from test" in error.message
    assert "UV_HTTP_TIMEOUT" in (error.hint or "")


@pytest.mark.parametrize("cause", ["dns", "refused", "timeout", "tls", "auth", "not-found"])
@pytest.mark.parametrize("role", [None, "the conda channel"])
def test_hints_survive_the_redaction_every_output_applies(cause: str, role: str | None) -> None:
    from gpuenv._network import Failure
    from gpuenv._redact import redact

    indexes = pip_indexes("https://d.invalid/simple", [], "https://t.invalid/whl/cu124")
    for index in (*indexes, None):
        error = network_error(Failure(cause, "https://d.invalid/x", "why"), index=index, role=role)
        assert redact(error.hint or "") == error.hint
        assert redact(error.message) == error.message


def test_a_torch_index_with_a_token_query_keeps_it_after_the_build_path(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    assert join_index("https://h.invalid/whl?token=abc123", "cu124") == (
        "https://h.invalid/whl/cu124?token=abc123"
    )
    assert join_index("https://h.invalid/whl/", "cpu") == "https://h.invalid/whl/cpu"
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(
        '[project]\nname = "t"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n'
        '[targets.cpu]\ngpu = "none"\n'
        '[pip]\ntorch-index = "https://h.invalid/whl?token=abc123"\n'
    )
    result = cli("-f", str(spec), "plan", "--json")
    assert result.code == 0, result.err
    assert '"https://h.invalid/whl/cpu"' in result.out and "abc123" not in result.out


@pytest.mark.parametrize("url", ["http://x\x00y/simple", "https://x/a\x07b", "file:///a\x7fb"])
def test_a_url_with_a_control_character_is_not_fetchable(url: str) -> None:
    """``index-url = "http://x\\u0000y/simple"`` (a TOML escape) passed the spec's check
    and reached uv's arguments: subprocess refused the NUL byte with exit 70."""
    assert not is_fetchable_url(url)


def test_a_nul_byte_that_reaches_a_process_is_a_tool_error_not_a_bug() -> None:
    from gpuenv import _proc
    from gpuenv.errors import ExternalToolError

    match = "cannot be started: embedded null byte"
    with pytest.raises(ExternalToolError, match=match):
        _proc.run(["true", "a\x00b"], timeout=5, what="true")
    with pytest.raises(ExternalToolError, match=match):
        _proc.stream(["true", "a\x00b"], timeout=5, what="true", on_line=lambda _: None)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("UV_HTTP_TIMEOUT", "-1"),
        ("UV_HTTP_TIMEOUT", "2.5"),
        ("UV_HTTP_CONNECT_TIMEOUT", "abc"),
        ("UV_REQUEST_TIMEOUT", " 30"),
        ("UV_HTTP_RETRIES", "4294967296"),
        ("UV_CONCURRENT_DOWNLOADS", "0"),
    ],
)
def test_a_number_uv_would_refuse_is_a_usage_error_naming_the_variable(
    name: str, value: str
) -> None:
    # uv refuses these at start-up; its words came back under another error's
    # sentence and fix ("no Python 3.11 for target prefix ...: install Python 3.11 here").
    with pytest.raises(UsageError) as raised:
        uv_environment({name: value, "PATH": "/usr/bin"})
    assert f"{name}={value!r}" in raised.value.message
    assert name in (raised.value.hint or "") and "unset" in (raised.value.hint or "")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("UV_HTTP_TIMEOUT", "0"),
        ("UV_HTTP_TIMEOUT", ""),
        ("UV_HTTP_TIMEOUT", "+90"),
        ("UV_HTTP_RETRIES", "4294967295"),
        ("UV_CONCURRENT_DOWNLOADS", "50"),
    ],
)
def test_a_number_uv_accepts_passes_through_as_written(name: str, value: str) -> None:
    assert uv_environment({name: value})[name] == value


# A company mirror of the default index and of its files, no credentials in the URLs
# (a newcomer's network test: the documented UV_INDEX_GPUENV_MIRROR_N_* worked for
# install and got 401 from lock, whose hint named UV_INDEX_GPUENV_DEFAULT_*, which
# install did not take).
COMPANY = Mirrors(
    (
        Mirror("https://index.invalid/simple", "http://mirror.invalid/simple", "config.toml"),
        Mirror("https://files.invalid", "http://mirror.invalid/files", "config.toml"),
    )
)


@pytest.mark.parametrize("given", ["GPUENV_MIRROR_1", "GPUENV_DEFAULT"])
def test_a_mirrors_credentials_serve_lock_and_install_by_either_name(given: str) -> None:
    environ = {f"UV_INDEX_{given}_USERNAME": "u", f"UV_INDEX_{given}_PASSWORD": "p"}
    lock = uv_environment(  # the lock resolves against the mirror's URL, by the index's name
        environ, [Index.parse("gpuenv-default", "http://mirror.invalid/simple")], mirrors=COMPANY
    )
    assert lock["UV_INDEX_GPUENV_DEFAULT_USERNAME"] == "u"
    assert lock["UV_INDEX_GPUENV_DEFAULT_PASSWORD"] == "p"
    install = uv_environment(  # install names the lock's canonical index and the mirrors
        environ,
        [Index.parse("gpuenv-default", "https://index.invalid/simple"), *COMPANY.indexes()],
        mirrors=COMPANY,
    )
    assert install["UV_INDEX_GPUENV_MIRROR_1_PASSWORD"] == "p"
    assert "UV_INDEX_GPUENV_MIRROR_2_PASSWORD" not in install, "the files' own mirror: its own"


def test_a_401_through_a_mirror_names_the_mirrors_variables() -> None:
    failure = classify(
        "error: Failed to fetch: `http://mirror.invalid/simple/six/`\n"
        "  Caused by: HTTP status client error (401 Unauthorized) for url "
        "(http://mirror.invalid/simple/six/)\n"
    )
    assert failure is not None and failure.cause == "auth"
    index = Index.parse("gpuenv-default", "http://mirror.invalid/simple")
    error = network_error(failure, index=index, mirrors=COMPANY)
    assert "UV_INDEX_GPUENV_MIRROR_1_USERNAME" in (error.hint or "")
    assert "a mirror of https://index.invalid/simple" in error.message


def test_a_relative_file_setting_reaches_uv_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv runs a lock in a scratch folder: NETRC=../netrc worked for install only."""
    monkeypatch.chdir(tmp_path)
    environ = {"NETRC": "../netrc", "SSL_CERT_FILE": "ca.pem", "SSL_CERT_DIR": "/etc/ssl/certs"}
    env = uv_environment(environ)
    assert env["NETRC"] == str(tmp_path.parent / "netrc")
    assert env["SSL_CERT_FILE"] == str(tmp_path / "ca.pem")
    assert env["SSL_CERT_DIR"] == "/etc/ssl/certs"


UV_TUNNEL = """error: Request failed after 3 retries in 7.1s
  cause: Failed to fetch: https://pkgs.invalid/simple/torch/
  cause: error sending request for url (https://pkgs.invalid/simple/torch/)
  cause: client error (Connect)
  cause: tunnel error: failed to create underlying connection
  cause: tcp connect error
  cause: Connection refused (os error 111)"""
_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


@pytest.mark.parametrize("variable", _PROXIES)
def test_a_refused_connection_through_a_proxy_names_the_proxy_and_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """A dead proxy was reported as the index refusing the connection, with a hint
    naming HTTPS_PROXY whatever was set: the proxy is named (redacted), and so is the
    variable that is set; --json carries both."""
    for name in (*_PROXIES, "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "http://puser:pr0xy-s3cret@127.0.0.1:9")
    url = UV_TUNNEL.replace("https://", "http://") if "http_" in variable.lower() else UV_TUNNEL
    failure = classify(url)
    assert failure is not None and failure.cause == "refused"
    index = Index.parse("gpuenv-default", "https://pkgs.invalid/simple")
    error = network_error(failure, index=index, stderr_tail=url)
    assert (
        f"cannot be used: the proxy http://127.0.0.1:9 (from {variable}) refused the connection"
    ) in error.message
    assert f"check the proxy {variable} names" in (error.hint or "")
    assert error.details()["proxy"] == {"variable": variable, "url": "http://127.0.0.1:9"}
    assert "pr0xy-s3cret" not in f"{error.message} {error.hint} {error.details()}"


def test_a_proxy_that_does_not_apply_to_the_url_is_not_blamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NO_PROXY lets the host bypass it, and an HTTPS proxy is not an http URL's."""
    for name in (*_PROXIES, "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "localhost,.invalid")
    failure = classify(UV_REFUSED)  # an http URL
    assert failure is not None
    index = Index.parse("gpuenv-default", "http://127.0.0.1:1/simple")
    assert "proxy" not in network_error(failure, index=index).message
    tunnel = classify(UV_TUNNEL)
    assert tunnel is not None
    bypassed = network_error(tunnel, index=index, stderr_tail=UV_TUNNEL)
    assert "the connection was refused" in bypassed.message and "proxy" not in bypassed.message


@pytest.mark.parametrize(
    "value", ["not a url", "http://[bad", "ftp://127.0.0.1:9", "http://127.0.0.1:notaport"]
)
def test_a_proxy_setting_uv_would_ignore_is_a_usage_error_naming_it(value: str) -> None:
    """uv ignored these and went direct, without a word."""
    with pytest.raises(UsageError, match="is not a proxy URL uv can use") as caught:
        uv_environment({"https_proxy": value})
    assert "https_proxy=" in caught.value.message


def test_a_bad_proxy_setting_never_shows_its_credentials() -> None:
    with pytest.raises(UsageError) as caught:
        uv_environment({"HTTP_PROXY": "http://user:se cretQ@proxy.invalid:3128"})
    assert "cretQ" not in caught.value.message and "***@proxy.invalid:3128" in caught.value.message


@pytest.mark.parametrize("value", ["127.0.0.1:9", "http://u:p@proxy.invalid:3128", "socks5://h:1"])
def test_a_usable_proxy_setting_passes(value: str) -> None:
    assert uv_environment({"ALL_PROXY": value})["ALL_PROXY"] == value
