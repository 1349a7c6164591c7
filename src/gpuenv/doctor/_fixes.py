"""Fix steps more than one check writes: the pip (or uv) command for an owner, the
ordered steps that settle a file clash, taking a ``sys.path`` entry's copies away."""

from __future__ import annotations

from gpuenv.doctor import _syspath
from gpuenv.doctor._context import Context
from gpuenv.doctor._records import Owner
from gpuenv.doctor._syspath import PathEntry


def pip_command(ctx: Context, owner: Owner, action: str, *args: str) -> str:
    """The command that installs or uninstalls with the tool that installed ``owner``:
    the OS package manager for a distribution an OS package installed; on an
    ``EXTERNALLY-MANAGED`` interpreter pip only with the flag it demands."""
    from gpuenv.doctor._osowned import externally_managed, os_package

    python = ctx.env.python
    package = os_package(ctx, owner.dist.path) if owner.dist is not None else None
    if package is not None:
        verb = "remove" if action == "uninstall" else "install --reinstall"
        return f"apt-get {verb} {package}"
    if externally_managed(ctx) is not None:  # pip refuses without the flag (PEP 668)
        yes = " -y" if action == "uninstall" else ""
        flags = f"{yes} --break-system-packages"
        return f"{python or 'python3'} -m pip {action}{flags} {' '.join(args)}"
    installer = owner.dist.installer() if owner.dist is not None else None
    if installer == "uv":
        target = f" --python {python}" if python else ""
        return f"uv pip {action}{target} {' '.join(args)}"
    yes = " -y" if action == "uninstall" else ""
    return f"{python or 'python'} -m pip {action}{yes} {' '.join(args)}"


def plain_pip(ctx: Context, action: str, *args: str) -> str:
    """A pip command for this environment's interpreter, for a distribution it does not
    hold yet; on an ``EXTERNALLY-MANAGED`` interpreter with the flag pip demands."""
    from gpuenv.doctor._osowned import externally_managed

    python = ctx.env.python
    pip = f"{python} -m pip" if python else "pip"
    if externally_managed(ctx) is not None:
        return f"{pip} {action} --break-system-packages {' '.join(args)}"
    return f"{pip} {action} {' '.join(args)}"


def clash_steps(ctx: Context, keep: Owner, stray: Owner, count: int) -> list[str]:
    pin = f"{keep.name}=={keep.version}"
    return [
        f"'{pip_command(ctx, stray, 'uninstall', stray.name)}' (it deletes the {count} "
        f"shared file(s), leaving {keep.name} without them)",
        f"'{pip_command(ctx, keep, 'install', '--force-reinstall', '--no-deps', pin)}' "
        "(restores them)",
    ]


def numbered(steps: list[str]) -> str:
    return " ".join(f"{i}. {step}." for i, step in enumerate(steps, 1))


def entry_fix(ctx: Context, entry: PathEntry, names: list[str]) -> str:
    """Ordered steps that take ``entry``'s copies of ``names`` off ``sys.path``."""
    python = ctx.env.python or "python"
    check = f"check with '{python} -c \"import torch; print(torch.__file__)\"'"
    if entry.origin == _syspath.ORIGIN_PYTHONPATH:
        first = (
            f"remove {entry.path} from PYTHONPATH (unset PYTHONPATH if nothing else needs "
            "it) where it is set: your shell profile, a module or the job script"
        )
    elif entry.origin == _syspath.ORIGIN_USER_SITE:
        first = (
            f"remove the user-site copies: '{python} -m pip uninstall {' '.join(names)}' "
            f"(pip removes the first copy on sys.path, the one in {entry.path}), or set "
            "PYTHONNOUSERSITE=1 wherever this environment is used"
        )
    elif entry.origin == _syspath.ORIGIN_PTH:
        first = f"delete {entry.detail} (the .pth line that adds {entry.path})"
    else:
        first = f"find what adds {entry.path} to sys.path ({entry.detail}) and remove it"
    return f"1. {first}. 2. {check}."
