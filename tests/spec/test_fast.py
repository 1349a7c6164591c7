"""The spec read without pydantic (spec._fast) against the pydantic models (spec._models):
it accepts nothing the models refuse, and what both accept normalises to the same dict.
The corpus: the examples, the invalid fixtures, a spec that sets every key, and seeded
mutations of them (values of every type and shape the checks meet, keys removed,
unknown, or spelt as Python names)."""

from __future__ import annotations

import copy
import random
import sys
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuenv.errors import SpecError
from gpuenv.spec import _document, _fast, _models, load_spec
from tests.mutations import Mutations

ROOT = Path(__file__).resolve().parents[2]

# Every key of every table, each with a valid value.
EVERY_KEY = """
[project]
name = "every.key_1"
description = "all of them"
path = "."

[stack]
python = ">=3.10,<3.13"
torch = "2.4.*"
torchvision = "0.19.*"
torchaudio = false
cuda = "12.4"
driver-compat = "minor"
toolkit = "system:/usr/local/cuda-12.4"
same-torch = false

[targets.h100]
gpu = "H100"
compute-capability = "9.0"
driver = "550.54.15"
platform = "linux-64"
torch = "2.4.1"
glibc = "2.31"
pip = { dependencies = ["flash-attn>=2.6; platform_machine == 'x86_64'"] }

[targets.cpu_1]
gpu = "none"
build = "pypi"

[pip]
dependencies = ["transformers[torch]==4.44.0", "pkg @ https://x.invalid/pkg-1.0-py3-none-any.whl"]
index-url = "https://index.invalid/simple"
extra-index-urls = ["file:///srv/wheels"]
torch-index = "https://torch.invalid/whl"
exclude-newer = "2024-05-01"
exclude-newer-package = { sympy = "2024-06-01" }
groups = { dev = ["pytest"], "notebooks.x" = [] }

[pip.build.flash-attn]
no-build-isolation = true
against-torch = true
toolkit = true
env = { FOO = "1; echo $HOME", BAR_2 = "" }
max-jobs = 4
extra-archs = ["8.0", "9.0+PTX"]
build-requires = ["ninja", "packaging>=20"]
requires-dist = ["einops"]
host-compiler = "gcc-12"

[conda]
channels = ["conda-forge", "https://conda.invalid/channel"]
dependencies = { cuda-nvcc = "12.4.*" }
python = false

[verify]
extra = ["import flash_attn"]
timeout = 600
"""

VALUES: list[Any] = [
    "", " x", "x ", "a\nb", "\x00", "3.11", "3.9", "4.0", ">=3.10", "2.4.*", "2.4.1", ">=2.4,<2.6",
    "*", "not a version", "auto", "12.4", "12", "550.54.15", "550", "detect", "H100", "none",
    "mps", "9.0", "20.0", "x.y", "system:/usr/local/cuda", "system:rel", "https://x.invalid/s",
    "http://[::1", "ftp://x.invalid/", "file:///w", "linux-64", "linux-aarch64", "osx-arm64",
    "win-64", "linux-32", "pypi", "strict", "minor", "gcc-12", "gcc-123", "clang-15", "8.0+PTX",
    "8.0 ", "FOO", "CUDA_HOME", "1x", "torch==2.4.1", "not a req !!", "conda-forge", ".",
    "/abs", "a\\b", "2.28", "2.8", "é", "x" * 65, True, False, 0, 1, 4, 9, 10, 300, 1024, 1025,
    3601, -1, 1.5, [], [""], ["x"], ["torch==2.4.1"], ["not a req !!"], ["8.0"], [1], [True],
    {}, {"a": "b"}, {"FOO": "1"}, {"CC": "gcc"}, {"x": 1}, {"dependencies": ["x"]},
    {"gpu": "H100", "driver": "550.54.15"},
    "2024-05-01", "2024-02-30", "2024-05-01T10:00:00Z", "2024-05-01T10:00:00", date(2024, 5, 1),
    datetime(2024, 5, 1, 10, tzinfo=timezone.utc),
]  # fmt: skip
KEYS = ["name", "driver_compat", "same_torch", "max_jobs", "unknown", "gpu", "pip", "targets"]


def _normalised(raw: dict[str, Any]) -> dict[str, Any] | None:
    """What the models make of ``raw``: its normalised form, or None where refused."""
    try:
        return _models.validate(copy.deepcopy(raw), file="gpuenv.toml", lines={})
    except SpecError:
        return None


def _same_answer(raw: dict[str, Any]) -> tuple[bool, bool]:
    """Assert the property; (the models accepted, the plain reading read it)."""
    fast = _fast.normalise(copy.deepcopy(raw))
    slow = _normalised(raw)
    if slow is None:
        assert fast is None, f"read what the models refuse: {raw!r}"
    else:
        assert fast in (None, slow), f"read differently: {raw!r}\n{fast!r}\n{slow!r}"
    return slow is not None, fast is not None


def _corpus() -> list[tuple[str, dict[str, Any]]]:
    texts = [("every key", EVERY_KEY)]
    for path in sorted((ROOT / "examples").glob("*/gpuenv.toml")):
        texts.append((str(path.relative_to(ROOT)), path.read_text()))
    for path in sorted((ROOT / "tests" / "fixtures" / "specs").rglob("*.toml")):
        text = path.read_bytes().decode(errors="replace")  # one fixture is not UTF-8
        texts.append((str(path.relative_to(ROOT)), text))
    out = []
    for name, text in texts:
        try:  # as gpuenv parses it: too deep a nesting is refused before tomllib
            out.append((name, _document(text, name)))
        except SpecError:
            continue  # a syntax fixture: refused before either reading
    return out


@pytest.mark.parametrize("name", sorted(_fast.MODELS))
def test_each_table_has_its_models_keys_order_and_defaults(name: str) -> None:
    """A key added to a model, renamed, or given another default shows here by name
    (a spec that used the new key would otherwise only be left to pydantic)."""
    model = getattr(_models, name)
    fields = _fast.MODELS[name].fields
    assert [key for key, _, _ in fields] == [f.alias or n for n, f in model.model_fields.items()]
    for (key, _, default), field in zip(fields, model.model_fields.values(), strict=True):
        assert field.is_required() == (default is _fast._REQUIRED), key
        if field.is_required():
            continue
        theirs = field.get_default(call_default_factory=True)
        if hasattr(theirs, "model_dump"):
            theirs = theirs.model_dump(mode="json", by_alias=True)
        assert (default() if callable(default) else default) == theirs, key


def test_every_example_and_fixture_reads_the_same() -> None:
    corpus = _corpus()
    assert len(corpus) > 40
    for name, raw in corpus:
        accepted, read = _same_answer(raw)
        if name == "every key" or name.startswith("examples/"):
            assert accepted and read, f"{name}: a valid spec must be read without pydantic"


MUTATIONS = Mutations(VALUES, KEYS)


@pytest.mark.parametrize("seed", range(4))
def test_mutated_specs_read_the_same(seed: int) -> None:
    rng = random.Random(seed)
    bases = [raw for _, raw in _corpus()]
    accepted = read = 0
    for _ in range(1500):
        ok, fast = _same_answer(MUTATIONS.mutated(rng.choice(bases), rng))
        accepted += ok
        read += fast
    # the plain reading covers what is valid, not only what the corpus holds as it is
    assert accepted > 40 and read >= 0.9 * accepted, (accepted, read)


def test_a_valid_spec_loads_without_pydantic(tmp_path: Path) -> None:
    """In a fresh interpreter: the example loads, and pydantic is never imported; a spec
    with a mistake is explained by the models as before."""
    import subprocess

    spec = tmp_path / "gpuenv.toml"
    spec.write_text((ROOT / "examples" / "h100-llm-finetune" / "gpuenv.toml").read_text())
    code = (
        "import sys\n"
        "from gpuenv.spec import load_spec\n"
        "loaded = load_spec(sys.argv[1])\n"
        "print(loaded.spec.project.name, 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(spec)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["llama-finetune", "False"], out.stderr
    spec.write_text(spec.read_text().replace('driver = "550.54.15"', 'driverr = "550.54.15"'))
    with pytest.raises(SpecError) as error:
        load_spec(spec)
    assert "did you mean 'driver'?" in str(error.value.problems[0].hint)
