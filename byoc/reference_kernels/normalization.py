"""Normalisations: lrn, batch_norm, bias_add, softmax and log_softmax; and attention, a softmax
between two products."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import shape_checks, shape_linear_norm
from .arrays import f64


def _per_channel(p: np.ndarray, ndim: int) -> np.ndarray:
    return f64(p).reshape((1, -1) + (1,) * (ndim - 2))


def lrn(x, *, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> np.ndarray:
    """ONNX LRN: x / (bias + alpha/size * sum of x^2 over channels c-floor((size-1)/2)..c+ceil((size-1)/2))^beta."""
    shape_linear_norm.lrn(np.shape(x), size=size, alpha=alpha, beta=beta, bias=bias)
    x = f64(x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    widths = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
    squares = np.pad(x * x, widths)
    total = sliding_window_view(squares, size, axis=1).sum(axis=-1)
    return x / (bias + alpha / size * total) ** beta


def batch_norm(x, scale, bias, mean, var, *, epsilon: float = 1e-5) -> np.ndarray:
    """Inference batch normalisation over channel axis 1: scale * (x - mean) / sqrt(var + epsilon) + bias."""
    shape_linear_norm.batch_norm(*map(np.shape, (x, scale, bias, mean, var)), epsilon=epsilon)
    x = f64(x)
    scale, bias, mean, var = (_per_channel(p, x.ndim) for p in (scale, bias, mean, var))
    return (x - mean) * (scale / np.sqrt(var + epsilon)) + bias


def bias_add(x, bias, *, axis: int = 1) -> np.ndarray:
    """x + bias along ``axis`` (Relay's bias_add), in float64."""
    shape_linear_norm.bias_add(np.shape(x), np.shape(bias), axis=axis)
    x = f64(x)
    a = shape_checks.normalize_axis(axis, x.ndim, "bias_add")
    return x + f64(bias).reshape((-1,) + (1,) * (x.ndim - 1 - a))


def softmax(x, *, axis: int = -1) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    shape_linear_norm.softmax(np.shape(x), axis=axis)
    e = np.exp(_shifted(x, axis))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, *, axis: int = -1) -> np.ndarray:
    """(x - max) - log(sum(exp(x - max))) along ``axis``."""
    shape_linear_norm.softmax(np.shape(x), axis=axis)
    z = _shifted(x, axis)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _shifted(x, axis: int) -> np.ndarray:
    x = f64(x)
    return x - x.max(axis=axis, keepdims=True)


def attention(q, kt, v, scale, *bias) -> np.ndarray:
    """softmax(q @ kt * scale + bias, over the keys) @ v: the scores in float64, never
    rounded between the steps."""
    shape_linear_norm.attention(*map(np.shape, (q, kt, v, scale, *bias)))
    scores = np.matmul(f64(q), f64(kt)) * f64(scale).reshape(())
    if bias:
        scores = scores + f64(bias[0])
    return np.matmul(softmax(scores, axis=-1), f64(v))
