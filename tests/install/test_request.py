"""``install.request_for``: the one place an install request is made from the project,
its lock and the settings lock ran with (``gpuenv install``, ``add`` and ``install
--from``), and ``LockOptions.from_settings``, the one place those options are made."""

from __future__ import annotations

from pathlib import Path

from gpuenv._artifacts import ArtifactSources
from gpuenv._network import Mirrors
from gpuenv.hardware import HardwareFacts
from gpuenv.install import request_for
from gpuenv.knowledge import knowledge_base
from gpuenv.lock.options import LockOptions, LockSettings
from gpuenv.spec import LoadedSpec, parse_spec_text
from tests.locked import cpu_target

# A private mirror of both indexes, with a token in the torch index's URL, as a lab's
# gpuenv.toml names them.
SPEC = """\
[project]
name = "lab"
[stack]
python = "3.11"
[pip]
index-url = "https://pypi.lab.invalid/simple"
extra-index-urls = ["https://wheels.lab.invalid/simple"]
torch-index = "https://ci:tok@torch.lab.invalid/whl"
[targets.cpu]
gpu = "none"
"""


def _loaded(text: str = SPEC, where: Path = Path("/work/proj")) -> LoadedSpec:
    return parse_spec_text(text, file=str(where / "gpuenv.toml"), kb=knowledge_base())


def test_an_install_names_the_indexes_the_lock_used_with_their_credentials() -> None:
    loaded = _loaded()
    request = request_for(loaded, cpu_target(), LockOptions(), ArtifactSources(), groups=("dev",))
    named = {i.name: (i.url, i.username, i.password) for i in request.indexes}
    assert named["gpuenv-torch"] == ("https://torch.lab.invalid/whl/cpu", "ci", "tok")
    assert named["gpuenv-extra-1"][0] == "https://wheels.lab.invalid/simple"
    assert len(named) == 3 and not request.offline and request.groups == ("dev",)
    assert request.project == Path("/work/proj") and request.env_name == "lab"


def test_the_overrides_lock_ran_with_are_the_indexes_install_declares() -> None:
    options = LockOptions(
        torch_index="https://mirror.invalid/torch/", index_url="https://m.invalid/s"
    )
    request = request_for(_loaded(), cpu_target(), options, ArtifactSources())
    urls = [i.url for i in request.indexes]
    assert urls == [
        "https://m.invalid/s",
        "https://wheels.lab.invalid/simple",
        "https://mirror.invalid/torch/cpu",
    ]


def test_an_archive_installs_offline_from_its_own_files_only() -> None:
    request = request_for(_loaded(), cpu_target(), None, ArtifactSources())
    assert request.offline and request.indexes == () and request.groups == ()
    assert request.local is None and request.channels == ()


def test_options_detect_this_machine_only_for_a_spec_that_asks() -> None:
    asked: list[str] = []

    def detect() -> HardwareFacts:
        asked.append("detect")
        raise AssertionError("a spec without a detect target detected the machine")

    mirrors = Mirrors()
    settings = LockSettings(
        torch_index="https://t.invalid/whl", cache_dir=Path("/c"), mirrors=mirrors, detect=detect
    )
    options = LockOptions.from_settings(settings, _loaded().spec, targets=("cpu",), upgrade=True)
    assert asked == [] and options.detected is None
    assert options == LockOptions(
        targets=("cpu",),
        upgrade=True,
        torch_index="https://t.invalid/whl",
        cache_dir=Path("/c"),
        mirrors=mirrors,
    )


def test_options_of_a_detect_spec_carry_this_machine_detected_once() -> None:
    facts = object()
    calls: list[object] = []

    def detect() -> HardwareFacts:
        calls.append(facts)
        return facts  # type: ignore[return-value]

    text = SPEC.replace('[targets.cpu]\ngpu = "none"', '[targets.here]\ngpu = "detect"')
    loaded = parse_spec_text(text, file="gpuenv.toml")
    options = LockOptions.from_settings(LockSettings(detect=detect), loaded.spec)
    assert calls == [facts] and options.detected is facts and options.targets is None
