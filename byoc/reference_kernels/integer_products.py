"""ONNX's integer products, ConvInteger and MatMulInteger: the codes less their zero
points, multiplied and summed exactly, as int32.

The sums are computed in float64, where every partial sum is an exact integer as long
as it stays below 2**53 (a product of centred 8-bit codes is at most 255 * 255 in
magnitude, so any order of summation of fewer than 1.4e11 terms is exact), and then
wrapped to int32 as ONNX's int32 accumulation wraps: modulo 2**32, the same result in
every order of summation.
"""

from __future__ import annotations

import numpy as np

from .. import shape_integer
from .arrays import Ints
from .conv_pool import conv
from .reductions import matmul


def _centred(codes, zero, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The codes less their zero point, in float64 (a per-channel zero point placed by ``shape``)."""
    zero = np.asarray(zero, np.float64)
    if shape is not None and zero.size > 1:
        zero = zero.reshape(shape)
    return np.asarray(codes, np.float64) - (zero if zero.size > 1 else zero.reshape(()))


def _wrapped(exact: np.ndarray) -> np.ndarray:
    return exact.astype(np.int64).astype(np.int32)


def conv_integer(
    x, w, x_zero, w_zero, *, strides: Ints = None, pads: Ints = None, dilations: Ints = None, groups: int = 1
) -> np.ndarray:
    """conv(x - x_zero, w - w_zero) in int32; w's zero point one value or one per output channel."""
    shape_integer.conv_integer(
        np.shape(x), np.shape(w), np.shape(x_zero), np.shape(w_zero),
        strides=strides, pads=pads, dilations=dilations, groups=groups,
    )  # fmt: skip
    w_c = _centred(w, w_zero, (-1,) + (1,) * (np.ndim(w) - 1))
    return _wrapped(
        conv(_centred(x, x_zero), w_c, strides=strides, pads=pads, dilations=dilations, groups=groups)
    )


def matmul_integer(a, b, a_zero, b_zero) -> np.ndarray:
    """(a - a_zero) @ (b - b_zero) in int32; b's zero point one value or one per column."""
    shape_integer.matmul_integer(np.shape(a), np.shape(b), np.shape(a_zero), np.shape(b_zero))
    return _wrapped(matmul(_centred(a, a_zero), _centred(b, b_zero, (-1,))))
