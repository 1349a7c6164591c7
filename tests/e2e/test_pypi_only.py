"""PyPI-only networks: a target whose build is PyPI's own locks and installs from the
default index alone, and the torch index, counted through the fixture server's request
log, is never asked."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from gpuenv.lock.format import read_lock
from gpuenv.plan import DEFAULT_TORCH_INDEX
from tests.e2e.conftest import Project
from tests.fixtures.pkgindex.index import Seen
from tests.fixtures.pkgindex.plugin import PkgIndex, closed_port

# H100 on driver 535 gets torch 2.4.1's cu121 build: PyPI's own.
H100_ON_535 = """[project]
name = "pypi-only"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = "*"
torchaudio = false

[targets.h100]
gpu = "H100"
driver = "535.104.05"

[pip]
index-url = "{default}"
dependencies = ["transformers>=4.44"]
"""


def torch_requests(seen: Seen) -> list[str]:
    return [path for path, _auth in seen.requests if path.startswith("/whl/")]


def torch_index_down(project: Project) -> str:
    """The PyTorch index, for ``project``'s commands, at a port nothing listens on (a
    network that reaches the default index only); its URL there."""
    down = f"http://127.0.0.1:{closed_port()}/whl"
    project.env.update(GPUENV_MIRRORS=f"{DEFAULT_TORCH_INDEX}={down}", UV_HTTP_RETRIES="0")
    return down


def test_a_pypi_default_target_never_asks_the_torch_index(
    make_project: Callable[..., Project], serve_index: Callable[..., PkgIndex]
) -> None:
    seen = Seen()
    index = serve_index(seen=seen)
    project = make_project(H100_ON_535.format(default=index.default_index))
    # The torch index, were it asked, would be the counting server's /whl/.
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={index.torch_base}"
    project.gpuenv("lock", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    h100 = lock.targets["h100"]
    torch = h100.pip_package("torch")
    assert torch is not None and torch.version == "2.4.1"
    assert torch.url.startswith(index.url + "/files/")
    assert h100.stack.index == index.default_index, "the index the wheels came from"
    result = project.gpuenv("install", "--target", "h100", "--frozen", "--json")
    assert result.returncode == 0, result.stderr
    prefix = Path(json.loads(result.stdout)["targets"]["h100"]["prefix"])
    assert prefix.is_dir()
    notes = project.gpuenv("export", "notes", "--target", "h100", check=True).stdout
    assert DEFAULT_TORCH_INDEX not in notes
    assert f"| index (torch from) | {index.default_index} |" in notes
    assert torch_requests(seen) == [], torch_requests(seen)
    assert any(path.startswith("/simple/torch/") for path, _auth in seen.requests)


CPU_FROM_PYPI = """[project]
name = "cpu-from-pypi"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = "*"
torchaudio = false

[targets.cpu]
gpu = "none"
build = "pypi"

[pip]
index-url = "{default}"
"""


def _give_the_probe_a_torch(prefix: Path, env: dict[str, str]) -> None:
    """The index's torch wheels are empty stand-ins: the test torch, as PyPI's CUDA build
    on a machine without a GPU."""
    site = next(prefix.glob("lib/python3*/site-packages"))
    fake = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torch"
    for name in ("torch", "torchvision"):
        if (site / name).exists():
            shutil.rmtree(site / name)
        shutil.copytree(fake / name, site / name)
    env["GPUENV_FAKE_TORCH"] = json.dumps(
        {"version": "2.4.1", "cuda": "12.1", "devices": [], "torchvision": "0.19.1"}
    )


def test_a_cpu_target_with_build_pypi_locks_installs_and_verifies_from_the_default_index(
    make_project: Callable[..., Project], serve_index: Callable[..., PkgIndex]
) -> None:
    seen = Seen()
    index = serve_index(seen=seen)
    project = make_project(CPU_FROM_PYPI.format(default=index.default_index))
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={index.torch_base}"
    plan = project.gpuenv("plan", check=True).stdout
    assert 'cu121 build: the target has no GPU, and build = "pypi"' in plan
    assert "several GB more to download and store than the CPU build" in plan
    project.gpuenv("lock", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    cpu = lock.targets["cpu"]
    torch = cpu.pip_package("torch")
    assert torch is not None and torch.version == "2.4.1", "PyPI's own build, unlabelled"
    assert cpu.pip_package("nvidia-cuda-runtime-cu12") is not None, "what it costs"
    assert cpu.stack.index == index.default_index
    assert "__cuda" not in cpu.virtual_packages
    result = project.gpuenv("install", "--target", "cpu", "--frozen", "--json")
    assert result.returncode == 0, result.stderr
    prefix = Path(json.loads(result.stdout)["targets"]["cpu"]["prefix"])
    _give_the_probe_a_torch(prefix, project.env)
    verify = project.gpuenv("verify", "--target", "cpu", "--json", timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert project.gpuenv("run", "--", "python", "-c", "import torch").returncode == 0
    assert torch_requests(seen) == [], torch_requests(seen)


NEEDS_THE_TORCH_INDEX = """[project]
name = "needs-torch-index"

[stack]
python = "3.11"
torch = "2.4.1"
torchvision = "*"
torchaudio = false

[targets.h100]
gpu = "H100"
driver = "550.54.15"

[targets.cpu]
gpu = "none"

[pip]
index-url = "{default}"
"""


def test_with_the_torch_index_down_lock_names_the_spec_change_that_needs_none(
    make_project: Callable[..., Project], serve_index: Callable[..., PkgIndex]
) -> None:
    """cu124 (driver 550) and the CPU build need the torch index; the hint names the
    exact change, and the spec changed so locks with the torch index still down."""
    seen = Seen()
    index = serve_index(seen=seen)
    project = make_project(NEEDS_THE_TORCH_INDEX.format(default=index.default_index))
    torch_index_down(project)
    result = project.gpuenv("lock")
    assert result.returncode == 5, result.stderr
    h100_route = (
        'to lock h100 from the default index alone, set [stack] cuda = "12.1" '
        "(for every target): torch 2.4.1 cu121 is PyPI's own build"
    )
    cpu_route = (
        'to lock cpu from the default index alone, set [targets.cpu] build = "pypi": '
        "torch 2.4.1 cu121 is PyPI's own build, a CUDA build that runs on a CPU"
    )
    assert h100_route in result.stderr and cpu_route in result.stderr
    (hint,) = [line for line in result.stderr.splitlines() if "hint:" in line]
    assert hint.count("check the URL and port") == 1, "each fix once, not once per target"
    failed = json.loads(project.gpuenv("lock", "--json").stdout)["error"]["failed"]
    assert failed["h100"]["pypi_route"] == h100_route
    # The changes as named: now nothing needs the torch index, which is still down.
    project.spec.write_text(
        project.spec.read_text()
        .replace("torchaudio = false\n", 'torchaudio = false\ncuda = "12.1"\n')
        .replace('gpu = "none"\n', 'gpu = "none"\nbuild = "pypi"\n')
    )
    project.gpuenv("lock", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    assert {t.stack.cu_tag for t in lock.targets.values()} == {"cu121"}
    assert torch_requests(seen) == []


# torch 2.5's PyPI build is cu124, which driver 535 (CUDA up to 12.2) cannot run: the
# newest torch the range allows is planned from the torch index.
RANGE_ON_535 = """[project]
name = "pypi-only"

[stack]
python = "3.11"
torch = ">=2.4,<2.6"
torchvision = "*"
torchaudio = false

[targets.h100]
gpu = "H100"
driver = "535.104.05"

[pip]
index-url = "{default}"
"""


def test_with_the_torch_index_down_lock_names_an_older_torch_pypi_builds_for_the_driver(
    make_project: Callable[..., Project], serve_index: Callable[..., PkgIndex]
) -> None:
    """No CUDA change makes PyPI's torch 2.5 run on driver 535, so the hint names the
    newest older release whose PyPI build does (2.4.1, cu121); with it, the lock needs
    no torch index."""
    seen = Seen()
    index = serve_index(seen=seen)
    project = make_project(RANGE_ON_535.format(default=index.default_index))
    torch_index_down(project)
    result = project.gpuenv("lock")
    assert result.returncode == 5, result.stderr
    route = (
        'to lock h100 from the default index alone, set [stack] torch = "2.4.1": '
        "torch 2.4.1 cu121 is PyPI's own build"
    )
    assert route in result.stderr
    project.spec.write_text(
        project.spec.read_text().replace('torch = ">=2.4,<2.6"', 'torch = "2.4.1"')
    )
    project.gpuenv("lock", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    assert lock.targets["h100"].stack.cu_tag == "cu121"
    assert lock.targets["h100"].stack.torch == "2.4.1"
    assert torch_requests(seen) == []


def test_import_with_the_torch_index_down_chooses_pypis_build_and_the_lock_needs_no_index(
    make_project: Callable[..., Project], serve_index: Callable[..., PkgIndex]
) -> None:
    """The paper's torch 2.4.1+cu124 comes from the torch index only; from a machine that
    cannot reach it, the import takes torch 2.4.1's PyPI build (cu121, which runs on an
    H100 with driver 550), says why, and the spec locks with the torch index still down."""
    seen = Seen()
    index = serve_index(seen=seen)
    project = make_project("placeholder")
    project.spec.unlink()
    paper = project.dir / "paper"
    paper.mkdir()
    (paper / "environment.yml").write_text(
        "name: paper\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n"
        "    - torch==2.4.1+cu124\n    - transformers==4.44.2\n"
    )
    down = torch_index_down(project)
    project.env.update(
        GPUENV_IMPORT_INDEX=index.default_index,
        GPUENV_INDEX_URL=index.default_index,
        GPUENV_IMPORT_TORCH_BUILDS="auto",
    )
    argv = ("import", "paper", "--gpu", "H100", "--driver", "550.54.15", "-o", "gpuenv.toml")
    result = project.gpuenv(*argv, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    said = [e["why"] for e in report["assumptions"] if e["package"] == "torch"]
    assert any(f"the PyTorch index ({down}) cannot be reached from here" in w for w in said)
    (torch,) = [e for e in report["changed"] if e["package"] == "torch"]
    assert torch["to"] == "2.4.1+cu121"
    assert "PyPI's own build of torch 2.4.1 is cu121, not CUDA 12.4" in torch["why"]
    spec = project.spec.read_text()
    assert 'torch = "2.4.1"' in spec and 'cuda = "12.1"' in spec
    project.gpuenv("lock", check=True)
    lock = read_lock(project.lock)
    assert lock is not None
    assert lock.targets["h100"].stack.cu_tag == "cu121"
    assert torch_requests(seen) == []
    # The same import where the torch index answers keeps the paper's build.
    project.env["GPUENV_MIRRORS"] = f"{DEFAULT_TORCH_INDEX}={index.torch_base}"
    again = project.gpuenv(*argv, "--force", "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    (kept,) = [e for e in json.loads(again.stdout)["kept"] if e["package"] == "torch"]
    assert kept["to"] == "2.4.1+cu124"


def test_torch_builds_pypi_asks_for_pypis_build_without_any_network(
    make_project: Callable[..., Project],
) -> None:
    """Importing on a laptop for a cluster that reaches PyPI only: --torch-builds pypi
    (or the variable) takes PyPI's builds with no request made; a bad value is refused."""
    project = make_project("placeholder")
    project.spec.unlink()
    paper = project.dir / "paper"
    paper.mkdir()
    (paper / "requirements.txt").write_text("torch==2.4.1+cu124\n")
    argv = ("import", "paper", "--gpu", "H100", "--driver", "550.54.15", "-o", "gpuenv.toml")
    result = project.gpuenv(*argv, "--torch-builds", "pypi", "--json")  # GPUENV_IMPORT_INDEX=off
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    (torch,) = [e for e in report["changed"] if e["package"] == "torch"]
    assert torch["to"] == "2.4.1+cu121"
    said = [e["why"] for e in report["assumptions"] if e["package"] == "torch"]
    assert any(w.startswith("--torch-builds pypi asks for PyPI's own builds: ") for w in said)
    project.env["GPUENV_IMPORT_TORCH_BUILDS"] = "PyPI"
    again = project.gpuenv(*argv, "--force", "--json")
    assert json.loads(again.stdout)["changed"][0]["to"] == "2.4.1+cu121"
    project.env["GPUENV_IMPORT_TORCH_BUILDS"] = "cu121"
    refused = project.gpuenv(*argv, "--force")
    assert refused.returncode == 2
    assert "GPUENV_IMPORT_TORCH_BUILDS='cu121' is not one of auto, pypi, any" in refused.stderr
    assert "Traceback" not in refused.stderr
