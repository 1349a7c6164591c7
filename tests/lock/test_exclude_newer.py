"""``[pip] exclude-newer``: the pip half of a lock resolved as of a day (uv's
``--exclude-newer``), the torch family exempt.

The index is served on loopback with PEP 691 JSON pages whose files carry PEP 700
``upload-time`` (what uv compares), real wheels and their hashes: ``dated-pkg`` 1.0
(2020) and 2.0 (2023), a ``torch`` whose only release is from 2025 (the plan's choice,
never filtered), and ``undated-pkg``, whose page gives no upload time.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuenv import _toml
from gpuenv.errors import NoCompatiblePlan, SpecError
from gpuenv.knowledge import knowledge_base
from gpuenv.lock.builds import BuildNeeds
from gpuenv.lock.inputs import input_hash
from gpuenv.lock.model import PipRequest
from gpuenv.lock.options import LockOptions
from gpuenv.lock.target import _job
from gpuenv.lock.uv import UvResolver
from gpuenv.plan import make_plan
from gpuenv.spec import Spec, _models, parse_spec_text
from gpuenv.spec._values import exclude_newer, exclude_newer_cutoff
from tests.fixtures.pkgindex.index import Serve, serve, write_index
from tests.fixtures.pkgindex.plugin import PkgIndex
from tests.fixtures.pkgindex.wheels import WheelSpec

# (wheel, upload time or None)
RELEASES = [
    (WheelSpec("dated-pkg", "1.0"), "2020-06-01T10:00:00.000Z"),
    (WheelSpec("dated-pkg", "2.0"), "2023-03-01T10:00:00.000Z"),
    (WheelSpec("late-dep", "1.0"), "2019-01-01T00:00:00.000Z"),
    (WheelSpec("torch", "9.0", requires=("late-dep>=1",)), "2025-05-01T00:00:00.000Z"),
    (WheelSpec("undated-pkg", "1.0"), None),
]


def _json_pages(root: Path) -> None:
    """A PEP 691 page beside each project's HTML page, its files dated (PEP 700)."""
    files: dict[str, list[dict[str, object]]] = {}
    for wheel, uploaded in RELEASES:
        data = (root / "files" / wheel.filename).read_bytes()
        entry: dict[str, object] = {
            "filename": wheel.filename,
            "url": f"../../files/{wheel.filename}",
            "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
            "core-metadata": {"sha256": hashlib.sha256(wheel.metadata().encode()).hexdigest()},
        }
        if uploaded is not None:
            entry["upload-time"] = uploaded
        files.setdefault(wheel.name, []).append(entry)
    for project, found in files.items():
        page = {"meta": {"api-version": "1.1"}, "name": project, "files": found}
        (root / "simple" / project / "index.json").write_text(json.dumps(page))


@pytest.fixture(scope="module")
def dated_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("dated-index")
    write_index(root, "simple", [w for w, _ in RELEASES], files_path="files")
    _json_pages(root)
    with serve(root, options=Serve()) as url:
        yield f"{url}/simple"


@pytest.fixture
def resolve(dated_index: str, tmp_path: Path):
    def run(
        *requirements: str, cutoff: str | None, own: dict[str, str] | None = None
    ) -> dict[str, str]:
        request = PipRequest(
            requirements=requirements,
            python="3.11",
            default_index=dated_index,
            cache_dir=tmp_path / "cache",
            exclude_newer=exclude_newer_cutoff(cutoff) if cutoff else None,
            exclude_newer_packages=tuple(
                (name, exclude_newer_cutoff(day)) for name, day in (own or {}).items()
            ),
        )
        return {p.name: p.version for p in UvResolver(timeout=120).resolve(request)}

    return run


def test_without_a_date_the_newest_release_is_taken(resolve) -> None:
    assert resolve("dated-pkg", cutoff=None)["dated-pkg"] == "2.0"


def test_a_date_takes_the_release_current_that_day(resolve) -> None:
    assert resolve("dated-pkg", cutoff="2021-01-01")["dated-pkg"] == "1.0"
    assert resolve("dated-pkg", cutoff="2023-03-01")["dated-pkg"] == "2.0"  # that day counts


def test_the_torch_family_is_never_filtered(resolve) -> None:
    # torch 9.0 was uploaded in 2025, after the day: the plan chose it, so it stays; its
    # own dependencies are filtered as any other package is.
    got = resolve("torch==9.0", "dated-pkg", cutoff="2021-01-01")
    assert got == {"torch": "9.0", "late-dep": "1.0", "dated-pkg": "1.0"}


def test_a_package_with_a_day_of_its_own_takes_that_day(resolve) -> None:
    # what a torch newer than the files requires, as of torch's day (gpuenv import)
    got = resolve("dated-pkg", "late-dep", cutoff="2021-01-01", own={"dated-pkg": "2023-06-01"})
    assert got == {"dated-pkg": "2.0", "late-dep": "1.0"}
    got = resolve("dated-pkg", cutoff=None, own={"dated-pkg": "2021-01-01"})  # alone too
    assert got == {"dated-pkg": "1.0"}
    # an exemption wins over a day of its own: the torch family, an exact pin
    got = resolve("torch==9.0", cutoff="2021-01-01", own={"torch": "2021-01-01"})
    assert got["torch"] == "9.0"


def test_an_exact_pin_is_the_specs_own_choice_and_never_filtered(resolve) -> None:
    # gpuenv import moves a pin without a wheel to the nearest release that has one, which
    # may be newer than the files' day (LAVIS: easydict 1.9 -> 1.12)
    assert resolve("dated-pkg==2.0", cutoff="2021-01-01")["dated-pkg"] == "2.0"
    assert resolve("dated-pkg===2.0", cutoff="2021-01-01")["dated-pkg"] == "2.0"
    with pytest.raises(NoCompatiblePlan):  # a range is filtered, a wildcard too
        resolve("dated-pkg==2.*", cutoff="2021-01-01")


def test_an_index_that_gives_no_upload_times_is_named(resolve) -> None:
    with pytest.raises(NoCompatiblePlan) as caught:
        resolve("undated-pkg", cutoff="2021-01-01")
    assert "undated-pkg" in str(caught.value)
    assert caught.value.hint == (
        "[pip] exclude-newer in gpuenv.toml hides every release uploaded after its day; "
        "undated-pkg 1.0 would fit, but its index gives no upload time, so no day lets it "
        "in: remove exclude-newer, or take it from an index that gives upload times"
    )


def test_a_release_the_day_hides_is_named_with_the_day_that_lets_it_in(resolve) -> None:
    with pytest.raises(NoCompatiblePlan) as caught:
        resolve("dated-pkg>=2", cutoff="2021-01-01")
    assert caught.value.hint == (
        "[pip] exclude-newer in gpuenv.toml hides every release uploaded after its day; "
        "dated-pkg 2.0 (2023-03-01) would fit: move the day to 2023-03-01 or later"
    )


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2021-03-02", "2021-03-03T00:00:00Z"),  # the whole day, UTC
        ("2020-12-31", "2021-01-01T00:00:00Z"),
        ("2024-02-29", "2024-03-01T00:00:00Z"),
        ("2021-03-02T12:30:00Z", "2021-03-02T12:30:00Z"),
        ("2021-03-02T12:30:00+02:00", "2021-03-02T10:30:00Z"),
        ("2021-03-02T12:30:00.123456z", "2021-03-02T12:30:00Z"),
    ],
)
def test_the_cutoff_is_a_utc_instant(text: str, instant: str) -> None:
    assert exclude_newer(text) == text
    assert exclude_newer_cutoff(text) == instant


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 2021-03-02",
        "2021-02-30",
        "2021-3-2",
        "2021-03-02T10:00:00",  # no offset: the machine's time zone would decide
        "yesterday",
        "9999-12-31",  # the day after is past what a date can hold
        "2021-03-02T25:00:00Z",
        "2021-03-02\n",
        "0001-01-01T00:00:00+01:00",  # a year 0 in UTC
        "9999-12-31T23:00:00-02:00",  # a year 10000 in UTC
        "1999-12-30",
        "9998-01-01",  # uv parses no year near 9999
        "2999-12-31",  # its day after is in 3000
    ],
)
def test_what_is_not_a_date_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"date|empty|spaces|control|years 2000 to 2999"):
        exclude_newer(text)


@pytest.mark.parametrize("text", ["1999-12-31", "9999-12-31", "3000-01-01"])
def test_a_day_outside_the_years_is_refused_as_written(text: str) -> None:
    """The year written decides: "1999-12-31"'s cutoff falls in 2000, and "9999-12-31"
    has no day after it, yet both are outside the range the message names."""
    with pytest.raises(ValueError, match=r"the day must fall in the years 2000 to 2999"):
        exclude_newer(text)


def test_any_text_is_a_day_or_a_value_error() -> None:
    """Seeded fuzz of the forms the checks read: never another exception (a year 0 in
    UTC once raised OverflowError: exit 70)."""
    rng = random.Random(19)
    parts = ["0001", "1999", "2000", "2021", "9999", "-", "T", " ", ":", "Z", "z", "+", "."]
    parts += ["00", "01", "12", "13", "23", "24", "29", "30", "31", "59", "60", "02:00", "\n"]
    for _ in range(5000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(1, 14)))
        try:
            exclude_newer(text)
        except ValueError:
            continue
    for year in range(1990, 3010):  # the edges of the range, with offsets that cross years
        for text in (
            f"{year}-01-01T00:30:00+01:00",
            f"{year}-12-31T23:30:00-01:00",
            f"{year}-06-01",
        ):
            try:
                exclude_newer(text)
            except ValueError:
                continue


# --- from the spec ---------------------------------------------------------------------------

SPEC = """[project]
name = "paper"
[stack]
python = "3.10"
torch = "2.1.2"
[targets.h100]
gpu = "H100"
driver = "550.54.15"
[pip]
dependencies = ["transformers"]
"""


def _loaded(extra: str = "", *, fast: bool = True) -> Spec:
    text = SPEC + extra
    if not fast:  # the pydantic models' reading (a spec the plain reading is unsure of)
        return Spec.from_normalised(
            _models.validate(_toml.loads(text), file="gpuenv.toml", lines={})
        )
    return parse_spec_text(text, file="gpuenv.toml", kb=knowledge_base()).spec


@pytest.mark.parametrize("fast", [True, False])
def test_the_spec_key_reaches_uv_and_the_plan_says_so(fast: bool) -> None:
    spec = _loaded('exclude-newer = "2023-12-20"\n', fast=fast)
    assert spec.pip.exclude_newer == "2023-12-20"
    plan = make_plan(spec, knowledge_base()).target("h100")
    request = _job(spec, plan, None, LockOptions()).pip_request(BuildNeeds())
    assert request.exclude_newer == "2023-12-21T00:00:00Z"
    assert plan.reasons[-1] == (
        "pip packages as of 2023-12-20 ([pip] exclude-newer): releases uploaded later are "
        "ignored, except the torch family's, chosen above, and exact pins"
    )


def test_without_the_key_nothing_is_filtered() -> None:
    spec = _loaded()
    plan = make_plan(spec, knowledge_base()).target("h100")
    request = _job(spec, plan, None, LockOptions()).pip_request(BuildNeeds())
    assert (request.exclude_newer, request.exclude_newer_packages) == (None, ())
    assert not any("exclude-newer" in reason for reason in plan.reasons)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "exclude-newer = 2023-12-20",
            'expected a string, got date "2023-12-20" (write it in quotes: "2023-12-20")',
        ),
        ('exclude-newer = "2023-13-01"', '"2023-13-01" is not a date ("2023-04-15") or a UTC time'),
        ('exclude-newer = "2023-12-20T10:00:00"', 'is not a date ("2023-04-15") or a UTC time'),
    ],
)
def test_a_bad_day_names_the_file_line_and_key(line: str, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec_text(SPEC + line + "\n", file="gpuenv.toml", kb=knowledge_base())
    assert "gpuenv.toml:11: pip.exclude-newer: " in str(caught.value)
    assert said in str(caught.value)


def test_the_days_of_their_own_reach_uv_and_the_plan_says_so() -> None:
    spec = _loaded(
        'exclude-newer = "2023-02-15"\n'
        '[pip.exclude-newer-package]\nSympy = "2023-12-14"\ntyping_extensions = "2023-12-14"\n'
    )
    assert spec.pip.exclude_newer_packages == {
        "sympy": "2023-12-14",
        "typing-extensions": "2023-12-14",
    }
    plan = make_plan(spec, knowledge_base()).target("h100")
    request = _job(spec, plan, None, LockOptions()).pip_request(BuildNeeds())
    assert request.exclude_newer_packages == (
        ("sympy", "2023-12-15T00:00:00Z"),
        ("typing-extensions", "2023-12-15T00:00:00Z"),
        # NVIDIA's nvcc wheel of the plan's CUDA is the plan's choice, as the torch family
        # (stylegan2-ada-pytorch, dated 2021, had no nvidia-cuda-nvcc-cu12==12.1.* then)
        ("nvidia-cuda-nvcc-cu12", "false"),
    )
    assert plan.reasons[-1] == (
        "sympy, typing-extensions as of 2023-12-14 ([pip] exclude-newer-package)"
    )
    with pytest.raises(SpecError, match=r"pip\.exclude-newer-package\.sympy"):
        _loaded('[pip.exclude-newer-package]\nsympy = "soon"\n')


def test_locks_of_specs_without_the_key_stay_fresh() -> None:
    # The input hash this spec had before the key existed (gpuenv at 7eb89d6): a lock made
    # then is not stale now. With the key, the hash changes, and so does each day.
    assert input_hash(_loaded(), "h100", "sha256:kb") == (
        "sha256:129be71833b9ab066a16d2353954c211cb719cc2dc65cc3509a8e261d727d11c"
    )
    dated = {
        input_hash(_loaded(f'exclude-newer = "{day}"\n'), "h100", "sha256:kb")
        for day in ("2023-12-20", "2023-12-21")
    }
    assert len(dated) == 2
    assert input_hash(_loaded(), "h100", "sha256:kb") not in dated


def test_a_spec_normalised_before_the_key_existed_still_reads() -> None:
    # A validated-spec cache entry written by an older gpuenv lacks the key (its cache
    # format moved on, so none is read; a spec built from such a form still works).
    normalised = _models.validate(_toml.loads(SPEC), file="gpuenv.toml", lines={})
    del normalised["pip"]["exclude-newer"]
    assert Spec.from_normalised(normalised).pip.exclude_newer is None


def _reproduction(**plan: object) -> object:
    from types import SimpleNamespace

    hardware = SimpleNamespace(platform="linux-64", glibc="2.28")
    fields = {"torch": "2.4.1", "torchvision": None, "torchaudio": None, "python": "3.11"}
    fields |= {"hardware": hardware, "pypi_default": True, **plan}
    return SimpleNamespace(decision=SimpleNamespace(plan=SimpleNamespace(**fields)))


def test_what_torch_requires_is_read_from_uvs_resolution_of_the_family_alone(
    pkgindex: PkgIndex, tmp_path: Path
) -> None:
    """gpuenv import gives these torch's own day ([pip] exclude-newer-package)."""
    from gpuenv.import_check import torch_requires

    found = torch_requires(_reproduction(), pkgindex.default_index, tmp_path)  # type: ignore[arg-type]
    assert found is not None
    assert "nvidia-cuda-runtime-cu12" in found and "torch" not in found
    assert "numpy" in found  # not required by torch's wheels, but built against
    assert list(found) == sorted(found)
    # another build than this index's (the PyTorch index's cu118): its requirements are not
    # these, so none are said
    other = _reproduction(pypi_default=False)
    assert torch_requires(other, pkgindex.default_index, tmp_path) is None  # type: ignore[arg-type]
    # a torch the index does not have: uv cannot say
    missing = _reproduction(torch="9.9.9")
    assert torch_requires(missing, pkgindex.default_index, tmp_path) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    ("table", "key"),
    [
        (
            '[pip.exclude-newer-package]\nsympy = "2023-12-14"\nSymPy = "2024-01-02"\n',
            "pip.exclude-newer-package",
        ),
        (
            "[pip.build.Flash_Attn]\nmax-jobs = 2\n[pip.build.flash-attn]\nmax-jobs = 4\n",
            "pip.build",
        ),
        ('[pip.groups]\nDev = ["pytest"]\ndev = ["ruff"]\n', "pip.groups"),
    ],
)
def test_a_name_written_twice_in_a_table_by_name_is_refused(
    fast: bool, table: str, key: str
) -> None:
    """Names compare without case and with -, _ and . alike: one of two such entries
    would silently have taken the other's place (a group's requirements lost)."""
    with pytest.raises(SpecError, match=rf"{re.escape(key)}: .* are one name .*write it once"):
        if fast:
            parse_spec_text(SPEC + table, file="gpuenv.toml", kb=knowledge_base())
        else:
            _loaded(table, fast=False)


@pytest.mark.parametrize("name", ["torch", "Torchvision", "triton", "pytorch-triton"])
def test_a_day_for_the_torch_family_is_refused_not_ignored(name: str) -> None:
    """uv is told to exempt the family (the plan chooses its release): a day of its own
    would be silently ignored, so the spec is refused and says why."""
    with pytest.raises(SpecError, match=r"the torch family takes the release the plan chose"):
        _loaded(f'[pip.exclude-newer-package]\n{name} = "2023-12-14"\n')
