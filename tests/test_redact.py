"""The one redaction rule: every secret form, in URLs and in free text."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuenv import _redact
from gpuenv._redact import is_secret_param, redact, redact_data, redact_url, remember_secret

SECRET = "s3cr3t-V4lue"


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://user:pw@host/simple", "https://host/simple"),
        ("https://__token__@host/simple", "https://host/simple"),
        ("https://u%40x:p%2Fw@host:8443/a", "https://host:8443/a"),
        ("https://host/simple?token=abc", "https://host/simple"),
        ("https://host/simple?v=1&access_token=abc&x=2", "https://host/simple?v=1&x=2"),
        ("https://host/f.whl?X-Amz-Signature=ab&X-Amz-Credential=c&keep=1", "https://host/f.whl?keep=1"),
        ("https://host/f.whl?X-Goog-Signature=ab", "https://host/f.whl"),
        ("https://acct.blob/f.whl?sv=2020&sig=abc%2Bd", "https://acct.blob/f.whl?sv=2020"),
        ("https://host/f.whl?Signature=a&Policy=b&Key-Pair-Id=k", "https://host/f.whl?Key-Pair-Id=k"),
        ("https://host/x?API_KEY=1&apikey=2&private_token=3&password=4", "https://host/x"),
        ("https://host/x?auth=1&key=2&secret=3&client_secret=4&jwt=5", "https://host/x"),
        ("https://conda.example/t/tk-123/chan/noarch/x.conda", "https://conda.example/chan/noarch/x.conda"),
        ("https://host/simple#sha256=ab", "https://host/simple#sha256=ab"),
        ("https://host/a%2Bb?q=1%2C2", "https://host/a%2Bb?q=1%2C2"),  # untouched byte for byte
        ("file:///srv/channel/noarch/x.tar.bz2", "file:///srv/channel/noarch/x.tar.bz2"),
        ("not a url", "not a url"),
        ("https://[::1", "https://[::1"),  # unparsable: left as it is
        ("https://host?x=a@b", "https://host?x=a@b"),  # an @ in the query is not userinfo
        # A raw "@" in a password: the userinfo ends at the last "@" before the host.
        ("https://u2:pa@ss-LEAKY-42@host/simple", "https://host/simple"),
        ("https://u:a@b@c@host:8/x@y?q=a@b", "https://host:8/x@y?q=a@b"),
        ("https://u':p\"<w`@host/x", "https://host/x"),  # quotes are userinfo in a value
        # "/t/<name>/" deeper in a path, and a folder named like an assignment, stay.
        ("https://h/simple/t/team/A_TOKEN=q/x.whl", "https://h/simple/t/team/A_TOKEN=q/x.whl"),
    ],
)  # fmt: skip
def test_redact_url_removes_every_secret_form(url: str, clean: str) -> None:
    assert redact_url(url) == clean
    assert redact_url(clean) == clean, "idempotent"


@pytest.mark.parametrize(
    "name", ["token", "TOKEN", "access_token", "X-Amz-Security-Token", "sig", "passwd", "pwd"]
)
def test_secret_parameter_names(name: str) -> None:
    assert is_secret_param(name)


@pytest.mark.parametrize("name", ["v", "platform", "version", "sha256", "format", "page"])
def test_ordinary_parameter_names_are_kept(name: str) -> None:
    assert not is_secret_param(name)


def test_text_forms_uv_and_rattler_print() -> None:
    text = (
        "error: Failed to fetch: https://u:pw@h/simple/torch/?token=abc\n"
        "  cause: HTTP status client error (401 Unauthorized) for url (https://u:pw@h/x.whl).\n"
        "Authorization: Basic dTpwdw==\n"
        "authorization=Bearer eyJabc\n"
        "UV_INDEX_GPUENV_TORCH_PASSWORD=hunter2 MY_TOKEN=abc ok=1"
    )
    got = redact(text)
    for secret in ("u:pw", "token=abc", "dTpwdw==", "eyJabc", "hunter2", "MY_TOKEN=abc"):
        assert secret not in got
    assert "https://h/simple/torch/" in got and "(https://h/x.whl)." in got
    assert "Authorization: Basic ***" in got and "ok=1" in got


def test_text_rules_leave_url_paths_whole_and_catch_a_raw_at_password() -> None:
    got = redact("fetched https://u2:pa@ss-LEAKY-42@h/simple/t/team/A_TOKEN=q/x.whl; A_TOKEN=z")
    assert got == "fetched https://h/simple/t/team/A_TOKEN=q/x.whl; A_TOKEN=***"
    assert redact("/home/a;touch P;#/B_TOKEN=z/x") == "/home/a;touch P;#/B_TOKEN=z/x"
    assert redact("--env=MY_TOKEN=abc;HF_TOKEN=def") == "--env=MY_TOKEN=***"


def test_remembered_secrets_are_masked_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_redact, "_remembered", set())
    remember_secret(SECRET + "/+")
    remember_secret("ab")  # too short to mask safely: ignored
    got = redact(f"uv said {SECRET}/+ and {SECRET}%2F%2B; ab stays")
    assert SECRET not in got and got == "uv said *** and ***; ab stays"


def test_redact_data_reaches_every_string() -> None:
    payload = {"a": ["https://u:p@h/x", {"https://k@h/?token=t": 1}], "n": 3, "b": None}
    assert redact_data(payload) == {"a": ["https://h/x", {"https://h/": 1}], "n": 3, "b": None}


def test_importing_it_is_cheap() -> None:
    """It is on the error path of ``gpuenv run``: nothing but ``re`` at import."""
    code = "import sys, gpuenv._redact; assert 'urllib.parse' not in sys.modules"
    path = f"import sys; sys.path[:0] = {sys.path!r}"
    subprocess.run([sys.executable, "-I", "-S", "-c", f"{path}; {code}"], check=True)


def test_requirements_and_ordinary_text_are_left_alone() -> None:
    text = "tokenizers==0.20.0\nmax_tokens=5 secret_santa==1.0 https://h/a.whl?v=1\ntoken: x"
    assert redact(text) == text
