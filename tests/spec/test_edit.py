"""gpuenv add/remove's edit of a validated spec gives exactly what validating the edited
text gives (so the edited spec is cached without pydantic), for every kind of list."""

from __future__ import annotations

import copy
import sys

import pytest

from gpuenv.spec import _models
from gpuenv.spec.edit import Where, add, added, merged, remove, removed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TEXT = """# a lab spec
[project]
name = "lab"  # prompt

[stack]
python = "3.11"

[targets.h100]   # cluster
gpu = "H100"
driver = "550.54.15"

[targets.cpu]
gpu = "none"

[pip]
dependencies = [
    "transformers>=4.44",  # models
    "numpy",
]

[pip.groups]
dev = ["pytest"]
"""


def _validated(text: str) -> dict[str, object]:
    return _models.validate(tomllib.loads(text), file="g", lines={})


@pytest.mark.parametrize(
    ("requirements", "where"),
    [
        (["pillow>=10", "numpy<2"], Where()),
        (["flash-attn==2.6.3"], Where(target="h100")),
        (["ruff"], Where(group="dev")),
        (["ipykernel"], Where(group="jupyter")),
        (["transformers[torch]", "numpy"], Where()),  # merged in place; kept as it is
    ],
)
def test_add_on_the_validated_spec_equals_validating_the_edited_text(
    requirements: list[str], where: Where
) -> None:
    before = _validated(TEXT)
    edit = add(TEXT, requirements, where, file="g")
    assert added(copy.deepcopy(before), requirements, where) == _validated(edit.text)


@pytest.mark.parametrize(
    ("names", "where"),
    [(["numpy"], None), (["pytest"], None), (["pytest"], Where(group="dev"))],
)
def test_remove_on_the_validated_spec_equals_validating_the_edited_text(
    names: list[str], where: Where | None
) -> None:
    text = add(TEXT, ["pytest"], Where(target="cpu"), file="g").text
    before = _validated(text)
    edit = remove(text, names, where, file="g")
    assert removed(copy.deepcopy(before), names, where) == _validated(edit.text)


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        (
            "git+https://github.com/facebookresearch/detectron2.git@v0.6",
            "gpuenv add 'detectron2 @ git+https://github.com/facebookresearch/detectron2.git@v0.6'",
        ),
        (  # a file's URL cannot be locked: the forms that can be
            "https://example.invalid/wheels/flash_attn-2.6.3-cp311-cp311-linux_x86_64.whl",
            "gpuenv add 'flash_attn==VERSION'",
        ),
        ("./third_party/apex", "installed editable ([project] path)"),
        ("-e .", "installed editable already"),
    ],
)
def test_what_uv_add_takes_bare_is_refused_with_the_line_to_write(line: str, hint: str) -> None:
    """``gpuenv add git+https://...`` said only "not a requirement": a URL, a VCS URL or
    a path needs the package's name first, and the hint writes the line."""
    from gpuenv.errors import UsageError
    from gpuenv.spec.edit import check_requirement

    with pytest.raises(UsageError) as caught:
        check_requirement(line)
    assert "is not a requirement" in caught.value.message
    assert caught.value.hint is not None and hint in caught.value.hint


def test_remove_from_a_group_that_does_not_exist_names_the_groups() -> None:
    """`remove --group nope tqdm` said "tqdm is not in pip.groups.nope", as if the group
    were there (install names a missing group with the real ones)."""
    from gpuenv.errors import UsageError

    with pytest.raises(UsageError, match=r"no dependency group 'nope' in g \(groups: dev\)"):
        remove(TEXT, ["pytest"], Where(group="nope"), file="g")
    with pytest.raises(UsageError, match=r"numpy is not in pip\.groups\.dev of g"):
        remove(TEXT, ["numpy"], Where(group="dev"), file="g")


@pytest.mark.parametrize(
    ("given", "meant"), [("Torch-Vision", "torchvision"), ("pytorch", "torch")]
)
def test_a_near_miss_of_the_torch_family_is_refused_naming_it(given: str, meant: str) -> None:
    """`gpuenv add "Torch-Vision"` locked the index's unrelated torch-vision 0.1.6.dev0."""
    from gpuenv.errors import UsageError

    with pytest.raises(UsageError, match=f"is not {meant}: the index's") as caught:
        add(TEXT, [given], Where(), file="g")
    assert f"[stack] {meant}" in (caught.value.hint or "")


@pytest.mark.parametrize(
    "line",
    [
        "pillow @ https://user:tok-123@files.invalid/pillow-10.4.0-cp311-cp311-linux_x86_64.whl",
        "apex @ file:///opt/apex",
    ],
)
def test_a_files_url_is_refused_before_the_spec_is_touched(line: str) -> None:
    """It was written to gpuenv.toml and refused by the lock (exit 5, "external", no tool
    had run); the spec then had to be put back."""
    from gpuenv.errors import UsageError
    from gpuenv.spec.edit import check_requirement

    with pytest.raises(UsageError) as caught:
        check_requirement(line)
    assert "not from a file's URL" in caught.value.message
    assert "tok-123" not in caught.value.message
    assert caught.value.hint is not None and "git+https://" in caught.value.hint
    name = line.split(" @ ", 1)[0]
    assert check_requirement(f"{name} @ git+https://example.invalid/{name}.git@v1") == name


def test_a_package_named_twice_in_one_add_is_refused() -> None:
    """`add pillow==10.4.0 pillow==10.3.0` said both were added and wrote the second."""
    from gpuenv.errors import UsageError

    text = '[project]\nname = "p"\n'
    with pytest.raises(UsageError) as caught:
        add(text, ["pillow==10.4.0", "Pillow==10.3.0"], Where(), file="gpuenv.toml")
    assert caught.value.message == "pillow is named 2 times: pillow==10.4.0, Pillow==10.3.0"


@pytest.mark.parametrize(
    ("entry", "given", "written"),
    [
        # the bound the entry had is kept, the extra merged in (as uv add writes it)
        ("transformers>=4.40", "transformers[torch]", "transformers[torch]>=4.40"),
        (
            "transformers[torch]>=4.40",
            "transformers[sentencepiece]<5",
            "transformers[sentencepiece,torch]<5",
        ),
        ("transformers>=4.40", "transformers", "transformers>=4.40"),
        ('pytest; sys_platform == "linux"', "pytest>=8", 'pytest>=8; sys_platform == "linux"'),
        (
            "apex @ git+https://example.invalid/apex.git",
            "apex[cuda]",
            "apex[cuda] @ git+https://example.invalid/apex.git",
        ),
        (
            "apex>=1",
            "apex @ git+https://example.invalid/apex.git",
            "apex @ git+https://example.invalid/apex.git",
        ),
        ("numpy", "numpy >= 2", "numpy >= 2"),  # nothing of the entry lost: as written
    ],
)
def test_an_add_over_an_entry_keeps_what_the_entry_said_unless_it_says_otherwise(
    entry: str, given: str, written: str
) -> None:
    """`gpuenv add 'transformers[torch]'` over `transformers>=4.40` wrote
    `transformers[torch]`: the bound the user wrote was dropped, unsaid."""
    assert merged(entry, given) == written


def test_an_add_over_an_entry_says_what_it_was_and_where_it_is() -> None:
    edit = add(TEXT, ["transformers[torch]", "numpy", "pillow"], Where(), file="g")
    assert '    "transformers[torch]>=4.44",  # models\n' in edit.text, "in place, comment kept"
    assert edit.changed == ("transformers[torch]>=4.44", "pillow")
    changed, new = edit.entries
    assert (changed.was, changed.requirement, changed.line) == (
        "transformers>=4.44",
        "transformers[torch]>=4.44",
        17,
    )
    assert (new.was, new.requirement, new.line, new.where.label) == (
        None,
        "pillow",
        19,
        "[pip] dependencies",
    )
    (kept,) = edit.kept
    assert (kept.requirement, kept.line) == ("numpy", 18)


def test_remove_names_each_list_and_the_line_each_entry_was_on() -> None:
    text = add(TEXT, ["pytest"], Where(target="cpu"), file="g").text
    edit = remove(text, ["numpy", "transformers", "pytest"], None, file="g")
    assert [(e.requirement, e.where.label, e.line) for e in edit.entries] == [
        ("numpy", "[pip] dependencies", 21),
        ("transformers>=4.44", "[pip] dependencies", 20),  # as the file had it, not shifted
        ("pytest", "[pip.groups] dev", 25),
        ("pytest", "[targets.cpu.pip] dependencies", 16),
    ]
    assert edit.changed == ("numpy", "transformers>=4.44", "pytest", "pytest")
