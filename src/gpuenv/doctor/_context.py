"""What every family of checks shares: the request, the inventory, and facts derived
once and only on demand (the knowledge base, torch's build, the CUDA library index)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from gpuenv.doctor._fsafe import read_text
from gpuenv.doctor.environment import Environment
from gpuenv.doctor.model import DoctorRequest
from gpuenv.names import normalize_name
from gpuenv.versions import CudaVersion, VersionFormatError

if TYPE_CHECKING:
    from gpuenv.doctor._cudalibs import LibraryIndex
    from gpuenv.doctor._records import Records
    from gpuenv.knowledge import KnowledgeBase, TorchBuild, TorchRelease


T = TypeVar("T")
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?\s*(?:==\s*(?P<pin>[^\s;,)]+))?"
)


class Context:
    def __init__(self, request: DoctorRequest, env: Environment) -> None:
        self.request = request
        self.env = env
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """A fact several checks derive, computed once."""
        if key not in self._memo:
            self._memo[key] = compute()
        return cast(T, self._memo[key])

    @cached_property
    def kb(self) -> KnowledgeBase:
        from gpuenv.knowledge import knowledge_base

        return knowledge_base()

    @cached_property
    def torch_release(self) -> TorchRelease | None:
        torch = self.env.torch
        if torch is None:
            return None
        try:
            return self.kb.torch_release(torch.public)
        except ValueError:
            return None

    @cached_property
    def torch_build(self) -> TorchBuild | None:
        release = self.torch_release
        torch = self.env.torch
        return release.build(torch.tag) if release is not None and torch is not None else None

    @cached_property
    def ld_library_path(self) -> list[str]:
        """The raw entries, empty ones kept (the loader reads them as the current
        directory)."""
        value = self.request.environ.get("LD_LIBRARY_PATH")
        return value.split(":") if value else []

    def resolve_entry(self, entry: str) -> Path:
        """Where the loader looks for an ``LD_LIBRARY_PATH`` entry."""
        return Path(os.path.normpath(self.request.cwd / entry)) if entry else self.request.cwd

    @cached_property
    def torch_requires(self) -> dict[str, str | None]:
        """What the winning torch's metadata requires: canonical name -> the ``==`` pin
        (None when not pinned). Empty for a torch without a dist-info (conda's)."""
        dist = self.env.dist("torch")
        out: dict[str, str | None] = {}
        if dist is None:
            return out
        text = read_text(dist.path / "METADATA")
        if text is None:
            return out
        for line in text.split("\n\n", 1)[0].splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            found = _REQUIREMENT.match(line.split(":", 1)[1].strip())
            if found:
                name = normalize_name(found["name"])
                out.setdefault(name, found["pin"])
        return out

    @cached_property
    def records(self) -> Records:
        """Every RECORD and conda-meta file list, read once."""
        from gpuenv.doctor._records import Records

        return Records(self.env)

    @cached_property
    def libraries(self) -> LibraryIndex:
        from gpuenv.doctor._cudalibs import build_index

        return build_index(self)

    @cached_property
    def env_cuda(self) -> tuple[CudaVersion, str] | None:
        """The CUDA the environment is built for, and where that was read."""
        torch = self.env.torch
        if torch is not None and torch.cuda is not None:
            return torch.cuda, str(torch.version_file)
        for name in ("cuda-version", "cudatoolkit", "cuda-cudart"):
            package = self.env.conda(name)
            if package is not None:
                found = _major_minor(package.version)
                if found:
                    return found, str(package.meta)
        for dist in self.env.dists:
            if dist.name.startswith("nvidia-cuda-runtime-cu"):
                found = _major_minor(dist.version)
                if found:
                    return found, str(dist.path)
        return None


def _major_minor(text: str) -> CudaVersion | None:
    parts = text.split(".")
    try:
        return CudaVersion.parse(".".join(parts[:2])) if len(parts) >= 2 else None
    except VersionFormatError:
        return None
