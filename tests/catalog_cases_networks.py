"""Hypothesis cases of the catalog's network ops (conv, conv_transpose, pooling, dense,
matmul, bias_add, batch_norm, lrn, softmax, attention, reductions), each expected result from the
nested-loop definitions of tests/reference_kernels_support.py or plain numpy expressions."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from catalog_cases_support import OpCase, array, broadcast_pair, draw_rng, shapes
from hypothesis import strategies as st
from reference_kernels_support import (
    conv_case,
    conv_transpose_case,
    loop_conv,
    loop_conv_transpose,
    loop_pool,
    pool_case,
)


def _maybe_default(draw, attrs: dict, name: str, default_value) -> None:
    """Drop ``attrs[name]`` (or write it as []) when it equals what an empty list means."""
    if list(attrs[name]) == list(default_value) and draw(st.booleans()):
        if draw(st.booleans()):
            del attrs[name]
        else:
            attrs[name] = []


def _as(dtype: str, *arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(dtype) for a in arrays]


@st.composite
def conv_op_case(draw, dtype: str, spatial: int | None = None) -> OpCase:
    x, w, attrs = draw(conv_case(spatial))
    x, w = _as(dtype, x, w)
    expected = loop_conv(x.astype(np.float64), w.astype(np.float64), **attrs)
    n = x.ndim - 2
    attrs = dict(attrs)
    _maybe_default(draw, attrs, "strides", [1] * n)
    _maybe_default(draw, attrs, "dilations", [1] * n)
    _maybe_default(draw, attrs, "pads", [0] * 2 * n)
    if attrs["groups"] == 1 and draw(st.booleans()):
        del attrs["groups"]
    return OpCase([x, w], attrs, expected)


@st.composite
def conv_transpose_op_case(draw, dtype: str) -> OpCase:
    x, w, attrs = draw(conv_transpose_case())
    x, w = _as(dtype, x, w)
    expected = loop_conv_transpose(x.astype(np.float64), w.astype(np.float64), **attrs)
    attrs = dict(attrs)
    _maybe_default(draw, attrs, "output_padding", [0] * (x.ndim - 2))
    return OpCase([x, w], attrs, expected)


def _pool(kind: str):
    @st.composite
    def case(draw, dtype: str, spatial: int | None = None) -> OpCase:
        x, attrs = draw(pool_case(spatial))
        (x,) = _as(dtype, x)
        attrs = {**attrs, "ceil_mode": bool(attrs["ceil_mode"])}
        if kind == "avg":
            attrs["count_include_pad"] = draw(st.booleans())
        expected = loop_pool(x.astype(np.float64), kind=kind, **attrs)
        if expected is None:
            return OpCase([x], attrs, None, "covers padding only")
        return OpCase([x], attrs, expected)

    return case


def _global_pool(reduce: Callable[..., np.ndarray]):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        x = array(draw_rng(draw), draw(shapes(3, 5)), dtype)
        axes = tuple(range(2, x.ndim))
        return OpCase([x], expected=reduce(x.astype(np.float64), axis=axes, keepdims=True))

    return case


@st.composite
def dense_case(draw, dtype: str, rank: int | None = None) -> OpCase:
    rng = draw_rng(draw)
    shape = draw(shapes(rank or 1, rank or 3))
    x, w = array(rng, shape, dtype), array(rng, (draw(st.integers(1, 4)), shape[-1]), dtype)
    expected = np.einsum("...i,ui->...u", x.astype(np.float64), w.astype(np.float64))
    return OpCase([x, w], expected=expected)


@st.composite
def matmul_case(draw, dtype: str, batched: bool = True) -> OpCase:
    rng = draw_rng(draw)
    ba, bb = draw(broadcast_pair()) if batched else ((), ())
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    a, b = array(rng, (*ba, m, k), dtype), array(rng, (*bb, k, n), dtype)
    expected = np.einsum("...ij,...jk->...ik", a.astype(np.float64), b.astype(np.float64))
    return OpCase([a, b], expected=expected)


@st.composite
def bias_add_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    shape = draw(shapes(1, 4))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    x, b = array(rng, shape, dtype), array(rng, (shape[axis],), dtype)
    view = [1] * len(shape)
    view[axis] = shape[axis]
    attrs = {} if axis == 1 and draw(st.booleans()) else {"axis": axis}
    return OpCase([x, b], attrs, x.astype(np.float64) + b.astype(np.float64).reshape(view))


@st.composite
def batch_norm_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    shape = draw(shapes(2, 4))
    c = shape[1]
    x = array(rng, shape, dtype)
    scale, bias, mean = (array(rng, (c,), dtype) for _ in range(3))
    var = array(rng, (c,), dtype, 0.1, 2.0)
    epsilon = draw(st.sampled_from([1e-5, 0.001, 0.5]))
    per = (1, c) + (1,) * (len(shape) - 2)
    s, b, m, v = (p.astype(np.float64).reshape(per) for p in (scale, bias, mean, var))
    expected = (x.astype(np.float64) - m) / np.sqrt(v + epsilon) * s + b
    return OpCase([x, scale, bias, mean, var], {"epsilon": epsilon}, expected)


@st.composite
def lrn_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(3, 4))
    x = array(draw_rng(draw), shape, dtype)
    size = draw(st.integers(1, shape[1] + 1))
    alpha, beta, bias = draw(st.sampled_from([1e-4, 0.3])), draw(st.sampled_from([0.75, 0.5])), 2.0
    wide = x.astype(np.float64)
    expected = np.empty_like(wide)
    channels = shape[1]
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + math.ceil((size - 1) / 2))
        square_sum = (wide[:, lo : hi + 1] ** 2).sum(axis=1)
        expected[:, c] = wide[:, c] / (bias + alpha / size * square_sum) ** beta
    return OpCase([x], {"size": size, "alpha": alpha, "beta": beta, "bias": bias}, expected)


def _softmax(log: bool):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        shape = draw(shapes(1, 3))
        x = array(draw_rng(draw), shape, dtype, -10, 10)
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        wide = x.astype(np.float64)
        e = np.exp(wide - wide.max(axis=axis, keepdims=True))
        total = e.sum(axis=axis, keepdims=True)
        expected = np.log(e / total) if log else e / total
        attrs = {} if axis == -1 and draw(st.booleans()) else {"axis": axis}
        return OpCase([x], attrs, expected)

    return case


@st.composite
def attention_case(draw, dtype: str) -> OpCase:
    """softmax(q @ kt * scale + bias) @ v with broadcast batch axes, maybe no bias; the
    softmax written out (the maximum subtracted, exponentials over their sum)."""
    rng = draw_rng(draw)
    ba, bb = draw(broadcast_pair())
    rows, depth, keys, width = (draw(st.integers(1, 4)) for _ in range(4))
    q, kt = array(rng, (*ba, rows, depth), dtype), array(rng, (*bb, depth, keys), dtype)
    v, scale = (
        array(rng, (keys, width), dtype),
        array(rng, draw(st.sampled_from([(), (1,)])), dtype, 0.1, 1.0),
    )
    inputs = [q, kt, v, scale]
    wide = [a.astype(np.float64) for a in inputs]
    scores = np.einsum("...ij,...jk->...ik", wide[0], wide[1]) * wide[3].item()
    if draw(st.booleans()):
        bias = array(rng, (rows, keys) if draw(st.booleans()) else (keys,), dtype)
        inputs.append(bias)
        scores = scores + bias.astype(np.float64)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = np.einsum("...ik,...kj->...ij", e / e.sum(axis=-1, keepdims=True), wide[2])
    return OpCase(inputs, {}, expected)


def _reduce(fn: Callable[..., np.ndarray]):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        shape = draw(shapes(1, 4))
        x = array(draw_rng(draw), shape, dtype, 0.5, 2.0)
        chosen = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
        axes = [a - len(shape) if draw(st.booleans()) else a for a in chosen]
        keepdims = draw(st.booleans())
        expected = fn(x.astype(np.float64), axis=tuple(chosen) or None, keepdims=keepdims)
        return OpCase([x], {"axes": tuple(axes), "keepdims": keepdims}, np.asarray(expected))

    return case


NETWORK_CASES = {
    "conv": conv_op_case,
    "conv_transpose": conv_transpose_op_case,
    "max_pool": _pool("max"),
    "avg_pool": _pool("avg"),
    "global_avg_pool": _global_pool(np.mean),
    "global_max_pool": _global_pool(np.max),
    "dense": dense_case,
    "matmul": matmul_case,
    "bias_add": bias_add_case,
    "batch_norm": batch_norm_case,
    "lrn": lrn_case,
    "softmax": _softmax(log=False),
    "log_softmax": _softmax(log=True),
    "attention": attention_case,
    "sum": _reduce(np.sum),
    "mean": _reduce(np.mean),
    "max": _reduce(np.max),
    "min": _reduce(np.min),
    "prod": _reduce(np.prod),
}
