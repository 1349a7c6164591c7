"""sha256 for the ``gpuenv run`` path, without ``hashlib``'s start-up.

Importing ``hashlib`` loads OpenSSL's libcrypto and builds a constructor for every
algorithm it offers (about 3 ms, an eighth of ``gpuenv run``'s whole cost), while the
run path hashes a prefix's path and a lock file. CPython's built-in sha256 (``_sha2``
from 3.12, ``_sha256`` before) computes the same digest; ``hashlib`` is the fallback
where neither exists or the built-in one refuses to work (a FIPS-mode Python).
Standard library only, as every module the run path imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class Hash(Protocol):
        def update(self, data: bytes, /) -> None: ...

        def hexdigest(self) -> str: ...


def _constructor() -> Callable[[bytes], Hash]:
    for name in ("_sha2", "_sha256"):
        try:
            made: Callable[[bytes], Hash] = __import__(name).sha256
            made(b"")  # a FIPS-mode build may refuse its own built-in hashes
        except (ImportError, AttributeError, ValueError):
            continue
        return made
    import hashlib

    return hashlib.sha256


_sha256 = _constructor()


def new(data: bytes = b"") -> Hash:
    """A sha256 object (``update``, ``hexdigest``), as ``hashlib.sha256(data)``."""
    return _sha256(data)


def hexdigest(data: bytes) -> str:
    """The sha256 of ``data``, in hex (as ``hashlib.sha256(data).hexdigest()``)."""
    return _sha256(data).hexdigest()
