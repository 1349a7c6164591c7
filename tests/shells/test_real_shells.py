"""Source the activation scripts in real shells and read the environment back.

Every run starts from an explicit environment (nothing inherited from the test
process), dumps it NUL-separated with ``env -0`` before, during and after activation,
and compares: deactivation must restore every variable exactly (empty stays empty,
unset stays unset), and the environment during activation must equal what the Python
delta (``apply_ops``) computes from the environment before, so ``gpuenv run`` and
``source activate.sh`` can never disagree. A shell that is not installed is skipped.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuenv import activation as act
from gpuenv.activation import ActivationInputs, activation_ops, apply_ops, write_activation_files

ENV_BIN = shutil.which("env") or "/usr/bin/env"


@dataclass(frozen=True)
class Shell:
    name: str
    argv: tuple[str, ...]
    extension: str

    @property
    def fish(self) -> bool:
        return self.extension == "fish"

    def available(self) -> bool:
        return shutil.which(self.argv[0]) is not None


SHELLS = {
    "sh": Shell("sh", ("sh",), "sh"),
    "dash": Shell("dash", ("dash",), "sh"),
    "bash": Shell("bash", ("bash", "--norc", "--noprofile"), "sh"),
    "zsh": Shell("zsh", ("zsh", "-f"), "zsh"),
    "fish": Shell("fish", ("fish", "--no-config"), "fish"),
}


def shell_param(name: str) -> object:
    shell = SHELLS[name]
    mark = pytest.mark.skipif(not shell.available(), reason=f"{name} is not installed")
    return pytest.param(shell, id=name, marks=mark)


ALL = [shell_param(n) for n in SHELLS]
POSIX_INTERACTIVE = [shell_param("bash"), shell_param("zsh")]


# --------------------------------------------------------------------- harness


Step = tuple[str, ...]  # ("source", i) | ("dump",) | ("deactivate",) | ("raw", sh, fish)


@dataclass(frozen=True)
class Result:
    dumps: list[dict[str, str]]
    stderr: list[str]


def _parse_env(raw: bytes) -> dict[str, str]:
    env = {}
    for item in raw.split(b"\0"):
        if item:
            key, _, value = item.decode("utf-8", "surrogateescape").partition("=")
            env[key] = value
    env.pop("_", None)  # bash/zsh: the last command's path, not ours
    return env


def run_shell(
    shell: Shell,
    scripts: Sequence[Path],
    steps: Sequence[Step],
    env: dict[str, str],
    cwd: Path,
    extra_args: Sequence[str] = (),
) -> Result:
    """Run ``steps`` in one shell process; ``dump`` steps write ``env -0`` to files."""
    dump_dir = cwd.parent / "dumps"
    dump_dir.mkdir(exist_ok=True)
    args = [str(s) for s in scripts]
    dumps: list[Path] = []
    lines = []
    for step in steps:
        kind = step[0]
        if kind == "source":
            ref = _arg(shell, int(step[1]) + 1)
            lines.append(f"source {ref}" if shell.fish else f". {ref}")
        elif kind == "dump":
            dumps.append(dump_dir / f"dump{len(dumps)}")
            args.append(str(dumps[-1]))
            lines.append(f"{ENV_BIN} -0 > {_arg(shell, len(args))}")
        elif kind == "deactivate":
            lines.append("gpuenv_deactivate")
        else:
            lines.append(step[2] if shell.fish else step[1])
    lines.append("true")  # so no shell execs the last `env` in place (zsh lowers SHLVL)
    program = "\n".join(lines)
    exe = shutil.which(shell.argv[0])  # absolute: the child's PATH may be empty
    assert exe is not None
    argv = [exe, *shell.argv[1:], *extra_args, "-c", program]
    if not shell.fish:
        argv.append(shell.name)  # $0
    completed = subprocess.run(
        [*argv, *args], env=env, cwd=cwd, capture_output=True, timeout=60, check=False
    )
    stderr = completed.stderr.decode("utf-8", "surrogateescape")
    assert completed.returncode == 0, stderr
    return Result([_parse_env(p.read_bytes()) for p in dumps], stderr.splitlines())


def _arg(shell: Shell, index: int) -> str:
    return f"$argv[{index}]" if shell.fish else f'"${{{index}}}"'


ROUND_TRIP: list[Step] = [
    ("dump",),
    ("source", "0"),
    ("dump",),
    ("source", "0"),
    ("dump",),
    ("deactivate",),
    ("dump",),
]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    return tmp_path


def base_env(workdir: Path, **extra: str) -> dict[str, str]:
    home = workdir / "home"
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "LC_ALL": "C.UTF-8",
        **extra,
    }


def make_prefix(
    store: Path,
    name: str = "p-abc",
    *,
    toolkit: str = "own",
    cuda_version: str | None = "12.4",
) -> ActivationInputs:
    """A prefix named ``name`` in ``store``; ``toolkit`` is "own", "none" or a path."""
    prefix = store / name
    cuda_home = {"own": prefix, "none": None}.get(toolkit, Path(toolkit))
    inputs = ActivationInputs(
        prefix=prefix,
        name="h100",
        store_root=store,
        bin_dirs=(prefix / "bin",),
        lib_dirs=(prefix / "lib", prefix / "lib/python3.11/site-packages/nvidia/cudnn/lib"),
        cuda_home=cuda_home,
        cuda_version=cuda_version,
    )
    write_activation_files(prefix, inputs)
    return inputs


def script(shell: Shell, inputs: ActivationInputs) -> Path:
    return inputs.prefix / f"etc/gpuenv/activate.{shell.extension}"


def expected(inputs: ActivationInputs, before: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    return apply_ops(activation_ops(inputs), before)


def check_round_trip(
    shell: Shell, inputs: ActivationInputs, env: dict[str, str], workdir: Path
) -> Result:
    result = run_shell(shell, [script(shell, inputs)], ROUND_TRIP, env, workdir / "cwd")
    before, during, again, after = result.dumps
    want, messages = expected(inputs, before)
    assert during == want
    assert again == during, "sourcing twice must not change anything"
    assert after == before, "deactivation must restore every variable exactly"
    assert result.stderr == messages
    return result


# ------------------------------------------------------------------- scenarios

DIRTY = ":".join(
    [
        "/STORE/p-other/lib",
        "",
        "relative/lib",
        "/usr/local/cuda-11.8/lib64",
        "/opt/keep me/lib",
        "/usr/local/cuda-12.4/lib64",
        "/STORE/p-other/lib",
        "",
        "relative/lib",
    ]
)


@pytest.mark.parametrize("shell", ALL)
@pytest.mark.parametrize(
    "case",
    [
        "clean",
        "empty-vs-unset",
        "dirty",
    ],
)
def test_round_trip(shell: Shell, case: str, workdir: Path) -> None:
    store = workdir / "store"
    inputs = make_prefix(store)
    if case == "clean":
        env = base_env(workdir)
    elif case == "empty-vs-unset":
        env = base_env(workdir, LD_LIBRARY_PATH="", CUDA_HOME="")  # CUDA_PATH stays unset
    else:
        dirty = DIRTY.replace("/STORE", str(store))
        env = base_env(workdir, LD_LIBRARY_PATH=dirty, CUDA_HOME="/usr/local/cuda-11.8")
    result = check_round_trip(shell, inputs, env, workdir)
    before, during, _, after = result.dumps
    prefix = str(inputs.prefix)
    assert during["CUDA_HOME"] == during["CUDA_PATH"] == prefix
    assert during["PATH"] == f"{prefix}/bin:{before['PATH']}"
    assert during["LD_LIBRARY_PATH"].startswith(f"{prefix}/lib:{prefix}/lib/python3.11/")
    if case == "empty-vs-unset":
        assert after["CUDA_HOME"] == "" and after["LD_LIBRARY_PATH"] == ""
        assert "CUDA_PATH" not in after
        tag = act.prefix_tag(prefix)
        assert during[act.unset_var(tag)] == "CUDA_PATH _GPUENV_ACTIVE"


@pytest.mark.parametrize("shell", ALL)
def test_ld_library_path_cleaning_announces_each_removal_once(shell: Shell, workdir: Path) -> None:
    store = workdir / "store"
    inputs = make_prefix(store)
    dirty = DIRTY.replace("/STORE", str(store))
    result = check_round_trip(shell, inputs, base_env(workdir, LD_LIBRARY_PATH=dirty), workdir)
    during = result.dumps[1]
    prefix = inputs.prefix
    assert during["LD_LIBRARY_PATH"] == (
        f"{prefix}/lib:{prefix}/lib/python3.11/site-packages/nvidia/cudnn/lib"
        ":/opt/keep me/lib:/usr/local/cuda-12.4/lib64"
    )
    m = act.removal_message
    assert result.stderr == [
        m("LD_LIBRARY_PATH", f"{store}/p-other/lib", act.REASON_OTHER_PREFIX),
        m("LD_LIBRARY_PATH", "", act.REASON_EMPTY),
        m("LD_LIBRARY_PATH", "relative/lib", act.REASON_RELATIVE),
        m("LD_LIBRARY_PATH", "/usr/local/cuda-11.8/lib64", act.reason_other_cuda("12.4")),
    ]


@pytest.mark.parametrize("shell", ALL)
def test_without_toolkit_cuda_home_is_unset_then_restored(shell: Shell, workdir: Path) -> None:
    inputs = make_prefix(workdir / "store", toolkit="none")
    env = base_env(workdir, CUDA_HOME="/usr/local/cuda", CUDA_PATH="")
    result = check_round_trip(shell, inputs, env, workdir)
    _, during, _, after = result.dumps
    assert "CUDA_HOME" not in during and "CUDA_PATH" not in during
    assert after["CUDA_HOME"] == "/usr/local/cuda" and after["CUDA_PATH"] == ""


@pytest.mark.parametrize("shell", ALL)
def test_injection_nothing_executes_and_values_round_trip(shell: Shell, workdir: Path) -> None:
    pwned = workdir / "pwned"
    name = (
        f"a b'c\"d $(touch {pwned}-1) `touch {pwned}-2` ${{HOME}} $HOME"
        f" e\\f;g*h[i]?%j!k|l&m<n>o(p)q{{r}}~s#t\tu\nv"
    )
    store = workdir / "st*re [x] $(touch x)"
    inputs = make_prefix(store, name)
    env = base_env(workdir, LD_LIBRARY_PATH=f"{store}/other/lib:{workdir}/stXre x/lib")
    result = check_round_trip(shell, inputs, env, workdir)
    during = result.dumps[1]
    prefix = str(inputs.prefix)
    assert "\n" in prefix and "'" in prefix and "`" in prefix and "$(" in prefix
    assert during["CUDA_HOME"] == prefix
    assert during["_GPUENV_ACTIVE"] == prefix
    assert during["PATH"].split(":")[0] == prefix + "/bin"
    # the store root is a literal, not a glob: a look-alike directory is kept
    assert during["LD_LIBRARY_PATH"].endswith(f":{workdir}/stXre x/lib")
    assert len(result.stderr) == 1 and "other/lib" in result.stderr[0]
    assert not Path(f"{pwned}-1").exists()
    assert not Path(f"{pwned}-2").exists()
    assert list((workdir / "cwd").iterdir()) == []


@pytest.mark.parametrize("shell", ALL)
def test_nested_activation_returns_exactly_to_the_outer_one(shell: Shell, workdir: Path) -> None:
    store = workdir / "store"
    first = make_prefix(store, "p-aaa")
    second = make_prefix(store, "p-bbb", toolkit="none")
    steps: list[Step] = [
        ("dump",),
        ("source", "0"),
        ("dump",),
        ("source", "1"),
        ("dump",),
        ("deactivate",),
        ("dump",),
        ("deactivate",),  # the outer activation's gpuenv_deactivate is back
        ("dump",),
    ]
    env = base_env(workdir, CUDA_HOME="", LD_LIBRARY_PATH="/opt/x")
    scripts = [script(shell, first), script(shell, second)]
    result = run_shell(shell, scripts, steps, env, workdir / "cwd")
    before, in_first, in_second, back, after = result.dumps
    assert in_first == expected(first, before)[0]
    assert in_second == expected(second, in_first)[0]  # stacked on the first
    assert back == in_first, "deactivating the inner one restores the outer one exactly"
    assert after == before
    inner_lib = f"{first.prefix}/lib"
    assert result.stderr == [
        act.removal_message("LD_LIBRARY_PATH", inner_lib, act.REASON_OTHER_PREFIX),
        act.removal_message(
            "LD_LIBRARY_PATH",
            f"{first.prefix}/lib/python3.11/site-packages/nvidia/cudnn/lib",
            act.REASON_OTHER_PREFIX,
        ),
    ]


@pytest.mark.parametrize("shell", ALL)
def test_a_shell_that_inherited_an_activation_sources_another_and_returns_to_it(
    shell: Shell, workdir: Path
) -> None:
    store = workdir / "store"
    first = make_prefix(store, "p-aaa")
    second = make_prefix(store, "p-bbb", toolkit="none")
    inherited, _ = expected(first, base_env(workdir, CUDA_HOME="", LD_LIBRARY_PATH="/opt/x"))
    steps: list[Step] = [("dump",), ("source", "0"), ("dump",), ("deactivate",), ("dump",)]
    result = run_shell(shell, [script(shell, second)], steps, inherited, workdir / "cwd")
    start, during, after = result.dumps
    assert during == expected(second, start)[0]
    assert after == start, "back to exactly the inherited activation"


@pytest.mark.parametrize("shell", ALL)
def test_a_prefix_active_beneath_another_is_not_activated_again(
    shell: Shell, workdir: Path
) -> None:
    store = workdir / "store"
    first = make_prefix(store, "p-aaa")
    second = make_prefix(store, "p-bbb")
    steps: list[Step] = [("source", "0"), ("source", "1"), ("dump",), ("source", "0"), ("dump",)]
    env = base_env(workdir)
    scripts = [script(shell, first), script(shell, second)]
    result = run_shell(shell, scripts, steps, env, workdir / "cwd")
    stacked, again = result.dumps
    assert again == stacked
    assert result.stderr[-1] == act.beneath_message(str(first.prefix))
    assert expected(first, stacked) == (stacked, [act.beneath_message(str(first.prefix))])


@pytest.mark.parametrize("shell", ALL)
def test_forged_records_cannot_make_deactivate_unset_path(shell: Shell, workdir: Path) -> None:
    inputs = make_prefix(workdir / "store")
    tag = act.prefix_tag(str(inputs.prefix))
    forged = base_env(
        workdir,
        _GPUENV_ACTIVE=str(inputs.prefix),
        _GPUENV_UNSET="PATH",
        **{act.unset_var(tag): "PATH LD_LIBRARY_PATH CUDA_HOME _GPUENV_ACTIVE"},
    )
    steps: list[Step] = [("dump",), ("source", "0"), ("deactivate",), ("dump",)]
    result = run_shell(shell, [script(shell, inputs)], steps, forged, workdir / "cwd")
    start, after = result.dumps
    assert after["PATH"] == start["PATH"], "PATH does not hold what activation set: kept"
    assert "_GPUENV_ACTIVE" not in after
    # forged records for another prefix are never read: activation overwrites its own
    other = base_env(
        workdir, **{act.backup_var(tag, "PATH"): "/evil", act.backup_var(tag, "CUDA_HOME"): "x"}
    )
    steps = [("dump",), ("source", "0"), ("deactivate",), ("dump",)]
    result = run_shell(shell, [script(shell, inputs)], steps, other, workdir / "cwd")
    start, after = result.dumps
    forged_names = {act.backup_var(tag, "PATH"), act.backup_var(tag, "CUDA_HOME")}
    assert {k: v for k, v in after.items() if k not in forged_names} == {
        k: v for k, v in start.items() if k not in forged_names
    }
    assert "CUDA_HOME" not in after and after["PATH"] == start["PATH"]


@pytest.mark.parametrize("shell", ALL)
def test_helper_names_never_touch_the_users_variables(shell: Shell, workdir: Path) -> None:
    inputs = make_prefix(workdir / "store")
    mine = {
        n: f"mine {n}"
        for n in (
            "_gpuenv_keep",
            "_gpuenv_e",
            "_gpuenv_rest",
            "_gpuenv_said",
            "_gpuenv_why",
            "_gpuenv_shown",
            "_gpuenv_r",
            "_gpuenv_last",
        )
    }
    dirty = DIRTY.replace("/STORE", str(workdir / "store"))
    env = base_env(workdir, LD_LIBRARY_PATH=dirty, **mine)
    result = check_round_trip(shell, inputs, env, workdir)
    for dump in result.dumps:
        for name, value in mine.items():
            assert dump[name] == value


@pytest.mark.parametrize("shell", ALL)
def test_a_child_shell_can_deactivate_with_the_exported_backups(
    shell: Shell, workdir: Path
) -> None:
    inputs = make_prefix(workdir / "store")
    env = base_env(workdir, CUDA_HOME="", LD_LIBRARY_PATH="/opt/x")
    # what a parent shell (or `gpuenv run`) leaves in the environment of a child
    activated, _ = expected(inputs, env)
    steps: list[Step] = [("dump",), ("source", "0"), ("dump",), ("deactivate",), ("dump",)]
    result = run_shell(shell, [script(shell, inputs)], steps, activated, workdir / "cwd")
    start, during, after = result.dumps
    assert during == start, "already active: sourcing again is a no-op"
    noise = {k: v for k, v in start.items() if k not in activated}  # PWD, SHLVL, ...
    assert after == {**env, **noise}
    assert result.stderr == []


@pytest.mark.parametrize("shell", ALL)
def test_conda_hooks(shell: Shell, workdir: Path) -> None:
    inputs = make_prefix(workdir / "store")
    ext = "fish" if shell.fish else "sh"
    hooks = [
        inputs.prefix / f"etc/conda/activate.d/gpuenv.{ext}",
        inputs.prefix / f"etc/conda/deactivate.d/gpuenv.{ext}",
    ]
    steps: list[Step] = [("dump",), ("source", "0"), ("dump",), ("source", "1"), ("dump",)]
    env = base_env(workdir, CUDA_HOME="")
    result = run_shell(shell, hooks, steps, env, workdir / "cwd")
    before, during, after = result.dumps
    assert during == expected(inputs, before)[0]
    assert after == before


@pytest.mark.parametrize("shell", [shell_param("sh"), shell_param("bash"), shell_param("zsh")])
def test_eval_and_strict_modes(shell: Shell, workdir: Path) -> None:
    """`eval "$(gpuenv activate --shell bash)"` under `set -eu` works too."""
    inputs = make_prefix(workdir / "store")
    steps: list[Step] = [
        ("raw", "set -eu", ""),
        ("dump",),
        ("raw", 'eval "$(cat "$1")"', ""),
        ("dump",),
        ("deactivate",),
        ("dump",),
    ]
    env = base_env(workdir, CUDA_HOME="")
    result = run_shell(shell, [script(shell, inputs)], steps, env, workdir / "cwd")
    before, during, after = result.dumps
    assert during == expected(inputs, before)[0]
    assert after == before


@pytest.mark.skipif(not SHELLS["zsh"].available(), reason="zsh is not installed")
def test_zsh_with_hostile_options(workdir: Path) -> None:
    shell = SHELLS["zsh"]
    inputs = make_prefix(workdir / "st*re [x]")
    options = "setopt shwordsplit globsubst extendedglob kshglob nounset nomatch promptsubst"
    steps: list[Step] = [("raw", options, ""), *ROUND_TRIP]
    dirty = f"{workdir}/st*re [x]/other/lib::/usr/local/cuda-11.8/lib64:/a b/lib"
    env = base_env(workdir, LD_LIBRARY_PATH=dirty)
    result = run_shell(shell, [script(shell, inputs)], steps, env, workdir / "cwd")
    before, during, again, after = result.dumps
    assert during == expected(inputs, before)[0]
    assert again == during and after == before


# --------------------------------------------------------------------- prompts


@pytest.mark.parametrize("shell", POSIX_INTERACTIVE)
def test_prompt_marker_in_interactive_posix_shells(shell: Shell, workdir: Path) -> None:
    inputs = make_prefix(workdir / "store")
    steps: list[Step] = [
        ("raw", "PS1='base$ '", ""),
        ("source", "0"),
        ("raw", "printf '[%s]\\n' \"$PS1\" >&2", ""),
        ("source", "0"),
        ("raw", "printf '[%s]\\n' \"$PS1\" >&2", ""),
        ("deactivate",),
        ("raw", "printf '[%s]\\n' \"$PS1\" >&2", ""),
    ]
    env = base_env(workdir)
    result = run_shell(shell, [script(shell, inputs)], steps, env, workdir / "cwd", ["-i"])
    prompts = [line for line in result.stderr if line.startswith("[")]
    assert prompts == ["[(gpuenv:h100) base$ ]", "[(gpuenv:h100) base$ ]", "[base$ ]"]


@pytest.mark.parametrize("shell", [shell_param("bash"), shell_param("sh")])
def test_no_prompt_change_when_not_interactive(shell: Shell, workdir: Path) -> None:
    inputs = make_prefix(workdir / "store")
    steps: list[Step] = [
        ("raw", "PS1='base$ '", ""),
        ("source", "0"),
        ("raw", "printf '[%s]\\n' \"$PS1\" >&2", ""),
    ]
    result = run_shell(shell, [script(shell, inputs)], steps, base_env(workdir), workdir / "cwd")
    assert result.stderr == ["[base$ ]"]


@pytest.mark.skipif(not SHELLS["fish"].available(), reason="fish is not installed")
def test_fish_prompt_is_wrapped_and_restored(workdir: Path) -> None:
    shell = SHELLS["fish"]
    inputs = make_prefix(workdir / "store")
    show = "printf '[%s]\\n' (false; fish_prompt) >&2"
    steps: list[Step] = [
        ("raw", "", "function fish_prompt; printf 'base%s> ' $status; end"),
        ("source", "0"),
        ("raw", "", show),
        ("deactivate",),
        ("raw", "", show),
        (
            "raw",
            "",
            "for f in (functions -a); string match -q '*gpuenv*' $f; and echo leak $f >&2; end",
        ),
    ]
    env = base_env(workdir)
    result = run_shell(shell, [script(shell, inputs)], steps, env, workdir / "cwd", ["-i"])
    shown = [line for line in result.stderr if line.startswith("[") or "leak" in line]
    assert shown == ["[(gpuenv:h100) base1> ]", "[base1> ]"]


# ---------------------------------------------------------------- the property


POOL = [
    "",
    "rel",
    "./rel",
    "/opt/a",
    "/opt/b c",
    "/opt/it's",
    '/opt/"q"',
    "/opt/$(x)",
    "/opt/`x`",
    "/opt/*",
    "/opt/é",
    "/opt/new\nline",
    "/usr/local/cuda-11.8/lib64",
    "/usr/local/cuda-12.4/lib64",
    "/usr/local/cuda-12.4.1/lib64",
    "/usr/local/cuda-12.40/lib64",
    "/usr/local/cuda-12/lib64",
    "/usr/local/cuda/lib64",
    "/opt/cuda-11.8",
    "/opt/my-cuda-12.1-tools/lib",
    "/STORE",
    "/STORE/p-abc",
    "/STORE/p-abc/lib",
    "/STORE/p-abc/lib/python3.11/site-packages/nvidia/cudnn/lib",
    "/STORE/p-abc/other",
    "/STORE/p-abcd/lib",
    "/STORE/p-other/lib",
    "/STOREx/lib",
    "rel\x1b[31m",
    "/STORE/p-other/\x07lib",
    "/opt/tab\there",
]
CASES = 25


def _random_env(rng: random.Random, store: Path, workdir: Path) -> dict[str, str]:
    env = base_env(workdir)
    for name in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"):
        roll = rng.random()
        if roll < 0.2:
            continue  # unset
        if roll < 0.3:
            env[name] = ""
        elif name == "LD_LIBRARY_PATH":
            entries = rng.choices(POOL, k=rng.randint(1, 8))
            env[name] = ":".join(e.replace("/STORE", str(store)) for e in entries)
        else:
            env[name] = rng.choice(POOL).replace("/STORE", str(store))
    if rng.random() < 0.1:
        env["PATH"] = ""
    return env


@pytest.mark.parametrize("shell", ALL)
def test_property_python_delta_equals_the_shell(shell: Shell, workdir: Path) -> None:
    """Seeded random environments: the shell and apply_ops agree on every variable and
    every announcement, and deactivation restores the start exactly."""
    rng = random.Random(20240605)
    store = workdir / "store"
    variants = [
        make_prefix(store),
        make_prefix(store, "p-cpu", toolkit="none", cuda_version=None),
        make_prefix(store, "p-sys", toolkit="/usr/local/cuda-12.4"),
    ]
    for case in range(CASES):
        inputs = variants[case % len(variants)]
        env = _random_env(rng, store, workdir)
        if shell.fish and env["PATH"] == "":
            env["PATH"] = "/usr/bin:/bin"  # fish replaces an empty PATH with its default
        try:
            check_round_trip(shell, inputs, env, workdir)
        except AssertionError as exc:
            raise AssertionError(f"case {case}: env={env!r}") from exc
