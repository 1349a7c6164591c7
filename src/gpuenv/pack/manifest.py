"""The manifest of an offline archive: what is inside, with the size and hash of every
member, and which locked URL each artifact stands for.

It is the archive's first member (``gpuenv-pack/manifest.json``), written with sorted
keys and no timestamps, so the same lock always gives the same bytes. Reading is
strict: anything that is not exactly this shape is refused before a single other
member is read, and every name it gives is checked to be a plain file name (nothing
an archive says is used as a path without that check).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gpuenv._fetch import safe_filename
from gpuenv.errors import ArchiveError

FORMAT = "gpuenv-pack"
FORMAT_VERSION = 1
ROOT = "gpuenv-pack"
MANIFEST = f"{ROOT}/manifest.json"
LOCK = f"{ROOT}/gpuenv.lock"
SPEC = f"{ROOT}/gpuenv.toml"
ARTIFACTS = f"{ROOT}/artifacts"
MAX_MANIFEST_BYTES = 16 << 20
MAX_TEXT_BYTES = 64 << 20  # the lock and the spec

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Member:
    """A text member (the lock, the spec): where, how big, its sha256."""

    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size}


@dataclass(frozen=True)
class PackedArtifact:
    """One artifact of the lock, stored once by content (``artifacts/<sha256>/<name>``)."""

    urls: tuple[str, ...]  # the URLs the lock names for these bytes (sorted; no credentials)
    filename: str
    sha256: str
    size: int
    kind: str  # "pip" or "conda"
    md5: str | None = None  # conda records carry one too

    @property
    def path(self) -> str:
        return f"{ARTIFACTS}/{self.sha256}/{self.filename}"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "filename": self.filename,
            "kind": self.kind,
            "sha256": self.sha256,
            "size": self.size,
            "urls": list(self.urls),
        }
        if self.md5:
            body["md5"] = self.md5
        return body


@dataclass(frozen=True)
class Manifest:
    """What an archive holds: the project, the packed targets, the lock and spec
    members, and every artifact."""

    project: str
    targets: dict[str, str]  # packed target -> its content hash (names its prefix)
    lock: Member
    spec: Member | None
    artifacts: tuple[PackedArtifact, ...]  # sorted by path, each sha256 once

    def dumps(self) -> str:
        body = {
            "artifacts": [a.to_json() for a in self.artifacts],
            "format": FORMAT,
            "format-version": FORMAT_VERSION,
            "lock": self.lock.to_json(),
            "project": self.project,
            "spec": self.spec.to_json() if self.spec else None,
            "targets": dict(sorted(self.targets.items())),
        }
        return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=True) + "\n"

    def by_url(self) -> dict[str, PackedArtifact]:
        return {url: a for a in self.artifacts for url in a.urls}

    @property
    def payload_bytes(self) -> int:
        return sum(a.size for a in self.artifacts)


# --- reading -----------------------------------------------------------------------------------


def _bad(what: str) -> ArchiveError:
    return ArchiveError(
        f"the archive's manifest is not valid: {what}",
        hint="the archive is damaged or was not written by gpuenv pack: pack it again",
    )


def _str(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{where}.{key} is not a non-empty string")
    return value


def _size(raw: dict[str, Any], key: str, where: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _bad(f"{where}.{key} is not a size in bytes")
    return value


def _sha(raw: dict[str, Any], key: str, where: str) -> str:
    value = _str(raw, key, where)
    if not _SHA256.match(value):
        raise _bad(f"{where}.{key} is not a sha256 in hex")
    return value


def _member(raw: Any, where: str, path: str) -> Member:
    if not isinstance(raw, dict) or set(raw) != {"path", "sha256", "size"}:
        raise _bad(f"{where} is not {{path, sha256, size}}")
    if raw["path"] != path:
        raise _bad(f"{where}.path is {raw['path']!r}, expected {path!r}")
    size = _size(raw, "size", where)
    if size > MAX_TEXT_BYTES:
        raise _bad(f"{where} claims {size} bytes (at most {MAX_TEXT_BYTES})")
    return Member(path, size, _sha(raw, "sha256", where))


def _artifact(raw: Any, index: int) -> PackedArtifact:
    where = f"artifacts[{index}]"
    keys = {"filename", "kind", "sha256", "size", "urls"}
    if not isinstance(raw, dict) or not keys <= set(raw) <= keys | {"md5"}:
        raise _bad(f"{where} does not have exactly {', '.join(sorted(keys))} (and md5)")
    filename = _str(raw, "filename", where)
    if not safe_filename(filename):
        raise _bad(f"{where}.filename {filename!r} is not a plain file name")
    kind = _str(raw, "kind", where)
    if kind not in ("pip", "conda"):
        raise _bad(f"{where}.kind is {kind!r}, not pip or conda")
    md5 = raw.get("md5")
    if md5 is not None and (not isinstance(md5, str) or not _MD5.match(md5)):
        raise _bad(f"{where}.md5 is not an md5 in hex")
    urls = raw["urls"]
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u for u in urls):
        raise _bad(f"{where}.urls is not a non-empty list of URLs")
    return PackedArtifact(
        urls=tuple(urls),
        filename=filename,
        sha256=_sha(raw, "sha256", where),
        size=_size(raw, "size", where),
        kind=kind,
        md5=md5,
    )


def parse_manifest(data: bytes) -> Manifest:
    """The manifest in ``data``, checked member by member; ``ArchiveError`` otherwise."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad(f"not JSON ({exc})") from None
    except RecursionError:  # json recurses per nesting level: was exit 70
        raise _bad("nested too deeply to be a manifest gpuenv wrote") from None
    if not isinstance(raw, dict):
        raise _bad("not a JSON object")
    if raw.get("format") != FORMAT:
        raise _bad(f"format is {raw.get('format')!r}, not {FORMAT!r}")
    version = raw.get("format-version")
    if type(version) is not int or version != FORMAT_VERSION:  # true == 1 in Python
        raise ArchiveError(
            f"the archive is format version {version!r}; this gpuenv reads {FORMAT_VERSION}",
            hint="pack it again with this gpuenv, or install with the gpuenv that packed it",
        )
    targets = raw.get("targets")
    if not isinstance(targets, dict) or not targets:
        raise _bad("targets is not a non-empty table")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in targets.items()):
        raise _bad("targets maps names to content hashes")
    artifacts = raw.get("artifacts")
    if not isinstance(artifacts, list):
        raise _bad("artifacts is not a list")
    parsed = tuple(_artifact(a, i) for i, a in enumerate(artifacts))
    paths = [a.path for a in parsed]
    urls = [u for a in parsed for u in a.urls]
    if len(set(paths)) != len(paths) or len(set(urls)) != len(urls):
        raise _bad("an artifact or a URL is listed twice")
    spec = raw.get("spec")
    return Manifest(
        project=_str(raw, "project", "manifest"),
        targets=dict(targets),
        lock=_member(raw.get("lock"), "lock", LOCK),
        spec=_member(spec, "spec", SPEC) if spec is not None else None,
        artifacts=parsed,
    )
