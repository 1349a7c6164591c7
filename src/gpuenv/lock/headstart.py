"""The lock's online ``uv pip compile`` runs begun as ``gpuenv lock`` starts, from what
the last lock of the same bytes ran.

Most of a lock's time is uv asking the indexes whether their pages changed (on an index
that sends no caching headers, every page and metadata file of the resolution is asked
again, in waves); before its first uv run gpuenv spends some 50 ms reading the spec,
the lock and the knowledge base to know what to ask. The runs depend only on those
inputs, so the lock of a project whose spec and lock are byte for byte those of the
last successful lock will most likely ask uv what that lock asked. ``begin`` starts
those runs at once, each in a folder of its own made like the lock's (the same files,
the same arguments with the folder's path replaced), from a recipe the last lock left
in gpuenv's cache (``save``). When the lock then asks for a run (``take``), a head
start that is the very same run (the same arguments, environment, time limit and
input files, the folder aside) is taken: its output is moved where the lock wanted it.
Anything else runs as it always did; a head start nobody took is killed (``release``).
A head start that failed is never taken either: the lock's own run then says why.

The recipe holds the arguments, the input files' text, and the environment as the
names taken from the caller's environment plus the values gpuenv set. Nothing secret
is written: no recipe is kept where a value gpuenv set, an argument or an input file
carries credentials (an index's password, a URL's user part or token). The key is the
sha256 of this gpuenv's version, the spec's and the lock's bytes and the lock's options;
the comparison at ``take`` is what makes a head start safe to use, not the key. A
recipe is run only from a regular file of this user's own that nobody else may write.

The resolutions' own scratch folders are noted here too (``scratch_folder``): a lock
interrupted while a resolution runs ahead in a daemon thread (``lock._share``) kills
the children still running and removes them (``release``), so that an interrupt
leaves no folder behind and no uv writing into one.

Standard library and ``gpuenv._proc`` only: this runs before the lock's modules load.
Measured on the issue's PyPI project (2 CPUs, 16 runs each): the first online uv run
began 34 ms after the process instead of 97 ms.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence

# No pathlib or typing at run time before the first uv starts (7 ms of imports): paths
# are strings until then (os.path, hence the PTH exceptions below).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from gpuenv import _proc

LOCK_FILENAME = "gpuenv.lock"  # gpuenv.lock.format.LOCK_FILENAME, without importing it
_DIR = "lock-headstart"
_FORMAT = b"headstart-1"
_FOLDER = "{folder}"  # a run's folder in a recipe's arguments
# Head starts begun at most (a lock of many distinct targets runs more: those run then);
# more uv runs at once would slow the first on a small machine.
MAX_RUNS = 2
KEPT_RECIPES = 32  # the newest recipes kept; older ones removed as a new one is saved
_RECIPE_LIMIT = 1 << 20
# Environment names whose values are never written to a recipe (set by gpuenv from a
# spec's index URL, they are that index's credentials).
_SECRET_PARTS = ("PASSWORD", "USERNAME", "TOKEN", "SECRET", "AUTH", "KEY")
# The only names a recipe may give a value of its own: those gpuenv sets or changes for
# uv (_network.uv_environment: uv's settings, a relative path made absolute, the macOS
# target). A recipe is this user's own file, but a value of anything else (LD_PRELOAD)
# would run before the comparison that refuses it.
_SET_NAMES = frozenset(
    {"NO_COLOR", "COLUMNS", "MACOSX_DEPLOYMENT_TARGET", "NETRC", "SSL_CERT_FILE", "SSL_CERT_DIR"}
    | {"SSL_CLIENT_CERT"}
)


def _settable(name: str) -> bool:
    return name in _SET_NAMES or name.startswith("UV_")


class _Run:
    """One uv run as a recipe holds it: arguments with the folder as ``_FOLDER``, the
    input files under the folder (relative path -> text), the environment as names
    taken from the caller's plus values set, the time limit."""

    __slots__ = ("argv", "files", "inherit", "output", "set_env", "timeout")

    def __init__(
        self,
        argv: tuple[str, ...],
        files: dict[str, str],
        inherit: tuple[str, ...],
        set_env: dict[str, str],
        timeout: float,
        output: str,
    ) -> None:
        self.argv, self.files, self.inherit = argv, files, inherit
        self.set_env, self.timeout, self.output = set_env, timeout, output

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "files": self.files,
            "inherit": list(self.inherit),
            "env": self.set_env,
            "timeout": self.timeout,
            "output": self.output,
        }

    @classmethod
    def from_json(cls, data: object) -> _Run | None:
        if not isinstance(data, dict):
            return None
        argv, files, inherit = data.get("argv"), data.get("files"), data.get("inherit")
        set_env, timeout, output = data.get("env"), data.get("timeout"), data.get("output")
        if not (
            _strings(argv)
            and _strings(inherit)
            and _string_map(files)
            and _string_map(set_env)
            and isinstance(timeout, (int, float))
            and 0 < timeout < 1e6  # neither NaN nor infinite: json.loads reads both
            and isinstance(output, str)
        ):
            return None
        assert isinstance(files, dict) and isinstance(set_env, dict)
        if not all(_relative(p) for p in (*files, output)):
            return None
        if not all(_settable(name) for name in set_env):
            return None
        return cls(tuple(argv), files, tuple(inherit), set_env, float(timeout), output)  # type: ignore[arg-type]

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        env = {k: environ[k] for k in self.inherit if k in environ}
        env.update(self.set_env)
        return env


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _string_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _relative(path: str) -> bool:
    """A path inside a run's folder: relative, no '..', no empty or odd part."""
    parts = path.split("/")
    return bool(path) and all(p not in ("", ".", "..") and "\0" not in p for p in parts)


def describe(
    argv: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str],
    folder: Path,
    timeout: float,
    environ: Mapping[str, str],
) -> _Run | None:
    """``argv`` run in ``folder`` as a recipe holds it, or None where it cannot be
    (no ``-o`` file in the folder, the folder's path inside another argument, input
    files that are not text, or credentials it would write down)."""
    from gpuenv._redact import redact

    placed = _placed([os.fspath(a) for a in argv], str(folder))
    if placed is None:
        return None
    args, files = placed
    output = _output_of(args)
    inherit = tuple(sorted(k for k, v in env.items() if environ.get(k) == v))
    set_env = {k: v for k, v in env.items() if environ.get(k) != v}
    secret = any(
        any(part in k.upper() for part in _SECRET_PARTS) or redact(v) != v or not _settable(k)
        for k, v in set_env.items()
    )
    if output is None or secret or any(redact(t) != t for t in files.values()):
        return None
    return _Run(tuple(args), files, inherit, set_env, timeout, output)


def _placed(argv: list[str], base: str) -> tuple[list[str], dict[str, str]] | None:
    """``argv`` with the paths inside ``base`` as ``_FOLDER``'s, and the text of those
    that are files; None for a path this module cannot move (``base`` inside another
    argument), a file that is not text, or an argument that carries credentials."""
    from gpuenv._redact import redact

    inside = base + os.sep
    args: list[str] = []
    files: dict[str, str] = {}
    for arg in argv:
        if not arg.startswith(inside):
            if base in arg or _FOLDER in arg or redact(arg) != arg:
                return None
            args.append(arg)
            continue
        rel = arg[len(inside) :].replace(os.sep, "/")
        if not _relative(rel):
            return None
        args.append(f"{_FOLDER}/{rel}")
        try:
            if os.path.isfile(arg):  # noqa: PTH113
                with open(arg, encoding="utf-8") as stream:
                    files[rel] = stream.read()
        except (OSError, UnicodeDecodeError):
            return None
    return args, files


def _output_of(args: Sequence[str]) -> str | None:
    """The ``-o`` file, relative to the folder (None: none there)."""
    prefix = _FOLDER + "/"
    import itertools

    for flag, value in itertools.pairwise(args):
        if flag in ("-o", "--output-file") and value.startswith(prefix):
            return value[len(prefix) :]
    return None


class _Started:
    """A head start: the run, the folder it runs in, the child, and what it was given."""

    def __init__(self, run: _Run, folder: str, child: _proc.Started, env: dict[str, str]) -> None:
        self.run, self.folder, self.child, self.env = run, folder, child, env

    def same(self, run: _Run, env: Mapping[str, str]) -> bool:
        mine = self.run
        return (
            run.argv == mine.argv
            and run.files == mine.files
            and run.timeout == mine.timeout
            and dict(env) == self.env
        )

    def discard(self) -> None:
        import shutil

        with contextlib.suppress(Exception):  # already reaped, or a kill not permitted
            self.child.abandon()
        shutil.rmtree(self.folder, ignore_errors=True)


class _State:
    """This process's head starts and what its lock ran (module state: one lock per
    process; the lock's threads take from it under ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.recipe: str | None = None  # where this lock's runs are saved; None: not kept
        self.held: list[_Started] = []
        self.taken: list[_Started] = []  # taken, and not yet done with (a thread waits)
        self.scratch: set[Path] = set()  # the lock's own uv folders, while in use
        self.interrupted = False  # the lock was interrupted: no new folder (scratch_made)
        self.ran: list[_Run] = []
        self.secret = False  # a run that could not be written down: no recipe saved
        self.kept: str | None = None  # the recipe's text as read: not written again


_state = _State()


def lock_options(
    targets: Sequence[str] | None, upgrade: bool, upgrade_packages: Sequence[str] | None
) -> list[str]:
    """The lock's options as ``recipe_path`` takes them (the command line's ``-t``,
    ``--upgrade`` and ``-P``, whichever path read them)."""
    return [repr((tuple(targets) if targets else None, upgrade, list(upgrade_packages or ())))]


def recipe_path(
    cache_dir: str | os.PathLike[str], spec_file: str | os.PathLike[str], options: Iterable[str]
) -> str | None:
    """Where the recipe of a lock of ``spec_file`` (and the lock beside it) with
    ``options`` (``lock_options``) is kept; None where either file cannot be read."""
    from gpuenv import __version__, _fsread, _sha256
    from gpuenv.errors import GpuenvError

    spec_path = os.path.abspath(spec_file)  # noqa: PTH100
    try:
        spec = _fsread.read_bytes(spec_path, limit=_fsread.SPEC_LIMIT, what="gpuenv.toml")
        lock_file = os.path.join(os.path.dirname(spec_path), LOCK_FILENAME)  # noqa: PTH118, PTH120
        try:
            lock = _fsread.read_bytes(lock_file, limit=_fsread.LOCK_LIMIT, what=LOCK_FILENAME)
        except FileNotFoundError:
            lock = b"-"  # no lock yet: a fresh lock has a recipe too
    except (OSError, GpuenvError):
        return None
    h = _sha256.new()
    parts = (_FORMAT, __version__.encode(), spec_path.encode(), spec, lock)
    for part in (*parts, "\0".join(options).encode()):
        h.update(len(part).to_bytes(8, "big") + part)
    return os.path.join(os.fspath(cache_dir), _DIR, f"{h.hexdigest()}.json")  # noqa: PTH118


def _read_recipe(path: str) -> tuple[str | None, list[_Run]]:
    """The recipe's text and runs; none where it is missing, not this user's own
    private file, or not a recipe."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None, []
    try:
        info = os.fstat(fd)
        me = os.geteuid() if hasattr(os, "geteuid") else info.st_uid
        owned = info.st_uid == me and not info.st_mode & 0o022
        if not stat.S_ISREG(info.st_mode) or not owned or info.st_size > _RECIPE_LIMIT:
            return None, []  # another user's file, or one others may write: never run it
        with os.fdopen(fd, "rb", closefd=False) as stream:
            text = stream.read(_RECIPE_LIMIT).decode()
        data = json.loads(text)
    except (OSError, ValueError, RecursionError):
        return None, []
    finally:
        os.close(fd)
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        return None, []
    read = [_Run.from_json(r) for r in runs[:MAX_RUNS]]
    return text, [r for r in read if r is not None]


def begin(recipe: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None) -> None:
    """Start the runs of ``recipe`` (see the module doc), and note that this lock's runs
    are to be saved there. Never raises for what it cannot do: the lock runs them."""

    environ = os.environ if environ is None else environ
    recipe = os.fspath(recipe) if recipe is not None else None
    with _state.lock:
        if recipe is not None and recipe == _state.recipe:
            return  # begun already, before the command line was parsed (cli._fastlock)
        _state.recipe, _state.ran, _state.secret = recipe, [], False
        _state.interrupted = False
    from gpuenv import _proc

    _proc.resume()  # an interrupted lock before this one (in one process: the tests)
    text, runs = _read_recipe(recipe) if recipe is not None else (None, [])
    _state.kept = text
    for run in runs:
        uv = run.argv[0] if run.argv else ""
        if os.path.basename(uv) not in ("uv", "uv.exe") or not os.path.isabs(uv):  # noqa: PTH119, PTH117
            continue  # only ever uv, named by its full path
        _start(run, environ)


def _start(run: _Run, environ: Mapping[str, str]) -> None:
    """``run`` begun in a folder of its own and held; nothing left behind where it
    cannot be (a full disk: nothing begun) or an interrupt lands meanwhile (raised)."""
    from gpuenv import _proc
    from gpuenv.errors import GpuenvError

    folder: str | None = None
    child: _proc.Started | None = None
    held = False
    try:
        folder = _scratch_path()
        os.mkdir(folder, 0o700)  # noqa: PTH102
        for rel, content in run.files.items():
            path = os.path.join(folder, rel)  # noqa: PTH118
            os.makedirs(os.path.dirname(path), exist_ok=True)  # noqa: PTH103, PTH120
            with open(path, "w", encoding="utf-8") as out:
                out.write(content)
        output = os.path.join(folder, run.output)  # noqa: PTH118
        os.makedirs(os.path.dirname(output), exist_ok=True)  # noqa: PTH103, PTH120
        argv = [_unplaced(a, folder) for a in run.argv]
        env = run.env(environ)
        child = _proc.start(
            argv, timeout=run.timeout, env=env, cwd=folder, check=False, what="uv pip compile"
        )
        with _state.lock:
            _state.held.append(_Started(run, folder, child, env))
            held = True
    except BaseException as exc:
        if not held:
            if child is not None:
                child.abandon()
            if folder is not None:
                import shutil  # here only: 2 ms of imports (bz2, lzma) before uv starts

                shutil.rmtree(folder, ignore_errors=True)
        if not isinstance(exc, (OSError, GpuenvError, ValueError)):
            raise  # Ctrl-C while starting: nothing left running or behind


def _unplaced(arg: str, folder: str) -> str:
    """A recipe's argument with ``_FOLDER`` as ``folder`` (only a path that starts with
    it: ``describe`` keeps no other argument that holds the placeholder's text)."""
    if arg == _FOLDER or arg.startswith(_FOLDER + "/"):
        return folder + arg[len(_FOLDER) :]
    return arg


def _scratch_path() -> str:
    """A new folder's path where the lock makes its own (``tempfile.gettempdir()``'s
    first candidates; ``tempfile`` itself costs 3 ms of imports before uv can start)."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        root = os.environ.get(name)
        if root and os.path.isdir(root):  # noqa: PTH112
            break
    else:
        root = "/tmp"  # noqa: S108 - a folder of our own in it, 0700, random name
    return os.path.join(root, _folder_name())  # noqa: PTH118


def _folder_name() -> str:
    """A new folder's name, a head start's or a resolution's alike (``gpuenv-uv-``)."""
    return f"gpuenv-uv-{os.urandom(6).hex()}"


def take(
    argv: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str],
    folder: Path,
    timeout: float,
) -> _proc.ProcResult | None:
    """The result of ``argv`` run in ``folder`` when a head start ran exactly it: its
    ``-o`` file is then in ``folder`` where ``argv`` names it. None otherwise (the caller
    runs it): no such head start, or one that failed. An online run is noted for the
    recipe either way, while a lock is being recorded (``begin``)."""
    if _state.recipe is None and not _state.held:
        return None
    if "--offline" in [os.fspath(a) for a in argv]:
        return None  # read from uv's cache in a few ms: nothing to start ahead
    run = describe(argv, env, folder, timeout, os.environ)
    with _state.lock:
        if run is None:
            _state.secret = True
            return None
        _state.ran.append(run)
        head = next((h for h in _state.held if h.same(run, env)), None)
        if head is not None:
            _state.held.remove(head)
            _state.taken.append(head)
    return _result(head, folder / run.output) if head is not None else None


def _result(head: _Started, output: Path) -> _proc.ProcResult | None:
    """``head``'s result, its output moved to ``output``, once it ends well; None when
    it failed (or its output cannot be moved). Its folder is removed either way."""
    try:
        result = head.child.wait()
        if result.returncode != 0:
            return None  # the lock's own run says why, as it always has
        _move(os.path.join(head.folder, head.run.output), output)  # noqa: PTH118
    except Exception:  # noqa: BLE001 - a timeout, a move refused: the caller runs it
        return None
    finally:
        head.discard()
        with _state.lock:
            if head in _state.taken:
                _state.taken.remove(head)
    return result


def _move(source: str, target: Path) -> None:
    """``source`` renamed to ``target``; copied where they are on two file systems."""
    try:
        os.replace(source, target)  # noqa: PTH105
    except OSError as exc:
        import errno

        if exc.errno != errno.EXDEV:
            raise
        with open(source, "rb") as data:
            target.write_bytes(data.read())


def save() -> None:
    """Keep the runs this lock made as the recipe of its key (``begin``), when none
    carried a secret and the file does not hold them already; the oldest recipes beyond
    ``KEPT_RECIPES`` are removed. The cache is a courtesy: a failure to write is
    ignored."""
    with _state.lock:
        recipe, runs, secret = _state.recipe, list(_state.ran), _state.secret
    if recipe is None or secret:
        return
    # In the order of their text, not of their start: resolutions run side by side
    # (lock._share) start in any order, and the same runs make the same file.
    shown = sorted({json.dumps(r.to_json(), sort_keys=True) for r in runs[:MAX_RUNS]})
    text = '{"runs": [' + ", ".join(shown) + "]}"
    if text == _state.kept:
        return  # what the file holds already (the lock of the same bytes, again)
    _write(recipe, text)


def _write(path: str, text: str) -> None:
    """``text`` as the recipe at ``path`` (private, as the cache's files are), written
    as any file gpuenv replaces (``_fs.atomic_write_text``); then the oldest pruned."""
    from pathlib import Path

    from gpuenv import _fs
    from gpuenv.errors import GpuenvError

    recipe = Path(path)
    try:
        recipe.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _fs.atomic_write_text(recipe, text, mode=0o600, durable=False, what="a lock recipe")
        _prune(recipe.parent)
    except (OSError, GpuenvError):
        pass  # the cache is a courtesy


def _prune(folder: Path) -> None:
    entries = []
    for entry in os.scandir(folder):
        with contextlib.suppress(OSError):
            entries.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
    for _, path in sorted(entries, reverse=True)[KEPT_RECIPES:]:
        with contextlib.suppress(OSError):
            os.unlink(path)  # noqa: PTH108


def scratch_folder(root: str) -> Path:
    """A new private folder in ``root`` for a resolution's uv files, noted as in use
    until ``scratch_done`` (``release`` removes it, should the lock end first: a
    resolution run ahead in a daemon thread, which an interrupted lock does not wait
    for, never removed its own). Made under the lock that ``release`` takes: a folder
    is either noted when ``release`` looks, or never made. Once the lock was
    interrupted, the thread asking is interrupted too (``KeyboardInterrupt``, as the
    lock was): the process is ending."""
    from pathlib import Path

    with _state.lock:
        if _state.interrupted:
            raise KeyboardInterrupt("the lock was interrupted")
        folder = Path(root) / _folder_name()
        _state.scratch.add(folder)  # first: a Ctrl-C after the mkdir finds it noted
        try:
            folder.mkdir(mode=0o700)
        except BaseException:
            _state.scratch.discard(folder)
            raise
    return folder


def scratch_done(folder: Path) -> None:
    with _state.lock:
        _state.scratch.discard(folder)


def release(*, interrupted: bool = False) -> None:
    """The head starts nobody took, and those a thread still waits for (the lock ends,
    interrupted, without it): killed, their folders removed, as are the resolutions'
    folders still in use; nothing recorded. ``interrupted``: the lock was, and the
    threads still resolving make no new folder (``scratch_made``) until the next
    ``begin``."""
    with _state.lock:
        _state.interrupted = _state.interrupted or interrupted
        held, _state.held = [*_state.held, *_state.taken], []
        _state.taken = []
        _state.recipe, _state.ran, _state.kept = None, [], None
        scratch, _state.scratch = list(_state.scratch), set()
    if interrupted and scratch:
        from gpuenv import _proc

        _proc.kill_running()  # a thread's uv would write its output there again
    for head in held:
        head.discard()
    if scratch:
        import shutil

        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)
