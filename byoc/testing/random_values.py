"""Random values of a drawn graph's parameters, each in its range (by default its dtype's)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from byoc.ir import TensorType, is_integer

from .statements import Param

SIGNED_RANGE = (-4, 4)
UNSIGNED_RANGE = (0, 4)
FLOAT_RANGE = (-1.0, 1.0)
"""The values of a parameter whose strategy sets no range, by the kind of its dtype."""


def random_inputs(params: Sequence[Param], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random values of ``params``, each in its range (see :func:`random_array`)."""
    return {p.value.name: random_array(p.value.type, rng, p.low, p.high) for p in params}


def random_array(
    t: TensorType, rng: np.random.Generator, low: float | None = None, high: float | None = None
) -> np.ndarray:
    """Random values of type ``t`` in ``low..high``, by default its dtype's range:
    :data:`FLOAT_RANGE`, :data:`SIGNED_RANGE` or :data:`UNSIGNED_RANGE`."""
    if t.dtype == "bool":
        return rng.integers(0, 2, size=t.shape).astype(bool)
    if is_integer(t.dtype):
        default = UNSIGNED_RANGE if t.dtype.startswith("u") else SIGNED_RANGE
        low, high = _or(low, default[0]), _or(high, default[1])
        return rng.integers(int(low), int(high) + 1, size=t.shape).astype(t.dtype)
    low, high = _or(low, FLOAT_RANGE[0]), _or(high, FLOAT_RANGE[1])
    return rng.uniform(low, high, size=t.shape).astype(t.dtype)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
