"""The CUDA toolkit a prefix uses (a pinned system one, the prefix's own, or NVIDIA's
wheels gathered under ``<prefix>/cuda``) and the activation scripts written from it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from gpuenv import _proc
from gpuenv._fs import writing
from gpuenv.errors import InstallError
from gpuenv.install.request import InstallRequest
from gpuenv.lock.model import LockedTarget
from gpuenv.store import Store

if TYPE_CHECKING:
    pass


def _nvcc_version(nvcc: Path) -> str | None:
    result = _proc.run([nvcc, "--version"], timeout=60, check=False, what="nvcc --version")
    match = re.search(r"release (\d+\.\d+)", result.stdout)
    return match.group(1) if match else None


def cuda_home(prefix: Path, target: LockedTarget, toolkit: str | None) -> Path | None:
    """Where CUDA_HOME points: a pinned system toolkit (checked), the prefix's own
    toolkit (conda's nvcc in <prefix>/bin), or nothing."""
    if toolkit is None:
        return None
    if toolkit.startswith("system:"):
        home = Path(toolkit.removeprefix("system:"))
        found = _nvcc_version(home / "bin" / "nvcc") if (home / "bin" / "nvcc").exists() else None
        if found != target.stack.cuda:
            raise InstallError(
                f"the pinned toolkit {home} has CUDA {found or 'no nvcc'}; "
                f"the lock's torch is built for CUDA {target.stack.cuda}",
                hint=f'pin a CUDA {target.stack.cuda} toolkit, or use toolkit = "auto"',
            )
        return home
    if (prefix / "bin" / "nvcc").exists():
        return prefix
    wheel_home = _assemble_wheel_toolkit(prefix)
    if wheel_home is None:
        raise InstallError(
            f"toolkit = {toolkit!r}, but the lock for {target.name} holds no nvcc",
            hint="run 'gpuenv lock' so the toolkit packages are locked",
        )
    return wheel_home


def _nvidia_dirs(prefix: Path) -> list[Path]:
    return sorted(prefix.glob("lib/python3*/site-packages/nvidia/*"))


def _assemble_wheel_toolkit(prefix: Path) -> Path | None:
    """NVIDIA's toolkit wheels spread bin/, include/ and lib/ over site-packages/nvidia/*:
    gather them under <prefix>/cuda with symlinks so CUDA_HOME has the usual layout."""
    nvcc = next(
        (d / "bin" / "nvcc" for d in _nvidia_dirs(prefix) if (d / "bin" / "nvcc").exists()), None
    )
    if nvcc is None:
        return None
    home = prefix / "cuda"
    with writing(home, "the prefix's CUDA toolkit links"):
        for part, alias in (("bin", "bin"), ("include", "include"), ("lib", "lib64")):
            (home / alias).mkdir(parents=True, exist_ok=True)
            for source in _nvidia_dirs(prefix):
                for entry in sorted((source / part).glob("*")) if (source / part).is_dir() else []:
                    link = home / alias / entry.name
                    if not link.exists():
                        link.symlink_to(entry)
    return home


def library_dirs(prefix: Path) -> tuple[Path, ...]:
    dirs = [prefix / "lib"] if (prefix / "conda-meta").is_dir() else []
    dirs.extend(d / "lib" for d in _nvidia_dirs(prefix) if (d / "lib").is_dir())
    return tuple(dirs)


def jit_arch_list(target: LockedTarget) -> str | None:
    """``TORCH_CUDA_ARCH_LIST`` for ``torch.utils.cpp_extension.load`` in the prefix: the
    target's archs, kept within what the toolkit of torch's CUDA compiles for (torch 1.12's
    own cpp_extension refuses 8.9: "Unknown CUDA arch"). None for a CPU build."""
    if target.stack.cuda is None:
        return None
    from gpuenv.builds.model import arch_list  # a CUDA build's only
    from gpuenv.knowledge import nvcc_arch_max

    return arch_list(
        target.hardware.compute_capabilities,
        nvcc_max=nvcc_arch_max(target.stack.cuda),
        torch_archs=target.stack.arch_list,
    )


def write_activation(
    prefix: Path, store: Store, request: InstallRequest, home: Path | None
) -> None:
    # imported here: an install that finds its prefix current writes no scripts
    from gpuenv.activation import ActivationInputs, write_activation_files
    from gpuenv.shells import write_shell_entrypoints

    target = request.target
    jit_archs = jit_arch_list(target)
    inputs = ActivationInputs(
        prefix=prefix,
        name=f"{request.env_name}:{target.name}",
        store_root=store.prefixes,
        bin_dirs=(prefix / "bin",),
        lib_dirs=library_dirs(prefix),
        cuda_home=home,
        cuda_version=target.stack.cuda,
        torch_arch_list=jit_archs,
        torch_extensions_dir=store.torch_extensions_dir(prefix),
    )
    write_activation_files(prefix, inputs)
    write_shell_entrypoints(prefix)
