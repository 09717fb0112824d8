"""What the dnnl tests share: how close a oneDNN result must be to the reference, and
DSL constants for the weights that `_const` patterns pack at init."""

from __future__ import annotations

import numpy as np

RTOL = ATOL = 1e-4
"""float32 sums of up to a few hundred terms, in oneDNN's order (or through Winograd's
transforms): relative to each element, and (for the elements where a sum cancels) to
the largest one."""


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale)


def const(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> str:
    """A DSL constant of ``shape`` with seeded values in [low, high)."""
    values = ", ".join(repr(float(v)) for v in rng.uniform(low, high, shape).astype(np.float32).ravel())
    return f"const float32[{', '.join(map(str, shape))}] [{values}]"
