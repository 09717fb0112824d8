"""Elementwise ops in the input's dtype (floats in float64): comparisons, isnan, isinf, rounding,
sign, mod and bit shifts."""

from __future__ import annotations

import numpy as np

from ..ir import is_float, is_integer
from .arrays import wide


def equal(a, b) -> np.ndarray:
    return np.equal(wide(a), wide(b))


def not_equal(a, b) -> np.ndarray:
    return np.not_equal(wide(a), wide(b))


def less(a, b) -> np.ndarray:
    return np.less(wide(a), wide(b))


def less_equal(a, b) -> np.ndarray:
    return np.less_equal(wide(a), wide(b))


def greater(a, b) -> np.ndarray:
    return np.greater(wide(a), wide(b))


def greater_equal(a, b) -> np.ndarray:
    return np.greater_equal(wide(a), wide(b))


def isnan(x) -> np.ndarray:
    return np.isnan(wide(x))


def isinf(x, *, detect_positive: int = 1, detect_negative: int = 1) -> np.ndarray:
    w = wide(x)
    return (np.isposinf(w) & bool(detect_positive)) | (np.isneginf(w) & bool(detect_negative))


def round_half_even(x) -> np.ndarray:
    """Round to the nearest integer, halves to even (numpy's rint, C's nearbyint)."""
    return np.rint(wide(x))


def sign(x) -> np.ndarray:
    """-1, 0 or 1 (NaN stays NaN); an unsigned input gives 0 or 1."""
    x = np.asarray(x)
    if x.dtype == bool or (is_integer(str(x.dtype)) and np.iinfo(x.dtype).min == 0):
        return (x != 0).astype(x.dtype)
    return np.sign(wide(x))


def mod(a, b, *, fmod: int = 0) -> np.ndarray:
    """ONNX Mod: with ``fmod``, C's fmod (the sign of the dividend, truncated division);
    without, the sign of the divisor (numpy's and Python's %, for floats too, as ONNX's
    reference and node tests). An integer divisor of 0 gives 0, as numpy does."""
    a, b = np.asarray(a), np.asarray(b)
    if is_float(str(a.dtype)):
        return np.fmod(wide(a), wide(b)) if fmod else np.mod(wide(a), wide(b))
    zero = b == 0
    safe = np.where(zero, np.ones((), b.dtype), b)
    r = np.fmod(a, safe) if fmod else np.mod(a, safe)
    return np.where(zero, np.zeros((), r.dtype), r)


def bit_shift(a, b, *, direction: str = "LEFT") -> np.ndarray:
    """ONNX BitShift. A shift count below 0 or of the type's width or more gives 0 (a
    right shift of a negative signed value: -1, its sign filling every bit); a right
    shift of a signed value is arithmetic; a left shift of one wraps (it shifts the
    bits of the unsigned type of its width)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bits = a.dtype.itemsize * 8
    signed = np.iinfo(a.dtype).min < 0
    out_of_range = (b < 0) | (b >= bits) if signed else b >= bits
    count = np.where(out_of_range, np.zeros((), b.dtype), b)
    if direction == "RIGHT":
        shifted = np.right_shift(a, count.astype(a.dtype))
        fill = np.where(a < 0, np.array(-1).astype(a.dtype), np.zeros((), a.dtype)) if signed else 0
    else:
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        shifted = np.left_shift(a.view(unsigned), count.astype(unsigned)).view(a.dtype)
        fill = 0
    return np.where(out_of_range, fill, shifted).astype(a.dtype)
