"""In-memory resolvers following the backend protocol, for orchestration tests.

The real uv and rattler backends have their own tests against the local index and
channel fixtures; these fakes let the locker's logic (plans, pins, targets, checks)
be tested fast and exactly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.version import Version

from gpuenv.errors import ExternalToolError, NoCompatiblePlan
from gpuenv.lock.model import CondaPackage, CondaRequest, PipPackage, PipRequest, normalize_name

DEFAULT = "https://default.invalid/simple"
CUDA_RUNTIME = {"12.1": "12.1.105", "12.4": "12.4.127", "11.8": "11.8.89", "12.6": "12.6.77"}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class FakePip:
    """Serves every requirement at its pinned version (or 1.0.0 / 2.0.0 when loose);
    torch-family wheels carry the index's tag, like the real PyTorch index."""

    newest: str = "2.0.0"
    mislabel: str | None = None  # serve this tag instead of the index's own
    requests: list[PipRequest] = field(default_factory=list)
    sdist_only: frozenset[str] = frozenset()  # packages the index has no wheel of
    # What torch's metadata pins (wheel_metadata); None: no such Requires-Dist line.
    cudnn: str | None = None
    nccl: str | None = None
    unreadable: bool = False  # wheel_metadata fails, as an index without metadata would
    metadata_reads: list[str] = field(default_factory=list)

    def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
        """METADATA for a wheel this fake served (the ``WheelMetadataSource`` protocol)."""
        self.metadata_reads.append(package.name)
        if self.unreadable:
            raise ExternalToolError(f"{package.url}: HTTP 404")
        lines = ["Metadata-Version: 2.1", f"Name: {package.name}", f"Version: {package.version}"]
        if package.name == "torch":
            lines.append("Requires-Python: >=3.8")
            local = Version(package.version).local
            cuda = f"{local[2:-1]}.{local[-1]}" if local and local.startswith("cu") else None
            pins = {
                "nvidia-cuda-runtime-cu12": CUDA_RUNTIME.get(cuda or ""),
                "nvidia-cudnn-cu12": self.cudnn if cuda else None,
                "nvidia-nccl-cu12": self.nccl if cuda else None,
            }
            lines += [f"Requires-Dist: {n}=={v}" for n, v in pins.items() if v]
        else:
            torch = next(r for r in request.requirements if r.startswith("torch=="))
            lines.append(f"Requires-Dist: {torch}")
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        return "fake-pip"

    def _version(self, req: Requirement, request: PipRequest) -> str:
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        if pinned:
            return pinned[0].replace(".*", ".0")  # "==12.4.*": a real index serves 12.4.x
        for pref in request.preferences:
            if pref.name == normalize_name(req.name) and req.specifier.contains(pref.version):
                return pref.version
        for candidate in (self.newest, "1.0.0"):
            if req.specifier.contains(candidate):
                return candidate
        raise NoCompatiblePlan(f"no version of {req.name} satisfies {req.specifier}")

    def resolve(self, request: PipRequest) -> tuple[PipPackage, ...]:
        self.requests.append(request)
        out = []
        tag = request.torch_index.rstrip("/").rsplit("/", 1)[-1] if request.torch_index else None
        for line in request.requirements:
            req = Requirement(line)
            name = normalize_name(req.name)
            version = self._version(req, request)
            family = name in request.torch_family
            index = (
                request.torch_index
                if family and request.torch_index
                else (request.default_index or DEFAULT)
            )
            if family and tag:
                version = f"{version}+{self.mislabel or tag}"
            wheel = name.replace("-", "_")
            url = f"{index}/{name}/{wheel}-{version}-py3-none-any.whl"
            if name in request.no_binary or name in self.sdist_only:  # builds: the sdist
                url = f"{index}/{name}/{wheel}-{version}.tar.gz"
            out.append(PipPackage(name, version, url, sha(url), index))
        torch = next((p for p in out if p.name == "torch"), None)
        if torch is not None and tag is None:  # the default index's torch: a CUDA build
            runtime = CUDA_RUNTIME["12.1"]
            wheel = f"nvidia_cuda_runtime_cu12-{runtime}-py3-none-manylinux2014_x86_64.whl"
            url = f"{DEFAULT}/nvidia-cuda-runtime-cu12/{wheel}"
            out.append(PipPackage("nvidia-cuda-runtime-cu12", runtime, url, sha(url), DEFAULT))
        return tuple(out)


@dataclass
class FakeConda:
    requests: list[CondaRequest] = field(default_factory=list)

    def describe(self) -> str:
        return "fake-conda"

    def resolve(self, request: CondaRequest) -> tuple[CondaPackage, ...]:
        self.requests.append(request)
        out = []
        for spec in request.specs:
            name, _, constraint = spec.partition(" ")
            version = constraint.rstrip(".*") + ".0" if constraint else "1.0"
            if name == "python":
                version = constraint.rstrip(".*") + ".9"
            url = f"file:///channel/{request.platform}/{name}-{version}-0.tar.bz2"
            out.append(
                CondaPackage(
                    name,
                    version,
                    "0",
                    0,
                    "file:///channel",
                    request.platform,
                    url,
                    sha(url),
                    sha(url)[:32],
                )
            )
        return tuple(out)


def newest_version(packages: tuple[PipPackage, ...], name: str) -> Version:
    return Version(next(p.version for p in packages if p.name == name))


def torch_index_down(monkeypatch: object, tag: str = "cu124") -> None:
    """Make ``FakePip`` fail as an unreachable torch index does for the ``tag`` build's
    requests (the other targets' resolve as before)."""
    from gpuenv.errors import NetworkError

    real = FakePip.resolve

    def flaky(self: FakePip, request: PipRequest) -> tuple[PipPackage, ...]:
        if request.torch_index and request.torch_index.endswith(tag):
            raise NetworkError("cannot reach the index", cause="refused", url=request.torch_index)
        return real(self, request)

    monkeypatch.setattr(FakePip, "resolve", flaky)  # type: ignore[attr-defined]
