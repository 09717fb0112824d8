"""byoc.reference_kernels' activations against their scalar definitions in Python's math (and
their tails and special values), and the casts, mod and bit_shift at the edges of their ranges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference_kernels_support import FAST

from byoc import shape_linear_norm
from byoc.reference_kernels import activations, casts, elementwise

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


def test_prelu_broadcasts_a_per_channel_slope(rng):
    x, slope = rng.standard_normal((2, 3, 4)), np.array([0.1, 0.2, 0.3]).reshape(3, 1)
    got = activations.prelu(x, slope)
    for c in range(3):
        np.testing.assert_array_equal(got[:, c], np.where(x[:, c] >= 0, x[:, c], slope[c, 0] * x[:, c]))
    assert got.shape == shape_linear_norm.prelu(x.shape, slope.shape)


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
