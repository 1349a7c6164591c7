"""Starting an interactive shell inside a prefix: the user's own start-up files first,
then the prefix's activation script (so the prompt marker and ``gpuenv_deactivate``
work as after a manual ``source``).

The entry files are static per prefix and written at install time:

- bash: ``etc/gpuenv/shell/bashrc``, used as ``bash --rcfile``;
- zsh: ``etc/gpuenv/shell/zsh/.zshrc``, found through ``ZDOTDIR``; it restores the
  user's ``ZDOTDIR`` and reads their own ``.zshrc`` first;
- fish: no file; ``fish --init-command "source <prefix>/etc/gpuenv/activate.fish"``;
- sh: ``ENV`` names the POSIX activation script (read by interactive sh and dash).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gpuenv._fs import atomic_write_text
from gpuenv.activation import fish_quote, sh_quote
from gpuenv.errors import NotInstalled, UsageError

SCRIPTS = {
    "bash": "activate.sh",
    "sh": "activate.sh",
    "zsh": "activate.zsh",
    "fish": "activate.fish",
}
SAVED_ZDOTDIR = "GPUENV_USER_ZDOTDIR"


def _etc(prefix: Path) -> Path:
    return prefix / "etc" / "gpuenv"


def activation_script(prefix: Path, shell: str) -> str:
    try:
        return (_etc(prefix) / SCRIPTS[shell]).read_text(encoding="utf-8")
    except KeyError:
        raise UsageError(f"unknown shell {shell!r}", hint=f"one of: {', '.join(SCRIPTS)}") from None
    except OSError:
        raise NotInstalled(
            f"{prefix} has no {SCRIPTS[shell]}", hint="reinstall the target (gpuenv install)"
        ) from None


def write_shell_entrypoints(prefix: Path) -> None:
    """The start-up files ``gpuenv shell`` points bash and zsh at."""
    shell_dir = _etc(prefix) / "shell"
    activate_sh = sh_quote(str(_etc(prefix) / "activate.sh"))
    atomic_write_text(
        shell_dir / "bashrc",
        "# gpuenv shell: your own ~/.bashrc, then this prefix's activation\n"
        'if [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi\n'
        f". {activate_sh}\n",
        durable=False,
        what="the bash start-up file of gpuenv shell",
    )
    activate_zsh = sh_quote(str(_etc(prefix) / "activate.zsh"))
    atomic_write_text(
        shell_dir / "zsh" / ".zshrc",
        "# gpuenv shell: restore your ZDOTDIR, read your own .zshrc, then activate\n"
        f'if [ -n "${{{SAVED_ZDOTDIR}+x}}" ]; then ZDOTDIR="${SAVED_ZDOTDIR}"; '
        "else unset ZDOTDIR; fi\n"
        f"unset {SAVED_ZDOTDIR}\n"
        'if [ -f "${ZDOTDIR:-$HOME}/.zshrc" ]; then . "${ZDOTDIR:-$HOME}/.zshrc"; fi\n'
        f". {activate_zsh}\n",
        durable=False,
        what="the zsh start-up file of gpuenv shell",
    )


def shell_command(
    name: str, prefix: Path, environ: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that start shell ``name`` activated in ``prefix``."""
    env = dict(environ)
    etc = _etc(prefix)
    if name == "bash":
        return ["bash", "--rcfile", str(etc / "shell" / "bashrc"), "-i"], env
    if name == "zsh":
        if "ZDOTDIR" in environ:
            env[SAVED_ZDOTDIR] = environ["ZDOTDIR"]
        env["ZDOTDIR"] = str(etc / "shell" / "zsh")
        return ["zsh", "-i"], env
    if name == "fish":
        return ["fish", "--init-command", f"source {fish_quote(str(etc / 'activate.fish'))}"], env
    env["ENV"] = str(etc / "activate.sh")
    return ["sh", "-i"], env
