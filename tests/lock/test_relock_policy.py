"""``lock.project.plan_relock``: the one rule for what a relock locks, which ``gpuenv
lock``, ``install`` (``ensure_lock``) and ``add``/``remove`` share."""

from __future__ import annotations

from dataclasses import replace

from gpuenv.knowledge import knowledge_base
from gpuenv.lock.format import LockReading
from gpuenv.lock.model import Lock
from gpuenv.lock.options import LockOptions
from gpuenv.lock.project import plan_relock
from gpuenv.spec import Spec, parse_spec_text
from tests.locked import cpu_target

SPEC = """\
[project]
name = "t"
[stack]
python = "3.11"
[targets.cpu]
gpu = "none"
[targets.cpu2]
gpu = "none"
[targets.cpu3]
gpu = "none"
"""


def _spec() -> Spec:
    return parse_spec_text(SPEC, file="gpuenv.toml", kb=knowledge_base()).spec


def _reading(damaged: dict[str, tuple[str, ...]]) -> LockReading:
    """A lock holding cpu intact, ``damaged``'s targets refused, and a target the spec
    dropped (gone)."""
    lock = Lock("sha256:" + "1" * 64, {"cpu": cpu_target(), "gone": cpu_target("gone", 1)})
    return LockReading("gpuenv.lock", 2, lock, damaged)


def test_a_damaged_target_is_added_to_the_targets_asked_for_with_its_problems() -> None:
    reading = _reading({"cpu3": ("the content hash does not match",)})
    relock = plan_relock(reading, _spec(), LockOptions(targets=("cpu2",)))
    assert relock.options.targets == ("cpu2", "cpu3")
    assert relock.forced == {"cpu3": ("the content hash does not match",)}
    assert relock.basis is not None and set(relock.basis.targets) == {"cpu", "gone"}


def test_every_target_stays_every_target_and_a_fresh_lock_forces_nothing() -> None:
    reading = _reading({"cpu2": ("old format",)})
    relock = plan_relock(reading, _spec(), LockOptions())
    assert relock.options.targets is None and relock.forced == {"cpu2": ("old format",)}
    clean = plan_relock(_reading({}), _spec(), LockOptions(targets=("cpu",)))
    assert clean.options == LockOptions(targets=("cpu",)) and clean.forced == {}


def test_a_damaged_target_the_spec_dropped_is_not_relocked() -> None:
    relock = plan_relock(_reading({"gone": ("bad",)}), _spec(), LockOptions(targets=("cpu",)))
    assert relock.options.targets == ("cpu",) and relock.forced == {}


def test_a_lock_that_cannot_be_read_starts_over_with_every_target() -> None:
    options = LockOptions(targets=("cpu",), upgrade=True)
    relock = plan_relock(None, _spec(), options, start_over=True)
    assert relock.basis is None and relock.forced == {}
    assert relock.options == replace(options, targets=None)


def test_no_lock_relocks_what_was_asked_from_nothing() -> None:
    relock = plan_relock(None, _spec(), LockOptions(targets=("cpu2",)))
    assert relock.basis is None and relock.options.targets == ("cpu2",)
