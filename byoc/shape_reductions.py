"""Output shapes of reductions, scans and orderings along axes: reduce, arg_reduce,
cumulative, top_k; conventions in :mod:`byoc.shape_checks`."""

from __future__ import annotations

from collections.abc import Sequence

from .shape_checks import (
    AttributeProblem,
    Flag,
    Shape,
    check_flag,
    check_int,
    check_shape,
    normalize_axes,
    normalize_axis,
)

# ------------------------------------------------------------------------------------ reductions


def reduce(x_shape: Sequence[int], *, axes: Sequence[int] | None = None, keepdims: Flag = 1) -> Shape:
    """axes None or empty: every axis. keepdims keeps reduced axes as 1."""
    x = check_shape(x_shape, "reduce: input shape")
    keep = check_flag(keepdims, "keepdims", "reduce")
    every = axes is None or len(axes) == 0
    gone = set(range(len(x))) if every else set(normalize_axes(axes, len(x), "reduce"))
    if keep:
        return tuple(1 if i in gone else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in gone)


# ------------------------------------------------------------------------ ordering and scans


def arg_reduce(
    x_shape: Sequence[int], *, axis: int = 0, keepdims: Flag = 1, select_last_index: Flag = 0
) -> Shape:
    """ONNX ArgMax/ArgMin: x without ``axis`` (or with it as 1 when keepdims); the axis
    must not be empty (an empty axis has no first maximum)."""
    op = "arg_reduce"
    x = check_shape(x_shape, f"{op}: input shape")
    a = normalize_axis(axis, len(x), op)
    keep = check_flag(keepdims, "keepdims", op)
    check_flag(select_last_index, "select_last_index", op)
    if x[a] == 0:
        raise AttributeProblem("axis", f"{op}: axis {a} of the input {list(x)} is empty: no element to pick")
    return tuple(1 if i == a else d for i, d in enumerate(x)) if keep else x[:a] + x[a + 1 :]


def cumulative(x_shape: Sequence[int], *, axis: int = 0, exclusive: Flag = 0, reverse: Flag = 0) -> Shape:
    """ONNX CumSum and CumProd: x's shape; axis in range."""
    x = check_shape(x_shape, "cumulative: input shape")
    if not x:
        raise ValueError("cumulative: the input is a scalar; it needs an axis")
    normalize_axis(axis, len(x), "cumulative")
    check_flag(exclusive, "exclusive", "cumulative")
    check_flag(reverse, "reverse", "cumulative")
    return x


def top_k(
    x_shape: Sequence[int],
    *,
    k: int,
    axis: int = -1,
    largest: Flag = 1,
    sorted: Flag = 1,  # ONNX's name
    num_outputs: int = 2,
) -> tuple[Shape, Shape]:
    """ONNX TopK: the values and their indices, both x with ``axis`` cut to k."""
    op = "top_k"
    x = check_shape(x_shape, f"{op}: input shape")
    if not x:
        raise ValueError(f"{op}: the input is a scalar; it needs an axis")
    a = normalize_axis(axis, len(x), op)
    count = check_int(k, f"{op}: k")
    if not 0 <= count <= x[a]:
        raise AttributeProblem("k", f"{op}: k = {count} must be in 0..{x[a]} (the size of axis {a})")
    check_flag(largest, "largest", op)
    check_flag(sorted, "sorted", op)
    if num_outputs != 2:
        raise ValueError(f"{op}: gives 2 outputs (values, indices), not {num_outputs}")
    out = (*x[:a], count, *x[a + 1 :])
    return out, out
