"""The ``GPUENV_OVERRIDE_*`` variables, read once here and passed to the library."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuenv.hardware.model import DetectOverrides


def detect_overrides(environ: Mapping[str, str] | None = None) -> DetectOverrides:
    """Overrides from the environment; an empty variable counts as absent."""
    from gpuenv.hardware.model import (
        OVERRIDE_COMPUTE_CAP_VAR,
        OVERRIDE_CUDA_DRIVER_VAR,
        DetectOverrides,
    )

    env = os.environ if environ is None else environ
    return DetectOverrides.from_values(
        cuda_driver=env.get(OVERRIDE_CUDA_DRIVER_VAR, "").strip(),
        compute_cap=env.get(OVERRIDE_COMPUTE_CAP_VAR, "").strip(),
    )
