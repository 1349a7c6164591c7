"""Whether a parsed gpuenv.lock certainly passes ``_models``' schema, answered without
pydantic: True only when every key and value is one the models accept; False for
anything else, which then goes to ``_models`` for its problems and their locations.

Why: ``lock.format`` skips the schema for bytes it has seen pass, but a lock it has
not seen (a fresh clone, a pull, a new gpuenv, emptied caches) paid for pydantic
before its first pin was read: 90-140 ms of a relock or an install with cold caches,
nearly all of it pydantic-core's library and the models' schemas, the walk itself
about a millisecond. The models stay the authority; this only says "nothing to report".

Strict as the models are: a value of another type (a boolean is not an integer), an
unknown key, a key by its Python name (the models accept ``content_hash``; this says
False and leaves it to them), a hash that breaks its pattern. ``tests/lock/test_plain.py``
holds the two to one answer: each table here has its model's keys and requiredness,
and on real locks and seeded mutations of them, this never says True where the models
report a problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MD5 = re.compile(r"[0-9a-f]{32}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def _text(value: Any) -> bool:
    return type(value) is str


def _matching(pattern: re.Pattern[str]) -> Check:
    return lambda value: type(value) is str and pattern.fullmatch(value) is not None


def _one_of(*choices: str) -> Check:
    return lambda value: type(value) is str and value in choices


def _boolean(value: Any) -> bool:
    return type(value) is bool


def _integer(low: int | None = None) -> Check:
    return lambda value: type(value) is int and (low is None or value >= low)


def _texts(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def _text_table(value: Any) -> bool:
    return type(value) is dict and all(type(item) is str for item in value.values())


def _list_of(item: Check) -> Check:
    return lambda value: type(value) is list and all(item(x) for x in value)


def _table_of(item: Check) -> Check:
    return lambda value: type(value) is dict and all(item(x) for x in value.values())


class Model:
    """One model's table: key -> (check, required). ``MODELS`` names each by its
    pydantic model."""

    __slots__ = ("fields",)

    def __init__(self, **fields: tuple[Check, bool]) -> None:
        self.fields = {key.replace("_", "-"): field for key, field in fields.items()}

    def __call__(self, value: Any) -> bool:
        if type(value) is not dict or not value.keys() <= self.fields.keys():
            return False
        for key, (check, required) in self.fields.items():
            if key in value:
                if not check(value[key]):
                    return False
            elif required:
                return False
        return True


_REQUIRED, _OPTIONAL = True, False

_HARDWARE = Model(
    cpu=(_boolean, _REQUIRED),
    gpu=(_text, _OPTIONAL),
    compute_capabilities=(_texts, _OPTIONAL),
    driver=(_text, _OPTIONAL),
    driver_cuda=(_text, _OPTIONAL),
    source=(_text, _REQUIRED),
)
_STACK = Model(
    python=(_text, _REQUIRED),
    cuda=(_text, _OPTIONAL),
    cu_tag=(_text, _REQUIRED),
    torch=(_text, _REQUIRED),
    torchvision=(_text, _OPTIONAL),
    torchaudio=(_text, _OPTIONAL),
    cudnn=(_text, _OPTIONAL),
    nccl=(_text, _OPTIONAL),
    arch_list=(_texts, _OPTIONAL),
    index=(_text, _REQUIRED),
)
_CONDA = Model(
    name=(_text, _REQUIRED),
    version=(_text, _REQUIRED),
    build=(_text, _REQUIRED),
    build_number=(_integer(), _REQUIRED),
    channel=(_text, _REQUIRED),
    subdir=(_text, _REQUIRED),
    url=(_text, _REQUIRED),
    sha256=(_matching(_SHA256), _REQUIRED),
    md5=(_matching(_MD5), _REQUIRED),
    depends=(_texts, _OPTIONAL),
    constrains=(_texts, _OPTIONAL),
    size=(_integer(), _OPTIONAL),
    noarch=(_one_of("python", "generic"), _OPTIONAL),
)
_PIP = Model(
    name=(_text, _REQUIRED),
    version=(_text, _REQUIRED),
    url=(_text, _REQUIRED),
    sha256=(_matching(_SHA256), _REQUIRED),
    size=(_integer(0), _OPTIONAL),
    index=(_text, _OPTIONAL),
    requires=(_texts, _OPTIONAL),
)
_BUILD = Model(
    name=(_text, _REQUIRED),
    version=(_text, _REQUIRED),
    identity=(_matching(_DIGEST), _REQUIRED),
    source=(_one_of("sdist", "git"), _REQUIRED),
    url=(_text, _REQUIRED),
    sha256=(_matching(_SHA256), _OPTIONAL),
    commit=(_matching(_COMMIT), _OPTIONAL),
    requires=(_texts, _OPTIONAL),
    max_jobs=(_integer(1), _OPTIONAL),
    against_torch=(_boolean, _REQUIRED),
    no_build_isolation=(_boolean, _REQUIRED),
    torch=(_text, _OPTIONAL),
    torch_sha256=(_matching(_SHA256), _OPTIONAL),
    cuda=(_text, _OPTIONAL),
    toolkit=(_text, _OPTIONAL),
    arch_list=(_text, _OPTIONAL),
    python=(_text, _REQUIRED),
    platform=(_text, _REQUIRED),
    host_compiler=(_text, _OPTIONAL),
    build_requires=(_texts, _OPTIONAL),
    env=(_text_table, _OPTIONAL),
)
_WHEEL_FACTS = Model(
    requires_python=(_text, _OPTIONAL),
    cuda_runtime=(_text, _OPTIONAL),
    cudnn=(_text, _OPTIONAL),
    nccl=(_text, _OPTIONAL),
    torchvision_requires=(_text, _OPTIONAL),
    torchaudio_requires=(_text, _OPTIONAL),
)
_TARGET = Model(
    content_hash=(_matching(_DIGEST), _REQUIRED),
    input_hash=(_text, _REQUIRED),
    platform=(_text, _REQUIRED),
    hardware=(_HARDWARE, _REQUIRED),
    stack=(_STACK, _REQUIRED),
    virtual_packages=(_text_table, _OPTIONAL),
    conda=(_list_of(_CONDA), _OPTIONAL),
    pip=(_list_of(_PIP), _OPTIONAL),
    builds=(_list_of(_BUILD), _OPTIONAL),
    wheel_facts=(_WHEEL_FACTS, _OPTIONAL),
    groups=(_table_of(_texts), _OPTIONAL),
)
_LOCK = Model(
    lock_version=(_integer(), _REQUIRED),
    spec_hash=(_text, _REQUIRED),
    targets=(_table_of(_TARGET), _OPTIONAL),
)
MODELS = {
    "LockFileModel": _LOCK,
    "TargetModel": _TARGET,
    "HardwareModel": _HARDWARE,
    "StackModel": _STACK,
    "CondaModel": _CONDA,
    "PipModel": _PIP,
    "BuildModel": _BUILD,
    "WheelFactsModel": _WHEEL_FACTS,
}


def conforms(raw: dict[str, Any]) -> bool:
    """True when ``raw`` (a parsed lock) certainly passes ``_models``' schema (see the
    module doc); False for a problem or any doubt."""
    try:
        return _LOCK(raw)
    except Exception:  # noqa: BLE001 - anything unforeseen is a doubt: the models decide
        return False
