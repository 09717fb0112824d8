"""byoc.reference_kernels.conv_pool (convolution, transposed convolution, pooling) against the
nested-loop definitions of tests/reference_kernels_support.py and the adjoint identity, and
byoc.shape_conv_pool against the kernels' actual output shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference_kernels_support import (
    CLOSE,
    FAST,
    conv_case,
    conv_transpose_case,
    loop_conv,
    loop_conv_transpose,
    loop_pool,
    pool_case,
    seeded_rng,
)

from byoc import shape_conv_pool
from byoc.reference_kernels import conv_pool

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
    z = seeded_rng(seed).standard_normal(shape_conv_pool.conv_transpose(y.shape, w.shape, **attrs))
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


def test_a_pools_padding_check_takes_no_time_whatever_its_attributes():
    """The windows in the padding are checked by arithmetic, not tap by tap, and the
    ones between are not enumerated: a mutated model with pads and kernels in the
    millions (as the ONNX fuzzer makes them) is answered at once."""
    import time

    started = time.perf_counter()
    big = 10**9
    shape = shape_conv_pool.max_pool((1, 1, 10**6), kernel_shape=[big], pads=[big - 1, big - 1])
    assert shape == (1, 1, 10**6 + big - 1)  # every window reaches the input: no refusal
    with pytest.raises(ValueError, match="window 0 covers padding only"):
        shape_conv_pool.max_pool((1, 1, 4), kernel_shape=[2], pads=[big, 0])
    with pytest.raises(ValueError, match="windows start in the padding"):  # sparse taps: one by one, bounded
        shape_conv_pool.max_pool((1, 1, 4), kernel_shape=[big], dilations=[5], pads=[5 * (big - 1), 5 * big])
    assert time.perf_counter() - started < 1.0
