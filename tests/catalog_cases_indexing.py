"""Hypothesis cases of the catalog's indexing and ordering ops (argmax, argmin,
gather_elements, scatter_elements, gather_nd, scatter_nd, cumsum, cumprod, top_k,
one_hot), each result computed here by plain loops over the elements, in Python
numbers, as ONNX's operator documents define it; tests/catalog_cases.py adds them to
its ``CASES``."""

from __future__ import annotations

import math

import numpy as np
from catalog_cases_support import OpCase, array, draw_rng, shapes, wrapped
from hypothesis import strategies as st

from byoc.ir import is_float, is_integer


def _value(v):
    """One element as a Python number (a float one as float, exactly)."""
    return v.item() if v.dtype.kind in "biu" else float(v)


def _ties(rng, shape, dtype: str) -> np.ndarray:
    """Small whole numbers (many equal ones), of ``dtype``."""
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    return rng.integers(0, 4, size=shape).astype(dtype)


def _axis(draw, rank: int) -> int:
    """An axis of a rank-``rank`` tensor, sometimes counted from the end."""
    axis = draw(st.integers(0, rank - 1))
    return axis - rank if draw(st.booleans()) else axis


def _arg(largest: bool):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = draw_rng(draw)
        shape = draw(shapes(1, 3))
        x = _ties(rng, shape, dtype)
        axis, keep, last = _axis(draw, len(shape)), draw(st.booleans()), draw(st.booleans())
        a = axis % len(shape)
        out = np.empty(shape[:a] + shape[a + 1 :], np.int64)
        for o in np.ndindex(*out.shape):
            best = None
            for j in range(shape[a]):
                v = _value(x[(*o[:a], j, *o[a:])])
                if best is None or (v > best[0] if largest else v < best[0]) or (last and v == best[0]):
                    best = (v, j)
            out[o] = best[1]
        if keep:
            out = out.reshape(shape[:a] + (1,) + shape[a + 1 :])
        attrs = {"axis": axis, "keepdims": keep, "select_last_index": last}
        return OpCase([x], attrs, out, out_dtype="int64")

    return case


def _index_dtype(draw) -> str:
    return draw(st.sampled_from(["int32", "int64"]))


@st.composite
def gather_elements_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    shape = draw(shapes(1, 3))
    x = array(rng, shape, dtype)
    axis = _axis(draw, len(shape))
    a, size = axis % len(shape), shape[axis]
    idx_shape = tuple(d if k == a else draw(st.integers(1, d)) for k, d in enumerate(shape))
    idx_shape = tuple(draw(st.integers(1, 3)) if k == a else d for k, d in enumerate(idx_shape))
    idx = rng.integers(-size, size, size=idx_shape).astype(_index_dtype(draw))
    expected = np.empty(idx_shape, x.dtype)
    for i in np.ndindex(*idx_shape):
        expected[i] = x[(*i[:a], int(idx[i]) % size, *i[a + 1 :])]
    return OpCase([x, idx], {"axis": axis}, expected)


def _combine(reduction: str, old, new, dtype: str):
    """One scatter step in Python numbers: ``new`` replaces or combines with ``old``."""
    if reduction == "none":
        return new
    if reduction == "add":
        return old + new
    if reduction == "mul":
        return old * new
    return max(old, new) if reduction == "max" else min(old, new)


def _finish(values: np.ndarray, dtype: str) -> np.ndarray:
    """Python numbers (an object array) as the op's result: integers wrapped to
    ``dtype``, floats in float64."""
    if is_integer(dtype):
        return wrapped(values, dtype)
    return values.astype(np.float64 if is_float(dtype) else dtype)


def _reduction(draw, dtype: str) -> str:
    if dtype == "bool":
        return "none"
    return draw(st.sampled_from(["none", "add", "mul", "max", "min"]))


@st.composite
def scatter_elements_case(draw, dtype: str) -> OpCase:
    """Updates applied one by one in row-major order; with reduction none the indices
    along the axis are distinct (ONNX leaves repeated ones undefined)."""
    rng = draw_rng(draw)
    shape = draw(shapes(1, 3))
    x = array(rng, shape, dtype)
    axis = _axis(draw, len(shape))
    a, size = axis % len(shape), shape[axis]
    reduction = _reduction(draw, dtype)
    idx_shape = tuple(draw(st.integers(1, d)) for d in shape)
    idx = np.empty(idx_shape, np.int64)
    for o in np.ndindex(*(idx_shape[:a] + idx_shape[a + 1 :])):
        if reduction == "none":
            line = rng.permutation(size)[: idx_shape[a]]
        else:
            line = rng.integers(0, size, idx_shape[a])
        for m, v in enumerate(line):
            idx[(*o[:a], m, *o[a:])] = v
    idx = np.where(rng.random(idx.shape) < 0.3, idx - size, idx).astype(_index_dtype(draw))
    updates = array(rng, idx_shape, dtype)
    out = np.array([_value(v) for v in x.ravel()], dtype=object).reshape(shape)
    for i in np.ndindex(*idx_shape):
        at = (*i[:a], int(idx[i]) % size, *i[a + 1 :])
        out[at] = _combine(reduction, out[at], _value(updates[i]), dtype)
    attrs = (
        {"axis": axis}
        if reduction == "none" and draw(st.booleans())
        else {"axis": axis, "reduction": reduction}
    )
    return OpCase([x, idx, updates], attrs, _finish(out, dtype))


@st.composite
def gather_nd_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    shape = draw(shapes(1, 4))
    x = array(rng, shape, dtype)
    b = draw(st.integers(0, len(shape) - 1))
    k = draw(st.integers(1, len(shape) - b))
    middle = draw(shapes(0, 2))
    idx = np.stack([rng.integers(-shape[b + j], shape[b + j], size=shape[:b] + middle) for j in range(k)], -1)
    idx = idx.astype(_index_dtype(draw))
    out_shape = shape[:b] + middle + shape[b + k :]
    expected = np.empty(out_shape, x.dtype)
    for o in np.ndindex(*out_shape):
        lead, rest = o[: b + len(middle)], o[b + len(middle) :]
        at = tuple(int(v) % shape[b + j] for j, v in enumerate(idx[lead]))
        expected[o] = x[(*o[:b], *at, *rest)]
    attrs = {"batch_dims": b} if b or draw(st.booleans()) else {}
    return OpCase([x, idx], attrs, expected)


@st.composite
def scatter_nd_case(draw, dtype: str) -> OpCase:
    """Each index tuple addresses an element or a slice; applied in order, distinct
    tuples with reduction none."""
    rng = draw_rng(draw)
    shape = draw(shapes(1, 3))
    x = array(rng, shape, dtype)
    k = draw(st.integers(1, len(shape)))
    reduction = _reduction(draw, dtype)
    cells = list(np.ndindex(*shape[:k]))
    count = draw(st.integers(1, len(cells) if reduction == "none" else 4))
    chosen = (
        rng.permutation(len(cells))[:count] if reduction == "none" else rng.integers(0, len(cells), count)
    )
    tuples = np.array([cells[c] for c in chosen], dtype=np.int64).reshape(count, k)
    tuples = np.where(rng.random(tuples.shape) < 0.3, tuples - np.array(shape[:k]), tuples)
    lead = draw(st.sampled_from([(count,), (1, count)]))
    idx = tuples.reshape(*lead, k).astype(_index_dtype(draw))
    updates = array(rng, lead + shape[k:], dtype)
    out = np.array([_value(v) for v in x.ravel()], dtype=object).reshape(shape)
    flat_updates = updates.reshape(count, *shape[k:])
    for n in range(count):
        at = tuple(int(v) % shape[j] for j, v in enumerate(tuples[n]))
        for rest in np.ndindex(*shape[k:]):
            out[(*at, *rest)] = _combine(
                reduction, out[(*at, *rest)], _value(flat_updates[(n, *rest)]), dtype
            )
    attrs = {"reduction": reduction} if reduction != "none" or draw(st.booleans()) else {}
    return OpCase([x, idx, updates], attrs, _finish(out, dtype))


def _cumulative(product: bool):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = draw_rng(draw)
        shape = draw(shapes(1, 3))
        x = array(rng, shape, dtype, -2, 2)
        axis = _axis(draw, len(shape))
        exclusive, reverse = draw(st.booleans()), draw(st.booleans())
        a = axis % len(shape)
        out = np.empty(shape, dtype=object)
        for o in np.ndindex(*shape):
            j = o[a]
            if reverse:  # from j (exclusive: after it) to the end
                span = range(j + (1 if exclusive else 0), shape[a])
            else:  # from the start to j (exclusive: before it)
                span = range(j + (0 if exclusive else 1))
            total = 1 if product else 0
            for m in span:
                v = _value(x[(*o[:a], m, *o[a + 1 :])])
                total = total * v if product else total + v
            out[o] = total
        attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
        return OpCase([x], attrs, _finish(out, dtype))

    return case


@st.composite
def top_k_case(draw, dtype: str) -> OpCase:
    """Python's sort by (value, index), descending value for largest: equal values keep
    the lower index first."""
    rng = draw_rng(draw)
    shape = draw(shapes(1, 3))
    x = _ties(rng, shape, dtype)
    axis = _axis(draw, len(shape))
    a = axis % len(shape)
    k = draw(st.integers(0, shape[a]))
    largest = draw(st.booleans())
    out_shape = shape[:a] + (k,) + shape[a + 1 :]
    values, indices = np.empty(out_shape, x.dtype), np.empty(out_shape, np.int64)
    for o in np.ndindex(*(shape[:a] + shape[a + 1 :])):
        row = [(_value(x[(*o[:a], j, *o[a:])]), j) for j in range(shape[a])]
        row.sort(key=lambda p: (-p[0] if largest else p[0], p[1]))
        for m, (v, j) in enumerate(row[:k]):
            values[(*o[:a], m, *o[a:])] = v
            indices[(*o[:a], m, *o[a:])] = j
    attrs = {"k": k, "axis": axis, "largest": largest, "sorted": True}
    return OpCase([x], attrs, (values, indices), out_dtype=(dtype, "int64"))


@st.composite
def one_hot_case(draw, dtype: str) -> OpCase:
    """Indices of an integer or float dtype, some negative, some out of range."""
    rng = draw_rng(draw)
    shape = draw(shapes(0, 2))
    depth = draw(st.integers(1, 4))
    index_dtype = draw(st.sampled_from(["int32", "int64", "float32"]))
    idx = rng.integers(-depth - 1, depth + 2, size=shape).astype(index_dtype)
    if index_dtype == "float32":
        idx = idx + rng.choice([0.0, 0.25], size=shape).astype(np.float32) * np.sign(idx)
    values = array(rng, (2,), dtype)
    axis = draw(st.integers(-len(shape) - 1, len(shape)))
    a = axis % (len(shape) + 1)
    out_shape = shape[:a] + (depth,) + shape[a:]
    expected = np.empty(out_shape, values.dtype)
    for o in np.ndindex(*out_shape):
        index = math.trunc(float(idx[o[:a] + o[a + 1 :]]))
        index += depth if index < 0 else 0
        expected[o] = values[1] if index == o[a] else values[0]
    return OpCase([idx, values], {"depth": depth, "axis": axis}, expected)


INDEXING_CASES = {
    "argmax": _arg(largest=True),
    "argmin": _arg(largest=False),
    "gather_elements": gather_elements_case,
    "scatter_elements": scatter_elements_case,
    "gather_nd": gather_nd_case,
    "scatter_nd": scatter_nd_case,
    "cumsum": _cumulative(product=False),
    "cumprod": _cumulative(product=True),
    "top_k": top_k_case,
    "one_hot": one_hot_case,
}
