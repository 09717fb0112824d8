"""byoc.reference_kernels' normalisation (lrn, batch_norm, softmax, bias_add), linear algebra
(dense, matmul) and reductions against closed forms and loops over the definition, and their
shape functions (byoc.shape_linear_norm, byoc.shape_reductions) against the outputs' shapes."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from reference_kernels_support import CLOSE, FAST, seeded_rng, small_shape

from byoc import shape_linear_norm, shape_reductions
from byoc.reference_kernels import normalization, reductions

# ------------------------------------------------------------------------------ normalisation


@FAST
@given(st.integers(1, 6), st.integers(1, 7), st.integers(0, 2**32 - 1))
def test_lrn_matches_the_onnx_channel_window(size, channels, seed):
    x = seeded_rng(seed).standard_normal((2, channels, 3))
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
    x = seeded_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(shape) * 5
    got = normalization.softmax(x, axis=axis)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, **CLOSE)
    np.testing.assert_allclose(got, np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True), **CLOSE)
    # exp(1000) overflows
    np.testing.assert_allclose(normalization.softmax(x + 1000.0, axis=axis), got, **CLOSE)
    log = normalization.log_softmax(x + 1000.0, axis=axis)
    np.testing.assert_allclose(log, np.log(got), rtol=1e-10, atol=1e-10)
    assert got.shape == log.shape == shape_linear_norm.softmax(shape, axis=axis)


@FAST
@given(small_shape(1, 4), st.data())
def test_bias_add_adds_along_the_axis(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = seeded_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, bias = rng.standard_normal(shape), rng.standard_normal(shape[axis])
    got = normalization.bias_add(x, bias, axis=axis)
    a = axis % len(shape)
    for index in np.ndindex(*shape):
        assert got[index] == x[index] + bias[index[a]]
    assert got.shape == shape_linear_norm.bias_add(x.shape, bias.shape, axis=axis)


# ----------------------------------------------------------------------------- linear algebra


@FAST
@given(small_shape(max_rank=3), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_dense_is_x_times_w_transposed(shape, units, seed):
    rng = seeded_rng(seed)
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
    rng = seeded_rng(data.draw(st.integers(0, 2**32 - 1)))
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
    x = seeded_rng(data.draw(st.integers(0, 2**32 - 1))).uniform(0.5, 1.5, shape)
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
