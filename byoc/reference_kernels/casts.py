"""Dtype conversions: cast, bitcast, quantize_linear and dequantize_linear."""

from __future__ import annotations

import numpy as np

from ..ir import is_float
from .arrays import wide


def cast(x, *, to: str) -> np.ndarray:
    """byoc's cast rule: to bool ``x != 0`` (NaN is true); bool to a number 0 or 1; float
    to integer: NaN is 0, else truncated toward zero and saturated to the target's range;
    integer to integer: wrapped modulo 2**bits; to a float type: rounded to nearest even
    (float64 to bfloat16 through float32, as ml_dtypes and ONNX Runtime do)."""
    x = np.asarray(x)
    src = str(x.dtype)
    if to == "bool":
        return wide(x) != 0
    if src == "bool":
        return x.astype(np.uint8).astype(to)
    if is_float(to):
        if to == "bfloat16" and src == "float64":
            x = x.astype(np.float32)
        with np.errstate(over="ignore"):
            return x.astype(to)
    if is_float(src):
        info = np.iinfo(to)
        w = np.trunc(np.nan_to_num(wide(x), nan=0.0, posinf=np.inf, neginf=-np.inf))
        above = w >= 2.0 ** (info.bits - (1 if info.min < 0 else 0))
        below = w < float(info.min)
        inside = np.where(above | below, 0.0, w).astype(to)
        return np.where(above, np.array(info.max, to), np.where(below, np.array(info.min, to), inside))
    return x.astype(to)


def bitcast(x, *, to: str) -> np.ndarray:
    """ONNX BitCast: each element's bits as the dtype ``to`` of the same width (the shape
    rule checks it), converting no value: numpy's ``view``, as C's memcpy."""
    return np.asarray(x).view(to)


def dequantize_linear(x, scale, zero_point) -> np.ndarray:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale``, x and the zero point
    converted to float32 first and the product taken in float32, as ONNX's reference
    computes it (the caller rounds it to the scale's dtype); numpy broadcasting."""
    f32 = np.float32
    return (np.asarray(x).astype(f32) - np.asarray(zero_point).astype(f32)) * np.asarray(scale).astype(f32)


def quantize_linear(x, scale, zero_point) -> np.ndarray:
    """ONNX QuantizeLinear: ``x / scale`` in float32, rounded half to even, plus the
    zero point, saturated to the zero point's dtype (NaN gives the range's low end, as
    onnxruntime's does; ONNX leaves it undefined); numpy broadcasting."""
    zero_point = np.asarray(zero_point)
    info = np.iinfo(zero_point.dtype)
    with np.errstate(all="ignore"):
        q = np.rint(np.asarray(x, np.float32) / np.asarray(scale, np.float32)).astype(np.float64)
        q = q + zero_point.astype(np.float64)
    q = np.where(np.isnan(q), info.min, np.clip(q, info.min, info.max))
    return q.astype(zero_point.dtype)
