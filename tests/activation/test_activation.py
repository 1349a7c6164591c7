"""Unit tests for gpuenv.activation: ops, validation, quoting, the delta and the files.

Everything here is pure Python; tests/shells/ runs the scripts in real shells.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from gpuenv import activation as act
from gpuenv.activation import (
    ActivationInputs,
    Guard,
    PathCleaning,
    PrependPath,
    Prompt,
    SetVar,
    Source,
    UnsetVar,
    activation_ops,
    apply_delta,
    apply_ops,
    emitter_for,
    environment_delta,
    ops_from_delta,
    read_delta,
    write_activation_files,
)
from gpuenv.errors import ActivationError, FileFormatError, UsageError

STORE = Path("/store")
PREFIX = STORE / "p-abc"
OTHER = STORE / "p-def"
REASON_CUDA = act.reason_other_cuda("12.4")
TAG = act.prefix_tag(str(PREFIX))


def old(name: str) -> str:
    return act.backup_var(TAG, name)


def inputs(
    prefix: Path = PREFIX,
    *,
    cuda_home: Path | None = PREFIX,
    cuda_version: str | None = "12.4",
    bin_dirs: tuple[Path, ...] | None = None,
    lib_dirs: tuple[Path, ...] | None = None,
    name: str = "h100",
) -> ActivationInputs:
    return ActivationInputs(
        prefix=prefix,
        name=name,
        store_root=STORE,
        bin_dirs=(prefix / "bin",) if bin_dirs is None else bin_dirs,
        lib_dirs=(prefix / "lib",) if lib_dirs is None else lib_dirs,
        cuda_home=cuda_home,
        cuda_version=cuda_version,
    )


def activate(environ: dict[str, str], inp: ActivationInputs | None = None):
    return apply_ops(activation_ops(inp or inputs()), environ)


# ---------------------------------------------------------------------------- ops


def test_ops_for_a_prefix_with_its_own_toolkit() -> None:
    ops = activation_ops(inputs())
    assert ops == (
        Guard("/store/p-abc", "/store"),
        PrependPath("PATH", ("/store/p-abc/bin",)),
        PrependPath(
            "LD_LIBRARY_PATH",
            ("/store/p-abc/lib",),
            PathCleaning("/store/p-abc", "/store", "12.4"),
        ),
        SetVar("CUDA_HOME", "/store/p-abc"),
        SetVar("CUDA_PATH", "/store/p-abc"),
        Prompt("(gpuenv:h100) "),
    )


def test_ops_without_toolkit_unset_cuda_home_and_cuda_path() -> None:
    ops = activation_ops(inputs(cuda_home=None))
    assert UnsetVar("CUDA_HOME") in ops
    assert UnsetVar("CUDA_PATH") in ops
    assert not any(isinstance(op, SetVar) for op in ops)


def test_ops_with_a_pinned_system_toolkit() -> None:
    ops = activation_ops(inputs(cuda_home=Path("/usr/local/cuda-12.4")))
    assert SetVar("CUDA_HOME", "/usr/local/cuda-12.4") in ops


def test_no_bin_dirs_means_path_is_untouched_but_ld_library_path_is_still_cleaned() -> None:
    ops = activation_ops(inputs(bin_dirs=(), lib_dirs=()))
    names = [op.name for op in ops if isinstance(op, PrependPath)]
    assert names == ["LD_LIBRARY_PATH"]


@pytest.mark.parametrize(
    ("name", "marker"),
    [
        ("h100", "(gpuenv:h100) "),
        ("a b$(x)`y`%n\\w!", "(gpuenv:a_b__x__y__n_w_) "),
        ("", "(gpuenv:_) "),
    ],
)
def test_prompt_marker_keeps_only_characters_no_prompt_expands(name: str, marker: str) -> None:
    assert act.prompt_marker(name) == marker


# --------------------------------------------------------------------- validation


@pytest.mark.parametrize("name", ["", "1A", "A-B", "A=B", "A B", "A\0", "é", "_GPUENV_X"])
def test_bad_variable_names_are_refused(name: str) -> None:
    with pytest.raises(ActivationError):
        SetVar(name, "v")
    with pytest.raises(ActivationError):
        UnsetVar(name)


def test_activation_error_is_a_usage_error_and_a_value_error() -> None:
    with pytest.raises(UsageError) as info:
        SetVar("A", "x\0y")
    assert isinstance(info.value, ValueError)
    assert info.value.exit_code == 2
    assert info.value.kind == "activation"


@pytest.mark.parametrize(
    "build",
    [
        lambda: SetVar("A", "x\0y"),
        lambda: Guard("/p\0"),
        lambda: Guard("relative/p"),
        lambda: PrependPath("PATH", ("/a\0",)),
        lambda: PrependPath("PATH", ("relative",)),
        lambda: PrependPath("PATH", ("/a:b",)),
        lambda: PrependPath("PATH", ()),
        lambda: Source("/x\0"),
        lambda: PathCleaning("/p", "/", "12.4"),
        lambda: PathCleaning("/p", "/s", "12"),
        lambda: PathCleaning("/p", "/s", "12.4; rm -rf /"),
        lambda: Prompt("($(x)) "),
        lambda: activation_ops(inputs(prefix=Path("/store/a\0b"))),
        lambda: activation_ops(inputs(lib_dirs=(Path("/x:y"),))),
        lambda: act.sh_quote("a\0"),
        lambda: act.fish_quote("a\0"),
    ],
)
def test_unsafe_inputs_raise_activation_error(build) -> None:
    with pytest.raises(ActivationError):
        build()


def test_prepend_without_entries_is_allowed_when_it_only_cleans() -> None:
    PrependPath("LD_LIBRARY_PATH", (), PathCleaning("/p", "/s", None))


def test_emitting_needs_exactly_one_leading_guard() -> None:
    for emitter in act.EMITTERS.values():
        with pytest.raises(ActivationError):
            emitter.emit([SetVar("A", "b")])
        with pytest.raises(ActivationError):
            emitter.emit([Guard("/p"), Guard("/q")])


# ------------------------------------------------------------------------ quoting


@pytest.mark.parametrize(
    ("value", "sh", "fish"),
    [
        ("plain", "'plain'", "'plain'"),
        ("a b", "'a b'", "'a b'"),
        ("it's", "'it'\\''s'", "'it\\'s'"),
        ("back\\slash", "'back\\slash'", "'back\\\\slash'"),
        ('$(x) `y` "z" $HOME', "'$(x) `y` \"z\" $HOME'", "'$(x) `y` \"z\" $HOME'"),
        ("", "''", "''"),
    ],
)
def test_values_are_single_quoted(value: str, sh: str, fish: str) -> None:
    assert act.sh_quote(value) == sh
    assert act.fish_quote(value) == fish


EVIL = PREFIX.parent / "a b'c\"d$(touch pwned)e`touch pwned2`f\\g;h*i[j]%k\nl"
# ... or the command substitution the POSIX emitter runs the LD_LIBRARY_PATH loop in
# (``LD_LIBRARY_PATH=$(`` at the end of its line: its body is the emitter's own text).
ALLOWED_REFS = re.compile(
    r"\$\{?(?:(?:PATH|LD_LIBRARY_PATH|CUDA_HOME|CUDA_PATH|PS1|_GPUENV_[A-Za-z0-9_]+|_gpuenv_[a-z_]+"
    r"|status|argv)\b|-)|(?<=^        LD_LIBRARY_PATH=)\$\($",
    re.MULTILINE,
)


def _strip_sh_literals(text: str) -> str:
    """Replace single-quoted literals and backslash-escaped characters with ``''``."""
    return re.sub(r"'[^']*'|\\.", "''", text, flags=re.DOTALL)


def _strip_fish_literals(text: str) -> str:
    return re.sub(r"'(?:[^'\\]|\\.)*'", "''", text, flags=re.DOTALL)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_only_dollars_are_references_to_managed_variables(shell: str) -> None:
    """R10: no value can introduce a `$`; outside single-quoted literals every `$` is
    the emitter's own reference to a variable it manages or a loop temporary."""
    emitter = emitter_for(shell)
    text = emitter.emit(activation_ops(inputs(prefix=EVIL, cuda_home=EVIL)))
    strip = _strip_fish_literals if shell == "fish" else _strip_sh_literals
    bare = strip(text)
    assert "touch" not in bare
    assert "`" not in bare
    for match in re.finditer(r"\$", bare):
        assert ALLOWED_REFS.match(bare, match.start()), bare[match.start() : match.start() + 20]


def test_pcre_literal_escapes_everything_but_word_characters() -> None:
    assert act.pcre_literal("/a b*.[x]") == "\\/a\\ b\\*\\.\\[x\\]"
    assert act.pcre_literal("é_1") == "é_1"
    for text in ["/a b*.[x]", "/tmp/(x)|y+?{2}$^", "a\\b"]:
        assert re.fullmatch(act.pcre_literal(text), text)


def test_emitter_for_knows_the_shells() -> None:
    assert emitter_for("sh") is emitter_for("bash") is emitter_for("dash")
    assert emitter_for("zsh").extension == "zsh"
    assert emitter_for("fish").extension == "fish"
    with pytest.raises(ActivationError, match="supported"):
        emitter_for("tcsh")


# ---------------------------------------------------------------- delta: format


def test_delta_is_json_and_round_trips_to_the_same_ops_minus_the_prompt() -> None:
    ops = activation_ops(inputs(prefix=EVIL))
    delta = environment_delta(ops)
    assert json.loads(json.dumps(delta)) == delta
    assert delta["format"] == act.DELTA_FORMAT
    assert delta["active"] == str(EVIL)
    rebuilt = ops_from_delta(delta)
    assert rebuilt[0] == Guard(str(EVIL))  # the store root only matters to the scripts
    assert rebuilt[1:] == tuple(op for op in ops[1:] if not isinstance(op, Prompt))


def test_delta_documented_shape() -> None:
    delta = environment_delta(activation_ops(inputs(cuda_home=None)))
    assert delta == {
        "format": 1,
        "active": "/store/p-abc",
        "ops": [
            {"op": "prepend", "name": "PATH", "entries": ["/store/p-abc/bin"]},
            {
                "op": "prepend",
                "name": "LD_LIBRARY_PATH",
                "entries": ["/store/p-abc/lib"],
                "clean": {"prefix": "/store/p-abc", "store_root": "/store", "cuda_version": "12.4"},
            },
            {"op": "unset", "name": "CUDA_HOME"},
            {"op": "unset", "name": "CUDA_PATH"},
        ],
    }


def test_a_source_op_cannot_be_precomputed() -> None:
    with pytest.raises(ActivationError):
        environment_delta([Guard("/p"), Source("/p/hook.sh")])


@pytest.mark.parametrize(
    "delta",
    [
        {},
        {"format": 1, "active": "/p"},
        {"format": 1, "active": "/p", "ops": [{"op": "chmod"}]},
        {"format": 1, "active": "/p", "ops": [{"op": "set", "name": "A"}]},
        {"format": 1, "active": "/p", "ops": ["x"]},
    ],
)
def test_a_malformed_delta_is_a_file_format_error(delta) -> None:
    with pytest.raises(FileFormatError):
        apply_delta(delta, {})


def test_a_tampered_delta_is_revalidated() -> None:
    delta = {"format": 1, "active": "/p", "ops": [{"op": "set", "name": "A=B", "value": "x"}]}
    with pytest.raises(FileFormatError, match="malformed environment delta op"):
        apply_delta(delta, {})
    relative = {
        "format": 1,
        "active": "/p",
        "ops": [{"op": "prepend", "name": "PATH", "entries": ["bin"]}],
    }
    with pytest.raises(ActivationError):
        apply_delta(relative, {})


def test_a_newer_delta_format_is_refused_with_a_hint() -> None:
    with pytest.raises(FileFormatError) as info:
        apply_delta({"format": 2, "active": "/p", "ops": []}, {})
    assert info.value.hint


def test_read_delta(tmp_path: Path) -> None:
    path = tmp_path / "env-delta.json"
    path.write_text("{not json")
    with pytest.raises(FileFormatError):
        read_delta(path)
    path.write_text("[]")
    with pytest.raises(FileFormatError):
        read_delta(path)
    path.write_text("[" * 100_000)  # past the JSON reader's recursion: no RecursionError
    with pytest.raises(FileFormatError):
        read_delta(path)
    with pytest.raises(FileNotFoundError):
        read_delta(tmp_path / "missing.json")


# ------------------------------------------------------------ delta: application


BASE = {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}


def test_apply_on_a_plain_environment() -> None:
    env, messages = activate(dict(BASE))
    assert messages == []
    assert env == {
        "PATH": "/store/p-abc/bin:/usr/bin:/bin",
        "HOME": "/home/u",
        "LD_LIBRARY_PATH": "/store/p-abc/lib",
        "CUDA_HOME": "/store/p-abc",
        "CUDA_PATH": "/store/p-abc",
        old("PATH"): "/usr/bin:/bin",
        act.unset_var(TAG): "LD_LIBRARY_PATH CUDA_HOME CUDA_PATH _GPUENV_ACTIVE",
        "_GPUENV_ACTIVE": "/store/p-abc",
    }


def test_empty_and_unset_are_backed_up_differently() -> None:
    env, _ = activate({**BASE, "CUDA_HOME": "", "LD_LIBRARY_PATH": ""})
    assert env[old("CUDA_HOME")] == ""
    assert env[old("LD_LIBRARY_PATH")] == ""
    assert env[act.unset_var(TAG)] == "CUDA_PATH _GPUENV_ACTIVE"
    assert env["LD_LIBRARY_PATH"] == "/store/p-abc/lib"


def test_empty_path_is_not_kept_as_a_trailing_separator() -> None:
    env, _ = activate({"PATH": ""})
    assert env["PATH"] == "/store/p-abc/bin"


def test_unset_cuda_home_without_toolkit() -> None:
    env, _ = activate({**BASE, "CUDA_HOME": "/usr/local/cuda"}, inputs(cuda_home=None))
    assert "CUDA_HOME" not in env
    assert "CUDA_PATH" not in env
    assert env[old("CUDA_HOME")] == "/usr/local/cuda"


def test_ld_library_path_cleaning_and_each_removal_announced_once() -> None:
    old = ":".join(
        [
            "/store/p-def/lib",
            "",
            "rel/lib",
            "/usr/local/cuda-11.8/lib64",
            "/opt/keep",
            "/usr/local/cuda-12.4/lib64",
            "/usr/local/cuda-12.4.1/targets/x86_64-linux/lib",
            "/usr/local/cuda-12/lib64",
            "/store/p-abc/lib",
            "/store/p-abc/other",
            "/storefront/lib",
            "/store/p-def/lib",
            "",
            "rel/lib",
        ]
    )
    env, messages = activate({**BASE, "LD_LIBRARY_PATH": old})
    assert env["LD_LIBRARY_PATH"] == ":".join(
        [
            "/store/p-abc/lib",
            "/opt/keep",
            "/usr/local/cuda-12.4/lib64",
            "/usr/local/cuda-12.4.1/targets/x86_64-linux/lib",
            "/store/p-abc/other",
            "/storefront/lib",
        ]
    )
    m = act.removal_message
    assert messages == [
        m("LD_LIBRARY_PATH", "/store/p-def/lib", act.REASON_OTHER_PREFIX),
        m("LD_LIBRARY_PATH", "", act.REASON_EMPTY),
        m("LD_LIBRARY_PATH", "rel/lib", act.REASON_RELATIVE),
        m("LD_LIBRARY_PATH", "/usr/local/cuda-11.8/lib64", REASON_CUDA),
        m("LD_LIBRARY_PATH", "/usr/local/cuda-12/lib64", REASON_CUDA),
    ]
    assert messages[0] == (
        'gpuenv: dropped LD_LIBRARY_PATH entry "/store/p-def/lib": inside another gpuenv prefix'
    )
    assert env[act.backup_var(TAG, "LD_LIBRARY_PATH")] == old


def test_a_cpu_environment_keeps_every_cuda_directory() -> None:
    old = "/usr/local/cuda-11.8/lib64:/usr/local/cuda-12.4/lib64"
    env, messages = activate({"LD_LIBRARY_PATH": old}, inputs(cuda_version=None, cuda_home=None))
    assert messages == []
    assert env["LD_LIBRARY_PATH"] == "/store/p-abc/lib:" + old


def test_only_cleaning_when_the_prefix_has_no_lib_dirs() -> None:
    env, _ = activate({"LD_LIBRARY_PATH": "rel:/a:/b"}, inputs(lib_dirs=()))
    assert env["LD_LIBRARY_PATH"] == "/a:/b"


def test_activating_the_same_prefix_twice_changes_nothing() -> None:
    once, _ = activate(dict(BASE))
    twice, messages = activate(once)
    assert twice == once
    assert messages == []


def test_activating_another_prefix_stacks_on_the_first() -> None:
    start = {**BASE, "CUDA_HOME": "", "LD_LIBRARY_PATH": "/opt/x"}
    in_a, _ = activate(start, inputs(OTHER))
    in_b, messages = activate(in_a)
    assert in_b["_GPUENV_ACTIVE"] == str(PREFIX)
    assert in_b[old("_GPUENV_ACTIVE")] == str(OTHER)
    assert in_b[old("PATH")] == in_a["PATH"]
    assert in_b[old("LD_LIBRARY_PATH")] == in_a["LD_LIBRARY_PATH"]
    assert all(
        in_b[k] == v for k, v in in_a.items() if k.startswith("_GPUENV_") and k != "_GPUENV_ACTIVE"
    )
    assert in_b["PATH"] == f"{PREFIX}/bin:{OTHER}/bin:/usr/bin:/bin"
    assert in_b["LD_LIBRARY_PATH"] == f"{PREFIX}/lib:/opt/x"  # the other prefix's lib dropped
    assert messages == [
        act.removal_message("LD_LIBRARY_PATH", f"{OTHER}/lib", act.REASON_OTHER_PREFIX)
    ]


def test_a_prefix_active_beneath_another_is_not_activated_again() -> None:
    in_a, _ = activate(dict(BASE))
    in_b, _ = activate(in_a, inputs(OTHER))
    again, messages = activate(in_b)
    assert again == in_b
    assert messages == [act.beneath_message(str(PREFIX))]


def test_forged_records_of_this_prefix_are_overwritten_when_it_activates() -> None:
    forged = {**BASE, old("CUDA_HOME"): "/evil", old("PATH"): "/evil"}
    env, _ = activate(forged)
    assert env[old("PATH")] == BASE["PATH"]
    assert old("CUDA_HOME") not in env
    assert "CUDA_HOME" in env[act.unset_var(TAG)].split()


def test_announced_entries_never_carry_control_characters() -> None:
    env, messages = activate({**BASE, "LD_LIBRARY_PATH": "rel\x1b[2J\x07:/ok"})
    assert messages == [
        act.removal_message("LD_LIBRARY_PATH", "rel\x1b[2J\x07", act.REASON_RELATIVE)
    ]
    assert "\x1b" not in messages[0] and 'entry "rel?[2J?"' in messages[0]
    assert env["LD_LIBRARY_PATH"] == f"{PREFIX}/lib:/ok"


def test_the_delta_and_the_ops_agree() -> None:
    ops = activation_ops(inputs())
    environ = {**BASE, "LD_LIBRARY_PATH": "::/store/p-def/lib"}
    assert apply_delta(environment_delta(ops), environ) == apply_ops(ops, environ)


def test_apply_does_not_modify_its_input() -> None:
    environ = dict(BASE)
    activate(environ)
    assert environ == BASE


# ------------------------------------------------------------------------- files


def test_write_activation_files(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    inp = inputs(prefix=tmp_path / "final")
    written = write_activation_files(staging, inp)
    rel = sorted(str(p.relative_to(staging)) for p in written)
    assert rel == [
        "etc/conda/activate.d/gpuenv.fish",
        "etc/conda/activate.d/gpuenv.sh",
        "etc/conda/deactivate.d/gpuenv.fish",
        "etc/conda/deactivate.d/gpuenv.sh",
        "etc/gpuenv/activate.fish",
        "etc/gpuenv/activate.sh",
        "etc/gpuenv/activate.zsh",
        "etc/gpuenv/env-delta.json",
    ]
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    leftovers = [p for p in staging.rglob("*") if p.is_file() and p not in written]
    assert leftovers == []
    ops = activation_ops(inp)
    assert (staging / "etc/gpuenv/activate.sh").read_text() == emitter_for("sh").emit(ops)
    assert read_delta(staging / "etc/gpuenv/env-delta.json") == environment_delta(ops)
    hook = (staging / "etc/conda/activate.d/gpuenv.sh").read_text()
    assert f"'{tmp_path}/final/etc/gpuenv/activate.sh'" in hook
    assert "staging" not in hook


def test_rewriting_replaces_files_atomically(tmp_path: Path) -> None:
    first = write_activation_files(tmp_path, inputs(prefix=tmp_path))
    inode = first[0].stat().st_ino
    second = write_activation_files(tmp_path, inputs(prefix=tmp_path, cuda_home=None))
    assert first == second
    assert second[0].stat().st_ino != inode
    assert "unset CUDA_HOME" in second[0].read_text()


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    def boom(self: Path, target: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Path, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_activation_files(tmp_path, inputs(prefix=tmp_path))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_the_module_imports_only_the_standard_library() -> None:
    import ast
    import sys

    modules = set()
    nodes = [
        node
        for source in Path(act.__file__).parent.glob("*.py")
        for node in ast.walk(ast.parse(source.read_text()))
    ]
    for node in nodes:
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    assert modules - {"__future__", "gpuenv"} <= sys.stdlib_module_names
