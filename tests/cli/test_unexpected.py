"""The net under every command: an OSError that no write site translated is still the
machine's fault (a full disk, a read-only file system: exit 5, named as such), while
any other unexpected exception is a bug (exit 70, with the bug-report hint)."""

from __future__ import annotations

import argparse
import errno
import json

import pytest

from gpuenv.cli import main, plan_cmd
from gpuenv.cli._common import Settings


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
def test_a_machine_fault_that_escaped_its_write_site_is_exit_5_naming_the_path(
    code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(args: argparse.Namespace, settings: Settings) -> int:  # plan_cmd.run's signature
        raise OSError(code, "fault", "/store/prefixes/cpu-0123/file")

    monkeypatch.setattr(plan_cmd, "run", run)
    assert main(["plan", "--json"]) == 5
    body = json.loads(capsys.readouterr().out)["error"]
    assert body["kind"] == "storage"
    assert body["path"] == "/store/prefixes/cpu-0123/file"
    assert body["errno"] == errno.errorcode[code]


def test_any_other_unexpected_error_is_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(args: argparse.Namespace, settings: Settings) -> int:
        raise OSError(errno.EINVAL, "invalid argument")

    monkeypatch.setattr(plan_cmd, "run", run)
    assert main(["plan"]) == 70
    assert "bug" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("signum", "code", "line"), [(15, 143, "SIGTERM"), (2, 130, "interrupted")]
)
def test_a_signal_disguised_as_another_exception_is_still_the_signal(
    signum: int,
    code: int,
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A signal's exception raised inside importlib's module-lock bookkeeping comes out
    as ``KeyError: <thread id>`` (seen once in ~20 start-up SIGTERMs): the handler's
    record makes it the signal's line and exit code, not "internal error"."""
    from gpuenv.cli import _signals

    monkeypatch.setattr(_signals, "_received", [])
    handler = _signals._raise_interrupted if signum != 2 else _signals._raise_keyboard_interrupt

    def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            handler(signum, None)
        except KeyboardInterrupt:
            raise KeyError(140234567) from None  # what importlib let out instead
        return 0

    monkeypatch.setattr(plan_cmd, "run", run)
    assert main(["plan"]) == code
    err = capsys.readouterr().err
    assert line in err
    assert "internal error" not in err
    assert len(err.strip().splitlines()) == 1
