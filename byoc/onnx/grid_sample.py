"""ONNX GridSample composed at import from catalog ops.

GridSample reads X (N, C, D1, ..., Dr) at the positions that ``grid`` (N, O1, ..., Or,
r) gives in [-1, 1] coordinates. Unlike Resize (byoc/onnx/resize.py), whose taps are
known at import, the grid is a run-time value: the imported graph computes the taps
and their weights, step by step as ONNX's reference implementation does
(onnx/reference/ops/op_grid_sample.py). The grid is reshaped (N, P, r, 1), P = O1 *
... * Or; its last axis lists the coordinates innermost first (x, y, z), so every
per-coordinate constant below (a shape (r, 1) column) is in that order too. For each
coordinate, L the length of its axis of X:

1. denormalized: ``(g + 1) * (L - 1) / 2`` with align_corners, else
   ``((g + 1) * L - 1) / 2``; nearest rounds it, halves to even (as numpy's rint);
2. outside the borders [lo, hi] (the centres of the edge pixels [0, L - 1] with
   align_corners, else their outer edges [-0.5, L - 0.5]): ``border`` puts it on the
   nearest edge pixel, 0 or L - 1; ``reflection`` reflects it off the borders until
   it is inside; ``zeros`` leaves it;
3. its K taps, a new last axis: the position itself (nearest), ``floor`` and
   ``floor + 1`` (linear), ``floor - 1`` to ``floor + 2`` (cubic), and their weights
   of the fraction ``t = x - floor(x)``: ``1 - t, t``, or Keys's cubic convolution of
   A = -0.75 at the distances ``t + 1, t, 1 - t, 2 - t``;
4. a tap outside [0, L - 1] reads 0 (``zeros``: a mask), the edge pixel (``border``)
   or its reflection (``reflection``); every tap is then clamped into [0, L - 1],
   which keeps the gather in bounds whatever the grid holds.

The r coordinates' taps, times X's strides, add up by broadcasting into (N, P, K,
..., K) flat indices into X's spatial elements; one gather_elements of X reshaped
(N, C, S) reads them all; ``zeros`` masks the taps outside; and the weights reduce
the tap axes one coordinate at a time, innermost first, as the reference's separable
interpolation does. The coordinates are computed in float32 (float64 for a float64
grid), the sums in X's dtype. Nearest sampling needs no weights, and takes X of any
dtype; linear and cubic take floats.

Cubic sampling with ``border`` padding follows the reference, which clamps the
position (step 2) before taking its taps; onnxruntime, like PyTorch, clamps only the
taps, and differs there. Where the reference divides by zero (reflection along an
axis of one pixel with align_corners), every position reads that pixel.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .indexing import dtype_text

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp

ATTRS = {"mode", "padding_mode", "align_corners"}

MODES = {
    16: {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"},
    20: {"linear": "linear", "nearest": "nearest", "cubic": "cubic"},
}
"""ONNX's mode names, by the opset that introduced them (the first is the default),
and the interpolation each names."""

PADDINGS = ("zeros", "border", "reflection")

TAPS = {"nearest": [0], "linear": [0, 1], "cubic": [-1, 0, 1, 2]}
"""The taps of each mode, as offsets from the position (nearest) or its floor."""

DISTANCES = {"linear": ([-1, 1], [1, 0]), "cubic": ([1, 1, -1, -1], [1, 0, 1, 2])}
"""Per tap: ``(a, b)`` with ``a * t + b`` the reference's expression of t (the
fraction) for the tap: for linear its weight (``1 - t``, ``t``), for cubic its
distance to the position (``t + 1``, ``t``, ``1 - t``, ``2 - t``)."""

FLOATS = ("float16", "bfloat16", "float32", "float64")

CUBIC_A = -0.75
_FAR = (CUBIC_A, -5 * CUBIC_A, 8 * CUBIC_A, -4 * CUBIC_A)
_NEAR = (CUBIC_A + 2, -(CUBIC_A + 3), 0.0, 1.0)
CUBIC = np.array([_FAR, _NEAR, _NEAR, _FAR]).T
"""Keys's cubic convolution per tap, as Horner coefficients ``((p*s + q)*s + u)*s + v``
of the distance s: the reference's two polynomials (s in [1, 2] for the outer taps,
[0, 1] for the inner), in its order of operations."""


class _Ops:
    """Statement writing for the handler: ``o("plus", a, b)`` emits the catalog op of
    the row's role ``plus``; ``o.k(values)`` is a constant of the compute dtype."""

    def __init__(self, imp: Importer, e: OnnxOp, dtype: np.dtype) -> None:
        self.imp, self.roles, self.dtype = imp, e.roles, dtype

    def __call__(self, role: str, *inputs: str, **attrs) -> str:
        return self.imp.emit(self.roles[role], list(inputs), attrs or None)

    def k(self, values, dtype=None) -> str:
        array = np.asarray(values, dtype or self.dtype)
        return self.imp.constant(array, self.imp.names.fresh("k"))


def grid_sample(imp: Importer, node, e: OnnxOp) -> None:
    """GridSample (opset 16: 4-D; 20 on: any rank) of X by a run-time grid; ``e.op`` is
    the gather_elements that reads the taps."""
    imp.check_attrs(node, ATTRS)
    mode, padding, align = _attributes(imp)
    shape, grid_shape = imp.shape(node.input[0]), imp.shape(node.input[1])
    _check_shapes(imp, shape, grid_shape)
    x_kind, grid_kind = dtype_text(imp, node.input[0]), dtype_text(imp, node.input[1])
    if not x_kind or (mode != "nearest" and x_kind not in FLOATS):
        raise imp.unsupported(
            f"{mode} GridSample of {x_kind or 'an unknown dtype'}", hint="byoc interpolates floats"
        )
    if grid_kind not in FLOATS:
        raise imp.invalid(
            f"its grid is of {grid_kind or 'an unknown dtype'}", hint="ONNX's grid is of a float type"
        )
    compute = "float64" if grid_kind == "float64" else "float32"
    o = _Ops(imp, e, np.dtype(compute))
    rank = len(shape) - 2
    lengths = np.array(shape[:1:-1], compute).reshape(rank, 1)  # innermost axis first, as the grid
    grid = imp.value(node.input[1])
    if grid_kind != compute:
        grid = o("convert", grid, to=compute)
    grid = o("shape_as", grid, newshape=[shape[0], math.prod(grid_shape[1:-1]), rank, 1])
    pos = _positions(o, grid, lengths, mode, padding, align)
    index, weights, mask = _taps(o, pos, lengths, mode, padding, align)
    if weights is not None and x_kind != compute:
        weights = o("convert", weights, to=x_kind)
    taps = (index, weights, mask, len(TAPS[mode]))
    values = _sample(o, e.op, imp.value(node.input[0]), shape, grid_shape, taps)
    imp.emit(e.roles["shape_as"], [values], {"newshape": [*shape[:2], *grid_shape[1:-1]]}, out=node.output[0])


def _positions(o: _Ops, grid: str, lengths: np.ndarray, mode: str, padding: str, align: bool) -> str:
    """Steps 1 and 2: the grid's positions (N, P, r, 1) in pixels of X, rounded
    (nearest) and brought inside the borders (border, reflection)."""
    one = o.k(1.0)
    if align:
        pos = o("times", o("plus", grid, one), o.k((lengths - 1) / 2))
    else:
        pos = o("times", o("minus", o("times", o("plus", grid, one), o.k(lengths)), one), o.k(0.5))
    if mode == "nearest":
        pos = o("nearest", pos)
    lo, hi = _borders(lengths, align)
    if padding == "border":  # lo <= 0 and hi >= L - 1: outside lo is nearest 0, past hi L - 1
        inside = o("choose", o("above", pos, o.k(hi)), o.k(lengths - 1), pos)
        pos = o("choose", o("below", pos, o.k(lo)), o.k(0.0), inside)
    elif padding == "reflection":
        pos = _reflect(o, pos, lo, hi)
    return pos


def _taps(o: _Ops, pos: str, lengths: np.ndarray, mode: str, padding: str, align: bool):
    """Steps 3 and 4: ``(index, weights, mask)`` (N, P, r, K) of the positions' taps:
    their int64 offsets into X's spatial elements along their axes, their weights
    (None for nearest) and, for zeros, whether they fall inside X (else None)."""
    weights = None
    if mode == "nearest":
        taps = pos
    else:
        base = o("down", pos)
        taps = o("plus", base, o.k(TAPS[mode]))
        weights = _weights(o, o("minus", pos, base), mode)
    mask = None
    if padding == "zeros":  # taps hold whole numbers: > -1 is >= 0
        mask = o("both", o("above", taps, o.k(-1.0)), o("below", taps, o.k(lengths)))
    elif padding == "reflection" and mode != "nearest":  # a nearest position is a tap, inside
        taps = _reflect_taps(o, taps, lengths, align)
    taps = o("high", o("low", taps, o.k(0.0)), o.k(lengths - 1))
    strides = np.cumprod([1, *lengths.ravel()[:-1]]).astype(np.int64).reshape(-1, 1)
    return o("times", o("convert", taps, to="int64"), o.k(strides, np.int64)), weights, mask


def _sample(o: _Ops, take: str, x: str, shape, grid_shape, taps: tuple) -> str:
    """X (``x``) at the taps (:func:`_taps`' tensors, and their count K), weighted and
    summed: (N, C, P). The r coordinates' taps broadcast into (N, P, K, ..., K) flat
    indices (and masks) that one ``take`` (gather_elements) reads from X reshaped
    (N, C, S)."""
    index, weights, mask, count = taps
    n, c, rank = shape[0], shape[1], len(shape) - 2
    points = math.prod(grid_shape[1:-1])
    flat, inside = None, None
    for j in range(rank):
        part = _axis(o, index, j, [n, points], rank, count)
        flat = part if flat is None else o("plus", flat, part)
        if mask is not None:
            part = _axis(o, mask, j, [n, points], rank, count)
            inside = part if inside is None else o("both", inside, part)
    size = points * count**rank
    flat = o("spread", o("shape_as", flat, newshape=[n, 1, size]), newshape=[n, c, size])
    x = o("shape_as", x, newshape=[n, c, math.prod(shape[2:])])
    taken = o.imp.emit(take, [x, flat], {"axis": 2})
    values = o("shape_as", taken, newshape=[n, c, points, *[count] * rank])
    if inside is not None:
        inside = o("shape_as", inside, newshape=[n, 1, points, *[count] * rank])
        values = o("choose", inside, values, o.imp.scalar(0, o.imp.node.input[0]))
    if weights is not None:
        for j in range(rank):  # the innermost axis first, as the reference interpolates
            w = _axis(o, weights, j, [n, 1, points], rank - j, count, last=True)
            values = o("total", o("times", values, w), axes=[2 + rank - j], keepdims=False)
    return values


def _borders(lengths: np.ndarray, align: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``: where positions start to be outside X, per coordinate."""
    return (np.zeros_like(lengths), lengths - 1) if align else (np.full_like(lengths, -0.5), lengths - 0.5)


def _attributes(imp: Importer) -> tuple[str, str, bool]:
    """``(mode, padding_mode, align_corners)``, the mode as linear, nearest or cubic."""
    names = MODES[20 if imp.opset >= 20 else 16]
    given = imp.attr("mode", next(iter(names)))
    if given not in names:
        raise imp.invalid(
            f"its mode {given!r} is not one of {', '.join(names)}",
            hint=f"GridSample's modes at opset {imp.opset}: {', '.join(names)}",
        )
    padding = imp.attr("padding_mode", "zeros")
    if padding not in PADDINGS:
        raise imp.invalid(
            f"its padding_mode {padding!r} is not one of {', '.join(PADDINGS)}",
            hint="GridSample pads with zeros, the border or reflections",
        )
    return names[given], padding, bool(imp.attr("align_corners", 0))


def _check_shapes(imp: Importer, shape, grid_shape) -> None:
    """X is (N, C, D1, ..., Dr) (r = 2 before opset 20) and the grid (N, O1, ..., Or, r)."""
    rank = len(shape) - 2
    if rank < 1:
        raise imp.invalid(
            f"its input X has shape {list(shape)}, of rank {len(shape)}",
            hint="GridSample's X is (N, C, D1, ..., Dr), of rank 3 or more",
        )
    if imp.opset < 20 and rank != 2:
        raise imp.invalid(
            f"its input X has shape {list(shape)}, not (N, C, H, W)",
            hint="GridSample takes X of other ranks from opset 20 on",
        )
    if len(grid_shape) != rank + 2 or grid_shape[0] != shape[0] or grid_shape[-1] != rank:
        outputs = ", ".join(f"O{k + 1}" for k in range(rank))
        raise imp.invalid(
            f"its grid of shape {list(grid_shape)} does not fit X of shape {list(shape)}",
            hint=f"the grid is (N, {outputs}, {rank}): X's N, and a position of {rank} "
            "coordinates per output element",
        )
    if 0 in shape or 0 in grid_shape:
        raise imp.unsupported(f"an empty X or grid (shapes {list(shape)} and {list(grid_shape)})")


def _reflect(o: _Ops, v: str, lo: np.ndarray, hi: np.ndarray) -> str:
    """``v`` reflected off ``lo`` and ``hi`` until inside, as the reference's
    ``_gs_reflect``: the distance d past the border it crosses, ``n = floor(d /
    span)`` reflections, the rest ``d - n * span`` from that border (n even) or the
    other (odd). A span of 0 (one pixel, align_corners) counts as 1: every position
    then reflects onto the pixel, where the reference divides by 0."""
    low, high, span = o.k(lo), o.k(hi), o.k(np.maximum(hi - lo, 1.0))
    below, above = o("below", v, low), o("above", v, high)
    past = o("choose", below, o("minus", low, v), o("minus", v, high))
    times = o("down", o("over", past, span))
    rest = o("minus", past, o("times", times, span))
    odd = o("same", o("wrap", times, o.k(2.0)), o.k(1.0))
    from_low = o("differ", below, odd)  # below and even, or above and odd: from lo
    reflected = o("choose", from_low, o("plus", low, rest), o("minus", high, rest))
    return o("choose", o("either", below, above), reflected, v)


def _reflect_taps(o: _Ops, taps: str, lengths: np.ndarray, align: bool) -> str:
    """Whole-number ``taps`` reflected off the borders, as :func:`_reflect` would: the
    reflections repeat with a period of 2L (2(L - 1) with align_corners), whose second
    half runs back, ``M - m`` with M = 2L - 1 (2(L - 1)). Of one pixel (a period of 0
    with align_corners), every tap is that pixel: a period of 1 says so."""
    period = np.maximum(2 * lengths if not align else 2 * (lengths - 1), 1.0)
    back = 2 * lengths - 1 if not align else 2 * (lengths - 1)
    m = o("wrap", taps, o.k(period))
    return o("choose", o("above", m, o.k(lengths - 1)), o("minus", o.k(back), m), m)


def _weights(o: _Ops, fraction: str, mode: str) -> str:
    """The taps' weights (N, P, r, K) of the positions' fractions (N, P, r, 1)."""
    a, b = DISTANCES[mode]
    s = o("plus", o("times", fraction, o.k(a)), o.k(b))
    if mode == "linear":
        return s
    p, q, u, v = CUBIC
    w = o("plus", o("times", s, o.k(p)), o.k(q))
    w = o("plus", o("times", w, s), o.k(u))
    return o("plus", o("times", w, s), o.k(v))


def _axis(o: _Ops, t: str, j: int, lead: list[int], axes: int, count: int, last: bool = False) -> str:
    """Coordinate ``j``'s taps of ``t`` (N, P, r, K), shaped ``lead`` then ``axes`` tap
    axes, its K on X's axis of coordinate j (the grid lists the innermost first), or on
    the last axis (``last``), the others 1, to broadcast against the rest."""
    picked = o("pick", t, o.k([j], np.int64), axis=2)
    at = axes - 1 if last else axes - 1 - j
    return o("shape_as", picked, newshape=[*lead, *(count if a == at else 1 for a in range(axes))])


GRID_SAMPLE_KINDS = {"grid_sample": grid_sample}
