"""gpuenv.lock on disk: deterministic bytes, round trips, versioning."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from gpuenv.errors import FileFormatError, LockIntegrityError
from gpuenv.lock.format import LATEST, parse_lock_text, read_lock, render_lock, write_lock
from gpuenv.lock.model import (
    CondaPackage,
    Lock,
    LockedHardware,
    LockedTarget,
    PipPackage,
    StackSummary,
)


def _wheel(name: str, version: str) -> str:
    return f"https://idx.invalid/{name.replace('-', '_')}-{version}-py3-none-any.whl"


def _target(
    name: str, pip: tuple[PipPackage, ...], conda: tuple[CondaPackage, ...] = ()
) -> LockedTarget:
    cpu = name == "cpu"
    return LockedTarget(
        name=name,
        input_hash="sha256:" + "0" * 64,
        platform="linux-64",
        hardware=(
            LockedHardware(True, None, (), None, None, "declared")
            if cpu
            else LockedHardware(False, "H100", ("9.0",), "550.54.15", "12.4", "declared")
        ),
        stack=StackSummary(
            "3.11",
            None if cpu else "12.4",
            "cpu" if cpu else "cu124",
            "2.4.1",
            None if cpu else "0.19.1",
            None,
            None if cpu else "9.1.0.70",
            None if cpu else "2.20.5",
            () if cpu else ("8.0", "9.0"),
            "https://download.pytorch.org/whl/" + ("cpu" if cpu else "cu124"),
        ),
        virtual_packages=(
            {"__glibc": "2.28"}
            if cpu
            else {"__cuda": "12.4", "__cuda_arch": "9.0", "__glibc": "2.28"}
        ),
        pip=pip,
        conda=conda,
    )


PIP = tuple(
    PipPackage(n, v, _wheel(n, v), c * 64, "https://idx.invalid", req)
    for n, v, c, req in [
        ("torch", "2.4.1+cu124", "a", ("filelock", "typing-extensions")),
        ("filelock", "3.15.4", "b", ()),
        ("typing-extensions", "4.12.2", "c", ()),
        ("torchvision", "0.19.1+cu124", "d", ("torch",)),
    ]
)
CPU_PIP = (
    PipPackage("torch", "2.4.1+cpu", _wheel("torch", "2.4.1+cpu"), "5" * 64, None, ("filelock",)),
    PIP[1],
)
CONDA = (
    CondaPackage(
        "python",
        "3.11.9",
        "h_0",
        0,
        "conda-forge",
        "linux-64",
        "https://c.invalid/linux-64/python-3.11.9-h_0.conda",
        "e" * 64,
        "f" * 32,
        ("libzlib >=1.2", "__glibc >=2.17"),
        ("pip >=20",),
        123,
    ),
    CondaPackage(
        "cuda-nvcc",
        "12.4.131",
        "h_1",
        1,
        "conda-forge",
        "linux-64",
        "https://c.invalid/linux-64/cuda-nvcc-12.4.131-h_1.tar.bz2",
        "1" * 64,
        "2" * 32,
    ),
    CondaPackage(
        "libzlib",
        "1.3.1",
        "h_2",
        2,
        "conda-forge",
        "linux-64",
        "https://c.invalid/linux-64/libzlib-1.3.1-h_2.conda",
        "3" * 64,
        "4" * 32,
    ),
)


def sample() -> Lock:
    return Lock(
        "sha256:" + "9" * 64,
        {"h100": _target("h100", PIP, CONDA), "cpu": _target("cpu", CPU_PIP)},
    )


def test_shuffled_input_gives_identical_bytes() -> None:
    expected = render_lock(sample())
    rng = random.Random(7)
    for _ in range(5):
        pip = list(PIP)
        rng.shuffle(pip)
        conda = list(CONDA)
        rng.shuffle(conda)
        targets = {
            "cpu": _target("cpu", tuple(reversed(CPU_PIP))),
            "h100": _target("h100", tuple(pip), tuple(conda)),
        }
        assert render_lock(Lock(sample().spec_hash, targets)) == expected


def test_read_then_write_returns_the_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "gpuenv.lock"
    write_lock(path, sample())
    first = path.read_bytes()
    lock = read_lock(path)
    assert lock is not None
    assert set(lock.targets) == {"h100", "cpu"}
    assert {p.name for p in lock.targets["h100"].pip} == {p.name for p in PIP}
    python = next(c for c in lock.targets["h100"].conda if c.name == "python")
    assert python.depends == ("libzlib >=1.2", "__glibc >=2.17")
    assert python.constrains == ("pip >=20",)
    assert write_lock(path, lock) is False, "same bytes: nothing rewritten"
    assert path.read_bytes() == first


def test_text_holds_the_contract_keys() -> None:
    text = render_lock(sample())
    assert text.startswith("# gpuenv.lock")
    assert f"lock-version = {LATEST}" in text
    assert (
        "[targets.h100]" in text
        and "[[targets.h100.pip]]" in text
        and "[[targets.h100.conda]]" in text
    )
    for key in (
        'name = "torch"',
        'version = "2.4.1+cu124"',
        "sha256 =",
        "md5 =",
        'build = "h_0"',
        "url =",
    ):
        assert key in text


def test_a_newer_lock_version_is_refused_clearly() -> None:
    text = render_lock(sample()).replace(f"lock-version = {LATEST}", "lock-version = 99")
    with pytest.raises(
        FileFormatError, match=rf"written by a newer gpuenv \(version 99, supports up to {LATEST}\)"
    ):
        parse_lock_text(text)


def test_damaged_locks_name_the_problem() -> None:
    with pytest.raises(FileFormatError, match="not valid TOML"):
        parse_lock_text("lock-version = ")
    with pytest.raises(FileFormatError, match="no lock-version"):
        parse_lock_text('spec-hash = "x"\n')
    bad = render_lock(sample()).replace("a" * 64, "not-a-hash", 1)
    reading = parse_lock_text(bad)
    assert set(reading.damaged) == {"h100"} and set(reading.lock.targets) == {"cpu"}
    assert any("sha256" in problem for problem in reading.damaged["h100"])
    with pytest.raises(LockIntegrityError, match=r"target h100: .*sha256") as raised:
        reading.require()
    assert raised.value.exit_code == 2 and "gpuenv lock" in (raised.value.hint or "")
    assert reading.require(["cpu"]).targets.keys() == {"cpu"}, "cpu alone can be trusted"


def test_missing_lock_reads_as_none(tmp_path: Path) -> None:
    assert read_lock(tmp_path / "gpuenv.lock") is None


def test_lock_schema_file_is_current() -> None:
    import json

    from gpuenv.lock.format import json_schema

    path = Path(__file__).resolve().parents[2] / "schemas" / "gpuenv.lock.schema.json"
    assert path.read_text() == json.dumps(json_schema(), indent=2, sort_keys=True) + "\n", (
        "schemas/gpuenv.lock.schema.json is stale: run `python tools/update_schemas.py`"
    )


def test_changing_one_target_leaves_the_other_bytes_alone() -> None:
    lock = sample()
    changed = Lock(
        lock.spec_hash, {**lock.targets, "cpu": replace(lock.targets["cpu"], pip=CPU_PIP[:1])}
    )
    before = render_lock(lock).split("[targets.h100]")[1]
    after = render_lock(changed).split("[targets.h100]")[1]
    assert before == after


def test_awkward_strings_survive_the_emitter() -> None:
    import tomllib

    odd = 'quote " backslash \\ unicode é 日本 ok'
    conda = (replace(CONDA[1], depends=(), constrains=(odd,), channel='https://c.invalid/odd"c'),)
    lock = Lock("sha256:" + "9" * 64, {"a_b": _target("a_b", PIP, conda)})
    text = render_lock(lock)
    parsed = tomllib.loads(text)
    assert parsed["targets"]["a_b"]["conda"][0]["constrains"] == [odd]
    assert parse_lock_text(text).require().targets["a_b"].conda[0].constrains == (odd,)


def test_control_characters_survive_the_emitter_and_are_refused_by_the_reader() -> None:
    import tomllib

    odd = "newline \n tab \t control \x01 escape \x1b[31m"
    conda = (replace(CONDA[1], constrains=(odd,)),)
    text = render_lock(Lock("sha256:" + "9" * 64, {"x": _target("x", PIP, conda)}))
    assert tomllib.loads(text)["targets"]["x"]["conda"][0]["constrains"] == [odd]
    reading = parse_lock_text(text)
    assert "control character (U+000A)" in " ".join(reading.damaged["x"])


def test_the_resolver_doubles_keep_the_protocol_signatures() -> None:
    """The orchestration tests' fakes answer exactly the calls the real backends do."""
    import inspect

    from gpuenv.lock.model import CondaSolver, PipResolver
    from gpuenv.lock.rattler import RattlerSolver
    from gpuenv.lock.uv import UvResolver
    from tests.lock.fakes import FakeConda, FakePip

    for fake, real, protocol in (
        (FakePip, UvResolver, PipResolver),
        (FakeConda, RattlerSolver, CondaSolver),
    ):
        for method in ("resolve", "describe"):
            wanted = inspect.signature(getattr(protocol, method))
            assert inspect.signature(getattr(fake, method)) == wanted, (fake, method)
            assert inspect.signature(getattr(real, method)) == wanted, (real, method)


def test_the_content_hash_covers_every_table_a_target_may_grow() -> None:
    """Generic: a key or sub-table added to a target (build entries, facts read from
    wheels) changes the hash with no change to the hashing code, in any position."""
    from gpuenv.lock import _integrity
    from gpuenv.lock.format import target_table

    table = target_table(sample().targets["h100"])
    base = _integrity.content_hash("h100", table)
    grown = {**table, "builds": [{"name": "flash-attn", "arch-list": "8.0;9.0"}]}
    edited = {**table, "builds": [{"name": "flash-attn", "arch-list": "9.0"}]}
    facts = {**table, "stack": {**table["stack"], "cudnn-from-wheel": "9.1.0.70"}}
    hashes = {_integrity.content_hash("h100", t) for t in (table, grown, edited, facts)}
    assert len(hashes) == 4 and base in hashes
    assert _integrity.content_hash("cpu", table) != base, "the name is covered too"
    assert _integrity.content_hash("h100", {**table, "content-hash": "x"}) == base


@pytest.mark.parametrize(
    "bad", ["http://127.].0.1:1/files/x.whl", "http://h.invalid:99999/files/x.whl"]
)
def test_a_url_that_does_not_parse_damages_its_target_and_crashes_nothing(bad: str) -> None:
    """Found by the lock fuzz: a bracket in the host, or a port out of range, made every
    reader of the URL raise ValueError (exit 70); the reader now refuses the target."""
    text = render_lock(sample())
    url = CPU_PIP[0].url
    reading = parse_lock_text(text.replace(f'url = "{url}"', f'url = "{bad}"', 1))
    assert "cpu" in reading.damaged and "cpu" not in reading.lock.targets
    assert any("is not an http(s):// or file:// URL" in p for p in reading.damaged["cpu"])


def test_what_is_written_is_checked_from_its_values_and_reads_back_as_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gpuenv.lock"
    lock = sample()
    write_lock(path, lock)
    reading = parse_lock_text(path.read_text(), file=str(path))
    hashes = {name: t.content_hash for name, t in lock.targets.items()}
    assert not reading.damaged
    assert {name: t.content_hash for name, t in reading.lock.targets.items()} == hashes
    h100 = lock.targets["h100"]
    bad = replace(h100, pip=(replace(h100.pip[0], sha256="not-a-hash"), *h100.pip[1:]))
    with pytest.raises(AssertionError, match=r"gpuenv wrote a lock it refuses.*sha256"):
        write_lock(path, replace(lock, targets={**lock.targets, "h100": bad}))
    again = parse_lock_text(path.read_text()).lock.targets
    assert {name: t.content_hash for name, t in again.items()} == hashes, "nothing written"


def test_an_absurd_glibc_is_refused_without_listing_a_tag_per_release() -> None:
    """A lock edited to say glibc 2.99999999998 made the reader list a hundred billion
    wheel tags (killed for memory, or exit 70 in the fuzz run): it is a damaged target."""
    import resource

    text = render_lock(sample())
    assert '__glibc = "2.28"' in text
    edited = text.replace('__glibc = "2.28"', '__glibc = "2.99999999998"', 1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reading = parse_lock_text(edited)
    assert reading.damaged, "the edit breaks the content hash"
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000


@pytest.mark.parametrize(
    ("locked", "edited", "said"),
    [
        ('python = "3.11"', 'python = "3.99999999991"', 'stack.python: "3.99999999991" is not'),
        ('__glibc = "2.28"', '__osx = "99999999.0"', "__osx: no macOS is 99999999.0"),
    ],
)
def test_an_absurd_python_or_macos_is_refused_at_once(locked: str, edited: str, said: str) -> None:
    """The lock fuzz's Python 3.99999999991 kept ``lock --check`` listing abi3 tags for a
    hundred billion minors (killed after 10 s: exit 70); a macOS 99999999 would list a
    platform tag per major. Each is one problem now, said in well under a second."""
    import time

    text = render_lock(sample())
    assert locked in text
    started = time.monotonic()
    reading = parse_lock_text(text.replace(locked, edited, 1))
    assert time.monotonic() - started < 5
    assert any(said in problem for found in reading.damaged.values() for problem in found), (
        reading.damaged
    )


def test_the_tags_a_target_installs_are_built_once_per_kind_of_target() -> None:
    """Each check of a target's wheels needs the hundreds of tags its platform and Python
    install: built once per kind of target and process, however many targets and checks
    (a lock checks each target as resolved and as written, a relock as read too)."""
    from dataclasses import replace

    from gpuenv.lock import _integrity
    from tests.locked import cpu_target

    _integrity._installable.cache_clear()
    targets = [cpu_target(f"node-{n}", n) for n in range(4)]
    for _ in range(3):
        assert all(_integrity.wheel_tag_problems(t) == [] for t in targets)
    assert _integrity._installable.cache_info().misses == 1
    wheel = replace(
        targets[0].pip[0],
        url="https://t.invalid/cpu/torch-2.4.1+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    )
    old_glibc = replace(targets[0], pip=(wheel,), virtual_packages={"__glibc": "2.17"})
    problems = _integrity.wheel_tag_problems(old_glibc)
    assert problems and "does not install on this target" in problems[0], problems
    assert _integrity._installable.cache_info().misses == 2
