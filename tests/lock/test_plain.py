"""The lock's schema answered without pydantic (lock._plain) against the pydantic models
(lock._models): ``conforms`` never says True where the models report a problem, and says
True for every valid lock in the corpus. The corpus: a lock that sets every key, locks
gpuenv renders, and seeded mutations of them (values of every type and shape the schema
meets, keys removed, unknown, or spelt as Python names)."""

from __future__ import annotations

import copy
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuenv import _toml
from gpuenv.lock import _models, _plain
from gpuenv.lock.format import parse_lock_text, render_lock
from tests.lock.test_format import sample
from tests.mutations import Mutations

H = "a" * 64
# Every key of every table, each with a valid value (the schema's, not the content
# hash's: that is _integrity's to check).
EVERY_KEY = f"""
lock-version = 2
spec-hash = "sha256:{H}"

[targets.h100]
content-hash = "sha256:{H}"
input-hash = "sha256:{H}"
platform = "linux-64"
hardware = {{ cpu = false, gpu = "H100", compute-capabilities = ["9.0"], driver = "550.54.15", driver-cuda = "12.4", source = "declared" }}
stack = {{ python = "3.11", cuda = "12.4", cu-tag = "cu124", torch = "2.4.1", torchvision = "0.19.1", torchaudio = "2.4.1", cudnn = "9.1.0.70", nccl = "2.20.5", arch-list = ["8.0", "9.0"], index = "https://torch.invalid/whl/cu124" }}
virtual-packages = {{ __cuda = "12.4", __glibc = "2.28" }}
groups = {{ dev = ["pytest"], empty = [] }}
wheel-facts = {{ requires-python = ">=3.8", cuda-runtime = "12.4.127", cudnn = "9.1.0.70", nccl = "2.20.5", torchvision-requires = "torch==2.4.1", torchaudio-requires = "torch==2.4.1" }}

[[targets.h100.conda]]
name = "python"
version = "3.11.9"
build = "h_0"
build-number = 0
channel = "conda-forge"
subdir = "linux-64"
url = "https://c.invalid/linux-64/python-3.11.9-h_0.conda"
sha256 = "{H}"
md5 = "{"b" * 32}"
depends = ["libzlib >=1.3"]
constrains = ["python_abi 3.11"]
size = 1234
noarch = "generic"

[[targets.h100.pip]]
name = "torch"
version = "2.4.1+cu124"
url = "https://torch.invalid/torch-2.4.1-cp311-cp311-linux_x86_64.whl"
sha256 = "{H}"
size = 0
index = "https://torch.invalid/whl/cu124"
requires = ["filelock"]

[[targets.h100.builds]]
name = "flash-attn"
version = "2.6.3"
identity = "sha256:{H}"
source = "git"
url = "git+https://g.invalid/flash-attention"
sha256 = "{H}"
commit = "{"c" * 40}"
requires = ["torch"]
max-jobs = 1
against-torch = true
no-build-isolation = true
torch = "2.4.1+cu124"
torch-sha256 = "{H}"
cuda = "12.4"
toolkit = "12.4.131"
arch-list = "8.0;9.0"
python = "3.11"
platform = "linux_x86_64"
host-compiler = "gcc-12"
build-requires = ["ninja"]
env = {{ FOO = "1" }}

[targets.cpu]
content-hash = "sha256:{H}"
input-hash = "x"
platform = "linux-64"
hardware = {{ cpu = true, source = "declared" }}
stack = {{ python = "3.11", cu-tag = "cpu", torch = "2.4.1", index = "https://torch.invalid/whl/cpu" }}
"""

VALUES: list[Any] = [
    "", "x", " x", "a\nb", "\x00", "3.11", "12.4", "cu124", "declared", "sdist", "git",
    "python", "generic", "other", H, H[:-1], H + "\n", H.upper(), "sha256:" + H, "sha256:" + H[:-1],
    "b" * 32, "c" * 40, "https://x.invalid/a.whl", True, False, 0, 1, -1, 2, 10**20, 1.5, [],
    [""], ["x"], [1], [True], [[]], {}, {"a": "b"}, {"a": 1}, {"a": ["x"]}, {"cpu": True},
    {"cpu": True, "source": "declared"},
]  # fmt: skip
KEYS = [
    "name", "content_hash", "cu_tag", "build_number", "max_jobs", "unknown", "targets",
    "size", "noarch", "wheel-facts", "groups", "cpu",
]  # fmt: skip


def _valid(raw: dict[str, Any]) -> bool:
    return not _models.problems(copy.deepcopy(raw))


def _same_answer(raw: dict[str, Any]) -> tuple[bool, bool]:
    """Assert the property; (the models found nothing, ``conforms`` said so too)."""
    plain = _plain.conforms(copy.deepcopy(raw))
    valid = _valid(raw)
    assert valid or not plain, f"said True where the models report a problem: {raw!r}"
    return valid, plain


def _corpus() -> list[tuple[str, dict[str, Any]]]:
    lock = sample()
    texts = [("every key", EVERY_KEY), ("sample", render_lock(lock))]
    texts.append(
        ("one target", render_lock(type(lock)(lock.spec_hash, {"cpu": lock.targets["cpu"]})))
    )
    return [(name, _toml.loads(text)) for name, text in texts]


@pytest.mark.parametrize("name", sorted(_plain.MODELS))
def test_each_table_has_its_models_keys_and_requiredness(name: str) -> None:
    """A key added to a model, renamed or made required shows here by name (a lock that
    held the new key would otherwise only be left to pydantic)."""
    model = getattr(_models, name)
    fields = _plain.MODELS[name].fields
    theirs = {field.alias or key: field.is_required() for key, field in model.model_fields.items()}
    assert {key: required for key, (_, required) in fields.items()} == theirs


def test_every_lock_of_the_corpus_conforms() -> None:
    for name, raw in _corpus():
        assert _same_answer(raw) == (True, True), name


MUTATIONS = Mutations(VALUES, KEYS, most=2, remove=0.2, rename=0.3, add=0.4)


@pytest.mark.parametrize("seed", range(3))
def test_mutated_locks_get_the_models_answer(seed: int) -> None:
    rng = random.Random(seed)
    bases = [raw for _, raw in _corpus()]
    valid = plain = 0
    for _ in range(1500):
        ok, said = _same_answer(MUTATIONS.mutated(rng.choice(bases), rng))
        valid += ok
        plain += said
    # True for what is valid, not only for the corpus as it is
    assert valid > 100 and plain >= 0.9 * valid, (valid, plain)


def test_an_unseen_valid_lock_is_read_without_pydantic(tmp_path: Path) -> None:
    """In a fresh interpreter with an empty cache: a valid lock is read and its targets
    checked, and pydantic is never imported; a lock with a schema problem is still
    explained by the models, with its target and key."""
    lock = tmp_path / "gpuenv.lock"
    lock.write_text(render_lock(sample()))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from gpuenv.lock.format import load_lock\n"
        "reading = load_lock(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))\n"
        "print(sorted(reading.lock.targets), dict(reading.damaged), 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(lock), str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split("\n")[0] == "['cpu', 'h100'] {} False", out.stderr
    broken = lock.read_text().replace('cu-tag = "cpu"', "cu-tag = 12")
    reading = parse_lock_text(broken)
    assert "cpu" in reading.damaged and "h100" in reading.lock.targets
    assert any("stack.cu-tag" in problem for problem in reading.damaged["cpu"])
