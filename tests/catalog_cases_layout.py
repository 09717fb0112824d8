"""Hypothesis cases of the catalog's layout ops (concatenate, reshape, flatten, transpose,
squeeze, unsqueeze, expand, pad, slice, gather, split), each expected result built element by
element from the op's definition (or numpy's indexing where it is the definition)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from catalog_cases_support import Attr, OpCase, array, draw_rng, shapes
from hypothesis import strategies as st


@st.composite
def concatenate_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    shape = list(draw(shapes(1, 3)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        shape[axis] = draw(st.integers(1, 3))
        parts.append(array(rng, tuple(shape), dtype))
    attrs = {} if axis == 0 and draw(st.booleans()) else {"axis": axis}
    rows = [list(np.moveaxis(p, axis, 0)) for p in parts]
    expected = np.moveaxis(np.array([r for rs in rows for r in rs]), 0, axis)
    return OpCase(parts, attrs, expected)


@st.composite
def reshape_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 4))
    x = array(draw_rng(draw), shape, dtype)
    factors = [p for d in shape for p in _prime_factors(d)]
    order = draw(st.permutations(factors)) if factors else []
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=3))) if order else []
    target = [math.prod(order[a:b]) for a, b in itertools.pairwise([0, *cuts, len(order)])] if order else []
    target += [1] * draw(st.integers(0, 1))
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return OpCase([x], {"newshape": tuple(target)}, x.reshape(target))


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def flatten_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 4))
    x = array(draw_rng(draw), shape, dtype)
    axis = draw(st.integers(-len(shape), len(shape)))
    a = axis + len(shape) if axis < 0 else axis
    expected = x.reshape(math.prod(shape[:a]), math.prod(shape[a:]))
    return OpCase([x], {"axis": axis}, expected)


@st.composite
def transpose_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 4))
    x = array(draw_rng(draw), shape, dtype)
    perm = list(draw(st.permutations(range(len(shape))))) if draw(st.booleans()) else []
    order = perm or list(range(len(shape)))[::-1]
    out = [shape[p] for p in order]
    expected = np.empty(out, dtype=x.dtype)
    for i in np.ndindex(*out):
        source = [0] * len(shape)
        for k, p in enumerate(order):  # output axis k is input axis p
            source[p] = i[k]
        expected[i] = x[tuple(source)]
    return OpCase([x], {"perm": tuple(perm)}, expected)


@st.composite
def squeeze_case(draw, dtype: str) -> OpCase:
    shape = draw(st.lists(st.sampled_from([1, 1, 2, 3]), max_size=4).map(tuple))
    x = array(draw_rng(draw), shape, dtype)
    ones = [i for i, d in enumerate(shape) if d == 1]
    axes = draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    gone = set(axes) if axes else set(ones)
    axes = [a - len(shape) if draw(st.booleans()) else a for a in axes]
    return OpCase([x], {"axes": tuple(axes)}, x.reshape([d for i, d in enumerate(shape) if i not in gone]))


@st.composite
def unsqueeze_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 3))
    x = array(draw_rng(draw), shape, dtype)
    count = draw(st.integers(1, 2))
    rank = len(shape) + count
    new = draw(st.lists(st.integers(0, rank - 1), min_size=count, max_size=count, unique=True))
    rest = iter(shape)
    target = [1 if i in new else next(rest) for i in range(rank)]
    axes = [a - rank if draw(st.booleans()) else a for a in new]
    return OpCase([x], {"axes": tuple(axes)}, x.reshape(target))


@st.composite
def expand_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 3))
    x = array(draw_rng(draw), shape, dtype)
    target = [draw(st.integers(1, 3)) if d == 1 else draw(st.sampled_from([1, d])) for d in shape]
    target = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))] + target
    out = [max(a, b) for a, b in zip([1] * (len(target) - len(shape)) + list(shape), target)]
    expected = np.empty(out, dtype=x.dtype)
    lead = len(out) - len(shape)
    for i in np.ndindex(*out):
        expected[i] = x[tuple(0 if d == 1 else j for j, d in zip(i[lead:], shape))]
    return OpCase([x], {"newshape": tuple(target)}, expected)


@st.composite
def pad_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(1, 3))
    x = array(draw_rng(draw), shape, dtype)
    mode = draw(st.sampled_from(["constant", "reflect", "edge"]))
    top = [d - 1 if mode == "reflect" else 2 for d in shape]
    pads = [draw(st.integers(0, min(2, t))) for t in top] + [draw(st.integers(0, min(2, t))) for t in top]
    # the fill value must fit the dtype (a uint8 tensor cannot be padded with -1)
    unsigned = dtype.startswith("uint") or dtype == "bool"
    value = float(draw(st.integers(0 if unsigned else -3, 1 if dtype == "bool" else 3)))
    n = len(shape)
    out = [d + pads[i] + pads[n + i] for i, d in enumerate(shape)]
    expected = np.full(out, value, dtype=x.dtype)
    for i in np.ndindex(*out):
        src = []
        for a, j in enumerate(i):
            k = j - pads[a]
            if mode == "edge":
                k = min(max(k, 0), shape[a] - 1)
            elif mode == "reflect":
                k = -k if k < 0 else (2 * (shape[a] - 1) - k if k >= shape[a] else k)
            src.append(k)
        if all(0 <= k < d for k, d in zip(src, shape)):
            expected[i] = x[tuple(src)]
    attrs = {"pads": tuple(pads)}
    if mode != "constant" or draw(st.booleans()):
        attrs["mode"] = mode
    if mode == "constant" and (value != 0 or draw(st.booleans())):
        attrs["value"] = value
    return OpCase([x], attrs, expected)


@st.composite
def slice_case(draw, dtype: str) -> OpCase:
    """Positive steps, where ONNX's clamping is Python's."""
    shape = draw(shapes(1, 3))
    x = array(draw_rng(draw), shape, dtype)
    explicit = draw(st.booleans())
    axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1)) if explicit else None
    covered = axes if axes is not None else list(range(draw(st.integers(1, len(shape)))))
    starts = [draw(st.integers(-shape[a] - 1, shape[a] + 1)) for a in covered]
    ends = [draw(st.integers(-shape[a] - 1, shape[a] + 1)) for a in covered]
    steps = [draw(st.integers(1, 3)) for _ in covered]
    index = [slice(None)] * len(shape)
    for a, s, e, k in zip(covered, starts, ends, steps):
        index[a] = slice(s, e, k)
    attrs: dict[str, Attr] = {"starts": tuple(starts), "ends": tuple(ends)}
    if axes is not None:
        attrs["axes"] = tuple(a - len(shape) if draw(st.booleans()) else a for a in axes)
    if any(k != 1 for k in steps) or draw(st.booleans()):
        attrs["steps"] = tuple(steps)
    return OpCase([x], attrs, x[tuple(index)])


@st.composite
def gather_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    shape = draw(shapes(1, 3))
    x = array(rng, shape, dtype)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    a, size = axis % len(shape), shape[axis]
    idx = rng.integers(-size, size, size=draw(shapes(0, 2))).astype(draw(st.sampled_from(["int32", "int64"])))
    out = (*shape[:a], *idx.shape, *shape[a + 1 :])
    expected = np.empty(out, dtype=x.dtype)
    for o in np.ndindex(*out):
        k = int(idx[o[a : a + idx.ndim]]) % size
        expected[o] = x[(*o[:a], k, *o[a + idx.ndim :])]
    return OpCase([x, idx], {"axis": axis}, expected)


@st.composite
def split_case(draw, dtype: str) -> OpCase:
    """Given sizes (some may be 0), or equal parts of ceil(size / n), the last one smaller;
    the parts are numpy.split's at the running sums of the sizes."""
    shape = draw(shapes(1, 3, max_side=6))
    x = array(draw_rng(draw), shape, dtype)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    attrs: dict[str, Attr] = {"axis": axis} if axis != 0 or draw(st.booleans()) else {}
    if draw(st.booleans()):
        sizes = draw(st.lists(st.integers(0, size), min_size=1, max_size=4).filter(lambda s: sum(s) <= size))
        sizes[-1] += size - sum(sizes)
        attrs["sizes"] = tuple(sizes)
    else:
        n = draw(st.integers(1, size).filter(lambda n: (n - 1) * -(-size // n) < size))
        chunk = -(-size // n)
        sizes = [chunk] * (n - 1) + [size - chunk * (n - 1)]
    cuts = list(itertools.accumulate(sizes))[:-1]
    return OpCase([x], attrs, tuple(np.split(x, cuts, axis=axis)))


LAYOUT_CASES = {
    "concatenate": concatenate_case,
    "reshape": reshape_case,
    "flatten": flatten_case,
    "transpose": transpose_case,
    "squeeze": squeeze_case,
    "unsqueeze": unsqueeze_case,
    "expand": expand_case,
    "pad": pad_case,
    "slice": slice_case,
    "split": split_case,
    "gather": gather_case,
}
