"""byoc.reference_kernels against independent computations written here (nested loops over the
definition, adjoint identities, closed forms), and the shape functions (byoc.shape_*) against the
kernels' actual output shapes and against every invalid attribute combination it must reject."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from byoc import shape_conv_pool, shape_indexing, shape_layout, shape_linear_norm, shape_reductions
from byoc.reference_kernels import (
    activations,
    by_name,
    casts,
    conv_pool,
    data_movement,
    elementwise,
    normalization,
    reductions,
)

FAST = settings(max_examples=100, deadline=None)
CLOSE = {"rtol": 1e-12, "atol": 1e-12}
MAX_SIZE = {1: 7, 2: 5, 3: 3}  # spatial size bound per rank: the loop references stay quick


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------- loop references


def _inside(pos, shape) -> bool:
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
            if _inside(pos, spatial):
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
            if _inside(pos, out):
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
            if _inside(pos, spatial):
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
    rng = _rng(draw(st.integers(0, 2**32 - 1)))
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
    rng = _rng(draw(st.integers(0, 2**32 - 1)))
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
    rng = _rng(draw(st.integers(0, 2**32 - 1)))
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


# ------------------------------------------------------------------------------ convolutions


@FAST
@given(conv_case())
def test_conv_matches_the_nested_loop_definition(case):
    x, w, attrs = case
    got = conv_pool.conv(x, w, **attrs)
    want = loop_conv(x, w, **attrs)
    assert got.shape == want.shape == shape_conv_pool.conv(x.shape, w.shape, **attrs)
    np.testing.assert_allclose(got, want, **CLOSE)


def test_conv_defaults_are_unit_strides_and_no_padding(rng):
    x, w = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 2))
    want = loop_conv(x, w, strides=[1, 1], pads=[0] * 4, dilations=[1, 1], groups=1)
    np.testing.assert_allclose(conv_pool.conv(x, w), want, **CLOSE)


def test_depthwise_conv_convolves_each_channel_alone(rng):
    x, w = rng.standard_normal((1, 5, 7, 7)), rng.standard_normal((5, 1, 3, 3))
    got = conv_pool.conv(x, w, pads=[1, 1, 1, 1], groups=5)
    for c in range(5):
        alone = conv_pool.conv(x[:, c : c + 1], w[c : c + 1], pads=[1, 1, 1, 1])
        np.testing.assert_allclose(got[:, c : c + 1], alone, **CLOSE)


def test_conv_keeps_integers_exact_in_float64():
    x = np.arange(2 * 16, dtype=np.int32).reshape(1, 2, 4, 4)
    w = np.ones((1, 2, 2, 2), dtype=np.int32)
    got = conv_pool.conv(x, w)
    assert got.dtype == np.float64
    assert got[0, 0, 0, 0] == 0 + 1 + 4 + 5 + 16 + 17 + 20 + 21


@FAST
@given(conv_transpose_case())
def test_conv_transpose_matches_the_scatter_definition(case):
    x, w, attrs = case
    got = conv_pool.conv_transpose(x, w, **attrs)
    want = loop_conv_transpose(x, w, **attrs)
    assert got.shape == want.shape == shape_conv_pool.conv_transpose(x.shape, w.shape, **attrs)
    np.testing.assert_allclose(got, want, **CLOSE)


@FAST
@given(conv_transpose_case(padding_below_stride=True), st.integers(0, 2**32 - 1))
def test_conv_transpose_is_the_adjoint_of_conv(case, seed):
    """<conv(z, w), y> == <z, conv_transpose(y, w)> for the same strides, pads, dilations, groups."""
    y, w, attrs = case
    z = _rng(seed).standard_normal(shape_conv_pool.conv_transpose(y.shape, w.shape, **attrs))
    conv_attrs = {k: v for k, v in attrs.items() if k != "output_padding"}
    forward = conv_pool.conv(z, w, **conv_attrs)
    assert forward.shape == y.shape
    lhs, rhs = np.vdot(forward, y), np.vdot(z, conv_pool.conv_transpose(y, w, **attrs))
    assert math.isclose(lhs, rhs, rel_tol=1e-10, abs_tol=1e-10)


# ------------------------------------------------------------------------------------ pooling


@FAST
@given(pool_case(), st.sampled_from(["max", "avg0", "avg1"]))
def test_pooling_matches_the_nested_loop_definition(case, kind):
    x, attrs = case
    extra = {} if kind == "max" else {"count_include_pad": int(kind[-1])}
    kernel, shape_fn = (
        (conv_pool.max_pool, shape_conv_pool.max_pool)
        if kind == "max"
        else (conv_pool.avg_pool, shape_conv_pool.avg_pool)
    )
    want = loop_pool(x, kind=kind[:3], **attrs, **extra)
    if want is None:  # some window covers padding only: both must refuse
        with pytest.raises(ValueError, match="covers padding only"):
            shape_fn(x.shape, **attrs, **extra)
        with pytest.raises(ValueError, match="covers padding only"):
            kernel(x, **attrs, **extra)
        return
    got = kernel(x, **attrs, **extra)
    assert got.shape == want.shape == shape_fn(x.shape, **attrs, **extra)
    np.testing.assert_allclose(got, want, **CLOSE)


def test_ceil_mode_drops_a_window_that_would_start_in_the_end_padding():
    # size 4, kernel 2, stride 2, pads 0+1: ceil((5-2)/2)+1 = 3 windows, but the third starts at 4
    x = np.arange(4.0).reshape(1, 1, 4)
    assert shape_conv_pool.max_pool(x.shape, kernel_shape=[2], strides=[2], pads=[0, 1], ceil_mode=1) == (
        1,
        1,
        2,
    )
    # size 5: the third window starts at 4, inside the input, and overhangs
    x = np.arange(1.0, 6.0).reshape(1, 1, 5)
    got = conv_pool.avg_pool(x, kernel_shape=[2], strides=[2], ceil_mode=1, count_include_pad=1)
    np.testing.assert_array_equal(got.ravel(), [1.5, 3.5, 5.0])  # the overhang is not counted


def test_global_pools_keep_spatial_axes_as_one(rng):
    x = rng.standard_normal((2, 3, 4, 5, 2))
    flat = x.reshape(2, 3, -1)
    for kernel, want in (
        (conv_pool.global_avg_pool, flat.mean(-1)),
        (conv_pool.global_max_pool, flat.max(-1)),
    ):
        got = kernel(x)
        assert got.shape == (2, 3, 1, 1, 1) == shape_conv_pool.global_pool(x.shape)
        np.testing.assert_allclose(got.reshape(2, 3), want, **CLOSE)


# ------------------------------------------------------------------------------ normalisation


@FAST
@given(st.integers(1, 6), st.integers(1, 7), st.integers(0, 2**32 - 1))
def test_lrn_matches_the_onnx_channel_window(size, channels, seed):
    x = _rng(seed).standard_normal((2, channels, 3))
    alpha, beta, bias = 0.3, 0.75, 2.0
    got = normalization.lrn(x, size=size, alpha=alpha, beta=beta, bias=bias)
    want = np.empty_like(x)
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + math.ceil((size - 1) / 2))
        square_sum = (x[:, lo : hi + 1] ** 2).sum(axis=1)
        want[:, c] = x[:, c] / (bias + alpha / size * square_sum) ** beta
    assert got.shape == shape_linear_norm.lrn(x.shape, size=size)
    np.testing.assert_allclose(got, want, **CLOSE)


def test_batch_norm_normalises_each_channel(rng):
    x = rng.standard_normal((2, 3, 4, 4))
    scale, bias, mean = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    var = rng.uniform(0.5, 2.0, 3)
    got = normalization.batch_norm(x, scale, bias, mean, var, epsilon=1e-3)
    for c in range(3):
        want = scale[c] * (x[:, c] - mean[c]) / math.sqrt(var[c] + 1e-3) + bias[c]
        np.testing.assert_allclose(got[:, c], want, **CLOSE)


@FAST
@given(small_shape(), st.data())
def test_softmax_sums_to_one_and_is_shift_invariant(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape) * 5
    got = normalization.softmax(x, axis=axis)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, **CLOSE)
    np.testing.assert_allclose(got, np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True), **CLOSE)
    # exp(1000) overflows
    np.testing.assert_allclose(normalization.softmax(x + 1000.0, axis=axis), got, **CLOSE)
    log = normalization.log_softmax(x + 1000.0, axis=axis)
    np.testing.assert_allclose(log, np.log(got), rtol=1e-10, atol=1e-10)
    assert got.shape == log.shape == shape_linear_norm.softmax(shape, axis=axis)


# ----------------------------------------------------------------------------- linear algebra


@FAST
@given(small_shape(max_rank=3), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_dense_is_x_times_w_transposed(shape, units, seed):
    rng = _rng(seed)
    x, w = rng.standard_normal(shape), rng.standard_normal((units, shape[-1]))
    got = reductions.dense(x, w)
    want = np.zeros((*shape[:-1], units))
    for idx in np.ndindex(*shape[:-1]):
        for u in range(units):
            want[(*idx, u)] = sum(x[(*idx, i)] * w[u, i] for i in range(shape[-1]))
    assert got.shape == shape_linear_norm.dense(x.shape, w.shape)
    np.testing.assert_allclose(got, want, **CLOSE)


@FAST
@given(st.data())
def test_matmul_shapes_follow_numpy_broadcasting(data):
    batch = data.draw(small_shape(0, 3, 1, 3))
    m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
    a_batch = tuple(1 if data.draw(st.booleans()) else d for d in batch)
    b_batch = batch[data.draw(st.integers(0, len(batch))) :]
    a_shape = (k,) if data.draw(st.booleans()) else (*a_batch, m, k)
    b_shape = (k,) if data.draw(st.booleans()) else (*b_batch, k, n)
    rng = _rng(data.draw(st.integers(0, 2**32 - 1)))
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    got = reductions.matmul(a, b)
    assert got.shape == shape_linear_norm.matmul(a_shape, b_shape)
    a2 = a if a.ndim > 1 else a[None]
    b2 = b if b.ndim > 1 else b[:, None]
    full = np.einsum("...ij,...jk->...ik", a2, b2)
    np.testing.assert_allclose(got, full.reshape(got.shape), **CLOSE)


# ---------------------------------------------------------------------------------- reductions


@FAST
@given(small_shape(), st.data())
def test_reductions_match_one_axis_at_a_time(shape, data):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank))
    keepdims = data.draw(st.integers(0, 1))
    x = _rng(data.draw(st.integers(0, 2**32 - 1))).uniform(0.5, 1.5, shape)
    gone = sorted({a % rank for a in axes} if axes else range(rank), reverse=True)
    for kernel, step in (
        (reductions.reduce_sum, np.sum),
        (reductions.reduce_max, np.max),
        (reductions.reduce_min, np.min),
        (reductions.reduce_prod, np.prod),
        (reductions.reduce_mean, np.mean),
    ):
        want = x
        for a in gone:
            want = step(want, axis=a, keepdims=bool(keepdims))
        got = kernel(x, axes=axes, keepdims=keepdims)
        assert got.shape == shape_reductions.reduce(shape, axes=axes, keepdims=keepdims)
        np.testing.assert_allclose(got, want, **CLOSE)


# ----------------------------------------------------------------------------------- shape ops


@FAST
@given(small_shape(max_rank=5), st.data())
def test_layout_ops_agree_with_their_shape_functions(shape, data):
    x = np.arange(math.prod(shape), dtype=np.int16).reshape(shape)
    rank = len(shape)
    perm = data.draw(st.permutations(range(rank)))
    got = data_movement.transpose(x, perm=perm)
    assert got.shape == shape_layout.transpose(shape, perm=perm) and got.dtype == x.dtype
    assert all(
        got[idx] == x[tuple(idx[perm.index(a)] for a in range(rank))] for idx in np.ndindex(*got.shape)
    )

    axis = data.draw(st.integers(-rank, rank))
    got = data_movement.flatten(x, axis=axis)
    assert got.shape == shape_layout.flatten(shape, axis=axis)
    np.testing.assert_array_equal(got.ravel(), x.ravel())

    count = data.draw(st.integers(1, 2))
    out_rank = rank + count
    new = data.draw(
        st.lists(
            st.integers(-out_rank, out_rank - 1),
            min_size=count,
            max_size=count,
            unique_by=lambda a: a % out_rank,
        )
    )
    got = data_movement.unsqueeze(x, axes=new)
    assert got.shape == shape_layout.unsqueeze(shape, axes=new)
    assert all(got.shape[a] == 1 for a in new)
    assert data_movement.squeeze(got, axes=new).shape == shape
    assert data_movement.squeeze(x).shape == tuple(d for d in shape if d != 1) == shape_layout.squeeze(shape)

    target = list(data.draw(st.permutations(shape)))  # same element count
    if target and data.draw(st.booleans()):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    got = data_movement.reshape(x, target)
    assert got.shape == shape_layout.reshape(shape, target)
    np.testing.assert_array_equal(got.ravel(), x.ravel())


def test_reshape_zero_copies_the_input_dimension_unless_allowzero():
    assert shape_layout.reshape((2, 3, 4), [0, -1]) == (2, 12)
    assert shape_layout.reshape((0, 3), [0, 3], allowzero=1) == (0, 3)
    assert data_movement.reshape(np.zeros((2, 3, 4)), [0, 0, 2, 2]).shape == (2, 3, 2, 2)


@FAST
@given(small_shape(max_rank=3), st.data())
def test_expand_and_concatenate_agree_with_their_shape_functions(shape, data):
    x = _rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    lead = data.draw(small_shape(0, 2, 1, 3))
    target = (*lead, *(data.draw(st.sampled_from([1, d])) for d in shape))
    got = data_movement.expand(x, target)
    assert got.shape == shape_layout.expand(shape, target) == np.broadcast_shapes(shape, target)
    for idx in np.ndindex(*got.shape):
        tail = idx[len(idx) - len(shape) :]
        assert got[idx] == x[tuple(0 if d == 1 else i for i, d in zip(tail, shape))]

    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    others = [np.ones(shape[: axis % len(shape)] + (k,) + shape[axis % len(shape) + 1 :]) for k in (1, 2)]
    got = data_movement.concatenate(x, *others, axis=axis)
    assert got.shape == shape_layout.concatenate(x.shape, *(o.shape for o in others), axis=axis)
    np.testing.assert_array_equal(np.take(got, range(shape[axis]), axis=axis), x)


def _reflect(i: int, size: int) -> int:
    while not 0 <= i < size:
        i = -i if i < 0 else 2 * (size - 1) - i
    return i


@FAST
@given(small_shape(max_rank=3, max_side=4), st.sampled_from(["constant", "reflect", "edge"]), st.data())
def test_pad_maps_every_output_element_to_its_source(shape, mode, data):
    top = [(d - 1 if mode == "reflect" else 3) for d in shape]
    pads = [data.draw(st.integers(0, t)) for t in top + top]  # begins, then ends
    x = _rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    got = data_movement.pad(x, pads=pads, mode=mode, value=-7.5)
    assert got.shape == shape_layout.pad(shape, pads=pads, mode=mode)
    for idx in np.ndindex(*got.shape):
        src = [i - pads[a] for a, i in enumerate(idx)]
        if mode == "constant":
            want = x[tuple(src)] if _inside(src, shape) else -7.5
        elif mode == "edge":
            want = x[tuple(min(max(s, 0), d - 1) for s, d in zip(src, shape))]
        else:
            want = x[tuple(_reflect(s, d) for s, d in zip(src, shape))]
        assert got[idx] == want


@FAST
@given(small_shape(max_rank=3), small_shape(0, 2, 1, 3), st.data())
def test_gather_takes_indices_along_the_axis(shape, indices_shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    rng = _rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal(shape)
    indices = rng.integers(-size, size, indices_shape)
    got = data_movement.gather(x, indices, axis=axis)
    a = axis % len(shape)
    assert got.shape == shape_indexing.gather(shape, indices_shape, axis=axis)
    for idx in np.ndindex(*got.shape):
        pre, mid, post = idx[:a], idx[a : a + len(indices_shape)], idx[a + len(indices_shape) :]
        assert got[idx] == x[(*pre, int(indices[mid]) % size, *post)]


def test_gather_rejects_an_index_out_of_range():
    with pytest.raises(ValueError, match="index 3 is out of range for axis size 3"):
        data_movement.gather(np.zeros(3), np.array([0, 3]))
    with pytest.raises(ValueError, match="index -4"):
        data_movement.gather(np.zeros(3), np.array([-4]))


def _onnx_slice(size: int, start: int, end: int, step: int) -> list[int]:
    """ONNX Slice's documented rule, spelled out."""
    start, end = start + size if start < 0 else start, end + size if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), size), min(max(end, 0), size)
    else:
        start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
    picked, i = [], start
    while (i < end) if step > 0 else (i > end):
        picked.append(i)
        i += step
    return picked


@FAST
@given(small_shape(max_rank=3, max_side=5), st.data())
def test_slice_follows_onnx_clamping(shape, data):
    rank = len(shape)
    axes = data.draw(
        st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank, unique_by=lambda a: a % rank)
    )
    big = st.integers(-9, 9) | st.sampled_from([-(2**63), 2**63 - 1])
    starts, ends = [data.draw(big) for _ in axes], [data.draw(big) for _ in axes]
    steps = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in axes]
    x = _rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    got = data_movement.slice(x, starts=starts, ends=ends, axes=axes, steps=steps)
    want = x
    for a, s, e, t in zip(axes, starts, ends, steps):
        want = np.take(want, _onnx_slice(shape[a], s, e, t), axis=a)
    assert (
        got.shape == want.shape == shape_layout.slice(shape, starts=starts, ends=ends, axes=axes, steps=steps)
    )
    np.testing.assert_array_equal(got, want)


def test_slice_onnx_examples_and_where_it_differs_from_python():
    data = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    got = data_movement.slice(data, starts=[1, 0], ends=[2, 3], axes=[0, 1], steps=[1, 2])
    np.testing.assert_array_equal(got, [[5, 7]])
    np.testing.assert_array_equal(data_movement.slice(data, starts=[0, 1], ends=[-1, 1000]), [[2, 3, 4]])
    # a start before the beginning with a negative step is clamped to 0 (Python gives nothing)
    np.testing.assert_array_equal(
        data_movement.slice(np.arange(5), starts=[-10], ends=[-100], steps=[-1]), [0]
    )
    assert list(range(5))[-10:-100:-1] == []


@FAST
@given(small_shape(max_rank=3, max_side=6), st.data())
def test_split_parts_concatenate_back(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    x = _rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
    if data.draw(st.booleans()):
        cuts = sorted(data.draw(st.lists(st.integers(0, size), max_size=3)))
        attrs = {"sizes": [b - a for a, b in zip([0, *cuts], [*cuts, size])]}
    else:
        attrs = {
            "num_outputs": data.draw(st.integers(1, size).filter(lambda n: (n - 1) * -(-size // n) < size))
        }
    parts = data_movement.split(x, axis=axis, **attrs)
    assert tuple(p.shape for p in parts) == shape_layout.split(shape, axis=axis, **attrs)
    np.testing.assert_array_equal(np.concatenate(parts, axis=axis), x)
    if "num_outputs" in attrs:
        chunk = -(-size // attrs["num_outputs"])
        assert all(p.shape[axis] == chunk for p in parts[:-1]) and 1 <= parts[-1].shape[axis] <= chunk


# ---------------------------------------------------------------------------------------- math

FLOATS = st.lists(st.floats(-30, 30, allow_nan=False), min_size=1, max_size=20).map(np.array)


@FAST
@given(FLOATS)
def test_activations_match_their_scalar_definitions(values):
    def each(fn):
        return np.array([fn(float(v)) for v in values])

    def expm1_or(v, alpha):
        return v if v > 0 else alpha * math.expm1(v)

    cases = [
        (activations.erf(values), each(math.erf)),
        (activations.relu(values), each(lambda v: max(v, 0.0))),
        (activations.sigmoid(values), each(lambda v: 1 / (1 + math.exp(-v)))),
        (activations.tanh(values), each(math.tanh)),
        (activations.softplus(values), each(lambda v: math.log1p(math.exp(v)))),
        (activations.softsign(values), each(lambda v: v / (1 + abs(v)))),
        (activations.elu(values, alpha=0.7), each(lambda v: expm1_or(v, 0.7))),
        (
            activations.selu(values),
            each(lambda v: activations.SELU_GAMMA * expm1_or(v, activations.SELU_ALPHA)),
        ),
        (activations.hard_sigmoid(values), each(lambda v: min(1.0, max(0.0, 0.2 * v + 0.5)))),
        (activations.leaky_relu(values), each(lambda v: v if v >= 0 else 0.01 * v)),
        (activations.clip(values, min=-1.0, max=2.0), each(lambda v: min(max(v, -1.0), 2.0))),
        (activations.gelu(values), each(lambda v: v * 0.5 * math.erfc(-v / math.sqrt(2)))),
    ]
    for got, want in cases:
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)


def test_math_tails_and_special_values():
    assert activations.erf(np.array([1.0]))[0] == pytest.approx(0.8427007929497149, rel=1e-15)
    # gelu(-10) = -10 * Phi(-10); 1 + erf(-10/sqrt 2) would round to 0
    assert activations.gelu(np.array([-10.0]))[0] == pytest.approx(-10 * 7.619853024160527e-24, rel=1e-12)
    np.testing.assert_allclose(
        activations.gelu(np.array([-2.0, 0.5])),
        [-2.0 * 0.5 * (1 + math.erf(-2 / 2**0.5)), 0.5 * 0.5 * (1 + math.erf(0.5 / 2**0.5))],
        rtol=1e-15,
    )
    assert activations.softplus(np.array([800.0]))[0] == 800.0  # exp(800) overflows
    assert activations.sigmoid(np.array([-800.0, 800.0])).tolist() == [0.0, 1.0]
    assert activations.clip(np.array([0.0, np.nan]), min=3.0, max=1.0)[0] == 1.0  # min > max: max everywhere
    assert np.isnan(activations.clip(np.array([np.nan]), min=0.0, max=1.0)[0])


def test_erf_and_gelu_of_a_scalar_are_arrays():
    """np.frompyfunc gives a Python float for a 0-d input; the kernels still return numpy float64."""
    for kernel in (activations.erf, activations.gelu):
        got = kernel(np.array(0.5, np.float32))
        assert isinstance(got, (np.ndarray, np.float64)) and got.shape == () and got.dtype == np.float64
    assert activations.erf(np.array(0.5)) == pytest.approx(math.erf(0.5), rel=1e-15)


@FAST
@given(small_shape(1, 4), st.data())
def test_bias_add_adds_along_the_axis(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = _rng(data.draw(st.integers(0, 2**32 - 1)))
    x, bias = rng.standard_normal(shape), rng.standard_normal(shape[axis])
    got = normalization.bias_add(x, bias, axis=axis)
    a = axis % len(shape)
    for index in np.ndindex(*shape):
        assert got[index] == x[index] + bias[index[a]]
    assert got.shape == shape_linear_norm.bias_add(x.shape, bias.shape, axis=axis)


def test_where_takes_nonzero_and_nan_as_true():
    cond = np.array([0.0, -0.0, 1.0, np.nan, -2.0])
    got = data_movement.where(cond, np.arange(5), np.full(5, -1))
    assert got.tolist() == [-1, -1, 2, 3, 4]
    ints = data_movement.where(np.array([[1], [0]], np.int32), np.int32(7), np.zeros(3, np.int32))
    assert ints.tolist() == [[7, 7, 7], [0, 0, 0]]


def test_prelu_broadcasts_a_per_channel_slope(rng):
    x, slope = rng.standard_normal((2, 3, 4)), np.array([0.1, 0.2, 0.3]).reshape(3, 1)
    got = activations.prelu(x, slope)
    for c in range(3):
        np.testing.assert_array_equal(got[:, c], np.where(x[:, c] >= 0, x[:, c], slope[c, 0] * x[:, c]))
    assert got.shape == shape_linear_norm.prelu(x.shape, slope.shape)


# ------------------------------------------------------------------------------- invalid cases

X4 = (1, 4, 5, 5)
W4 = (6, 2, 3, 3)
INVALID = [
    # (kernel, shape function, input shapes, extra positional, attributes, message)
    (
        "conv",
        "conv",
        [X4, W4],
        [],
        {"groups": 2, "pads": [-1, 0, 0, 0]},
        r"pads\[0\] = -1 must be non-negative",
    ),
    ("conv", "conv", [X4, W4], [], {"groups": 2, "strides": [1, 0]}, r"strides\[1\] = 0 must be positive"),
    (
        "conv",
        "conv",
        [X4, W4],
        [],
        {"groups": 2, "dilations": [-1, 1]},
        r"dilations\[0\] = -1 must be positive",
    ),
    ("conv", "conv", [X4, W4], [], {"groups": 2, "strides": [1, 1, 1]}, r"strides has 3 values .*expected 2"),
    ("conv", "conv", [X4, W4], [], {"groups": 2, "pads": [1, 1]}, r"pads has 2 values .*expected 4"),
    (
        "conv",
        "conv",
        [(1, 3, 5, 5), (6, 1, 3, 3)],
        [],
        {"groups": 2},
        r"groups = 2 does not divide the 3 input",
    ),
    ("conv", "conv", [X4, (3, 2, 3, 3)], [], {"groups": 2}, r"does not divide the 3 output channels"),
    ("conv", "conv", [X4, (6, 4, 3, 3)], [], {"groups": 2}, r"weight shape\[1\] = 4, expected C/groups"),
    ("conv", "conv", [X4, W4], [], {"groups": 0}, r"groups = 0 must be positive"),
    ("conv", "conv", [X4, (6, 2, 7, 3)], [], {"groups": 2}, r"kernel extent 7 .* exceeds the padded input 5"),
    (
        "conv",
        "conv",
        [X4, W4],
        [],
        {"groups": 2, "dilations": [3, 1]},
        r"extent 7 \(kernel 3, dilations\[0\] = 3\)",
    ),
    ("conv", "conv", [X4, (6, 2, 3)], [], {"groups": 2}, r"weight shape \[6, 2, 3\] has rank 3, expected 4"),
    ("conv", "conv", [(4, 5), (6, 4)], [], {}, r"must be \(N, C, spatial...\)"),
    (
        "conv_transpose",
        "conv_transpose",
        [X4, (4, 3, 3, 3)],
        [],
        {"output_padding": [1, 0]},
        r"output_padding\[0\] = 1 must be smaller",
    ),
    (
        "conv_transpose",
        "conv_transpose",
        [X4, (3, 3, 3, 3)],
        [],
        {},
        r"weight shape\[0\] = 3, expected the 4 input",
    ),
    (
        "conv_transpose",
        "conv_transpose",
        [X4, (4, 3, 3, 3)],
        [],
        {"groups": 3},
        r"groups = 3 does not divide the 4 input",
    ),
    (
        "conv_transpose",
        "conv_transpose",
        [(1, 1, 1, 1), (1, 1, 1, 1)],
        [],
        {"pads": [1, 0, 0, 0]},
        r"leave no output on spatial axis 0",
    ),
    ("max_pool", "max_pool", [X4], [], {"kernel_shape": [3]}, r"kernel_shape has 1 values .*expected 2"),
    (
        "max_pool",
        "max_pool",
        [X4],
        [],
        {"kernel_shape": [6, 1]},
        r"window extent 6 .* exceeds the padded input 5",
    ),
    (
        "max_pool",
        "max_pool",
        [(1, 1, 3)],
        [],
        {"kernel_shape": [1], "pads": [2, 0]},
        r"window 0 covers padding only",
    ),
    (
        "max_pool",
        "max_pool",
        [X4],
        [],
        {"kernel_shape": [2, 2], "ceil_mode": 2},
        r"ceil_mode = 2 must be 0 or 1",
    ),
    (
        "avg_pool",
        "avg_pool",
        [X4],
        [],
        {"kernel_shape": [2, 2], "count_include_pad": 2},
        r"count_include_pad = 2",
    ),
    (
        "avg_pool",
        "avg_pool",
        [X4],
        [],
        {"kernel_shape": [2, 2], "strides": [0, 1]},
        r"strides\[0\] = 0 must be positive",
    ),
    ("global_avg_pool", "global_pool", [(2, 3)], [], {}, r"must be \(N, C, spatial...\)"),
    ("lrn", "lrn", [X4], [], {"size": 0}, r"size = 0 must be positive"),
    (
        "batch_norm",
        "batch_norm",
        [X4, (4,), (4,), (3,), (4,)],
        [],
        {},
        r"parameter 3 has shape \[3\], expected \[4\]",
    ),
    ("softmax", "softmax", [(2, 3)], [], {"axis": 2}, r"axis = 2 is out of range for rank 2"),
    ("log_softmax", "softmax", [(2, 3)], [], {"axis": -3}, r"axis = -3 is out of range"),
    ("dense", "dense", [(2, 3), (4, 5)], [], {}, r"last dimension 3 does not match weight shape\[1\] = 5"),
    ("matmul", "matmul", [(2, 3), (4, 5)], [], {}, r"inner dimensions differ"),
    ("matmul", "matmul", [(2, 2, 3), (3, 3, 5)], [], {}, r"batch dimensions .* do not broadcast"),
    ("matmul", "matmul", [(), (3,)], [], {}, r"must both have rank >= 1"),
    ("reduce_sum", "reduce", [(2, 3)], [], {"axes": [2]}, r"axes\[0\] = 2 is out of range"),
    ("reduce_max", "reduce", [(2, 3)], [], {"axes": [1, -1]}, r"names an axis twice"),
    ("reduce_mean", "reduce", [(2, 3)], [], {"keepdims": 2}, r"keepdims = 2 must be 0 or 1"),
    ("reshape", "reshape", [(2, 6)], [[-1, -1]], {}, r"more than one -1"),
    ("reshape", "reshape", [(2, 6)], [[5, 2]], {}, r"holds 10 elements, the input \[2, 6\] 12"),
    ("reshape", "reshape", [(2, 6)], [[-1, 5]], {}, r"cannot infer the -1"),
    ("reshape", "reshape", [(2, 6)], [[-2, -6]], {}, r"shape\[0\] = -2 is negative"),
    ("reshape", "reshape", [(12,)], [[3, 0]], {}, r"shape\[1\] = 0 copies input axis 1"),
    (
        "flatten",
        "flatten",
        [(2, 3)],
        [],
        {"axis": 3},
        r"axis = 3 is out of range for rank 2 \(valid: -2..2\)",
    ),
    ("transpose", "transpose", [(2, 3, 4)], [], {"perm": [0, 0, 1]}, r"not a permutation of 0..2"),
    ("transpose", "transpose", [(2, 3, 4)], [], {"perm": [1, 0]}, r"not a permutation"),
    ("squeeze", "squeeze", [(2, 1)], [], {"axes": [0]}, r"axis 0 has size 2, not 1"),
    ("squeeze", "squeeze", [(2, 1)], [], {"axes": [2]}, r"out of range"),
    ("unsqueeze", "unsqueeze", [(2, 3)], [], {"axes": [0, -4]}, r"names an axis twice"),
    ("unsqueeze", "unsqueeze", [(2, 3)], [], {"axes": [3]}, r"axes\[0\] = 3 is out of range for rank 3"),
    ("expand", "expand", [(2, 3)], [(4, 3, 2)], {}, r"do not broadcast"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0, -1, 0, 0]}, r"pads\[1\] = -1 must be non-negative"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0, 1]}, r"pads has 2 values .*expected 4"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0] * 4, "mode": "wrap"}, r"mode 'wrap' is not one of"),
    ("pad", "pad", [(2, 3)], [], {"pads": [0, 3, 0, 0], "mode": "reflect"}, r"smaller than its size 3"),
    ("slice", "slice", [(4,)], [], {"starts": [0], "ends": [3], "steps": [0]}, r"steps\[0\] is 0"),
    ("slice", "slice", [(4,)], [], {"starts": [0, 1], "ends": [3]}, r"starts has 2 values, ends 1"),
    (
        "slice",
        "slice",
        [(4, 4)],
        [],
        {"starts": [0, 0], "ends": [3, 3], "axes": [0, -2]},
        r"names an axis twice",
    ),
    ("split", "split", [(4, 6)], [], {"axis": 1, "sizes": [2, 3]}, r"add up to 5, axis 1 has size 6"),
    (
        "split",
        "split",
        [(4, 6)],
        [],
        {"sizes": [1, 1, 2], "num_outputs": 2},
        r"give 3 parts, but there are 2 outputs",
    ),
    ("split", "split", [(4, 6)], [], {"axis": 1}, r"give sizes, num_outputs or both"),
    ("split", "split", [(4, 6)], [], {"num_outputs": 3}, r"cannot split size 4 into non-empty parts"),
    ("gather", "gather", [(4, 6), (2,)], [], {"axis": 2}, r"axis = 2 is out of range"),
    ("concatenate", "concatenate", [(2, 3), (2, 3, 1)], [], {}, r"input 1 has shape \[2, 3, 1\]"),
    ("concatenate", "concatenate", [(2, 3), (2, 4)], [], {"axis": 0}, r"input 1 has shape \[2, 4\]"),
    ("concatenate", "concatenate", [(2, 3), (2, 4)], [], {"axis": -3}, r"out of range"),
    ("prelu", "prelu", [(2, 3), (2,)], [], {}, r"slope shape \[2\] does not broadcast"),
    ("bias_add", "bias_add", [(2, 3), (2,)], [], {"axis": 1}, r"bias shape \[2\], expected \[3\]"),
    ("bias_add", "bias_add", [(2, 3), (3,)], [], {"axis": 2}, r"axis = 2 is out of range for rank 2"),
]


SHAPE_MODULES = (shape_conv_pool, shape_linear_norm, shape_layout, shape_reductions, shape_indexing)
"""The modules of the shape functions that INVALID names."""


def shape_function(name: str):
    return next(getattr(m, name) for m in SHAPE_MODULES if hasattr(m, name))


@pytest.mark.parametrize(
    ("kernel", "shape_fn", "shapes", "extra", "attrs", "message"),
    INVALID,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(INVALID)],
)
def test_invalid_attributes_raise_value_error_naming_the_cause(
    kernel, shape_fn, shapes, extra, attrs, message
):
    with pytest.raises(ValueError, match=message):
        shape_function(shape_fn)(*shapes, *extra, **attrs)
    with pytest.raises(ValueError, match=message):
        by_name()[kernel](*(np.zeros(s) for s in shapes), *extra, **attrs)


# ------------------------------------------------------------------ the kernels of issue 29


def test_cast_saturates_at_the_exact_range_bounds():
    """2**63 and 2**64 are floats: the first value beyond int64's and uint64's range."""
    x = np.array([2.0**64, 2.0**64 - 2048, 2.0**63, -0.9, -1.0, np.nan, -np.inf])
    big = 2**64 - 2048
    assert casts.cast(x, to="uint64").tolist() == [2**64 - 1, big, 2**63, 0, 0, 0, 0]
    assert casts.cast(x, to="int64").tolist()[:3] == [2**63 - 1, 2**63 - 1, 2**63 - 1]
    assert casts.cast(x, to="int64").tolist()[3:] == [0, -1, 0, -(2**63)]


def test_cast_to_bool_and_back():
    x = np.array([0.0, -0.0, np.nan, 1e-300, -2.0])
    assert casts.cast(x, to="bool").tolist() == [False, False, True, True, True]
    assert casts.cast(np.array([True, False]), to="bfloat16").astype(np.float32).tolist() == [1.0, 0.0]
    assert casts.cast(np.array([-1, 256, 255], np.int32), to="uint8").tolist() == [255, 0, 255]


def test_cast_float64_to_bfloat16_rounds_through_float32():
    """1 + 2**-8 + 2**-33 rounds to the float32 tie 1 + 2**-8, which rounds to even, 1;
    rounded once it would be 1 + 2**-7."""
    x = np.array([1 + 2.0**-8 + 2.0**-33])
    assert casts.cast(x, to="bfloat16").astype(np.float64).tolist() == [1.0]
    assert casts.cast(x.astype(np.float32), to="bfloat16").astype(np.float64).tolist() == [1.0]


def test_mod_by_zero_and_minus_one_never_traps():
    a = np.array([-128, -7, 7, -7, 5], np.int8)
    b = np.array([-1, 0, -2, 2, 3], np.int8)
    assert elementwise.mod(a, b).tolist() == [0, 0, -1, 1, 2]
    assert elementwise.mod(a, b, fmod=1).tolist() == [0, 0, 1, -1, 2]
    assert elementwise.mod(np.array([-7.5, 7.5]), np.array([2.0, -2.0])).tolist() == [0.5, -0.5]
    assert elementwise.mod(np.array([-7.5, 7.5]), np.array([2.0, -2.0]), fmod=1).tolist() == [-1.5, 1.5]


def test_bit_shift_beyond_the_width():
    a = np.array([1, 255, 128, 3], np.uint8)
    shift = elementwise.bit_shift
    assert shift(a, np.array([8, 1, 7, 0], np.uint8), direction="LEFT").tolist() == [0, 254, 0, 3]
    s = np.array([-8, -8, 8, 64], np.int8)
    assert shift(s, np.array([1, 9, -1, 1], np.int8), direction="RIGHT").tolist() == [-4, -1, 0, 32]
    assert shift(s, np.array([1, 9, -1, 1], np.int8), direction="LEFT").tolist() == [-16, 0, 0, -128]
