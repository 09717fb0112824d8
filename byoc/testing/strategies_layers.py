"""The strategies of the shape rules of network layers: convolutions, pools, dense,
matmul, normalizations, softmax-like rules of one axis, attention, and reductions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from byoc import shape_integer

from .statements import Proposal

if TYPE_CHECKING:
    from byoc.catalog import OpDef

    from .draft import Draft, Strategy


def _spatial(d: Draft, n: int, name: str, low: int, high: int) -> dict[str, object]:
    """``name``: n values in low..high, or the default (omitted)."""
    return {name: tuple(d.integers(low, high) for _ in range(n))} if d.maybe() else {}


def _pads(d: Draft, n: int) -> dict[str, object]:
    return {"pads": tuple(d.integers(0, 1) for _ in range(2 * n))} if d.maybe() else {}


def _window(d: Draft, n: int) -> dict[str, object]:
    """strides, pads and dilations of a convolution or a pool (each maybe the default)."""
    return {**_spatial(d, n, "strides", 1, 2), **_pads(d, n), **_spatial(d, n, "dilations", 1, 2)}


def _groups(d: Draft, channels: int) -> int:
    return d.choice([g for g in range(1, channels + 1) if channels % g == 0])


def _conv(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n, channels = x.type.rank - 2, x.type.shape[1]
    groups = _groups(d, channels)
    kernel = d.shape(n, 1, 3)
    weight = d.fresh((groups * d.integers(1, 2), channels // groups, *kernel))
    attrs = _window(d, n)
    if groups > 1 or d.maybe():
        attrs["groups"] = groups
    return Proposal([x, weight], attrs)


def _conv_transpose(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n, channels = x.type.rank - 2, x.type.shape[1]
    groups = _groups(d, channels)
    weight = d.fresh((channels, d.integers(1, 2), *d.shape(n, 1, 3)))
    attrs = {**_window(d, n), **_spatial(d, n, "output_padding", 0, 1)}
    if groups > 1 or d.maybe():
        attrs["groups"] = groups
    return Proposal([x, weight], attrs)


def _pool(d: Draft, op: OpDef) -> Proposal:
    x = d.data(3, 5)
    n = x.type.rank - 2
    return Proposal([x], {"kernel_shape": d.shape(n, 1, 3), **_window(d, n)})


def _global_pool(d: Draft, op: OpDef) -> Proposal:
    return Proposal([d.data(3, 5)])


def _dense(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x, d.fresh((d.integers(1, 4), x.type.shape[-1]))])


def _matmul(d: Draft, op: OpDef) -> Proposal:
    a = d.data(1)
    k, n = a.type.shape[-1], d.integers(1, 4)
    if a.type.rank == 1 or d.maybe():
        shape: tuple[int, ...] = (k,) if d.maybe() else (k, n)
    else:
        shape = (*d.broadcastable(a.type.shape[:-2]), k, n)
    return Proposal([a, d.fresh(shape)])


CODES = {t: (float(np.iinfo(t).min), float(np.iinfo(t).max)) for t in shape_integer.CODES}
"""The 8-bit codes of the integer products, and their ranges."""


def _codes(d: Draft, shape: tuple[int, ...], dtype: str):
    """A new parameter of 8-bit codes over their whole range."""
    return d.fresh(shape, dtype, *CODES[dtype])


def _code_types(d: Draft) -> tuple[str, str]:
    """The codes' types of an integer product: the graph's dtype where it is 8-bit, for
    the first operand; each drawn otherwise."""
    first = d.dtype if d.dtype in CODES else d.choice(list(CODES))
    return first, d.choice(list(CODES))


def _conv_integer(d: Draft, op: OpDef) -> Proposal:
    """conv_integer: 8-bit x and w (conv's shapes and attributes), x's zero point one
    value, w's one value or one per output channel."""
    x_type, w_type = _code_types(d)
    n = d.integers(1, 3)
    x = _codes(d, (d.integers(1, 2), d.integers(1, 4), *d.shape(n, 2, 5)), x_type)
    groups = _groups(d, x.type.shape[1])
    m = groups * d.integers(1, 2)
    w = _codes(d, (m, x.type.shape[1] // groups, *d.shape(n, 1, 3)), w_type)
    attrs = {**_window(d, n), "groups": groups}
    return Proposal([x, w, _codes(d, (), x_type), _codes(d, (m,) if d.maybe() else (), w_type)], attrs)


def _matmul_integer(d: Draft, op: OpDef) -> Proposal:
    """matmul_integer: 8-bit a and b (matmul's shapes), a's zero point one value, b's
    one value or one per column."""
    a_type, b_type = _code_types(d)
    a = _codes(d, d.shape(d.any_rank(2, 4), 1, 5), a_type)
    n = d.integers(1, 5)
    b = _codes(d, (*d.broadcastable(a.type.shape[:-2]), a.type.shape[-1], n), b_type)
    return Proposal([a, b, _codes(d, (), a_type), _codes(d, (n,) if d.maybe() else (), b_type)])


def _bias_add(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.axis_of(x)
    return Proposal([x, d.fresh((x.type.shape[axis],))], {"axis": axis})


def _batch_norm(d: Draft, op: OpDef) -> Proposal:
    x = d.data(2)
    channel = (x.type.shape[1],)
    scale, bias, mean = (d.fresh(channel) for _ in range(3))
    return Proposal([x, scale, bias, mean, d.fresh(channel, low=0.5, high=1.5)])  # a variance


def _lrn(d: Draft, op: OpDef) -> Proposal:
    return Proposal([d.data(2)], {"size": d.choice([1, 3, 5])})


def _one_axis(d: Draft, op: OpDef) -> Proposal:
    """softmax, argmax, cumsum, ...: an axis (the rule reads it); others drawn by type."""
    x = d.data(1)
    return Proposal([x], {"axis": d.axis_of(x)})


def _attention(d: Draft, op: OpDef) -> Proposal:
    """attention: q from scope, kt and v of batch axes that broadcast to q's, a scale of
    one value, and maybe a bias that broadcasts to the scores."""
    q = d.data(2)
    batch, rows, depth = q.type.shape[:-2], q.type.shape[-2], q.type.shape[-1]
    keys = d.integers(1, 4)
    kt = d.fresh((*d.broadcastable(batch), depth, keys))
    v = d.fresh((*d.broadcastable(batch), keys, d.integers(1, 4)))
    inputs = [q, kt, v, d.fresh(() if d.maybe() else (1,), low=0.1, high=1.0)]
    if d.maybe():
        inputs.append(d.fresh(d.broadcastable((*batch, rows, keys))))
    return Proposal(inputs)


def _reduce(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    attrs: dict[str, object] = {"keepdims": d.maybe()}
    if d.maybe():
        axes = d.subset(range(x.type.rank), 1)
        attrs["axes"] = tuple(a - x.type.rank if d.maybe() else a for a in axes)
    return Proposal([x], attrs)


LAYER_RULES: dict[str, Strategy] = {
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "pool": _pool,
    "global_pool": _global_pool,
    "dense": _dense,
    "matmul": _matmul,
    "conv_integer": _conv_integer,
    "matmul_integer": _matmul_integer,
    "bias_add": _bias_add,
    "batch_norm": _batch_norm,
    "lrn": _lrn,
    "softmax": _one_axis,
    "attention": _attention,
    "reduce": _reduce,
    "arg_reduce": _one_axis,
    "cumulative": _one_axis,
}
