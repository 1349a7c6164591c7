"""Targets for another operating system: macOS on Apple silicon (``osx-arm64``) and
Windows (``win-64``). gpuenv plans, locks and exports them on any machine; installing,
running and verifying them happens on their own machines. Standard library only: the
``gpuenv run`` path imports it.
"""

from __future__ import annotations

# platform -> (what the machines are, platform.system() there)
FOREIGN = {
    "osx-arm64": ("a Mac with Apple silicon (macOS, arm64)", "Darwin"),
    "win-64": ("a Windows x86_64 machine", "Windows"),
}


def platform_of(platform: object, gpu: object) -> str | None:
    """A spec target's platform as declared, or implied by ``gpu = "mps"``."""
    if isinstance(platform, str):
        return platform
    if isinstance(gpu, str) and gpu.strip().lower() == "mps":
        return "osx-arm64"
    return None


def foreign_problem(name: str, platform: str | None, action: str) -> str | None:
    """The one line refusing to ``action`` target ``name`` here, or None when this
    machine runs the target's operating system (or the target is a Linux one)."""
    if platform not in FOREIGN:
        return None
    import platform as _platform  # only for a foreign target: 1.5 ms of import

    where, system = FOREIGN[platform]
    here = _platform.system()
    if here == system:
        return None
    machine = _platform.machine() or "unknown machine"
    return (
        f"target {name} is for {platform}: {action} it on {where}, with this project and "
        f"its lock there; this machine is {here} {machine}"
    )


def refuse(name: str, platform: str | None, action: str) -> None:
    """Raise the refusal (exit 2) when ``name`` is another operating system's target."""
    problem = foreign_problem(name, platform, action)
    if problem is not None:
        from gpuenv.errors import UsageError

        raise UsageError(
            problem,
            hint=f"here: gpuenv lock, gpuenv export requirements --target {name}",
        )
