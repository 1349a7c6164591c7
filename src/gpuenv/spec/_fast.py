"""A valid gpuenv.toml read without pydantic: the normalised form ``_models.validate``
gives (defaults filled, keys by alias), or None for anything this reading is not sure
of, which then goes to ``_models`` (its problems are reported there, with their hints).

Why a second reading: ``_models`` costs 60-80 ms of a lock (120-150 ms in a fresh
interpreter) before the first value is checked (pydantic-core's library and the
models' schemas), and every edit of a spec pays it (``gpuenv lock`` after an edit,
``add``, ``plan``); the checks themselves take under a millisecond. This reading walks
the same models' keys with the same value checks (``_values``) and refuses what
pydantic's strict mode would: an unknown key, a key by its Python name, a value of
another type (a boolean is not an integer), a name that does not match its pattern,
two target names alike but for case. It never reports: any doubt is None.

``tests/spec/test_fast.py`` holds the two to the same answer: each table here has its
model's keys, in its order, with its defaults; and on the examples, the invalid
fixtures, a spec that sets every key and seeded mutations of them, this reading
accepts nothing ``_models`` refuses, and what both accept normalises to the same dict.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpuenv._marker import valid_target_name
from gpuenv.names import TORCH_FAMILY, normalize_name
from gpuenv.spec import _values as v

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # _models.NAME_PATTERN, whole text
_HOST_COMPILER = re.compile(r"gcc-[0-9]{1,2}")
_PLATFORMS = ("linux-64", "linux-aarch64", "osx-arm64", "win-64")


class _Unsure(Exception):
    """What this reading leaves to pydantic."""


def normalise(raw: dict[str, Any]) -> dict[str, Any] | None:
    """``raw`` (parsed TOML) as ``_models.validate`` normalises it, or None (see the
    module doc)."""
    try:
        return _spec(raw)
    except Exception:  # noqa: BLE001 - a check's refusal, or anything unforeseen: pydantic's
        return None


# --- values ---------------------------------------------------------------------------------

Check = Callable[[Any], Any]


def _text(check: Callable[[str], object] | None = None) -> Check:
    def read(value: Any) -> str:
        if type(value) is not str:
            raise _Unsure
        if check is not None:
            check(value)
        return value

    return read


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise _Unsure
    return value


def _integer(low: int, high: int) -> Check:
    def read(value: Any) -> int:
        if type(value) is not int or not low <= value <= high:
            raise _Unsure
        return value

    return read


def _or_false(check: Check) -> Check:
    """A text, or ``false`` (never ``true``)."""

    def read(value: Any) -> Any:
        return False if value is False else check(value)

    return read


def _one_of(*choices: str) -> Check:
    def read(value: Any) -> str:
        if type(value) is not str or value not in choices:
            raise _Unsure
        return value

    return read


def _list(item: Check) -> Check:
    def read(value: Any) -> list[Any]:
        if type(value) is not list:
            raise _Unsure
        return [item(x) for x in value]

    return read


def _mapping(key: Check, item: Check) -> Check:
    def read(value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise _Unsure
        return {key(k): item(x) for k, x in value.items()}

    return read


def _by_name(item: Check) -> Check:
    """A table by package or group name: "Foo" and "foo" in one is pydantic's to say."""
    table = _mapping(_name, item)

    def read(value: Any) -> dict[str, Any]:
        named: dict[str, Any] = table(value)
        if len({normalize_name(k) for k in named}) != len(named):
            raise _Unsure
        return named

    return read


def _days_by_package(item: Check) -> Check:
    """``exclude-newer-package``: a torch-family name in it is pydantic's to say."""
    table = _by_name(item)

    def read(value: Any) -> dict[str, Any]:
        days: dict[str, Any] = table(value)
        if any(normalize_name(name) in TORCH_FAMILY for name in days):
            raise _Unsure
        return days

    return read


def _name(value: Any) -> str:
    if type(value) is not str or len(value) > 64 or not _NAME.fullmatch(value):
        raise _Unsure
    return value


def _target_name(value: Any) -> str:
    if type(value) is not str or not valid_target_name(value):
        raise _Unsure
    return value


def _requirement(value: Any) -> str:
    from packaging.requirements import Requirement

    if type(value) is not str:
        raise _Unsure
    Requirement(value)  # InvalidRequirement: pydantic's to say
    return value


def _host_compiler(value: Any) -> str:
    if type(value) is not str or not _HOST_COMPILER.fullmatch(value):
        raise _Unsure
    return value


# A table's keys, in the model's order: (key, read, default). A default of _REQUIRED
# is a required key; a callable default makes a fresh value (a list, a table).
_REQUIRED = object()
Field = tuple[str, Check, Any]


def _table(value: Any, fields: tuple[Field, ...]) -> dict[str, Any]:
    if type(value) is not dict or not value.keys() <= {key for key, _, _ in fields}:
        raise _Unsure
    out: dict[str, Any] = {}
    for key, read, default in fields:
        if key in value:
            out[key] = read(value[key])
        elif default is _REQUIRED:
            raise _Unsure
        else:
            out[key] = default() if callable(default) else default
    return out


class _Model:
    """One model's table (``MODELS``: by the pydantic model's name)."""

    __slots__ = ("fields",)

    def __init__(self, *fields: Field) -> None:
        self.fields = fields

    def __call__(self, value: Any) -> dict[str, Any]:
        return _table(value, self.fields)


_PROJECT = _Model(
    ("name", _name, _REQUIRED),
    ("description", _text(), None),
    ("path", _or_false(_text(v.project_path)), None),
)
_STACK = _Model(
    ("python", _text(v.python_version), _REQUIRED),
    ("torch", _text(v.version_spec), "*"),
    ("torchvision", _or_false(_text(v.version_spec)), None),
    ("torchaudio", _or_false(_text(v.version_spec)), None),
    ("cuda", _text(v.cuda), "auto"),
    ("driver-compat", _one_of("strict", "minor"), "strict"),
    ("toolkit", _text(v.toolkit), None),
    ("same-torch", _boolean, True),
)
_TARGET_PIP = _Model(("dependencies", _list(_requirement), list))
_TARGET = _Model(
    ("gpu", _text(v.gpu), None),
    ("compute-capability", _text(v.compute_capability), None),
    ("driver", _text(v.driver), None),
    ("platform", _one_of(*_PLATFORMS), None),
    ("torch", _text(v.version_spec), None),
    ("glibc", _text(v.glibc), "2.28"),
    ("build", _one_of("pypi"), None),
    ("pip", _TARGET_PIP, None),
)
_BUILD = _Model(
    ("no-build-isolation", _boolean, None),
    ("against-torch", _boolean, None),
    ("toolkit", _boolean, None),
    ("env", _mapping(_text(v.env_name), _text(v.env_value)), dict),
    ("max-jobs", _integer(1, 1024), None),
    ("extra-archs", _list(_text(v.arch_entry)), list),
    ("build-requires", _list(_requirement), None),
    ("requires-dist", _list(_requirement), None),
    ("host-compiler", _host_compiler, None),
)
_PIP = _Model(
    ("dependencies", _list(_requirement), list),
    ("index-url", _text(v.url), None),
    ("extra-index-urls", _list(_text(v.url)), list),
    ("torch-index", _text(v.url), None),
    ("exclude-newer", _text(v.exclude_newer), None),
    ("exclude-newer-package", _days_by_package(_text(v.exclude_newer)), dict),
    ("build", _by_name(_BUILD), dict),
    ("groups", _by_name(_list(_requirement)), dict),
)


def _conda_dependencies(value: Any) -> dict[str, str] | list[str]:
    if type(value) is dict:
        return _mapping(_text(), _text())(value)  # type: ignore[no-any-return]
    return _list(_text())(value)  # type: ignore[no-any-return]


_CONDA = _Model(
    ("channels", _list(_text(v.channel)), lambda: ["conda-forge"]),
    ("dependencies", _conda_dependencies, dict),
    ("python", _boolean, True),
)
_VERIFY = _Model(
    ("extra", _list(_text()), list),
    ("timeout", _integer(10, 3600), 300),
)


def _targets(value: Any) -> dict[str, Any]:
    targets: dict[str, Any] = _mapping(_target_name, _TARGET)(value)
    if not targets or len({name.lower() for name in targets}) < len(targets):
        raise _Unsure  # none, or two names alike but for case: the models explain
    return targets


_SPEC = _Model(
    ("project", _PROJECT, _REQUIRED),
    ("stack", _STACK, _REQUIRED),
    ("targets", _targets, _REQUIRED),
    ("pip", _PIP, lambda: _PIP({})),
    ("conda", _CONDA, None),
    ("verify", _VERIFY, lambda: _VERIFY({})),
)
MODELS = {
    "SpecModel": _SPEC,
    "Project": _PROJECT,
    "Stack": _STACK,
    "Target": _TARGET,
    "TargetPip": _TARGET_PIP,
    "Pip": _PIP,
    "Build": _BUILD,
    "Conda": _CONDA,
    "Verify": _VERIFY,
}


def _spec(raw: dict[str, Any]) -> dict[str, Any]:
    return v.without_unset(_SPEC(raw))
