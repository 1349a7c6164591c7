"""The ``Fingerprint`` value: a machine's driver version and GPU UUIDs.

A leaf module (it imports nothing) so that the cheap reader (``fingerprint``), the NVML
source (``_nvml``) and ``HardwareFacts`` (``model``) share the value without importing
each other; ``gpuenv.hardware.fingerprint`` re-exports it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # keeps typing off the `gpuenv run` path
if TYPE_CHECKING:
    from collections.abc import Iterable


class Fingerprint:
    """Driver version and the sorted GPU UUIDs; ``source`` says where they were read
    ("proc", "nvml", "none", or a ``HardwareFacts`` source). Immutable by convention;
    a plain class because defining a dataclass costs about a millisecond."""

    __slots__ = ("driver_version", "gpu_uuids", "source")

    def __init__(
        self, driver_version: str | None, gpu_uuids: tuple[str, ...], source: str = "none"
    ) -> None:
        self.driver_version = driver_version
        self.gpu_uuids = gpu_uuids
        self.source = source

    def _values(self) -> tuple[str | None, tuple[str, ...], str]:
        return (self.driver_version, self.gpu_uuids, self.source)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fingerprint) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"Fingerprint({self.driver_version!r}, {self.gpu_uuids!r}, {self.source!r})"

    @classmethod
    def of(cls, driver_version: str | None, uuids: Iterable[str], *, source: str) -> Fingerprint:
        return cls(driver_version, tuple(sorted(set(uuids))), source)

    @property
    def key(self) -> str:
        """A stable text form for records: ``driver=550.54.15;gpus=GPU-…,GPU-…``."""
        return f"driver={self.driver_version or '-'};gpus={','.join(self.gpu_uuids)}"

    def matches(self, other: Fingerprint) -> bool:
        """Same driver and the same set of GPUs (wherever each was read from)."""
        return (self.driver_version, self.gpu_uuids) == (other.driver_version, other.gpu_uuids)
