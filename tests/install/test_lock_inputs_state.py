"""What `gpuenv run` compares to say the spec changed since the install: the input files'
stamps in the project's lock state, kept by their path inside the project (a copied
checkout compares its own files, not the original's), and a hand-edited state that
names no file (a NUL byte, an empty path) is nothing to say, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpuenv import _marker


def _installed(project: Path) -> None:
    (project / _marker.PROJECT_DIR).mkdir(parents=True)
    (project / "gpuenv.toml").write_text('[project]\nname = "p"\n')
    inputs = [str(project / "gpuenv.toml"), str(project / "pyproject.toml")]
    _marker.write_lock_state(str(project), inputs=_marker.input_stamps(inputs, str(project)))


def test_a_copied_checkout_compares_its_own_files(tmp_path: Path) -> None:
    original = tmp_path / "paper"
    _installed(original)
    copy = tmp_path / "paper-copy"
    shutil.copytree(original, copy)
    assert _marker.inputs_changed(str(copy)) == []
    (copy / "gpuenv.toml").write_text('[project]\nname = "p2"\n')
    assert _marker.inputs_changed(str(copy)) == [str(copy / "gpuenv.toml")]
    assert _marker.inputs_changed(str(original)) == [], "the original's files are its own"
    (original / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    assert _marker.inputs_changed(str(original)) == [str(original / "pyproject.toml")]


def test_a_state_naming_no_file_is_nothing_to_say(tmp_path: Path) -> None:
    project = tmp_path / "p"
    _installed(project)
    state = project / _marker.PROJECT_DIR / _marker.LOCK_STATE
    data = json.loads(state.read_text())
    data["inputs"] = {"": [0, 0, "a"], "a\u0000b": [1, 2, "c"], "x": "not a stamp", "y": [1]}
    state.write_text(json.dumps(data))
    assert _marker.inputs_changed(str(project)) == []
