"""Start-up stays light: --version, --help and parser construction import nothing heavy."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pydantic", "tomlkit", "rattler", "httpx", "rich", "pynvml", "conda_lock", "packaging")


def _imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_version_and_parser_import_nothing_heavy() -> None:
    modules = _imported_after(
        "from gpuenv.cli import build_parser, main\n"
        "build_parser()\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    )
    loaded = {m.split(".")[0] for m in modules}
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_help_runs_and_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpuenv", "--help"], capture_output=True, text=True, check=True
    )
    assert "plan" in out.stdout and "init" in out.stdout
