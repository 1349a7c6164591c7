"""Reading a wheel's METADATA without the wheel: PEP 658 files, range requests, and what
a broken or hostile server cannot make gpuenv do."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request

import pytest

from gpuenv._network import Mirror, Mirrors
from gpuenv.lock import wheelmeta
from gpuenv.lock.model import PipPackage, PipRequest
from gpuenv.lock.wheelcheck import http_metadata, metadata_source
from gpuenv.lock.wheelmeta import MetadataUnavailable, parse_metadata, read_metadata, read_names
from tests.fixtures.pkgindex.index import Seen, Serve
from tests.fixtures.pkgindex.plugin import PkgIndex

METADATA = "Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1\nRequires-Python: >=3.8\nRequires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == 'Linux'\n"


def wheel_bytes(metadata: str = METADATA, padding: int = 0) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("torch/__init__.py", "x" * padding)
        z.writestr("torch-2.4.1.dist-info/METADATA", metadata)
    return buffer.getvalue()


class _Response(io.BytesIO):
    def __init__(self, body: bytes, status: int, headers: dict[str, str]) -> None:
        super().__init__(body)
        self.status, self.headers = status, headers


def server(
    wheel: bytes, *, pep658: str | None = None, ranges: bool = True
) -> tuple[Callable[..., Any], list[Request]]:
    seen: list[Request] = []

    def opener(request: Request, timeout: float) -> _Response:
        seen.append(request)
        if request.full_url.endswith(".metadata"):
            if pep658 is None:
                raise HTTPError(request.full_url, 404, "not found", {}, None)  # type: ignore[arg-type]
            return _Response(pep658.encode(), 200, {})
        wanted = request.get_header("Range")
        if wanted is None or not ranges:
            return _Response(wheel, 200, {})
        first, _, last = wanted.removeprefix("bytes=").partition("-")
        size = len(wheel)
        start, end = (
            (size - int(last), size - 1) if not first else (int(first), min(size - 1, int(last)))
        )
        start = max(0, start)
        return _Response(
            wheel[start : end + 1], 206, {"Content-Range": f"bytes {start}-{end}/{size}"}
        )

    return opener, seen


def test_pep_658_first() -> None:
    opener, seen = server(b"", pep658=METADATA)
    assert read_metadata("https://files.example/t.whl", opener=opener) == METADATA
    assert "https://files.example/t.whl.metadata" in [r.full_url for r in seen]


def test_range_requests_when_there_is_no_pep_658_file() -> None:
    wheel = wheel_bytes(padding=5_000_000)  # deflated: small; the tail covers the directory
    opener, seen = server(wheel)
    text = read_metadata("https://files.example/t.whl", opener=opener)
    assert parse_metadata(text) == (
        ">=3.8",
        ("nvidia-cudnn-cu12==9.1.0.70; platform_system == 'Linux'",),
    )
    ranged = [r for r in seen if not r.full_url.endswith(".metadata")]
    assert all(r.get_header("Range") for r in ranged)
    assert len(ranged) <= 2  # the tail (fetched beside the .metadata probe), one more


def test_credentials_become_a_header_and_never_reach_a_message() -> None:
    opener, seen = server(b"", pep658=None, ranges=False)
    with pytest.raises(MetadataUnavailable) as caught:
        read_metadata("https://user:s3cret@files.example/t.whl", opener=opener)
    assert "s3cret" not in caught.value.message
    assert "ignored a range request" in caught.value.message  # never the whole wheel
    assert seen[0].get_header("Authorization", "").startswith("Basic ")
    assert "s3cret" not in seen[0].full_url


def test_a_huge_pep_658_answer_is_refused() -> None:
    opener, _seen = server(b"", pep658="x" * (wheelmeta.MAX_METADATA + 10))
    with pytest.raises(MetadataUnavailable, match="larger than"):
        read_metadata("https://files.example/t.whl", opener=opener)


def test_a_metadata_bomb_is_not_inflated() -> None:
    opener, _seen = server(wheel_bytes(metadata="A" * (wheelmeta.MAX_METADATA + 1)))
    with pytest.raises(MetadataUnavailable, match="METADATA claims"):
        read_metadata("https://files.example/t.whl", opener=opener, pep658=False)


def test_not_a_zip_is_a_typed_failure() -> None:
    opener, _seen = server(b"\x00" * 5000)
    with pytest.raises(MetadataUnavailable, match="not a readable wheel"):
        read_metadata("https://files.example/t.whl", opener=opener, pep658=False)


def test_other_schemes_are_refused() -> None:
    with pytest.raises(MetadataUnavailable, match="not an http"):
        read_metadata("ftp://files.example/t.whl", pep658=False)


def test_a_local_wheel_is_read_directly(tmp_path: Any) -> None:
    path = tmp_path / "t.whl"
    path.write_bytes(wheel_bytes())
    assert read_metadata(path.as_uri()) == METADATA


def test_against_the_fixture_server_with_and_without_pep_658(pkgindex: PkgIndex) -> None:
    art = pkgindex.find("torch", "2.4.1+cu124", "whl/cu124")[0]
    url = f"{pkgindex.torch_index('cu124')}/{art.filename.replace('+', '%2B')}"
    via_658 = read_metadata(url)
    via_ranges = read_metadata(url, pep658=False)
    assert via_658 == via_ranges and "nvidia-cudnn-cu12==9.1.0.70" in via_658
    assert any(n.endswith(".dist-info/METADATA") for n in read_names(url))


def test_verify_expects_the_pins_the_wheels_stated(tmp_path: Any) -> None:
    """The lock's wheel facts are what the prefix holds: verify checks cuDNN/NCCL against
    them, not against the knowledge base (which may be stale)."""
    from gpuenv.knowledge import knowledge_base
    from gpuenv.lock.model import LockedHardware, LockedTarget, StackSummary, WheelFacts
    from gpuenv.verify.target import expectations_for

    stack = StackSummary(
        "3.11",
        "12.4",
        "cu124",
        "2.4.1",
        None,
        None,
        "9.1.0.70",
        "2.20.5",
        ("9.0",),
        "https://x.example/cu124",
    )
    hardware = LockedHardware(False, "H100", ("9.0",), "550.54.15", "12.4", "declared")
    target = LockedTarget(
        "h", "sha256:0", "linux-64", hardware, stack, {}, wheel_facts=WheelFacts(cudnn="9.9.9.9")
    )
    expect = expectations_for(target, tmp_path, knowledge_base(), ())
    assert (expect.cudnn, expect.nccl) == ("9.9.9.9", "2.20.5")


def test_metadata_headers_end_at_the_description_and_fold_continuations() -> None:
    text = (
        "Metadata-Version: 2.1\nName: torch\nrequires-python: >=3.10\n"
        "Requires-Dist: filelock\nRequires-Dist: nvidia-nccl-cu12==2.20.5;\n"
        "  platform_system == 'Linux'\n\nRequires-Dist: not-a-header-in-the-description\n"
    )
    assert parse_metadata(text) == (
        ">=3.10",
        ("filelock", "nvidia-nccl-cu12==2.20.5; platform_system == 'Linux'"),
    )


def test_the_metadata_cache_is_checked_before_it_is_believed(tmp_path: Path) -> None:
    """The cache of each wheel's METADATA (by its sha256) is read on every relock: a
    FIFO there hung the lock, and a file of another wheel (or a truncated one) gave the
    lock that wheel's facts. Neither is believed: the metadata is read again."""
    import os

    from gpuenv.lock.model import PipPackage, PipRequest
    from gpuenv.lock.wheelcheck import read_wheel_metadata

    real = "Metadata-Version: 2.1\nName: torch\nVersion: 2.4.1+cu124\nRequires-Dist: x\n\n"

    class Source:
        calls = 0

        def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
            Source.calls += 1
            return real

    package = PipPackage("torch", "2.4.1+cu124", "https://i.example/torch-2.4.1.whl", "a" * 64)
    request = PipRequest(requirements=("torch",), python="3.11", cache_dir=tmp_path)
    cached = tmp_path / "wheel-metadata" / f"{'a' * 64}.METADATA"
    cached.parent.mkdir()
    os.mkfifo(cached)
    assert read_wheel_metadata(Source(), package, request) == real and Source.calls == 1
    for planted in (real.replace("2.4.1+cu124", "2.5.0"), "Metadata-Version: 2.1\nName: tor"):
        cached.unlink()
        cached.write_text(planted)
        assert read_wheel_metadata(Source(), package, request) == real
    assert Source.calls == 3
    assert cached.read_text() == real, "the cache is rewritten with what the wheel says"
    assert read_wheel_metadata(Source(), package, request) == real and Source.calls == 3


def _mirrored_torch(
    mirror: str, pkgindex: PkgIndex
) -> tuple[PipPackage, PipRequest]:  # the cu124 torch as a lock names it, and a request
    canonical = "https://torch.invalid/whl"
    art = pkgindex.find("torch", "2.4.1+cu124", "whl/cu124")[0]
    url = f"{canonical}/cu124/{art.filename.replace('+', '%2B')}"
    request = PipRequest(
        ("torch==2.4.1",),
        "3.11",
        default_index="https://pypi.invalid/simple",
        torch_index=f"{canonical}/cu124",
        mirrors=Mirrors((Mirror(canonical, mirror, "test"),)),
    )
    return PipPackage("torch", "2.4.1+cu124", url, art.sha256), request


def test_the_metadata_is_read_through_the_mirror_with_the_credentials_uv_was_given(
    serve_index: Callable[..., PkgIndex], pkgindex: PkgIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where only the mirror is reachable, the read of the canonical URL failed on every
    lock (a warning, and no wheel facts); on an open network it went around the mirror.
    It goes through the mirror, with the credentials given by the torch index's name
    (either name serves both, as for uv), and only the mirror is asked."""
    seen = Seen()
    mirror = serve_index(Serve(credentials="mirror-user:mirror-pass-7"), seen=seen)
    package, request = _mirrored_torch(mirror.torch_base, pkgindex)
    monkeypatch.setenv("UV_INDEX_GPUENV_TORCH_USERNAME", "mirror-user")
    monkeypatch.setenv("UV_INDEX_GPUENV_TORCH_PASSWORD", "mirror-pass-7")
    assert metadata_source(package.url, request)[0].startswith(mirror.torch_base + "/cu124/")
    text = http_metadata(package, request)
    assert "nvidia-cudnn-cu12==9.1.0.70" in text
    assert seen.requests, "the mirror was asked"
    assert all(path.startswith("/whl/cu124/torch-2.4.1") for path, _auth in seen.requests)
    assert all(auth and auth.startswith("Basic ") for _path, auth in seen.requests)


def test_a_failed_read_through_a_mirror_names_the_mirror_url_without_its_credentials(
    serve_index: Callable[..., PkgIndex], pkgindex: PkgIndex, tmp_path: Path
) -> None:
    """The warning names the URL actually fetched (the mirror's, redacted), not the
    canonical one nobody asked."""
    from gpuenv.knowledge import knowledge_base
    from gpuenv.lock.wheelcheck import read_wheel_facts
    from gpuenv.plan import plan_target
    from gpuenv.spec import parse_spec_text

    mirror = serve_index(Serve(credentials="mirror-user:mirror-pass-7"))
    wrong = mirror.torch_base.replace("://", "://mirror-user:wrong-pass-7@")
    package, request = _mirrored_torch(wrong, pkgindex)

    class Source:
        def wheel_metadata(self, package: PipPackage, request: PipRequest) -> str:
            return http_metadata(package, request, timeout=5.0)

    text = (
        '[project]\nname = "m"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n'
        '[targets.h100]\ngpu = "H100"\ndriver = "550.54.15"\n'
    )
    kb = knowledge_base()
    plan = plan_target("h100", parse_spec_text(text, file="gpuenv.toml", kb=kb).spec, kb)
    facts, warnings = read_wheel_facts(plan, (package,), request, Source())
    assert facts is None and len(warnings) == 1
    assert f"{mirror.torch_base}/cu124/torch-2.4.1" in warnings[0]
    assert "HTTP 401" in warnings[0]
    assert "torch.invalid" not in warnings[0] and "wrong-pass-7" not in warnings[0]
