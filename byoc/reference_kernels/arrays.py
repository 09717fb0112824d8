"""The array conversions and the attribute type that the reference kernels share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir import is_float

Ints = Sequence[int] | None


def f64(x) -> np.ndarray:
    """``x`` as a float64 array."""
    return np.asarray(x, dtype=np.float64)


def wide(x) -> np.ndarray:
    """``x`` as an array, a float one in float64 (exact for every float dtype)."""
    x = np.asarray(x)
    return x.astype(np.float64) if is_float(str(x.dtype)) else x
