"""The strategies of the shape rules that move data: concatenation, reshapes,
transposes, pads, slices, split, gathers and scatters, top_k and one_hot."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .statements import Proposal, Value

if TYPE_CHECKING:
    from byoc.catalog import OpDef

    from .draft import Draft, Strategy

INDEX_DTYPE = "int64"
"""The dtype of index inputs (gather's, one_hot's, ...)."""


def _concatenate(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.integers(-x.type.rank, x.type.rank - 1)
    others = []
    for _ in range(d.integers(max(0, op.min_inputs - 1), 2)):
        shape = list(x.type.shape)
        shape[axis] = d.integers(1, 3)
        others.append(x if d.integers(0, 3) == 0 else d.fresh(shape))
    return Proposal([x, *others], {"axis": axis})


def _reshape(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    dims = d.permutation(x.type.shape)
    if dims and d.maybe():
        dims[d.integers(0, len(dims) - 1)] = -1
    elif d.maybe():
        dims = [math.prod(x.type.shape), 1][: d.integers(1, 2)]
    return Proposal([x], {"newshape": tuple(dims)})


def _flatten(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    return Proposal([x], {"axis": d.integers(-x.type.rank, x.type.rank)})


def _transpose(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    return Proposal([x], {"perm": tuple(d.permutation(range(x.type.rank)))} if d.maybe() else {})


def _squeeze(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    ones = [a for a, s in enumerate(x.type.shape) if s == 1]
    if ones and d.maybe():
        return Proposal([x], {"axes": tuple(d.subset(ones, 1))})
    return Proposal([x])


def _unsqueeze(d: Draft, op: OpDef) -> Proposal:
    x = d.data(0, 3)
    count = d.integers(1, 2)
    return Proposal([x], {"axes": tuple(d.subset(range(x.type.rank + count), count, count))})


def _expand(d: Draft, op: OpDef) -> Proposal:
    x = d.data(0, 3)
    grown = tuple(d.integers(1, 3) if s == 1 else s for s in x.type.shape)
    return Proposal([x], {"newshape": (*d.shape(d.integers(0, 1), 1, 3), *grown)})


def _pad(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x], {"pads": tuple(d.integers(0, 2) for _ in range(2 * x.type.rank))})


def _slice(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axes = d.subset(range(x.type.rank), 1)
    sizes = [x.type.shape[a] for a in axes]
    attrs = {
        "starts": tuple(d.integers(-s, s - 1) for s in sizes),
        "ends": tuple(d.integers(-s - 1, s + 1) for s in sizes),
        "axes": tuple(axes),
        "steps": tuple(d.choice([1, 1, 2, -1]) for _ in sizes),
    }
    return Proposal([x], attrs)


def _split(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.axis_of(x)
    size = x.type.shape[axis]
    if d.maybe():
        cuts = sorted(d.subset(range(1, size), 0, 2)) if size > 1 else []
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, size])]
        return Proposal([x], {"axis": axis, "sizes": tuple(sizes)}, outputs=len(sizes))
    return Proposal([x], {"axis": axis}, outputs=d.integers(1, min(size, 3)))


def _gather(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.axis_of(x)
    size = x.type.shape[axis]
    indices = d.fresh(d.shape(d.integers(0, 2), 1, 3), INDEX_DTYPE, -size, size - 1)
    return Proposal([x, indices], {"axis": axis})


def _top_k(d: Draft, op: OpDef) -> Proposal:
    """top_k: k of at most the axis' size; two outputs (values, int64 indices)."""
    x = d.data(1)
    axis = d.axis_of(x)
    return Proposal([x], {"axis": axis, "k": d.integers(1, x.type.shape[axis])}, outputs=2)


def _element_indices(d: Draft, x: Value, axis: int) -> tuple[tuple[int, ...], Value]:
    """An index tensor of x's rank, no larger than x off the axis, in range along it."""
    shape = tuple(
        d.integers(1, 3) if k == axis % x.type.rank else d.integers(1, s) for k, s in enumerate(x.type.shape)
    )
    size = x.type.shape[axis]
    return shape, d.fresh(shape, INDEX_DTYPE, -size, size - 1)


def _gather_elements(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    axis = d.axis_of(x)
    _, indices = _element_indices(d, x, axis)
    return Proposal([x, indices], {"axis": axis})


def _scatter_elements(d: Draft, op: OpDef) -> Proposal:
    """Duplicate indices are allowed: the reference and every backend that takes the
    op write them in the same (row-major) order."""
    x = d.data(1)
    axis = d.axis_of(x)
    shape, indices = _element_indices(d, x, axis)
    return Proposal([x, indices, d.fresh(shape, x.type.dtype)], {"axis": axis})


def _nd_indices(d: Draft, x: Value) -> tuple[int, Value]:
    """(m, indices): index tuples of m leading axes of x, each in range for every axis."""
    m = d.integers(1, x.type.rank)
    high = min(x.type.shape[:m]) - 1
    return m, d.fresh((*d.shape(d.integers(0, 1), 1, 3), m), INDEX_DTYPE, 0, high)


def _gather_nd(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    _, indices = _nd_indices(d, x)
    return Proposal([x, indices], {"batch_dims": 0})


def _scatter_nd(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    m, indices = _nd_indices(d, x)
    updates = d.fresh((*indices.type.shape[:-1], *x.type.shape[m:]), x.type.dtype)
    return Proposal([x, indices, updates])


def _one_hot(d: Draft, op: OpDef) -> Proposal:
    """one_hot: int64 indices in [-depth, depth - 1] and two values (off, on)."""
    depth = d.integers(1, 4)
    indices = d.fresh(d.shape(d.integers(0, 2), 1, 3), INDEX_DTYPE, -depth, depth - 1)
    values = d.fresh((2,), d.dtype)
    return Proposal(
        [indices, values], {"depth": depth, "axis": d.integers(-indices.type.rank - 1, indices.type.rank)}
    )


LAYOUT_RULES: dict[str, Strategy] = {
    "concatenate": _concatenate,
    "reshape": _reshape,
    "flatten": _flatten,
    "transpose": _transpose,
    "squeeze": _squeeze,
    "unsqueeze": _unsqueeze,
    "expand": _expand,
    "pad": _pad,
    "slice": _slice,
    "split": _split,
    "gather": _gather,
    "top_k": _top_k,
    "gather_elements": _gather_elements,
    "scatter_elements": _scatter_elements,
    "gather_nd": _gather_nd,
    "scatter_nd": _scatter_nd,
    "one_hot": _one_hot,
}
