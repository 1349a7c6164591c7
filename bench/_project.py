"""A benchmark project on the tests' local index (real wheels, served on loopback), so
every tool resolves and installs the same inputs with no network."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from _timing import REPO

sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from tests.fixtures.pkgindex.index import Seen, serve
from tests.fixtures.pkgindex.plugin import build_tree

REQUIREMENTS = ["torch==2.4.1", "torchvision==0.19.1", "torchaudio==2.4.1", "transformers>=4.44"]


@dataclass(frozen=True)
class Bench:
    root: Path
    default_index: str
    torch_base: str
    env: dict[str, str]

    def spec(self, target: str) -> str:
        gpu = 'gpu = "H100"\ndriver = "550.54.15"' if target == "h100" else 'gpu = "none"'
        deps = ", ".join(f'"{r}"' for r in REQUIREMENTS[3:])
        return (
            f'[project]\nname = "bench"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n'
            f'torchvision = "*"\ntorchaudio = "*"\n[targets.{target}]\n{gpu}\n'
            f'[pip]\nindex-url = "{self.default_index}"\ntorch-index = "{self.torch_base}"\n'
            f"dependencies = [{deps}]\n"
        )


def scale_names(count: int) -> list[str]:
    return [f"benchpkg-{n:03d}" for n in range(count)]


def _scale_wheels(tree: Path, count: int) -> None:
    """``count`` small pure wheels on the default index (benchpkg-000, ...), a chain
    of ten per group so the resolver follows dependency edges too."""
    from tests.fixtures.pkgindex.index import write_index
    from tests.fixtures.pkgindex.wheels import WheelSpec

    names = scale_names(count)
    wheels = [
        WheelSpec(name, "1.0", requires=(f"{names[i + 1]}>=1",) if (i + 1) % 10 else ())
        for i, name in enumerate(names)
    ]
    if wheels:
        write_index(tree, "simple", wheels, files_path="files")


@contextlib.contextmanager
def bench_index(root: Path, *, packages: int = 0, seen: Seen | None = None) -> Iterator[Bench]:
    """The tests' index served on loopback, plus ``packages`` generated wheels."""
    tree = root / "index"
    build_tree(tree)
    _scale_wheels(tree, packages)
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "GPUENV_"))}
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        GPUENV_HOME=str(root / "store"),
        PIP_CONFIG_FILE=os.devnull,  # the machine's pip mirror config would skew pip
        UV_CACHE_DIR=str(home / ".cache" / "uv"),
    )
    with serve(tree, seen=seen) as url:
        yield Bench(root, f"{url}/simple", f"{url}/whl", env)


# Issue 28's own measurement: an H100 target on the default index's torch 2.9.1 build
# (cu128) with transformers, accelerate and datasets (66 pins, about 3.9 GiB).
PYPI_REQUIREMENTS = ["torch==2.9.1", "transformers", "accelerate", "datasets"]
# Without torchvision and torchaudio, as the issue measured it (66 pins), so that uv's
# anchor and gpuenv resolve the same request (with them gpuenv resolved two packages more).
PYPI_SPEC = (
    '[project]\nname = "bench"\n[stack]\npython = "3.11"\ntorch = "2.9.1"\ncuda = "12.8"\n'
    "torchvision = false\ntorchaudio = false\n"
    '[targets.h100]\ngpu = "H100"\ndriver = "570.133.20"\n'
    '[pip]\ndependencies = ["transformers", "accelerate", "datasets"]\n'
)
