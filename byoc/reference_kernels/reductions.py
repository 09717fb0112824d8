"""Sums of products (dense, matmul) and the reduce_* ops over axes."""

from __future__ import annotations

import numpy as np

from .. import shape_checks, shape_linear_norm, shape_reductions
from .arrays import Ints, f64

# -------------------------------------------------------------------------------- linear algebra


def dense(x, w) -> np.ndarray:
    """x @ w.T, w (units, in) as Relay's dense."""
    shape_linear_norm.dense(np.shape(x), np.shape(w))
    return np.matmul(f64(x), f64(w).T)


def matmul(a, b) -> np.ndarray:
    """numpy.matmul in float64."""
    shape_linear_norm.matmul(np.shape(a), np.shape(b))
    return np.matmul(f64(a), f64(b))


# ------------------------------------------------------------------------------------ reductions


def _reduce(fn, x, axes, keepdims, **empty) -> np.ndarray:
    """``fn`` over ``axes`` in float64; ``empty`` (``initial=``) gives the value of an
    empty reduction where it has no identity (max and min)."""
    shape_reductions.reduce(np.shape(x), axes=axes, keepdims=keepdims)
    x = f64(x)
    every = axes is None or len(axes) == 0
    norm = tuple(range(x.ndim)) if every else shape_checks.normalize_axes(axes, x.ndim, "reduce")
    return fn(x, axis=norm, keepdims=bool(keepdims), **(empty if x.size == 0 else {}))


def reduce_sum(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    return _reduce(np.sum, x, axes, keepdims)


def reduce_mean(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    return _reduce(np.mean, x, axes, keepdims)


def reduce_max(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    """The maximum; of no elements -inf (ONNX's ReduceMax of an empty set)."""
    return _reduce(np.max, x, axes, keepdims, initial=-np.inf)


def reduce_min(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    """The minimum; of no elements +inf (ONNX's ReduceMin of an empty set)."""
    return _reduce(np.min, x, axes, keepdims, initial=np.inf)


def reduce_prod(x, *, axes: Ints = None, keepdims: int = 1) -> np.ndarray:
    return _reduce(np.prod, x, axes, keepdims)
