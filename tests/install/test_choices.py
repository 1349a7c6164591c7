"""``install.project.choose_targets`` and ``choose_groups``: what ``gpuenv install``
installs of a project when given --target/--all and --group/--all-groups/--no-dev."""

from __future__ import annotations

import pytest

from gpuenv.errors import UsageError
from gpuenv.install.project import choose_groups, choose_targets
from gpuenv.knowledge import knowledge_base
from gpuenv.spec import Spec, parse_spec_text

SPEC = """\
[project]
name = "groups"
[stack]
python = "3.11"
[targets.cpu]
gpu = "none"
[pip]
dependencies = ["numpy"]
[pip.groups]
dev = ["pytest"]
docs = ["Sphinx"]
"""


def _spec() -> Spec:
    return parse_spec_text(SPEC, file="gpuenv.toml", kb=knowledge_base()).spec


def test_one_target_is_installed_without_being_named_several_must_be() -> None:
    assert choose_targets(["cpu"], None, every=False) == ("cpu",)
    assert choose_targets(["a", "b"], ["b"], every=False) == ("b",)
    assert choose_targets(["a", "b"], [], every=True) == ("a", "b")
    with pytest.raises(UsageError, match=r"several targets \(a, b\): say which") as err:
        choose_targets(["a", "b"], None, every=False)
    assert err.value.hint == "gpuenv install --target a (or --all)"
    with pytest.raises(UsageError, match="no target named 'c'"):
        choose_targets(["a", "b"], ["c"], every=True)


def test_dev_is_installed_unless_left_out_and_named_groups_are_normalised() -> None:
    spec = _spec()
    assert choose_groups(spec, (), every=False, dev=True) == ("dev",)
    assert choose_groups(spec, (), every=False, dev=False) == ()
    assert choose_groups(spec, ("Docs", "dev"), every=False, dev=True) == ("dev", "docs")
    assert set(choose_groups(spec, (), every=True, dev=False)) == {"dev", "docs"}
    with pytest.raises(UsageError, match=r"no dependency group 'test' \(groups: dev, docs\)"):
        choose_groups(spec, ("test",), every=False, dev=True)
