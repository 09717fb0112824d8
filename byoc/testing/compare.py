"""Comparing a backend's result with the numpy reference, at the tolerance of its dtype."""

from __future__ import annotations

import numpy as np

TOLERANCE = {
    "float32": (2e-4, 1e-5),
    "float64": (1e-9, 1e-12),
    "float16": (4e-3, 1e-3),
    "bfloat16": (3e-2, 8e-3),
}
"""(rtol, atol relative to the largest finite reference magnitude) per dtype: backends
sum in other orders than numpy (convolutions, reductions), so results differ by rounding.
float16 and bfloat16 are computed in float32 (the reference in float64), and a value
one rounding apart is one of their ulps (2**-10 and 2**-7 relative) away. Integer and
bool results must be equal."""


def mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why ``got`` differs from the reference ``want``, or None when it matches: the same
    dtype and shape, NaN exactly where the reference is NaN (a domain error, or a NaN
    carried on through maximum, relu, a max pool, ...), the same infinities, and the
    finite values within :data:`TOLERANCE` of the dtype (integers and bool: equal)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype}{list(got.shape)}, the reference is {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f" and str(want.dtype) not in TOLERANCE:  # integers and bool
        wrong = got != want
        if not wrong.any():
            return None
        return f"{int(wrong.sum())} of {want.size} elements differ, {_first(got, want, wrong)}"
    rtol, atol = TOLERANCE.get(str(want.dtype), TOLERANCE["float32"])
    got, want = got.astype(np.float64), want.astype(np.float64)  # bfloat16 (ml_dtypes) too
    finite = np.isfinite(want)
    special = ~finite & ~((got == want) | (np.isnan(got) & np.isnan(want)))
    if special.any():
        return f"{int(special.sum())} non-finite elements differ, {_first(got, want, special)}"
    scale = max(1.0, float(np.abs(want[finite]).max())) if finite.any() else 1.0
    with np.errstate(invalid="ignore"):  # inf - inf where the reference is not finite
        error = np.where(finite, np.abs(got - want), 0.0)
    error = np.where(np.isnan(error), np.inf, error)  # a NaN where the reference is finite
    wrong = error > atol * scale + rtol * np.abs(np.where(finite, want, 0.0))
    if not wrong.any():
        return None
    return (
        f"max abs error {float(error.max()):.6g} (rtol {rtol:g}, atol {atol * scale:g}); "
        f"{int(wrong.sum())} of {want.size} elements differ, {_first(got, want, wrong)}"
    )


def _first(got: np.ndarray, want: np.ndarray, wrong: np.ndarray) -> str:
    at = tuple(int(i) for i in np.argwhere(wrong)[0])
    return f"first at {list(at)}: got {_scalar(got[at])}, want {_scalar(want[at])}"


def _scalar(x: np.generic) -> str:
    value = x.item()
    return f"{value:.7g}" if isinstance(value, float) else repr(value)


def check_close(got: np.ndarray, want: np.ndarray, context: str = "") -> None:
    """Raise an AssertionError (naming ``context``) unless :func:`mismatch` finds nothing."""
    why = mismatch(got, want)
    if why is not None:
        raise AssertionError(f"{why}\n{context}" if context else why)
