"""Indexing and ordering: argmax, argmin, gather/scatter by elements and by index tuples, cumsum,
cumprod, top_k and one_hot."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import shape_checks, shape_indexing, shape_reductions
from .arrays import wide


def _along(axis: int, rank: int, index: np.ndarray) -> tuple:
    """Index arrays addressing, for each element of ``index`` (of rank ``rank``), the
    element at its own position but at ``index`` along ``axis`` (take_along_axis's)."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[axis] = index
    return tuple(grid)


def _in_range(indices, size: int, op: str) -> np.ndarray:
    """``indices`` with negatives counted from the end of an axis of ``size``, as intp;
    ValueError when one is outside [-size, size)."""
    idx = np.asarray(indices)
    if idx.size and not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"{op}: indices have dtype {idx.dtype}, expected an integer type")
    idx = idx.astype(np.int64)
    bad = (idx < -size) | (idx >= size)
    if np.any(bad):
        raise ValueError(f"{op}: index {idx[bad].flat[0]} is out of range for axis size {size}")
    return np.where(idx < 0, idx + size, idx).astype(np.intp)


def _arg_reduce(pick, x, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    shape_reductions.arg_reduce(
        np.shape(x), axis=axis, keepdims=keepdims, select_last_index=select_last_index
    )
    w = wide(x)
    a = shape_checks.normalize_axis(axis, w.ndim, "arg_reduce")
    if select_last_index:
        found = w.shape[a] - 1 - pick(np.flip(w, axis=a), axis=a)
    else:
        found = pick(w, axis=a)
    found = found.astype(np.int64)
    return np.expand_dims(found, a) if keepdims else found


def argmax(x, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """ONNX ArgMax: the index (int64) of the first maximum along ``axis`` (the last with
    select_last_index); a NaN is the maximum, as numpy's argmax and ONNX's reference."""
    return _arg_reduce(np.argmax, x, axis, keepdims, select_last_index)


def argmin(x, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """ONNX ArgMin: as argmax, of the minimum."""
    return _arg_reduce(np.argmin, x, axis, keepdims, select_last_index)


def gather_elements(x, indices, *, axis: int = 0) -> np.ndarray:
    """ONNX GatherElements: out[i] = x[i with indices[i] along axis]; negative indices
    count from the end."""
    shape_indexing.gather_elements(np.shape(x), np.shape(indices), axis=axis)
    x = np.asarray(x)
    a = shape_checks.normalize_axis(axis, x.ndim, "gather_elements")
    return x[_along(a, x.ndim, _in_range(indices, x.shape[a], "gather_elements"))]


_SCATTER_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, where: tuple, updates: np.ndarray, reduction: str, op: str) -> np.ndarray:
    """``updates`` written into ``out`` at the index arrays ``where``: in order (the last
    of repeated indices wins), or combined with ``reduction`` (every one counts)."""
    if reduction == "none":
        out[where] = updates
    elif reduction in _SCATTER_REDUCTIONS:
        _SCATTER_REDUCTIONS[reduction].at(out, where, updates)
    else:
        raise ValueError(f"{op}: reduction {reduction!r} is not none, add, mul, max or min")
    return out


def scatter_elements(x, indices, updates, *, axis: int = 0, reduction: str = "none") -> np.ndarray:
    """ONNX ScatterElements: x with updates[i] written at i with indices[i] along axis
    (or combined by ``reduction``); floats in float64, integers in their dtype."""
    shape_indexing.scatter_elements(
        np.shape(x), np.shape(indices), np.shape(updates), axis=axis, reduction=reduction
    )
    out = np.array(wide(x), copy=True)
    a = shape_checks.normalize_axis(axis, out.ndim, "scatter_elements")
    where = _along(a, out.ndim, _in_range(indices, out.shape[a], "scatter_elements"))
    return _scatter(out, where, wide(updates).astype(out.dtype), reduction, "scatter_elements")


def _nd_index(indices, shape: Sequence[int], op: str) -> tuple:
    """The last axis of ``indices`` as one index array per addressed axis of ``shape``,
    negatives counted from the end."""
    idx = np.asarray(indices)
    return tuple(_in_range(idx[..., j], shape[j], op) for j in range(idx.shape[-1]))


def gather_nd(x, indices, *, batch_dims: int = 0) -> np.ndarray:
    """ONNX GatherND: each index tuple (the indices' last axis) picks an element or a
    slice of x, per batch of the batch_dims leading axes."""
    out_shape = shape_indexing.gather_nd(np.shape(x), np.shape(indices), batch_dims=batch_dims)
    x, idx = np.asarray(x), np.asarray(indices)
    b, k = batch_dims, idx.shape[-1]
    batch = math.prod(x.shape[:b])
    data = x.reshape(batch, *x.shape[b:])
    flat = idx.reshape(batch, -1, k)
    parts = [data[(j, *_nd_index(flat[j], data.shape[1:], "gather_nd"))] for j in range(batch)]
    return np.stack(parts).reshape(out_shape) if parts else np.zeros(out_shape, x.dtype)


def scatter_nd(x, indices, updates, *, reduction: str = "none") -> np.ndarray:
    """ONNX ScatterND: x with each update (an element or a slice) written at its index
    tuple, in order, or combined by ``reduction``."""
    shape_indexing.scatter_nd(np.shape(x), np.shape(indices), np.shape(updates), reduction=reduction)
    out = np.array(wide(x), copy=True)
    idx = np.asarray(indices)
    where = _nd_index(idx.reshape(-1, idx.shape[-1]), out.shape, "scatter_nd")
    upd = wide(updates).astype(out.dtype).reshape(-1, *out.shape[idx.shape[-1] :])
    if reduction == "none":  # one at a time: a repeated index takes the last update
        for j in range(upd.shape[0]):
            out[tuple(w[j] for w in where)] = upd[j]
        return out
    return _scatter(out, where, upd, reduction, "scatter_nd")


def _cumulative(fn, identity: int, x, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    shape_reductions.cumulative(np.shape(x), axis=axis, exclusive=exclusive, reverse=reverse)
    w = wide(x)
    a = shape_checks.normalize_axis(axis, w.ndim, "cumulative")
    if reverse:
        w = np.flip(w, axis=a)
    out = fn(w, axis=a, dtype=w.dtype)
    if exclusive:  # each element leaves itself out: the running value shifted by one
        first = np.full_like(np.take(out, [0], axis=a), identity)
        out = np.concatenate([first, np.take(out, np.arange(out.shape[a] - 1), axis=a)], axis=a)
    return np.flip(out, axis=a) if reverse else out


def cumsum(x, *, axis: int = 0, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """ONNX CumSum: running sums along axis (reverse: from the end; exclusive: each
    sum without its own element). Floats in float64, integers wrap in their dtype."""
    return _cumulative(np.cumsum, 0, x, axis, exclusive, reverse)


def cumprod(x, *, axis: int = 0, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """ONNX CumProd: running products, as cumsum."""
    return _cumulative(np.cumprod, 1, x, axis, exclusive, reverse)


def top_k(
    x, *, k: int, axis: int = -1, largest: int = 1, sorted: int = 1, num_outputs: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """ONNX TopK: the k largest (or smallest) elements along axis, sorted, and their
    int64 indices; of equal elements the lower index comes first (ONNX's order). The
    output is sorted whatever ``sorted`` says (ONNX leaves the order open then)."""
    shape_reductions.top_k(
        np.shape(x), k=k, axis=axis, largest=largest, sorted=sorted, num_outputs=num_outputs
    )
    x = np.asarray(x)
    w = wide(x)
    a = shape_checks.normalize_axis(axis, w.ndim, "top_k")
    if largest:  # descending, ties by index: an ascending stable sort of the reversed axis, reversed
        order = w.shape[a] - 1 - np.flip(np.argsort(np.flip(w, axis=a), axis=a, kind="stable"), axis=a)
    else:
        order = np.argsort(w, axis=a, kind="stable")
    order = np.take(order, np.arange(k), axis=a)
    return np.take_along_axis(x, order, axis=a), order.astype(np.int64)


def one_hot(indices, values, *, depth: int, axis: int = -1) -> np.ndarray:
    """ONNX OneHot: values[1] where the axis ``axis`` (of depth entries, inserted into
    the indices' shape) is at the index, values[0] elsewhere. A float index is
    truncated; a negative one counts from the end; one outside [-depth, depth) gives
    an all-off row."""
    shape = shape_indexing.one_hot(np.shape(indices), np.shape(values), depth=depth, axis=axis)
    idx = np.asarray(indices)
    if not np.issubdtype(idx.dtype, np.integer):
        idx = np.trunc(wide(idx))
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth)
    hot = np.moveaxis(hot, -1, shape_checks.normalize_axis(axis, idx.ndim + 1, "one_hot"))
    values = np.asarray(values)
    return np.where(hot, values[1], values[0]).reshape(shape)
