"""The knowledge base's data files as bytes and raw TOML, and their digests.

Every fact gpuenv ships is a file in ``gpuenv/knowledge/data``: the planning facts
(``DATA_FILES``), the foreign formats ``gpuenv import`` reads (``knowledge.foreign``),
the build defaults (``BUILD_FILES``, queried by ``gpuenv.builds.knowledge``), the CUDA
libraries and manager pairs the doctor knows, and the base images of ``export
dockerfile`` (``images.toml``). Their callers keep their own query modules; this one
reads the files and computes the one kind of digest every cache and lock keys on.

Kept apart from the loader so that caches keyed on the data (the validated-spec
cache, the parsed-data cache) can compute the digest without importing the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuenv import _toml
from gpuenv.errors import FileFormatError

if TYPE_CHECKING:
    pass

DATA_FILES = ("cuda.toml", "gpus.toml", "torch.toml")
BUILD_FILES = ("packages.toml", "host_compilers.toml", "diagnoses.toml")
SCHEMA_VERSION = 1


_DATA_DIR = Path(__file__).with_name("data")


def data_bytes(name: str) -> bytes:
    """One shipped data file's bytes: from the package's folder when it is one (the
    usual install: no importlib.resources to import), else through importlib.resources
    (a zipped gpuenv)."""
    try:
        return (_DATA_DIR / name).read_bytes()
    except FileNotFoundError:
        if _DATA_DIR.is_dir():
            raise
    from importlib import resources

    return resources.files("gpuenv.knowledge").joinpath("data").joinpath(name).read_bytes()


def data_toml(name: str) -> dict[str, Any]:
    """One shipped data file as TOML, not checked further (its query module does that);
    a damaged file is an error naming it."""
    try:
        data = _toml.loads(data_bytes(name).decode("utf-8"))
    except (OSError, UnicodeDecodeError, _toml.TomlError) as exc:
        raise FileFormatError(
            f"gpuenv/knowledge/data/{name}: {exc}",
            hint="the knowledge base shipped with gpuenv is damaged; reinstall gpuenv",
        ) from None
    return data


def files_digest(names: tuple[str, ...], extra: bytes = b"") -> str:
    """sha256 over each file's name and bytes, in order, then ``extra``: the digest of
    every set of data files (a lock's input hash, the parsed-data caches). Once per
    process for each set and ``extra``: the shipped files do not change under a
    command, and an install asked for the planning files' digest twice (0.6 ms each)."""
    key = (names, extra)
    known = _digests.get(key)
    if known is not None:
        return known
    from gpuenv import _sha256  # no hashlib: `lock --check` hashes these files only

    digest = _sha256.new()
    for name in names:
        digest.update(name.encode() + b"\0" + data_bytes(name))
    digest.update(extra)
    _digests[key] = found = digest.hexdigest()
    return found


_digests: dict[tuple[tuple[str, ...], bytes], str] = {}


def facts_file_bytes(path: Path | None) -> bytes | None:
    """The user's facts file as bytes; None when there is none (a missing file is no
    facts file). Unreadable is an error naming the path."""
    if path is None:
        return None
    from gpuenv import _fsread

    try:  # bounded: read on every plan, so a FIFO or /dev/zero there must not hang it
        return _fsread.read_bytes(path, limit=_fsread.SPEC_LIMIT, what="facts file")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileFormatError(
            f"{path}: cannot read the facts file: {exc.strerror}",
            hint="fix its permissions, or point GPUENV_FACTS elsewhere",
        ) from None


def data_digest(facts_file: Path | bool | None = True) -> str:
    """A digest of the knowledge base's data: the shipped files, and the user's facts file
    (``True``: the one the CLI configured in ``gpuenv._settings``). Caches of derived
    results (parsed data, validated specs) and lock input hashes key on it."""
    from gpuenv import _settings

    path = _settings.facts_file if facts_file is True else facts_file or None
    user = facts_file_bytes(path) if isinstance(path, Path) else None
    extra = b"" if user is None else b"\0facts\0" + str(path).encode() + b"\0" + user
    return files_digest(DATA_FILES, extra)


def read_data(name: str) -> dict[str, Any]:
    """The raw TOML of one data file (also used by the schema test)."""
    data = _toml.loads(data_bytes(name).decode("utf-8"))
    if data.get("schema") != SCHEMA_VERSION:
        raise FileFormatError(
            f"knowledge/data/{name}: schema {data.get('schema')!r}, expected {SCHEMA_VERSION}"
        )
    return data
