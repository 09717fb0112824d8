"""Output shapes of normalisation (batch_norm, lrn, softmax, prelu, bias_add) and linear
algebra (dense, matmul, attention); conventions in :mod:`byoc.shape_checks`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .shape_checks import AttributeProblem, Shape, broadcast, check_int, check_shape, normalize_axis

# ----------------------------------------------------------------------------- normalisation


def _channel_params(x_shape: Sequence[int], *param_shapes: Sequence[int], op: str) -> Shape:
    """x (N, C, ...) with every parameter of shape (C,) -> x's shape."""
    x = check_shape(x_shape, f"{op}: input shape")
    if len(x) < 2:
        raise ValueError(f"{op}: input shape {list(x)} must be (N, C, ...)")
    for i, p in enumerate(param_shapes):
        if tuple(p) != (x[1],):
            raise ValueError(
                f"{op}: parameter {i + 1} has shape {list(p)}, expected [{x[1]}] (one value per channel)"
            )
    return x


def lrn(
    x_shape: Sequence[int], *, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0
) -> Shape:
    x = _channel_params(x_shape, op="lrn")
    if check_int(size, "lrn: size") < 1:
        raise AttributeProblem("size", f"lrn: size = {size} must be positive")
    return x


def batch_norm(x_shape, scale_shape, bias_shape, mean_shape, var_shape, *, epsilon: float = 1e-5) -> Shape:
    if not epsilon >= 0:
        raise AttributeProblem("epsilon", f"batch_norm: epsilon = {epsilon} must be non-negative")
    return _channel_params(x_shape, scale_shape, bias_shape, mean_shape, var_shape, op="batch_norm")


def softmax(x_shape: Sequence[int], *, axis: int = -1) -> Shape:
    x = check_shape(x_shape, "softmax: input shape")
    normalize_axis(axis, len(x), "softmax")
    return x


def prelu(x_shape: Sequence[int], slope_shape: Sequence[int]) -> Shape:
    """slope broadcasts to x (ONNX's unidirectional broadcasting)."""
    x = check_shape(x_shape, "prelu: input shape")
    try:
        fits = broadcast(x, slope_shape) == x
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"prelu: slope shape {list(slope_shape)} does not broadcast to the input shape {list(x)}"
        )
    return x


def bias_add(x_shape: Sequence[int], bias_shape: Sequence[int], *, axis: int = 1) -> Shape:
    """Relay's bias_add: a bias of shape (x[axis],) added along ``axis`` of x -> x's shape."""
    x = check_shape(x_shape, "bias_add: input shape")
    a = normalize_axis(axis, len(x), "bias_add")
    if tuple(bias_shape) != (x[a],):
        raise ValueError(
            f"bias_add: bias shape {list(bias_shape)}, expected [{x[a]}] (axis {a} of the input {list(x)})"
        )
    return x


# -------------------------------------------------------------------------------- linear algebra


def dense(x_shape: Sequence[int], w_shape: Sequence[int]) -> Shape:
    """x (..., in), w (units, in) -> (..., units)."""
    x = check_shape(x_shape, "dense: input shape")
    w = check_shape(w_shape, "dense: weight shape")
    if len(x) < 1 or len(w) != 2:
        raise ValueError(f"dense: shapes {list(x)} and {list(w)} must be (..., in) and (units, in)")
    if x[-1] != w[1]:
        raise ValueError(
            f"dense: input's last dimension {x[-1]} does not match weight shape[1] = {w[1]} (units, in)"
        )
    return (*x[:-1], w[0])


def matmul(a_shape: Sequence[int], b_shape: Sequence[int]) -> Shape:
    """numpy.matmul: 1-D operands are promoted and the added axis removed; batch axes broadcast."""
    a = check_shape(a_shape, "matmul: first shape")
    b = check_shape(b_shape, "matmul: second shape")
    if not a or not b:
        raise ValueError(f"matmul: shapes {list(a)} and {list(b)} must both have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: inner dimensions differ: {list(a)} @ {list(b)} ({a2[-1]} != {b2[-2]})")
    try:
        batch = broadcast(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of {list(a)} and {list(b)} do not broadcast") from None
    rows = (a[-2],) if len(a) > 1 else ()
    cols = (b[-1],) if len(b) > 1 else ()
    return (*batch, *rows, *cols)


def attention(
    q_shape: Sequence[int], kt_shape: Sequence[int], v_shape: Sequence[int], scale_shape: Sequence[int], *bias
) -> Shape:
    """Scaled dot-product attention, softmax(q @ kt * scale + bias) @ v: q (..., Sq, D),
    kt (..., D, Sk: the keys transposed), v (..., Sk, Dv), scale one value, the optional
    bias broadcast to the scores (..., Sq, Sk) -> (..., Sq, Dv); the batch axes of all
    four broadcast."""
    q = check_shape(q_shape, "attention: q shape")
    kt = check_shape(kt_shape, "attention: kt shape")
    v = check_shape(v_shape, "attention: v shape")
    scale = check_shape(scale_shape, "attention: scale shape")
    if len(bias) > 1:
        raise ValueError(f"attention: takes 4 or 5 inputs (q, kt, v, scale, bias), got {4 + len(bias)}")
    if min(len(q), len(kt), len(v)) < 2:
        raise ValueError(
            f"attention: q, kt and v must have rank >= 2 (..., rows, columns), got {list(q)}, {list(kt)}, {list(v)}"
        )
    if math.prod(scale) != 1:
        raise ValueError(f"attention: scale must be one value, got shape {list(scale)}")
    if q[-1] != kt[-2]:
        raise ValueError(
            f"attention: q's last axis and kt's axis -2 differ (the head size): {list(q)} and {list(kt)}"
        )
    if kt[-1] != v[-2]:
        raise ValueError(
            f"attention: kt's last axis and v's axis -2 differ (the keys): {list(kt)} and {list(v)}"
        )
    given = check_shape(bias[0], "attention: bias shape") if bias else ()
    b = (1,) * max(0, 2 - len(given)) + given  # a bias of rank < 2 broadcasts along the rows too
    rows, keys = q[-2], kt[-1]
    if b[-2] not in (1, rows) or b[-1] not in (1, keys):
        raise ValueError(f"attention: bias {list(b)} does not broadcast to the scores (..., {rows}, {keys})")
    try:
        batch = broadcast(q[:-2], kt[:-2], v[:-2], b[:-2])
    except ValueError:
        raise ValueError(
            f"attention: batch axes of {list(q)}, {list(kt)}, {list(v)} and bias {list(b)} do not broadcast"
        ) from None
    return (*batch, rows, v[-1])
