"""Shared by the tests/test_reference_kernels_*.py files: nested-loop references of
convolution, transposed convolution and pooling (also used by tests/catalog_cases_networks.py),
hypothesis strategies of their cases, and the tolerances and settings those tests use."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

FAST = settings(max_examples=100, deadline=None)
CLOSE = {"rtol": 1e-12, "atol": 1e-12}
MAX_SIZE = {1: 7, 2: 5, 3: 3}  # spatial size bound per rank: the loop references stay quick


def seeded_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------- loop references


def inside(pos, shape) -> bool:
    return all(0 <= p < s for p, s in zip(pos, shape))


def loop_conv(x, w, *, strides, pads, dilations, groups):
    """Direct definition: y[n, m, o] = sum_c,k x[n, g*Cg + c, o*s - pb + k*d] * w[m, c, k]."""
    nsp = x.ndim - 2
    spatial, kernel = x.shape[2:], w.shape[2:]
    cg, mg = x.shape[1] // groups, w.shape[0] // groups
    out = []
    for i in range(nsp):
        extent, count = (kernel[i] - 1) * dilations[i] + 1, 0
        while count * strides[i] + extent <= spatial[i] + pads[i] + pads[nsp + i]:
            count += 1
        out.append(count)
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for n, m, *o in itertools.product(range(x.shape[0]), range(w.shape[0]), *map(range, out)):
        g, acc = m // mg, 0.0
        for c, k in itertools.product(range(cg), itertools.product(*map(range, kernel))):
            pos = [o[i] * strides[i] - pads[i] + k[i] * dilations[i] for i in range(nsp)]
            if inside(pos, spatial):
                acc += x[(n, g * cg + c, *pos)] * w[(m, c, *k)]
        y[(n, m, *o)] = acc
    return y


def loop_conv_transpose(x, w, *, strides, pads, output_padding, dilations, groups):
    """Scatter: x[n, c, i] * w[c, m, k] lands on y[n, g*Mg + m, i*s + k*d - pb]."""
    nsp = x.ndim - 2
    spatial, kernel = x.shape[2:], w.shape[2:]
    cg, mg = x.shape[1] // groups, w.shape[1]
    out = [
        strides[i] * (spatial[i] - 1)
        + output_padding[i]
        + (kernel[i] - 1) * dilations[i]
        + 1
        - pads[i]
        - pads[nsp + i]
        for i in range(nsp)
    ]
    y = np.zeros((x.shape[0], groups * mg, *out))
    for n, c, *i in itertools.product(range(x.shape[0]), range(x.shape[1]), *map(range, spatial)):
        for m, k in itertools.product(range(mg), itertools.product(*map(range, kernel))):
            pos = [i[a] * strides[a] + k[a] * dilations[a] - pads[a] for a in range(nsp)]
            if inside(pos, out):
                y[(n, (c // cg) * mg + m, *pos)] += x[(n, c, *i)] * w[(c, m, *k)]
    return y


def loop_pool(x, *, kind, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad=0):
    """Windows start at o*s - pb. Floor mode keeps those that end inside the end padding; ceil mode
    also one that overhangs it by less than a stride, then drops the last window if it starts past
    the input (ONNX's reference). None if a window holds no input element (the kernels reject that)."""
    nsp = x.ndim - 2
    spatial = x.shape[2:]
    out = []
    for i in range(nsp):
        extent, count = (kernel_shape[i] - 1) * dilations[i] + 1, 0
        padded_end = spatial[i] + pads[nsp + i]  # one past the last padded position
        while True:
            start = count * strides[i] - pads[i]
            limit = padded_end + (strides[i] - 1 if ceil_mode else 0)
            if start + extent > limit:
                break
            count += 1
        if ceil_mode and (count - 1) * strides[i] - pads[i] >= spatial[i]:
            count -= 1
        out.append(count)
    y = np.zeros((*x.shape[:2], *out))
    for n, c, *o in itertools.product(*map(range, x.shape[:2]), *map(range, out)):
        values, in_padded = [], 0
        for k in itertools.product(*map(range, kernel_shape)):
            pos = [o[i] * strides[i] - pads[i] + k[i] * dilations[i] for i in range(nsp)]
            if inside(pos, spatial):
                values.append(x[(n, c, *pos)])
            if all(-pads[i] <= pos[i] < spatial[i] + pads[nsp + i] for i in range(nsp)):
                in_padded += 1
        if not values:
            return None
        if kind == "max":
            y[(n, c, *o)] = max(values)
        else:
            y[(n, c, *o)] = sum(values) / (in_padded if count_include_pad else len(values))
    return y


# -------------------------------------------------------------------------------- strategies


@st.composite
def window_case(draw, *, grow=0, pads_below_extent=False, spatial=None):
    """(spatial rank, kernel, strides, dilations, pads, input sizes) with the kernel inside the padded
    input; ``grow`` raises the size bound, ``pads_below_extent`` keeps every pad under the window extent;
    ``spatial`` fixes the spatial rank (else 1 to 3)."""
    nsp = draw(st.integers(1, 3)) if spatial is None else spatial
    top = MAX_SIZE[nsp] + grow
    kernel = [draw(st.integers(1, 3 if nsp < 3 else 2)) for _ in range(nsp)]
    strides = [draw(st.integers(1, 3)) for _ in range(nsp)]
    dilations = [draw(st.integers(1, 2)) for _ in range(nsp)]
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)] * 2
    pads = [draw(st.integers(0, min(2, e - 1) if pads_below_extent else 2)) for e in extents]
    sizes = []
    for i in range(nsp):
        extent = (kernel[i] - 1) * dilations[i] + 1
        low = max(1, extent - pads[i] - pads[nsp + i])
        sizes.append(draw(st.integers(low, max(low, top))))
    return nsp, kernel, strides, dilations, pads, sizes


@st.composite
def conv_case(draw, spatial=None):
    nsp, kernel, strides, dilations, pads, sizes = draw(window_case(spatial=spatial))
    groups = draw(st.integers(1, 3))
    cg, mg, batch = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    rng = seeded_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((batch, groups * cg, *sizes))
    w = rng.standard_normal((groups * mg, cg, *kernel))
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "groups": groups}
    return x, w, attrs


@st.composite
def conv_transpose_case(draw, *, padding_below_stride=False):
    nsp = draw(st.integers(1, 3))
    top = min(MAX_SIZE[nsp], 4)
    kernel = [draw(st.integers(1, 3 if nsp < 3 else 2)) for _ in range(nsp)]
    strides = [draw(st.integers(1, 3)) for _ in range(nsp)]
    dilations = [draw(st.integers(1, 2)) for _ in range(nsp)]
    limit = strides if padding_below_stride else [max(s, d) for s, d in zip(strides, dilations)]
    output_padding = [draw(st.integers(0, b - 1)) for b in limit]
    sizes = [draw(st.integers(1, top)) for _ in range(nsp)]
    pads = []
    for i in range(nsp):  # keep at least one output element
        full = strides[i] * (sizes[i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
        begin = draw(st.integers(0, min(2, full - 1)))
        pads.append((begin, draw(st.integers(0, min(2, full - 1 - begin)))))
    pads = [p[0] for p in pads] + [p[1] for p in pads]
    groups, cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    rng = seeded_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 2)), groups * cg, *sizes))
    w = rng.standard_normal((groups * cg, mg, *kernel))
    attrs = {
        "strides": strides,
        "pads": pads,
        "output_padding": output_padding,
        "dilations": dilations,
        "groups": groups,
    }
    return x, w, attrs


@st.composite
def pool_case(draw, spatial=None):
    nsp, kernel, strides, dilations, pads, sizes = draw(
        window_case(grow=2, pads_below_extent=draw(st.booleans()), spatial=spatial)
    )
    rng = seeded_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((draw(st.integers(1, 2)), draw(st.integers(1, 2)), *sizes))
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "ceil_mode": draw(st.integers(0, 1)),
    }
    return x, attrs


def small_shape(min_rank=1, max_rank=4, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)
