"""Starting an interactive shell inside a prefix: the user's own start-up files first,
then the prefix's activation script (so the prompt marker and ``gpuenv_deactivate``
work as after a manual ``source``).

The entry files are static per prefix and written at install time:

- bash: ``etc/gpuenv/shell/bashrc``, used as ``bash --rcfile``;
- zsh: ``etc/gpuenv/shell/zsh/.zshrc``, found through ``ZDOTDIR``; it restores the
  user's ``ZDOTDIR`` and reads their own ``.zshrc`` first;
- fish: no file; ``fish --init-command "source <prefix>/etc/gpuenv/activate.fish"``;
- sh: ``etc/gpuenv/shell/shrc``, found through ``ENV`` (read by interactive sh and
  dash); it restores the user's ``ENV`` (or unsets it), reads the file that names,
  then activates.

No path ever reaches a shell unquoted. sh and dash expand ``ENV`` (parameters,
command substitution: a store under ``/tmp/$(...)`` would run it), so ``ENV`` is the
constant text ``${GPUENV_SHELL_RC}`` and the path is the value of that variable: an
expansion's result is never expanded again. The user's own ``ENV`` is read as the
path it names (sh would also expand it; a plain path is the usual case).
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
SAVED_ENV = "GPUENV_USER_ENV"
SH_RC_VAR = "GPUENV_SHELL_RC"


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
    atomic_write_text(
        shell_dir / "shrc",
        "# gpuenv shell (sh): restore your ENV, read the file it names, then activate\n"
        f'if [ -n "${{{SAVED_ENV}+x}}" ]; then ENV="${SAVED_ENV}"; export ENV; '
        "else unset ENV; fi\n"
        f"unset {SAVED_ENV} {SH_RC_VAR}\n"
        'if [ -n "${ENV-}" ] && [ -f "$ENV" ]; then . "$ENV"; fi\n'
        f". {activate_sh}\n",
        durable=False,
        what="the sh start-up file of gpuenv shell",
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
    rc = etc / "shell" / "shrc"
    if "ENV" in environ:
        env[SAVED_ENV] = environ["ENV"]
    env["ENV"] = f"${{{SH_RC_VAR}}}"  # constant: the path is never expanded (module doc)
    env[SH_RC_VAR] = str(rc if rc.is_file() else etc / "activate.sh")  # older prefixes
    return ["sh", "-i"], env
