"""A kept Pillow pin below what the moved torchvision's wheels require moves to the nearest
release that satisfies it (companions.toml's torchvision constraints), and the report and
the written spec say why; a pin that satisfies it, or a Pillow without torchvision, stays."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.importers.conftest import Imported

# A 2020 classification repository: torch 1.4 with torchvision 0.5, Pillow pinned to the
# 5.2.0 of its first commit (torchvision 0.5 accepted pillow>=4.1.1).
OLD_VISION = """torch==1.4.0
torchvision==0.5.0
Pillow==5.2.0
numpy==1.18.1
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "paper" / "requirements.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("target", ["h100"])
def test_pillow_below_the_moved_torchvisions_floor_moves_to_the_nearest_release(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    # The H100 needs torch 2.0 (sm_90): torchvision moves to 0.15, past the 0.11 floor.
    imported = run_import(_write(tmp_path, OLD_VISION), target=target)
    assert imported.result.code == 0, imported.result.out
    vision = imported.entries("changed")["torchvision"]
    assert vision["from"] == "0.5.0"
    pillow = imported.entries("changed")["pillow"]
    assert pillow["from"] == "5.2.0"
    assert "torchvision 0.11 and later require pillow>=5.3.0,!=8.3.*" in pillow["why"]
    assert "pillow" not in imported.entries("kept")
    spec = imported.spec.read_text()
    written = "==" + pillow["to"] if pillow["to"][0].isdigit() else pillow["to"]
    assert f'"pillow{written}", #' in spec, spec
    assert "pillow==5.2.0" not in spec.lower().split("#")[0]
    if pillow["to"][0].isdigit():
        assert "is the nearest release that satisfies it" in pillow["why"]
    else:  # the nearest with wheels for the Python (8.3.2 on 3.10) is excluded: a range
        assert "the lock takes the newest release in" in pillow["why"]


@pytest.mark.parametrize("target", ["rtx4090", "cpu"])
def test_pillow_below_no_floor_of_the_moved_torchvision_moves_for_wheels_only(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    # On an RTX 4090 or a CPU, torch 1.4 moves only to the oldest series gpuenv knows (1.7):
    # its torchvision 0.8 accepts Pillow 5.2.0, which moves only because it has no wheels
    # for the Python, and the reason says so (not torchvision's floor).
    imported = run_import(_write(tmp_path, OLD_VISION), target=target)
    assert imported.result.code == 0, imported.result.out
    assert imported.torch().startswith("1.7.1+")
    changed = imported.entries("changed")
    assert changed["torchvision"]["to"] == "0.8.2"
    assert "predates gpuenv's knowledge (it starts at 1.7.0)" in changed["torch"]["why"]
    pillow = changed["pillow"]
    assert "torchvision" not in pillow["why"]
    assert "no wheel" in pillow["why"] and "for Python 3." in pillow["why"], pillow


def test_pillow_nearest_release_has_wheels_for_the_chosen_python(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # The floor (5.3.0) has no wheels for the Python the moved torch runs on: the nearest
    # release that satisfies torchvision and installs there is named.
    imported = run_import(_write(tmp_path, OLD_VISION), target="h100")
    found = re.search(r'^python = "(3\.\d+)"', imported.spec.read_text(), re.M)
    assert found is not None
    chosen = found[1]
    floors = {"3.9": "8.0.0", "3.10": "8.3.2", "3.11": "9.3.0", "3.12": "10.1.0"}
    pillow = imported.entries("changed")["pillow"]
    assert pillow["to"] == floors[chosen], (chosen, pillow)
    assert f"with wheels for Python {chosen}" in pillow["why"]
    # numpy==1.18.1 moved to the oldest release with wheels there: the Python sentence
    # names what is written, not the pin it replaced.
    assert "numpy==1.18.1 installs" not in imported.spec.read_text()
    assert (
        "1.18.1"
        not in next(a for a in imported.report["assumptions"] if a["package"] == "python")["why"]
    )


@pytest.mark.parametrize("target", ["h100", "rtx4090", "cpu"])
def test_pillow_that_satisfies_the_moved_torchvision_is_kept(
    run_import: Callable[..., Imported], tmp_path: Path, target: str
) -> None:
    text = OLD_VISION.replace("Pillow==5.2.0", "Pillow==10.2.0")
    imported = run_import(_write(tmp_path, text), target=target)
    assert imported.result.code == 0, imported.result.out
    assert imported.entries("kept")["pillow"]["to"] == "==10.2.0"
    assert "pillow" not in imported.entries("changed")
    assert '"pillow==10.2.0"' in imported.spec.read_text()


def test_pillow_without_torchvision_is_not_held_to_its_floor(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # No torchvision in the environment: nothing requires pillow>=5.3.0, and Pillow 8.3.1
    # (excluded by torchvision 0.11+ only) stays as pinned.
    text = "torch==2.1.2\nPillow==8.3.1\n"
    imported = run_import(_write(tmp_path, text), target="cpu")
    assert imported.result.code == 0, imported.result.out
    assert "pillow" not in imported.entries("changed")
    assert '"pillow==8.3.1"' in imported.spec.read_text()


def test_a_pillow_pin_the_data_cannot_move_exactly_is_one_entry_with_the_range(
    run_import: Callable[..., Imported], tmp_path: Path
) -> None:
    # A pre-release pin with extras and a marker on a CPU target: the nearest release with
    # wheels for the Python would be excluded or unknown, so the requirement's range is
    # written, as one entry (not the Python floor's move beside it), extras and marker kept.
    # (torch 1.12 and its torchvision 0.13, past the 0.11 floor, on Python 3.10: a torch 1.4
    # would now move to 1.7 only, whose torchvision 0.8 has no such floor)
    text = "torch==1.12.1\ntorchvision==0.13.1\nPillow[extra]==5.3.0rc1 ; python_version >= '3.6'\n"
    imported = run_import(_write(tmp_path, text), target="cpu")
    assert imported.result.code == 0, imported.result.out
    pillows = [e for e in imported.report["changed"] if e["package"] == "pillow"]
    assert len(pillows) == 1, pillows
    assert "torchvision" in pillows[0]["why"]
    spec = imported.spec.read_text()
    assert "pillow[extra]" in spec and "python_version" in spec
    assert '"pillow[extra]!=8.3.*,>=5.3.0; python_version' in spec
    assert "pillow[extra]==5.3.0rc1" not in spec
