"""The readers of uv's prose (gpuenv.lock._uv_output) against uv's own output, captured
at 40, 80 and 1000 columns (tests/fixtures/uv_output/, uv 0.13: an unsatisfiable
request, a refused index, a build that imports torch to give its metadata). Each reads
the same at every width; and uv is always run at one width."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuenv._network import UV_COLUMNS, uv_environment
from gpuenv.lock._uv_output import (
    PROJECT_NAME,
    TAIL_LINES,
    build_needing_torch,
    classify,
    error_tail,
    explain_unsatisfiable,
)

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "uv_output"
WIDTHS = (40, 80, 1000)


def captured(name: str, width: int) -> str:
    return (CAPTURED / f"{name}-{width}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_build_that_imports_torch_is_named_at_every_width(width: int) -> None:
    text = captured("build-needs-torch", width)
    assert build_needing_torch(text) == "attn-like"
    tail = error_tail(text)
    assert len(tail.splitlines()) <= TAIL_LINES
    assert build_needing_torch(tail) == "attn-like", "the headline survives the tail"


def test_the_plain_last_lines_lost_the_headline_even_unwrapped() -> None:
    """Why error_tail keeps the headline: 23 lines at 1000 columns."""
    text = captured("build-needs-torch", 1000)
    assert build_needing_torch("\n".join(text.splitlines()[-TAIL_LINES:])) is None


@pytest.mark.parametrize("width", WIDTHS)
def test_a_refused_index_is_classified_with_its_url_at_every_width(width: int) -> None:
    failure = classify(captured("refused", width))
    assert failure is not None
    assert (failure.cause, failure.url) == ("refused", "http://127.0.0.1:9/simple/x/")
    assert failure.detail == "Connection refused (os error 111)"


def test_an_unsatisfiable_request_reads_the_same_at_every_width() -> None:
    explained = {explain_unsatisfiable(captured("unsatisfiable", w)) for w in WIDTHS}
    assert len(explained) == 1, explained
    ((message, hint),) = explained
    assert message.startswith("Because flask was not found in the provided package locations")
    assert message.endswith("the requirements are unsatisfiable.")
    assert hint is not None and hint.startswith("Packages were unavailable")
    assert all(classify(captured("unsatisfiable", w)) is None for w in WIDTHS)


def test_uv_runs_at_one_width_whatever_the_terminal() -> None:
    for terminal in ("40", "80", ""):
        env = uv_environment({"COLUMNS": terminal, "PATH": "/usr/bin"})
        assert env["COLUMNS"] == UV_COLUMNS


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (
            "401",
            "could not be queried due to a lack of valid authentication credentials (401 Unauthorized)",
        ),
        (
            "403",
            "returned a 403 Forbidden error. Check that the index URL is correct and the credentials are valid.",
        ),
    ],
)
def test_a_refusal_at_lock_time_is_its_http_status_never_the_resolvers_conclusion(
    code: str, said: str
) -> None:
    """uv reports a 401/403 from an index page as "Because torch was not found in the
    package registry and gpuenv-lock-request depends on torch==...": the message showed
    that sentence (about the wrong index, naming gpuenv's throw-away project) where the
    HTTP status belongs, in the text and in --json."""
    from gpuenv._network import Index, network_error

    text = (
        "error: No solution found when resolving dependencies\n"
        f"  cause: Because torch was not found in the package registry and {PROJECT_NAME} "
        "depends on torch==2.4.1, we can conclude that your requirements are unsatisfiable.\n\n"
        f"hint: An index URL (http://127.0.0.1:9/simple) {said}"
    )
    failure = classify(text)
    assert failure is not None and failure.cause == "auth"
    reason = "Unauthorized" if code == "401" else "Forbidden"
    assert failure.detail == f"HTTP {code} {reason}"
    error = network_error(failure, index=Index.parse("gpuenv-default", "http://127.0.0.1:9/simple"))
    assert error.message.endswith(f"the server refused the credentials (HTTP {code} {reason})")
    assert PROJECT_NAME not in error.message and "Because" not in error.message


# uv 0.13's words when git cannot fetch a git requirement (DETR's panopticapi, on a
# machine that reaches the package index only).
GIT_UNREACHABLE = """error: Failed to download and build `panopticapi @ git+https://github.com/cocodataset/panopticapi.git`
  Caused by: Git operation failed
  Caused by: failed to clone into: /root/.cache/gpuenv/uv/git-v2/db/ce0d949df9fcfd49
  Caused by: process didn't exit successfully: `/usr/bin/git fetch --force --update-head-ok 'https://github.com/cocodataset/panopticapi.git' '+HEAD:refs/remotes/origin/HEAD'` (exit status: 128)
--- stderr
fatal: unable to access 'https://github.com/cocodataset/panopticapi.git/': Could not resolve host: github.com
"""


def test_a_git_requirement_git_cannot_fetch_is_named_as_one() -> None:
    from gpuenv.lock.uv import _git_failure

    failure = classify(GIT_UNREACHABLE)
    assert failure is not None and failure.cause == "dns"
    error = _git_failure(GIT_UNREACHABLE, failure.cause, "")
    assert error is not None
    assert error.message == (
        "panopticapi comes from git (git+https://github.com/cocodataset/panopticapi.git), "
        "and git could not fetch it: unable to access "
        "'https://github.com/cocodataset/panopticapi.git/': Could not resolve host: github.com"
    )
    # the package index may serve no such project, or another one by that name (PyPI's
    # clip is a clipboard manager, not OpenAI's CLIP): said, not promised
    assert error.hint == (
        "reach that host from this machine (a proxy: HTTPS_PROXY), or, where the package "
        "index serves this same project, depend on a release of it instead of the git URL "
        "(panopticapi==VERSION; a project of that name there may be another one)"
    )
    assert _git_failure("error: 404 Not Found for url (x)", "not-found", "") is None
