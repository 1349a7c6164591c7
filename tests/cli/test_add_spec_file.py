"""``gpuenv add``/``remove`` rewrite the spec file as the user keeps it: its mode
(a 0600 spec stayed private, a 0444 one was replaced by a 0644 copy), a spec reached
through a symbolic link edited where it lives (the link was replaced by a copy), a
read-only spec refused by name, every byte outside the edited list kept."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.lock.fakes import FakeConda, FakePip

SPEC = """# our training box
[project]
name = "proj"   # short

[stack]
python = "3.11"
torch = "2.4.*"

[targets.cpu]
gpu = "none"

[pip]
# what the code imports
dependencies = [
  "transformers>=1",  # tokenizers come with it
]
"""


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[FakePip, FakeConda]:
    from gpuenv.lock import backends

    pip, conda = FakePip(), FakeConda()
    monkeypatch.setattr(backends, "resolvers", lambda: (pip, conda))
    return pip, conda


def _spec(directory: Path, mode: int = 0o644) -> Path:
    spec = directory / "gpuenv.toml"
    spec.write_text(SPEC)
    spec.chmod(mode)
    return spec


def test_add_keeps_every_other_byte_and_the_file_mode(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    spec = _spec(tmp_path, 0o600)
    result = cli("-f", str(spec), "add", "--no-install", "pillow>=1")
    assert result.code == 0, result.err
    text = spec.read_text()
    assert "".join(x for x in text.splitlines(True) if "pillow" not in x) == SPEC, text
    assert oct(spec.stat().st_mode & 0o777) == oct(0o600)
    assert cli("-f", str(spec), "remove", "--no-install", "pillow").code == 0
    assert spec.read_text() == SPEC
    assert oct(spec.stat().st_mode & 0o777) == oct(0o600)


def test_a_read_only_spec_is_refused_by_name_and_left_as_it_was(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    spec = _spec(tmp_path, 0o444)
    for line in (["add", "pillow"], ["remove", "transformers"]):
        result = cli("-f", str(spec), *line, "--no-install")
        assert result.code == 2, result.err
        assert f"{spec} is read-only (mode 0444)" in result.err
        assert f"chmod u+w {spec}" in result.err and "Traceback" not in result.err
    assert spec.read_text() == SPEC and spec.stat().st_mode & 0o777 == 0o444
    assert not (tmp_path / "gpuenv.lock").exists()


def test_a_linked_spec_is_edited_where_it_lives_and_stays_a_link(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    real = _spec(shared)
    project = tmp_path / "project"
    project.mkdir()
    link = project / "gpuenv.toml"
    link.symlink_to(os.path.relpath(real, project))
    result = cli("-f", str(link), "add", "--no-install", "pillow")
    assert result.code == 0, result.err
    assert link.is_symlink() and "pillow" in real.read_text()
    assert (project / "gpuenv.lock").is_file()  # the lock is the project's, beside the link


def test_adding_what_the_spec_has_already_says_so_and_leaves_the_file_alone(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """``gpuenv add`` of a line the spec holds already said "added" it."""
    spec = _spec(tmp_path)
    before = spec.stat().st_mtime_ns
    again = cli("-f", str(spec), "add", "--no-install", "transformers>=1")
    assert again.code == 0, again.err
    said = f"[pip] dependencies has transformers>=1 already ({spec}:15): nothing added"
    assert said in again.out
    assert "added" not in again.out.replace("nothing added", "")
    assert spec.read_text() == SPEC and spec.stat().st_mtime_ns == before
    both = cli("-f", str(spec), "add", "--no-install", "--json", "transformers>=1", "pillow")
    assert both.json()["changed"] == ["pillow"], both.out


def test_an_add_over_a_listed_package_keeps_its_bound_and_says_what_it_was(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpuenv add 'transformers[torch]'` over `transformers>=1` replaced the entry: the
    bound was gone, and the output said only "added transformers[torch]". uv add merges
    the extra into the entry and keeps the bound; so does gpuenv, and says so."""
    spec = _spec(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = cli("add", "--no-install", "transformers[torch]", "pillow")
    assert result.code == 0, result.err
    assert result.out.splitlines()[:2] == [
        "changed transformers>=1 → transformers[torch]>=1 in [pip] dependencies (gpuenv.toml:15)",
        "added pillow to [pip] dependencies (gpuenv.toml:16)",
    ], result.out
    assert spec.read_text() == SPEC.replace(
        '"transformers>=1",  # tokenizers come with it\n',
        '"transformers[torch]>=1",  # tokenizers come with it\n  "pillow",\n',
    )
    again = cli("add", "--no-install", "--json", "transformers[sentencepiece]<5")
    assert again.json()["edits"] == [
        {
            "requirement": "transformers[sentencepiece,torch]<5",
            "was": "transformers[torch]>=1",
            "list": "pip.dependencies",
            "file": "gpuenv.toml",
            "line": 15,
        }
    ], "a bound given replaces the entry's; the extras add up"


def test_remove_names_each_list_and_line_it_removed_from(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gpuenv remove transformers` of a package in two lists said "removed
    transformers>=1, transformers": not which list each was in, nor where; add names
    them. remove now says it the same way, with the line the entry was on."""
    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC + '\n[pip.groups]\ndev = ["pytest", "transformers"]\n')
    monkeypatch.chdir(tmp_path)
    result = cli("remove", "--no-install", "transformers")
    assert result.code == 0, result.err
    assert result.out.splitlines()[:2] == [
        "removed transformers>=1 from [pip] dependencies (gpuenv.toml:15)",
        "removed transformers from [pip.groups] dev (gpuenv.toml:19)",
    ], result.out
    assert cli("add", "--no-install", "--target", "cpu", "idna").code == 0
    both = cli("remove", "--no-install", "--json", "idna", "pytest")
    assert both.code == 0, both.err
    assert [(e["requirement"], e["list"], e["line"]) for e in both.json()["edits"]] == [
        ("idna", "targets.cpu.pip.dependencies", 13),
        ("pytest", "pip.groups.dev", 21),
    ]


@pytest.mark.parametrize("group", ["", "Bad Group!", ".x"])
def test_a_group_that_is_no_group_name_is_refused_by_flag_and_edits_nothing(
    cli: Callable[..., CliResult], tmp_path: Path, group: str
) -> None:
    """``add -g '' idna`` added idna to the project's own dependencies; a group name
    with a space was reported at a line of the edited text the file never had."""
    spec = _spec(tmp_path)
    for line in (["add", "--group", group, "pillow"], ["remove", "--group", group, "pillow"]):
        result = cli("-f", str(spec), *line, "--no-install")
        assert result.code == 2, result.err
        assert f"--group {group!r}: not a group name" in result.err
    assert spec.read_text() == SPEC


@pytest.mark.parametrize("name", ["", "pillow>=1", "../x"])
def test_remove_takes_package_names(
    cli: Callable[..., CliResult], tmp_path: Path, name: str
) -> None:
    spec = _spec(tmp_path)
    result = cli("-f", str(spec), "remove", "--no-install", name)
    assert result.code == 2 and f"{name!r} is not a package name" in result.err, result.err
    assert spec.read_text() == SPEC


def test_an_add_waits_for_another_edit_of_the_same_spec(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three adds at once each read the spec and wrote it back: one line was lost while
    all three said "added". An edit now holds the spec's lock until it is done."""
    import threading

    from gpuenv.store import Store

    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    spec = _spec(tmp_path)
    results: list[CliResult] = []
    with Store(tmp_path / "store").spec_locked(spec):  # another add, mid-edit
        waiting = threading.Thread(
            target=lambda: results.append(cli("-f", str(spec), "add", "--no-install", "pillow"))
        )
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive() and spec.read_text() == SPEC  # it waits, reads nothing
        spec.write_text(SPEC.replace('"transformers>=1",', '"transformers>=1",\n  "idna",'))
    waiting.join(60)
    assert results and results[0].code == 0, results
    text = spec.read_text()
    assert '"idna"' in text and '"pillow"' in text  # the other edit is kept


def test_a_windows_spec_keeps_its_byte_order_mark_and_line_ends(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """The byte order mark a Windows editor writes was dropped by add."""
    spec = tmp_path / "gpuenv.toml"
    original = ("\ufeff" + SPEC.replace("\n", "\r\n")).encode("utf-8")
    spec.write_bytes(original)
    assert cli("-f", str(spec), "add", "--no-install", "pillow").code == 0
    edited = spec.read_bytes()
    assert edited.startswith(b"\xef\xbb\xbf# our training box\r\n"), edited[:40]
    assert b'"pillow"' in edited and b"\n" not in edited.replace(b"\r\n", b"")
    assert cli("-f", str(spec), "remove", "--no-install", "pillow").code == 0
    assert spec.read_bytes() == original


def test_rollback_of_a_target_the_spec_does_not_name_says_so(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """It said "target nosuch has no previous generation" (exit 4) for a typo."""
    spec = _spec(tmp_path)
    result = cli("-f", str(spec), "rollback", "--target", "nosuch")
    assert result.code == 2, result.err
    assert "no target named 'nosuch'" in result.err and "targets in this spec: cpu" in result.err


@contextlib.contextmanager
def _chattr(path: Path, flag: str) -> Iterator[None]:
    """``chattr +flag path`` for the block (root only, on a file system with the flags);
    the test is skipped where it cannot be set."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("no chattr here")
    tried = subprocess.run([chattr, f"+{flag}", str(path)], check=False, capture_output=True)
    if tried.returncode:
        pytest.skip("chattr +i/+a needs root and a file system with inode flags")
    try:
        yield
    finally:
        subprocess.run([chattr, f"-{flag}", str(path)], check=True)


def test_an_immutable_spec_or_lock_is_named_with_the_attribute_not_a_mode(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """mode 0644 and still refused, to root too: "read-only (mode 0644)" and "chmod u+w"
    said nothing true. The attribute is named, with how to remove it."""
    spec = _spec(tmp_path, 0o644)
    with _chattr(spec, "i"):
        result = cli("-f", str(spec), "add", "--no-install", "pillow")
    assert result.code == 2, result.err
    assert f"{spec} is immutable (chattr +i)" in result.err
    assert f"chattr -i {spec}" in result.err and "chmod" not in result.err
    assert spec.read_text() == SPEC


def test_a_write_refused_by_a_chattr_attribute_names_it_over_the_callers_hint(
    tmp_path: Path,
) -> None:
    from gpuenv import _fs
    from gpuenv.errors import StorageError

    lock = tmp_path / "gpuenv.lock"
    lock.write_text("old\n")
    with _chattr(lock, "a"), pytest.raises(StorageError) as refused:
        _fs.atomic_write_text(lock, "new\n", what="the lock", hint="make the folder writable")
    assert refused.value.hint == (
        f"{lock} is append-only (chattr +a): remove it with chattr -a {lock} as root"
    )
    assert lock.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gpuenv.lock"]  # no temporary left


def test_a_stale_immutable_lock_is_refused_with_the_attributes_fix(tmp_path: Path) -> None:
    """install's relock of a stale lock that a chattr attribute keeps from being written
    is refused before resolving, with the same advice every refused write gives."""
    from gpuenv.errors import StorageError
    from gpuenv.lock.project import _require_rewritable

    lock = tmp_path / "gpuenv.lock"
    lock.write_text("old\n")
    _require_rewritable(lock, {"cpu": ["the spec changed"]})  # writable: nothing said
    with _chattr(lock, "i"), pytest.raises(StorageError) as refused:
        _require_rewritable(lock, {"cpu": ["the spec changed"]})
    assert "is out of date for cpu and cannot be rewritten here" in refused.value.message
    assert refused.value.hint == (
        f"{lock} is immutable (chattr +i): remove it with chattr -i {lock} as root"
    )
