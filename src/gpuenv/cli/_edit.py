"""What ``gpuenv add`` and ``gpuenv remove`` share: where a requirement goes, and the
edit itself (checked, relocked, written with its lock, installed; undone on failure)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv.cli import _common, _installing, _output, _progress
from gpuenv.errors import GpuenvError

if TYPE_CHECKING:
    from gpuenv.cli._common import Settings
    from gpuenv.spec.edit import Edit, Entry, Where


def where_flags(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "-t", "--target", metavar="NAME", help="this target only: [targets.NAME.pip]"
    )
    where.add_argument("-g", "--group", metavar="NAME", help="a dependency group: [pip.groups]")
    parser.add_argument(
        "--no-install", action="store_true", help="edit and relock; install nothing"
    )


def where_of(args: argparse.Namespace) -> Where:
    from gpuenv.names import normalize_name
    from gpuenv.spec.edit import Where

    if args.group is not None and not _GROUP.match(args.group):  # "" too: no silent default
        from gpuenv.errors import UsageError

        raise UsageError(
            f"--group {args.group!r}: not a group name",
            hint="letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(gpuenv add --group dev pytest)",
        )
    group = normalize_name(args.group) if args.group is not None else None
    return Where(target=args.target, group=group)


_BOM = "\ufeff"  # a Windows editor's byte order mark, kept where the file had one
_GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # [pip.groups]' key rule


def apply(
    args: argparse.Namespace,
    settings: Settings,
    edit_text: Callable[[str, str], Edit],
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> int:
    """Edit the spec with ``edit_text(text, file)``, check, relock the edited text, write
    it just before the new lock, install; a failure before the write leaves both files as
    they were, one after it puts both back (nothing half-done, even after a SIGKILL but
    for the two renames). ``change`` is the same edit on the validated spec
    (``spec.edit.check_edited``)."""
    spec_file = _common.spec_path(args)
    # Two adds at once each read the spec, and the second's write dropped the first's
    # line (both said "added"): edits of one spec run one after another.
    with settings.store().spec_locked(spec_file):
        return _apply(args, settings, spec_file, edit_text, change)


def _apply(
    args: argparse.Namespace,
    settings: Settings,
    spec_file: Path,
    edit_text: Callable[[str, str], Edit],
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> int:
    from gpuenv.knowledge import knowledge_base
    from gpuenv.spec import read_spec_text
    from gpuenv.spec.edit import check_edited

    before = read_spec_text(spec_file, hint="create one with 'gpuenv init'")
    real, mode = _writable(spec_file)
    edit: Edit = edit_text(before, str(spec_file))
    cache = settings.cache_dir  # the check fills the cache the relock then reads
    check_edited(
        before, edit.text, file=str(spec_file), kb=knowledge_base, cache_dir=cache, change=change
    )
    spec = _SpecBytes(real, mode, before, edit.text)
    lock = _LockBytes(spec_file.parent / "gpuenv.lock")
    try:  # the spec is written just before the lock's rename, by the relock
        locked, installed, as_of = _relock_and_install(args, settings, spec_file, edit, spec.write)
    except BaseException as exc:
        # Both files as they were: the lock too, should the install fail after it was
        # written (a lock of a spec no longer there would be out of date, and `run`
        # would refuse the environment installed before).
        spec_back = spec.put_back()
        try:
            lock_back = lock.put_back()
        except (OSError, GpuenvError):  # the failure itself is the news; lock --check tells
            lock_back = None
        said = _put_back(spec=spec_back, lock=lock_back)
        if said and isinstance(exc, GpuenvError):  # in the failure's own message
            exc.message += f"\n{said}"
            exc.args = (exc.message, *exc.args[1:])
        elif said:  # Ctrl-C, SIGTERM: their one line says only that gpuenv stopped
            _output.err(f"gpuenv: {said}")
        raise
    _render(args, spec_file, edit, (locked, installed), as_of)
    return 0


class _SpecBytes:
    """gpuenv.toml's edit, written when the relock has its lock ready (``write``), and
    the text before it, to put back when the edit is undone."""

    def __init__(self, real: Path, mode: int, before: str, after: str) -> None:
        self.real, self.mode = real, mode
        self.bom = _BOM if _has_bom(real) else ""  # the reader drops it; the file keeps it
        self.before, self.after = before, after
        self.started = False

    def write(self) -> None:
        from gpuenv import _fs

        if self.after == self.before:
            return
        self.started = True  # an interrupt just after the rename must put it back
        _fs.atomic_write_text(self.real, self.bom + self.after, mode=self.mode, what="gpuenv.toml")

    def put_back(self) -> bool:
        """Write the text before the edit back where the edit was written; True when it
        did (False: the file never changed)."""
        from gpuenv import _fs

        if not self.started:
            return False
        with contextlib.suppress(OSError, GpuenvError):
            if _fs.read_text(self.real, limit=_fs.SPEC_LIMIT) == self.before:  # BOM dropped
                return False  # the write failed before its rename
        _fs.atomic_write_text(self.real, self.bom + self.before, mode=self.mode, what="gpuenv.toml")
        return True


class _LockBytes:
    """gpuenv.lock's bytes before an edit, to put back when the edit is undone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.before: bytes | None = b""  # unreadable: the relock says why; not put back
        self.mode = 0o644
        self.link = path.readlink() if path.is_symlink() else None
        self.real = path.resolve()  # where a linked lock's bytes live
        with contextlib.suppress(OSError, GpuenvError):
            self.before = _read(path)
            self.mode = path.stat().st_mode & 0o777

    def put_back(self) -> bool | None:
        """Write the old bytes back (or remove a lock that was not there) when they
        changed, through a link and with the mode the file had; True when it did, False
        when they had not changed, None when that cannot be told (unreadable)."""
        from gpuenv import _fs

        if self.before == b"":
            return None
        try:
            if _read(self.path) == self.before:
                return False
        except (OSError, GpuenvError):
            return None
        if self.before is None:
            self.path.unlink(missing_ok=True)
        else:  # the bytes as they were, whatever they decode to, where and as they were
            text = self.before.decode("utf-8", "surrogateescape")
            _fs.atomic_write_text(self.real, text, mode=self.mode, what="gpuenv.lock")
            if self.link is not None and not self.path.is_symlink():  # the relock's rename
                temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.link")
                temporary.symlink_to(self.link)
                temporary.replace(self.path)
        return True


def _read(path: Path) -> bytes | None:
    """``path``'s bytes, None when there is no such file."""
    from gpuenv import _fs

    try:
        return _fs.read_bytes(path, limit=_fs.LOCK_LIMIT, what="gpuenv.lock")
    except FileNotFoundError:
        return None


def _put_back(*, spec: bool, lock: bool | None) -> str | None:
    """Which files were put back as they were, as said; both "left as they were" where
    neither had changed (the edit failed before its write); None where that is not
    known of the lock."""
    if not spec and lock is False:
        return "gpuenv.toml and gpuenv.lock left as they were"
    files = [name for name, done in (("gpuenv.toml", spec), ("gpuenv.lock", lock)) if done]
    if not files:
        return None
    return f"{' and '.join(files)} put back as {'they were' if len(files) > 1 else 'it was'}"


def _has_bom(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(3) == _BOM.encode("utf-8")
    except OSError:
        return False


def _writable(spec_file: Path) -> tuple[Path, int]:
    """The file to rewrite and its mode, kept: a spec reached through a symbolic link is
    edited where it lives (the rename would replace the link with a copy), and a spec
    made read-only (no write bit, or not this user's to write) is refused by name, as an
    editor does, not replaced by a renamed file that drops its mode. One on a read-only
    mount is a storage error naming the mount (exit 5, as lock's own write would be)."""
    import errno
    import os
    import stat

    from gpuenv import _fs
    from gpuenv.errors import UsageError

    real = spec_file.resolve()
    mode = stat.S_IMODE(real.stat().st_mode)
    if os.statvfs(real).f_flag & os.ST_RDONLY:  # no mode makes it writable: say the mount
        refused = OSError(errno.EROFS, os.strerror(errno.EROFS), str(real))
        hint = (  # the store's advice (GPUENV_HOME, GPUENV_CACHE_DIR) cannot move a spec
            f"{real.parent} is mounted read-only: edit gpuenv.toml where the project is "
            "writable (a read-write mount or a copy), then 'gpuenv lock' there"
        )
        raise _fs.storage_error(refused, real, "gpuenv.toml", hint=hint)
    attribute = _fs.attribute_refusing_writes(real) if mode & 0o222 else None
    if attribute is not None:  # mode 0644 and still refused: say what refuses it
        name, how = attribute
        raise UsageError(
            f"{real} is {name} (chattr {how}): gpuenv add and remove edit it",
            hint=f"remove the attribute (chattr -{how[1]} {real}, as root) or edit it by "
            "hand, then 'gpuenv lock'",
        )
    if not mode & 0o222 or not os.access(real, os.W_OK):
        raise UsageError(
            f"{real} is read-only (mode {mode:04o}): gpuenv add and remove edit it",
            hint=f"make it writable (chmod u+w {real}) or edit it by hand, then 'gpuenv lock'",
        )
    return real, mode


def _relock_and_install(
    args: argparse.Namespace,
    settings: Settings,
    spec_file: Path,
    edit: Edit,
    write_spec: Callable[[], None],
) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """Lock the edit's text before it is written (``write_spec`` writes it, called just
    before the lock's rename), then install the targets installed here; the targets
    locked and installed, and the spec's ``[pip] exclude-newer``."""
    from gpuenv import runtime
    from gpuenv.install import install_locked, record_lock_state
    from gpuenv.install.pipeline import lock_inputs
    from gpuenv.knowledge import knowledge_base
    from gpuenv.knowledge._data import data_digest
    from gpuenv.lock.format import LOCK_FILENAME, load_lock
    from gpuenv.lock.options import LockOptions
    from gpuenv.lock.project import lock_and_write, plan_relock
    from gpuenv.spec import load_spec

    loaded = load_spec(spec_file, kb=knowledge_base, cache_dir=settings.cache_dir, text=edit.text)
    touched = edit.touched if edit.touched is not None else tuple(loaded.spec.targets)
    lock_path = spec_file.parent / LOCK_FILENAME
    reading = load_lock(lock_path, cache_dir=settings.cache_dir, legacy_ok=True)
    asked = LockOptions.from_settings(settings.lock, loaded.spec, targets=touched)
    relock = plan_relock(reading, loaded.spec, asked)
    options = relock.options
    with _progress.display(args) as progress:
        result, _written = lock_and_write(
            loaded,
            knowledge_base(),
            relock,
            lock_path=lock_path,
            kb_digest=data_digest(),
            progress=progress,
            with_spec=write_spec,
        )
        project = str(spec_file.parent.absolute())
        present = runtime.installed_targets(project)
        installed = tuple(t for t in touched if t in present) if not args.no_install else ()
        # Each target again with the groups it has (the docs' notebook group was dropped
        # by the next `add`, and the Jupyter kernel installed with it no longer started).
        default = _installing.default_groups(loaded.spec)
        by_groups: dict[tuple[str, ...], list[str]] = {}
        for name in installed:
            by_groups.setdefault(_installed_groups(project, name, default), []).append(name)
        for groups, names in by_groups.items():
            install_locked(
                settings.store(),
                loaded,
                result.lock,
                tuple(names),
                groups=groups,
                options=options,
                progress=progress,
            )
        if installed:
            record_lock_state(
                Path(project),
                result.lock,
                installed,
                digest=result.digest,
                inputs=lock_inputs(loaded),
            )
    return options.targets or (), installed, loaded.spec.pip.exclude_newer


def _installed_groups(project: str, target: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """The dependency groups the project's installed ``target`` holds, as its prefix's
    marker records them; ``default`` for a prefix installed before they were recorded."""
    from gpuenv import _marker

    prefix = _marker.resolve_pointer(_marker.pointer(project, target))
    marker = _marker.read_marker(Path(project) / _marker.PROJECT_DIR / prefix) if prefix else None
    return marker.groups if marker is not None and marker.groups is not None else default


def _render(
    args: argparse.Namespace,
    spec_file: Path,
    edit: Edit,
    done: tuple[tuple[str, ...], tuple[str, ...]],
    as_of: str | None,
) -> None:
    shown = _shown(spec_file)
    locked, installed = done
    if args.json:
        _output.emit_json(
            {
                "changed": list(edit.changed),
                "edits": [_entry_json(e, shown) for e in edit.entries],
                "kept": [_entry_json(e, shown) for e in edit.kept],
                "locked": list(locked),
                "installed": list(installed),
                "exclude_newer": as_of,
            }
        )
        return
    for entry in edit.entries:
        _output.out(_said(args.command, entry, shown))
    for entry in edit.kept:  # what the spec had already, as asked: said, not added
        left = "left as it is" if edit.entries else "nothing added"
        _output.out(
            f"{entry.where.label} has {entry.requirement} already ({_at(entry, shown)}): {left}"
        )
    _output.out(f"  locked {', '.join(locked)}")
    if as_of is not None and args.command == "add":  # the newest release is not the one taken
        _output.out(
            f"  as of {as_of} ([pip] exclude-newer in {shown}): releases uploaded later are "
            "not taken; remove the key for today's"
        )
    if installed:
        _output.out(f"  installed {', '.join(installed)}")


def _said(command: str, entry: Entry, shown: str) -> str:
    """One line of what the edit did to one entry: the list by its name in the file, the
    file and the line; a changed entry with what it was, so no bound goes unsaid."""
    at, label = _at(entry, shown), entry.where.label
    if command == "remove":  # the line it was on: the file has it no more
        return f"removed {entry.requirement} from {label} ({at})"
    if entry.was is None:
        return f"added {entry.requirement} to {label} ({at})"
    return f"changed {entry.was} → {entry.requirement} in {label} ({at})"


def _at(entry: Entry, shown: str) -> str:
    return f"{shown}:{entry.line}" if entry.line is not None else shown


def _entry_json(entry: Entry, shown: str) -> dict[str, Any]:
    return {
        "requirement": entry.requirement,
        "was": entry.was,
        "list": entry.where.key,
        "file": shown,
        "line": entry.line,
    }


def _shown(spec_file: Path) -> str:
    """The spec as the user would name it: relative to here when it is below here."""
    absolute = spec_file.absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(spec_file)
