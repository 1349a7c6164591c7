"""``cli._classcode``: the console script keeps the code of the methods ``dataclasses``
writes in its cache and compiles it once; the classes behave as before, a damaged
table is an empty one, and a program that imports gpuenv is left alone. Every dataclass
of gpuenv has a docstring, so that ``dataclasses`` never imports ``inspect`` to make one."""

from __future__ import annotations

import ast
import dataclasses
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuenv
from gpuenv.cli import _classcode

SPEC = '[project]\nname = "p"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n[targets.cpu]\ngpu = "none"\n'

# The console script (gpuenv.cli.entry), its compiles counted and printed at its exit.
PROBE = (
    "import os, sys\n"
    "from gpuenv.cli import _classcode, entry\n"
    "count = [0]\n"
    "def counted(*args, **kwargs):\n"
    "    count[0] += 1\n"
    "    return compile(*args, **kwargs)\n"
    "_classcode.compile = counted\n"
    "real_exit = os._exit\n"
    "def done(code):\n"
    "    os.write(2, f'compiled {count[0]}\\n'.encode())\n"
    "    real_exit(code)\n"
    "os._exit = done\n"
    "sys.argv = ['gpuenv', 'plan']\n"
    "entry()\n"
)


def _plan(root: Path) -> tuple[int, int]:
    """Exit status and the number of texts compiled of one `gpuenv plan` in ``root``."""
    env = {**os.environ, "GPUENV_CACHE_DIR": str(root / "cache"), "GPUENV_HOME": str(root / "s")}
    env.pop("GPUENV_NO_CACHE", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    line = [x for x in out.stderr.splitlines() if x.startswith("compiled ")]
    assert line, out.stderr
    return out.returncode, int(line[-1].split()[1])


def _table(root: Path) -> dict[str, object]:
    (path,) = (root / "cache").glob("classcode/dataclass-code-*.marshal")
    table = marshal.loads(path.read_bytes())
    assert isinstance(table, dict)
    return table


def test_the_second_run_compiles_nothing_the_first_compiled(tmp_path: Path) -> None:
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    code, first = _plan(tmp_path)
    assert code == 0 and first > 50  # every dataclass method of the plan path, compiled
    table = _table(tmp_path)
    assert len(table) == first
    assert all("def __create_fn__" in text for text in table)
    assert all(isinstance(c, type(compile("", "", "exec"))) for c in table.values())
    assert _plan(tmp_path) == (0, 0)


def test_a_table_in_an_older_format_is_removed_once_the_new_one_is_written(
    tmp_path: Path,
) -> None:
    """Format 1 held code compiled with _classcode's own __future__ flags; nothing reads
    it again, so the first table written in the new format takes its place."""
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    new = _classcode.table_path(tmp_path / "cache", "plan")
    old = new.with_name(new.name.replace(f"-{_classcode._FORMAT}-", "-1-", 1))
    other_command = old.with_name(old.name.replace("-plan.", "-lock."))
    old.parent.mkdir(mode=0o700, parents=True)
    for stale in (old, other_command):
        stale.write_bytes(marshal.dumps({}))
    assert _plan(tmp_path)[0] == 0
    assert new.is_file() and not old.exists()
    assert other_command.exists(), "another command's table is that command's to replace"


def test_a_damaged_table_is_an_empty_one_and_is_written_again(tmp_path: Path) -> None:
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    assert _plan(tmp_path)[0] == 0
    (path,) = (tmp_path / "cache").glob("classcode/dataclass-code-*.marshal")
    for damage in (b"", b"\x00garbage", marshal.dumps([1, 2]), marshal.dumps({"x": 1})):
        path.write_bytes(damage)
        code, compiled = _plan(tmp_path)
        assert code == 0 and compiled > 50  # compiled afresh, and the plan still made
        assert len(_table(tmp_path)) >= compiled
        assert _plan(tmp_path) == (0, 0)


def test_a_table_others_can_write_is_never_read(tmp_path: Path) -> None:
    # A team's shared cache: a table another user could write would run their code.
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    assert _plan(tmp_path)[0] == 0
    (path,) = (tmp_path / "cache").glob("classcode/dataclass-code-*.marshal")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    (tmp_path / "cache").chmod(0o777)  # the cache itself shared: the table's folder is not
    assert _plan(tmp_path) == (0, 0)
    assert _plan(tmp_path) == (0, 0)
    for where, mode in ((path, 0o620), (path, 0o602), (path.parent, 0o775), (path.parent, 0o777)):
        before = where.stat().st_mode & 0o777
        where.chmod(mode)
        code, compiled = _plan(tmp_path)
        where.chmod(before)
        assert code == 0 and compiled > 50, (where.name, oct(mode))
    assert _plan(tmp_path) == (0, 0)


def test_a_cache_that_cannot_be_written_changes_nothing_but_the_speed(tmp_path: Path) -> None:
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    table = _classcode.table_path(tmp_path / "cache", "plan")
    table.mkdir(parents=True)  # neither read nor replaced (running as root: no chmod)
    (table / "inside").write_text("")
    for _ in range(2):
        code, compiled = _plan(tmp_path)
        assert code == 0 and compiled > 50
    assert table.is_dir() and [p.name for p in (tmp_path / "cache").glob("*.tmp")] == []


def test_a_program_importing_gpuenv_keeps_the_stock_dataclasses(tmp_path: Path) -> None:
    (tmp_path / "gpuenv.toml").write_text(SPEC)
    probe = (
        "import dataclasses\n"
        "from gpuenv.cli import main\n"
        "code = main(['plan'])\n"
        "print(code, 'exec' in vars(dataclasses))\n"
    )
    env = {**os.environ, "GPUENV_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.stdout.split()[-2:] == ["0", "False"], out.stderr
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("data*"))


def test_classes_built_from_the_table_behave_as_stock_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_classcode, "_table", {})
    monkeypatch.setattr(_classcode, "_used", set())
    monkeypatch.setattr(_classcode, "_state", {})
    monkeypatch.setattr(dataclasses, "exec", exec, raising=False)  # undone after the test
    _classcode.install(tmp_path, "plan")
    assert vars(dataclasses)["exec"] is _classcode._exec

    def make() -> type:
        @dataclasses.dataclass(frozen=True)
        class Pin:
            name: str
            version: str = "1.0"
            extras: tuple[str, ...] = dataclasses.field(default_factory=tuple)

        return Pin

    first = make()
    _classcode.save()
    texts = len(_classcode._table)
    monkeypatch.setattr(_classcode, "_table", {})
    monkeypatch.setattr(_classcode, "_state", {})
    _classcode.install(tmp_path, "plan")
    assert _classcode._table == {}  # read on first use only
    second = make()  # built from the table read back: nothing new compiled
    assert len(_classcode._table) == texts
    assert not _classcode._state.get("new")
    for cls in (first, second):
        pin = cls("torch")
        assert (pin.name, pin.version, pin.extras) == ("torch", "1.0", ())
        assert pin == cls("torch", "1.0") and hash(pin) == hash(cls("torch"))
        assert repr(pin).endswith("Pin(name='torch', version='1.0', extras=())")
        with pytest.raises(dataclasses.FrozenInstanceError):
            pin.name = "numpy"
        assert dataclasses.replace(pin, version="2.0").version == "2.0"
        with pytest.raises(TypeError):
            cls()


def test_every_dataclass_in_gpuenv_has_a_docstring() -> None:
    """On Python 3.10/3.11 ``dataclasses`` gives a class without a docstring one made from
    ``inspect.signature``, and the console script imports ``inspect`` (ast, dis, tokenize:
    6 ms) only when that happens: one such class on a command's path brings the 6 ms back."""
    src = Path(gpuenv.__file__).parent
    bare: list[str] = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ClassDef)
                and any("dataclass" in ast.unparse(d) for d in node.decorator_list)
                and ast.get_docstring(node) is None
            ):
                bare.append(f"{path.relative_to(src.parent)}:{node.lineno}:{node.name}")
    assert bare == [], (
        "these dataclasses have no docstring, so dataclasses imports inspect (6 ms) to "
        "invent one from their signature; write one saying what each is: " + ", ".join(bare)
    )


def test_a_command_creating_no_dataclass_imports_and_reads_nothing(tmp_path: Path) -> None:
    """`lock --check` of a fresh lock, through the console script: no dataclasses module
    (inspect, ast, dis: 8 ms) and no table read, although the hook is in place."""
    from tests.test_startup import _lock

    spec = tmp_path / "gpuenv.toml"
    spec.write_text(SPEC)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "c"), "GPUENV_HOME": str(tmp_path / "s")}
    env.pop("GPUENV_CACHE_DIR", None)
    env.pop("GPUENV_NO_CACHE", None)
    _lock(spec, env)
    table = _classcode.table_path(tmp_path / "c" / "gpuenv", "lock")
    table.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    table.write_bytes(b"")
    probe = (
        "import os, sys\n"
        "from gpuenv.cli import _classcode, entry\n"
        "real_exit = os._exit\n"
        "def done(code):\n"
        "    loaded = 'dataclasses' in sys.modules, 'loaded' in _classcode._state\n"
        "    os.write(1, f'{code} {loaded[0]} {loaded[1]}\\n'.encode())\n"
        "    real_exit(code)\n"
        "os._exit = done\n"
        "sys.argv = ['gpuenv', 'lock', '--check']\n"
        "entry()\n"
    )
    run = [sys.executable, "-c", probe]
    for _ in range(2):  # the first check may be a full one; the second finds it fresh
        out = subprocess.run(
            run, cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
    assert out.stdout.split()[-3:] == ["0", "False", "False"], out.stdout + out.stderr
    assert table.read_bytes() == b""


def test_dataclasses_import_inspect_only_for_a_class_without_a_docstring(tmp_path: Path) -> None:
    """In the console script ``dataclasses`` gets a stand-in for ``inspect`` (6 ms of
    imports: ast, dis, tokenize) that imports the real one when it is first used: on
    Python 3.10 and 3.11 only to write the docstring of a class that has none. That
    docstring is stock's, and the module is the real one from then on."""
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from gpuenv.cli import _classcode\n"
        f"_classcode.install(Path({str(tmp_path)!r}), 'probe')\n"
        "import dataclasses\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Documented:\n"
        "    '''A class with its own docstring.'''\n"
        "    name: str\n"
        "print('inspect' in sys.modules)\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Bare:\n"
        "    name: str\n"
        "    size: int = 0\n"
        "import inspect\n"
        "print('inspect' in sys.modules, Bare.__doc__, dataclasses.inspect is inspect)\n"
        "print(Documented('x'), Documented.__doc__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    if sys.version_info < (3, 12):  # from 3.12 every class reads its annotations through it
        assert out[0] == "False"
    assert out[1] == "True Bare(name: str, size: int = 0) True"
    assert out[2] == "Documented(name='x') A class with its own docstring."
