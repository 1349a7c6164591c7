"""A small, complete locked target for tests that need a real gpuenv.lock beside an
installed prefix (``run``, ``shell`` and ``activate`` check the prefix against it)."""

from __future__ import annotations

from gpuenv.lock.model import LockedHardware, LockedTarget, PipPackage, StackSummary


def cpu_target(name: str = "cpu", n: int = 0) -> LockedTarget:
    """A CPU target holding torch alone; ``n`` makes its content (so its prefix) distinct."""
    torch = PipPackage(
        "torch",
        "2.4.1+cpu",
        "https://t.invalid/cpu/torch-2.4.1+cpu-cp311-cp311-linux_x86_64.whl",
        "a" * 64,
    )
    return LockedTarget(
        name=name,
        input_hash=f"sha256:{n:064x}",
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
            "https://torch.invalid/whl/cpu",
        ),
        virtual_packages={},
        pip=(torch,),
    )
