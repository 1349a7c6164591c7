"""The one error module: every failure gpuenv reports is a ``GpuenvError``.

Each class carries a fixed exit code (the CLI contract in docs/dev/design.md) and a ``kind``
that ``--json`` output uses as ``{"error": {"kind": ...}}``. Only ``gpuenv.cli``
turns these into output and an exit status; the library raises and never prints.

The classes below come in exit-code order, each subclass after its base (what each code
means to a user: docs/reference/exit-codes.md):

| code | meaning                      | class (``kind``)                    |
| ---- | ---------------------------- | ----------------------------------- |
| 0    | success                      |                                     |
| 1    | a check answered "no"        | CheckFailed (check-failed)          |
| 2    | bad input                    | UsageError (usage)                  |
|      |                              | SpecError (spec)                    |
|      |                              | ForeignFileError (import)           |
|      |                              | ActivationError (activation)        |
|      |                              | FileFormatError (file-format)       |
|      |                              | UnreadableLockError (file-format)   |
|      |                              | InputFileError (unreadable-input)   |
|      |                              | LockIntegrityError (lock-integrity) |
|      |                              | ArchiveError (archive)              |
| 3    | no build fits                | NoCompatiblePlan (unsatisfiable)    |
| 4    | not installed or verified    | NotInstalled (not-installed)        |
|      |                              | NotVerified (not-verified)          |
| 5    | an external step or a write  | ExternalToolError (external)        |
|      |                              | NetworkError (network)              |
|      |                              | DownloadError (download)            |
|      |                              | InstallError (install)              |
|      |                              | HashMismatch (hash-mismatch)        |
|      |                              | BuildError (build)                  |
|      |                              | HardwareDetectionError (hardware)   |
|      |                              | StorageError (storage)              |
| 70   | a bug in gpuenv              | anything else (internal)            |
| 130  | interrupted (SIGINT)         | Interrupted, KeyboardInterrupt      |
| 141  | stdout's reader went away    | OutputClosed (broken-pipe)          |
| 143  | SIGTERM (129: SIGHUP)        | Interrupted                         |
"""

from __future__ import annotations

TYPE_CHECKING = False  # avoids importing typing (~10 ms) on the `gpuenv run` path

if TYPE_CHECKING:  # kept off the run-time import path: `gpuenv run` imports this module
    from collections.abc import Mapping, Sequence
    from typing import Any

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_UNSATISFIABLE = 3
EXIT_NOT_READY = 4
EXIT_EXTERNAL = 5
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell tool ends with when its reader left
EXIT_TERMINATED = 143


class GpuenvError(Exception):
    """Root of every error gpuenv raises on purpose."""

    exit_code: int = EXIT_INTERNAL
    kind: str = "internal"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def details(self) -> dict[str, Any]:
        """Extra structured fields for ``--json`` error output."""
        return {}

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        body.update(self.details())
        return {"error": body}


class CheckFailed(GpuenvError):
    """A check answered "no": the lock is stale, doctor found errors, a probe failed.

    ``details`` carries the check's structured result into ``--json`` error output."""

    exit_code = EXIT_CHECK_FAILED
    kind = "check-failed"

    def __init__(
        self, message: str, *, hint: str | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self._details = dict(details or {})

    def details(self) -> dict[str, Any]:
        return dict(self._details)


class UsageError(GpuenvError, ValueError):
    """Bad flags or arguments."""

    exit_code = EXIT_USAGE
    kind = "usage"


class SpecProblem:
    """One problem in a spec or lock file, located as precisely as we can.

    A plain class rather than a dataclass: ``dataclasses`` costs ~10 ms to import, and
    this module is on every command's path, ``gpuenv run`` included.
    """

    __slots__ = ("file", "hint", "line", "message", "path")

    def __init__(
        self, file: str, line: int | None, path: str, message: str, hint: str | None = None
    ) -> None:
        self.file = file
        self.line = line
        self.path = path
        self.message = message
        self.hint = hint

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpecProblem) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self.file, self.line, self.path, self.message, self.hint))

    def __repr__(self) -> str:
        return f"SpecProblem({self.render()!r})"

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        key = f" {self.path}:" if self.path else ""
        text = f"{where}:{key} {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
        }


class SpecError(UsageError):
    """An invalid ``gpuenv.toml``: lists every problem found, each with file, line and key."""

    kind = "spec"

    def __init__(self, problems: Sequence[SpecProblem], *, hint: str | None = None) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(p.render() for p in self.problems), hint=hint)

    def details(self) -> dict[str, Any]:
        return {"problems": [p.to_json() for p in self.problems]}


class ForeignFileError(SpecError):
    """A file given to ``gpuenv import`` cannot be believed: not text, malformed, too
    large or too deep, an unknown format, or files that contradict each other. Like
    ``SpecError`` it lists every problem, each with the file, the line and the entry."""

    kind = "import"


class ActivationError(UsageError):
    """An activation input cannot be written safely: a bad variable name, a NUL byte,
    a relative path or a ``:`` inside a path-list entry."""

    kind = "activation"


class FileFormatError(UsageError):
    """A file gpuenv reads (the lock, facts) is malformed or from a newer gpuenv."""

    kind = "file-format"


class UnreadableLockError(FileFormatError):
    """The lock file as a whole cannot be read as a gpuenv lock: not UTF-8 or TOML (a
    merge left conflict markers in it), no or an impossible ``lock-version``, broken
    outside any target. ``gpuenv lock`` writes a new one in its place; every reader of
    the lock refuses it."""


class InputFileError(FileFormatError):
    """A file gpuenv reads cannot be read safely: not a regular file (a FIFO, a
    device), larger than any file of its kind, not UTF-8, or nested too deeply."""

    kind = "unreadable-input"

    def __init__(self, message: str, *, path: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path

    def details(self) -> dict[str, Any]:
        return {"path": self.path}


class LockIntegrityError(FileFormatError):
    """gpuenv.lock fails its own checks: a target's content hash does not match its
    entries, or the entries contradict each other (an edited or damaged lock)."""

    kind = "lock-integrity"

    def __init__(
        self,
        message: str,
        *,
        problems: Mapping[str, Sequence[str]],
        hint: str | None = "run 'gpuenv lock' to rewrite it from gpuenv.toml",
    ) -> None:
        super().__init__(message, hint=hint)
        self.problems = {name: tuple(found) for name, found in problems.items()}

    def details(self) -> dict[str, Any]:
        return {"problems": {name: list(found) for name, found in self.problems.items()}}


class ArchiveError(FileFormatError):
    """An offline archive (``gpuenv pack``) is damaged, truncated, tampered with or
    hostile (a member outside the archive's folder, a link, a device, a duplicate)."""

    kind = "archive"


class Alternative:
    """A concrete change that would make an unsatisfiable target plannable."""

    __slots__ = ("changes", "description")

    def __init__(self, description: str, changes: Mapping[str, str] | None = None) -> None:
        self.description = description
        self.changes: Mapping[str, str] = dict(changes or {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Alternative) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self.description, tuple(sorted(self.changes.items()))))

    def __repr__(self) -> str:
        return f"Alternative({self.description!r}, {dict(self.changes)!r})"

    def to_json(self) -> dict[str, Any]:
        return {"description": self.description, "changes": dict(self.changes)}


class NoCompatiblePlan(GpuenvError):
    """No build fits this target's hardware and the spec's constraints."""

    exit_code = EXIT_UNSATISFIABLE
    kind = "unsatisfiable"

    def __init__(
        self,
        message: str,
        *,
        target: str | None = None,
        alternatives: Sequence[Alternative] = (),
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.target = target
        self.alternatives = tuple(alternatives)

    def details(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "alternatives": [a.to_json() for a in self.alternatives],
        }


class NotInstalled(GpuenvError):
    """The environment has not been installed (or its install is incomplete)."""

    exit_code = EXIT_NOT_READY
    kind = "not-installed"


class NotVerified(GpuenvError):
    """No passing verification record matches this machine and lock."""

    exit_code = EXIT_NOT_READY
    kind = "not-verified"


class ExternalToolError(GpuenvError):
    """An external step (uv, rattler, a compiler, a download) failed."""

    exit_code = EXIT_EXTERNAL
    kind = "external"

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        returncode: int | None = None,
        stderr_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr_tail = stderr_tail

    def details(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "returncode": self.returncode,
            "stderr": self.stderr_tail,
        }


class NetworkError(ExternalToolError):
    """An index, mirror or channel could not be reached, or refused us: name resolution,
    connection refused, timeout, TLS, 401/403 or 404 (``cause``), for ``url`` (redacted).

    Never exit 3: a wrong password or a mirror missing a package is not "no build fits".
    ``extra`` carries further structured fields into ``--json`` (a partial lock's
    written and failed targets)."""

    kind = "network"

    def __init__(
        self,
        message: str,
        *,
        cause: str,
        url: str | None = None,
        target: str | None = None,
        hint: str | None = None,
        stderr_tail: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, stderr_tail=stderr_tail, hint=hint)
        self.cause = cause
        self.url = url
        self.target = target
        self.extra = dict(extra or {})

    def details(self) -> dict[str, Any]:
        body = super().details()
        body.update(cause=self.cause, url=self.url, target=self.target)
        body.update(self.extra)
        return body


class DownloadError(ExternalToolError):
    """An artifact could not be downloaded (``gpuenv pack``): the URL is redacted."""

    kind = "download"


class InstallError(GpuenvError):
    """Materialising a prefix or writing the store failed."""

    exit_code = EXIT_EXTERNAL
    kind = "install"


class HashMismatch(InstallError):
    """Bytes that are not the ones the lock names (a download, a stored artifact, an
    archive's member): the one refusal of every fetch, whoever fetched."""

    kind = "hash-mismatch"


class BuildError(InstallError):
    """A compiled extension could not be built, or its build cannot start (no host
    compiler nvcc accepts, a source that does not match its hash). Carries the build
    log's path, its last lines and the diagnosis of the known causes it matched."""

    kind = "build"

    def __init__(
        self,
        message: str,
        *,
        package: str | None = None,
        log: str | None = None,
        tail: str = "",
        diagnosis: Sequence[Mapping[str, str]] = (),
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.package = package
        self.log = log
        self.tail = tail
        self.diagnosis = tuple(dict(d) for d in diagnosis)

    def details(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "log": self.log,
            "tail": self.tail,
            "diagnosis": [dict(d) for d in self.diagnosis],
        }


class HardwareDetectionError(GpuenvError):
    """Detection hit an unexpected error (not "no GPU", which is a normal answer)."""

    exit_code = EXIT_EXTERNAL
    kind = "hardware"


class StorageError(GpuenvError, OSError):
    """Writing (or creating, renaming, locking) a file failed for a reason of the
    machine's, not gpuenv's: a full disk or quota, a read-only file system, a
    permission, an I/O error. Names the path and what to do.

    Also an ``OSError``, so code that treats a write as a courtesy (the caches) and
    suppresses ``OSError`` keeps doing so."""

    exit_code = EXIT_EXTERNAL
    kind = "storage"

    def __init__(
        self, message: str, *, path: str, errno_name: str | None, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.filename = path
        self.errno_name = errno_name

    def __str__(self) -> str:
        return self.message

    def details(self) -> dict[str, Any]:
        return {"path": self.filename, "errno": self.errno_name}


class OutputClosed(GpuenvError):
    """The reader of standard output went away (``gpuenv list | head -1``): nothing more
    can be said there, and saying so on stderr is noise. Ends the command quietly with
    128 + SIGPIPE, as ``ls | head`` ends ``ls``."""

    exit_code = EXIT_BROKEN_PIPE
    kind = "broken-pipe"


class Interrupted(KeyboardInterrupt):
    """A signal asked gpuenv to stop (SIGINT, SIGTERM, SIGHUP): raised from the signal
    handler the console script installs, so every ``finally`` and ``except
    BaseException`` clean-up runs (a half-built prefix is removed, children are killed)
    and the exit status is 128 + the signal number."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(name)
        self.signum = signum
        self.name = name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
