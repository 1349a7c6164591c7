"""A locked target as its table in gpuenv.lock: the one rendering that the writer emits
and that the target's content hash covers.

It sits below ``lock.model`` (which imports it lazily for ``LockedTarget.content_hash``)
and ``lock._integrity``, and imports neither at run time, so that the lock's identity
does not depend on its serialiser (``lock.format``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuenv import _sha256

if TYPE_CHECKING:
    from gpuenv.builds.model import BuildEntry
    from gpuenv.lock.model import LockedTarget

HASH_KEY = "content-hash"
# The shapes of a pip entry's name and of a digest: checked on reading
# (``lock._integrity``) and again where install writes uv's requirements.
PIP_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")  # PEP 503-normalised
HEX = {"sha256": re.compile(r"^[0-9a-f]{64}$"), "md5": re.compile(r"^[0-9a-f]{32}$")}


def content_hash(name: str, table: Mapping[str, Any]) -> str:
    """sha256 over the target's name and every key of its table but the hash itself."""
    body = {key: value for key, value in table.items() if key != HASH_KEY}
    text = json.dumps(
        {"target": name, "table": body}, sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return "sha256:" + _sha256.hexdigest(text.encode())


WHEEL_FACT_KEYS = {
    "requires-python": "requires_python",
    "cuda-runtime": "cuda_runtime",
    "cudnn": "cudnn",
    "nccl": "nccl",
    "torchvision-requires": "torchvision_requires",
    "torchaudio-requires": "torchaudio_requires",
}


def drop_none(table: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if v is not None}


def _target_table(t: LockedTarget) -> dict[str, Any]:
    """The target as it is written, without its content hash."""
    hw, st = t.hardware, t.stack
    table: dict[str, Any] = {
        "input-hash": t.input_hash,
        "platform": t.platform,
        "hardware": drop_none(
            {
                "cpu": hw.cpu,
                "gpu": hw.gpu,
                "compute-capabilities": list(hw.compute_capabilities),
                "driver": hw.driver,
                "driver-cuda": hw.driver_cuda,
                "source": hw.source,
            }
        ),
        "stack": drop_none(
            {
                "python": st.python,
                "cuda": st.cuda,
                "cu-tag": st.cu_tag,
                "torch": st.torch,
                "torchvision": st.torchvision,
                "torchaudio": st.torchaudio,
                "cudnn": st.cudnn,
                "nccl": st.nccl,
                "arch-list": list(st.arch_list),
                "index": st.index,
            }
        ),
        "virtual-packages": dict(sorted(t.virtual_packages.items())),
        "conda": [
            drop_none(
                {
                    "name": c.name,
                    "version": c.version,
                    "build": c.build,
                    "build-number": c.build_number,
                    "channel": c.channel,
                    "subdir": c.subdir,
                    "url": c.url,
                    "sha256": c.sha256,
                    "md5": c.md5,
                    "depends": list(c.depends),
                    "constrains": list(c.constrains),
                    "size": c.size,
                    "noarch": c.noarch,
                }
            )
            for c in sorted(t.conda, key=lambda c: (c.name, c.version, c.build, c.subdir))
        ],
        "pip": [
            drop_none(
                {
                    "name": p.name,
                    "version": p.version,
                    "url": p.url,
                    "sha256": p.sha256,
                    "size": p.size,
                    "index": p.index,
                    "requires": sorted(p.requires),
                }
            )
            for p in sorted(t.pip, key=lambda p: (p.name, p.version, p.url))
        ],
        "builds": [_build_table(b) for b in sorted(t.builds, key=lambda b: b.name)],
        "wheel-facts": None
        if t.wheel_facts is None
        else drop_none(
            {key: getattr(t.wheel_facts, attr) for key, attr in WHEEL_FACT_KEYS.items()}
        ),
        "groups": {k: sorted(v) for k, v in sorted(t.groups.items())} or None,
    }
    # An empty array of tables has no TOML form of its own: left out, read as empty.
    # An absent sub-table (no wheel facts) is left out too.
    return {
        k: v
        for k, v in table.items()
        if v is not None and not (k in ("conda", "pip", "builds") and not v)
    }


def target_table(t: LockedTarget) -> dict[str, Any]:
    """The target's table as written, its content hash first."""
    table = _target_table(t)
    return {HASH_KEY: content_hash(t.name, table), **table}


def target_content_hash(t: LockedTarget) -> str:
    """The content hash of ``t`` as gpuenv writes it (``LockedTarget.content_hash``)."""
    return content_hash(t.name, _target_table(t))


def _build_table(b: BuildEntry) -> dict[str, Any]:
    i = b.inputs
    return drop_none(
        {
            "name": b.name,
            "version": b.version,
            "identity": b.identity,
            "source": b.source.kind,
            "url": b.source.url,
            "sha256": b.source.sha256,
            "commit": b.source.commit,
            "requires": sorted(b.requires),
            "max-jobs": b.max_jobs,
            "against-torch": i.against_torch,
            "no-build-isolation": i.no_build_isolation,
            "torch": i.torch,
            "torch-sha256": i.torch_sha256,
            "cuda": i.cuda,
            "toolkit": i.toolkit,
            "arch-list": i.arch_list,
            "python": i.python,
            "platform": i.platform,
            "host-compiler": i.host_compiler,
            "build-requires": list(i.build_requires),
            "env": dict(i.env),
        }
    )
