"""Output shapes of gathers, scatters and one_hot (indices addressing a tensor);
conventions in :mod:`byoc.shape_checks`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .shape_checks import AttributeProblem, Shape, check_int, check_shape, normalize_axis


def gather(x_shape: Sequence[int], indices_shape: Sequence[int], *, axis: int = 0) -> Shape:
    """x[:axis] + indices + x[axis+1:]."""
    x = check_shape(x_shape, "gather: input shape")
    idx = check_shape(indices_shape, "gather: indices shape")
    a = normalize_axis(axis, len(x), "gather")
    return (*x[:a], *idx, *x[a + 1 :])


def gather_elements(x_shape: Sequence[int], indices_shape: Sequence[int], *, axis: int = 0) -> Shape:
    """ONNX GatherElements: indices of x's rank; the output has the indices' shape."""
    op = "gather_elements"
    x = check_shape(x_shape, f"{op}: input shape")
    idx = check_shape(indices_shape, f"{op}: indices shape")
    if len(idx) != len(x) or not x:
        raise ValueError(f"{op}: indices {list(idx)} must have the input's rank {len(x)} (>= 1)")
    a = normalize_axis(axis, len(x), op)
    wider = [k for k in range(len(x)) if k != a and idx[k] > x[k]]
    if wider:  # an output element there would read past the input (ONNX Runtime refuses it too)
        k = wider[0]
        raise ValueError(
            f"{op}: indices {list(idx)} exceed the input {list(x)} along axis {k}, which is not the gathered axis"
        )
    return idx


def scatter_elements(
    x_shape: Sequence[int],
    indices_shape: Sequence[int],
    updates_shape: Sequence[int],
    *,
    axis: int = 0,
    reduction: str = "none",
) -> Shape:
    """ONNX ScatterElements: indices and updates of one shape, of x's rank -> x's shape."""
    op = "scatter_elements"
    x = check_shape(x_shape, f"{op}: input shape")
    idx = check_shape(indices_shape, f"{op}: indices shape")
    if tuple(updates_shape) != idx:
        raise ValueError(f"{op}: updates {list(updates_shape)} must have the indices' shape {list(idx)}")
    if len(idx) != len(x) or not x:
        raise ValueError(f"{op}: indices {list(idx)} must have the input's rank {len(x)} (>= 1)")
    normalize_axis(axis, len(x), op)
    return x


def gather_nd(x_shape: Sequence[int], indices_shape: Sequence[int], *, batch_dims: int = 0) -> Shape:
    """ONNX GatherND: indices (..., k) address x after its batch_dims leading axes ->
    indices[:-1] + x[batch_dims + k:]."""
    op = "gather_nd"
    x = check_shape(x_shape, f"{op}: input shape")
    idx = check_shape(indices_shape, f"{op}: indices shape")
    b = check_int(batch_dims, f"{op}: batch_dims")
    if not 0 <= b < min(len(x), len(idx) or 1):
        raise AttributeProblem(
            "batch_dims", f"{op}: batch_dims = {b} must be below both ranks ({len(x)} and {len(idx)})"
        )
    if not idx or not 1 <= idx[-1] <= len(x) - b:
        raise ValueError(f"{op}: the indices' last axis ({list(idx)}) must be 1..{len(x) - b}")
    if idx[:b] != x[:b]:
        raise AttributeProblem(
            "batch_dims", f"{op}: the first {b} axes of x {list(x)} and of the indices {list(idx)} differ"
        )
    return (*idx[:-1], *x[b + idx[-1] :])


def scatter_nd(
    x_shape: Sequence[int],
    indices_shape: Sequence[int],
    updates_shape: Sequence[int],
    *,
    reduction: str = "none",
) -> Shape:
    """ONNX ScatterND: updates of shape indices[:-1] + x[k:] -> x's shape."""
    op = "scatter_nd"
    x = check_shape(x_shape, f"{op}: input shape")
    idx = check_shape(indices_shape, f"{op}: indices shape")
    if not idx or not 1 <= idx[-1] <= len(x):
        raise ValueError(f"{op}: the indices' last axis ({list(idx)}) must be 1..{len(x)}")
    want = (*idx[:-1], *x[idx[-1] :])
    if tuple(updates_shape) != want:
        raise ValueError(f"{op}: updates {list(updates_shape)} must have the shape {list(want)}")
    return x


def one_hot(
    indices_shape: Sequence[int], values_shape: Sequence[int], *, depth: int, axis: int = -1
) -> Shape:
    """ONNX OneHot: the indices' shape with an axis of ``depth`` inserted at ``axis``
    (of the output's rank); values holds [off, on]."""
    op = "one_hot"
    idx = check_shape(indices_shape, f"{op}: indices shape")
    if math.prod(check_shape(values_shape, f"{op}: values shape")) != 2 or len(values_shape) != 1:
        raise ValueError(f"{op}: values {list(values_shape)} must have shape [2] (off, on)")
    d = check_int(depth, f"{op}: depth")
    if d < 1:
        raise AttributeProblem("depth", f"{op}: depth = {d} must be positive")
    a = normalize_axis(axis, len(idx) + 1, op)
    return (*idx[:a], d, *idx[a:])
