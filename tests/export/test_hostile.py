"""Every export format rendered for hostile project paths and values, then parsed back by
the tool it is written for (bash -n and a real run of the Slurm script, TOML, YAML, the
Dockerfile parser, pip's requirement syntax): redaction works on values, never on the
finished text, and each format quotes with its own rules (issue 24, finding 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuenv import export
from gpuenv.lock.model import (
    CondaPackage,
    Lock,
    LockedHardware,
    LockedTarget,
    PipPackage,
    StackSummary,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

# A password holding a raw "@" (uv and pip split the userinfo at the LAST "@").
LEAKY = "u2:pa@ss-LEAKY-42"
SECRETS = ("LEAKY", "pa@ss", "u2:", "tk-5e3c7", "sekrit-q")
# Legitimate URLs that look like secrets to text rules: a "/t/<name>/" folder deeper in
# the path and an "A_TOKEN=q" folder name. They must come out byte for byte.
TEAM_INDEX = "https://files.example/simple/t/team/"
NUMPY_URL = "https://files.example/simple/t/team/A_TOKEN=q/numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl"
TORCH_URL = "https://torch.example/whl/cpu/torch-2.4.1%2Bcpu-cp311-cp311-linux_x86_64.whl"

HOSTILE_DIRS = (
    "a;touch PWNED;#/B_TOKEN=z",
    "$(touch PWNED)/x",
    "`touch PWNED`/y",
    "q'\"; touch PWNED; echo '/z",
    "t/secret/A_PASSWORD=p w/${HOME}",
    "line\nbreak;touch PWNED",
)


def _target() -> LockedTarget:
    python = CondaPackage(
        "python",
        "3.11.9",
        "h955ad1f_0_cpython",
        0,
        "https://conda.example/t/tk-5e3c7a/chan",
        "linux-64",
        "https://conda.example/t/tk-5e3c7a/chan/linux-64/python-3.11.9-h955ad1f_0_cpython.conda",
        "b" * 64,
        "c" * 32,
    )
    torch = PipPackage(
        "torch",
        "2.4.1+cpu",
        TORCH_URL.replace("https://", f"https://{LEAKY}@") + "?sig=sekrit-q",
        "a" * 64,
        f"https://{LEAKY}@torch.example/whl/cpu",
        ("numpy",),
    )
    numpy = PipPackage("numpy", "2.0.0", NUMPY_URL, "d" * 64, TEAM_INDEX)
    return LockedTarget(
        name="cpu",
        input_hash="sha256:" + "0" * 64,
        platform="linux-64",
        hardware=LockedHardware(True, None, (), None, None, "declared"),
        stack=StackSummary(
            "3.11",
            None,
            "cpu",
            "2.4.1",
            None,
            None,
            None,
            None,
            (),
            f"https://{LEAKY}@torch.example/whl/cpu",
        ),
        virtual_packages={"__glibc": "2.28"},
        conda=(python,),
        pip=(torch, numpy),
    )


def _context(project_dir: Path, store: Path) -> export.ExportContext:
    target = _target()
    return export.ExportContext(
        lock=Lock("sha256:" + "1" * 64, {"cpu": target}),
        target=target,
        project="demo",
        prefix=store / "prefixes" / "cpu-0123",
        project_dir=project_dir,
        store_root=store,
        gpuenv_argv=(sys.executable, "-m", "gpuenv"),
    )


def _no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


@pytest.fixture(params=range(len(HOSTILE_DIRS)), ids=lambda i: f"dir{i}")
def hostile(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "p" / HOSTILE_DIRS[request.param] / "B_TOKEN=z"
    store = tmp_path / "s" / HOSTILE_DIRS[-1 - request.param]
    project.mkdir(parents=True)
    store.mkdir(parents=True)
    return project, store


def test_the_slurm_script_parses_and_runs_exactly_the_command_for_any_path(
    hostile: tuple[Path, Path], tmp_path: Path
) -> None:
    project, store = hostile
    context = _context(project, store)
    text = export.export("slurm", context).text
    _no_secret(text)
    script = tmp_path / "job.sh"
    script.write_text(text)
    syntax = subprocess.run(["bash", "-n", script], check=False, capture_output=True)
    assert syntax.returncode == 0, syntax.stderr
    # A real run: the pointer names the script's prefix, and srun records what it got.
    (project / ".gpuenv").mkdir()
    (project / ".gpuenv" / "cpu").symlink_to(context.prefix)  # type: ignore[arg-type]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "srun.json"
    (bin_dir / "srun").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'home': os.environ['GPUENV_HOME']}}, "
        f"open({str(record)!r}, 'w'))\n"
    )
    (bin_dir / "srun").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    run = subprocess.run(
        ["bash", script, "echo", "hi; touch PWNED"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(record.read_text())
    assert got["home"] == str(store)
    assert got["argv"] == [
        sys.executable,
        "-m",
        "gpuenv",
        "-f",
        f"{project}/gpuenv.toml",
        "run",
        "--target",
        "cpu",
        "--",
        "echo",
        "hi; touch PWNED",
    ]
    assert not list(tmp_path.rglob("PWNED")), "the script ran a piece of a path"


def test_every_other_format_parses_back_with_its_urls_exact_and_no_secret(
    hostile: tuple[Path, Path],
) -> None:
    context = _context(*hostile)
    texts = {fmt: export.export(fmt, context).text for fmt in export.FORMATS}
    for text in texts.values():
        _no_secret(text)

    pylock = tomllib.loads(texts["pylock"])
    from packaging.pylock import Pylock

    Pylock.from_dict(pylock).validate()
    urls = {w["url"] for p in pylock["packages"] for w in p["wheels"]}
    assert urls == {TORCH_URL, NUMPY_URL}
    assert {p.get("index") for p in pylock["packages"]} == {
        TEAM_INDEX,
        "https://torch.example/whl/cpu",
    }

    import yaml

    env = yaml.safe_load(texts["environment-yml"])
    pins = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert f"numpy @ {NUMPY_URL}#sha256={'d' * 64}" in pins
    assert env["channels"] == ["https://conda.example/chan", "nodefaults"]

    conda_lock = yaml.safe_load(texts["conda-lock"])
    assert {p["url"] for p in conda_lock["package"]} == {
        TORCH_URL,
        NUMPY_URL,
        "https://conda.example/chan/linux-64/python-3.11.9-h955ad1f_0_cpython.conda",
    }

    from packaging.requirements import Requirement

    lines = [ln for ln in texts["requirements"].splitlines() if ln and ln[0] not in "#-"]
    assert sorted(Requirement(ln.split(" --hash=")[0]).name for ln in lines) == ["numpy", "torch"]
    assert f"--index-url {TEAM_INDEX}" in texts["requirements"].splitlines() or (
        f"--extra-index-url {TEAM_INDEX}" in texts["requirements"].splitlines()
    )

    dockerfile = pytest.importorskip("dockerfile")
    commands = list(dockerfile.parse_string(texts["dockerfile"]))
    heredocs = {h.name: h.content for c in commands for h in c.heredocs}
    assert f"numpy @ {NUMPY_URL} --hash=sha256:{'d' * 64}" in heredocs["GPUENV_PIP"].splitlines()
    assert [c.cmd for c in commands if c.cmd == "FROM"] == ["FROM"]

    # notes: a Markdown table row per package, the URL-free values as they are.
    assert "| numpy | 2.0.0 |" in texts["notes"]
    assert "https://torch.example/whl/cpu" in texts["notes"]


def test_a_line_break_in_a_comment_value_cannot_start_a_command(tmp_path: Path) -> None:
    context = _context(tmp_path, tmp_path)
    hostile = export.ExportContext(
        **{**context.__dict__, "project": "demo\nrm -rf /\n#"}  # not a valid name: defence
    )
    for fmt in ("slurm", "requirements", "dockerfile", "environment-yml", "pylock"):
        text = export.export(fmt, hostile).text
        assert "\nrm -rf /" not in text, fmt
