"""Hypothesis cases of the catalog's integer products, conv_integer and matmul_integer:
8-bit codes over their whole range with zero points of their own types, each expected
result from the nested-loop convolution of tests/reference_kernels_support.py or an
einsum, on the codes less their zero points in Python's exact integers, wrapped to
int32 as ONNX's int32 sums wrap."""

from __future__ import annotations

import numpy as np
from catalog_cases_support import OpCase, broadcast_pair, draw_rng, wrapped
from hypothesis import strategies as st
from reference_kernels_support import conv_case, loop_conv

from byoc.shape_integer import CODES


def codes(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    """Codes of ``dtype`` over its whole range."""
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max) + 1, size=shape).astype(dtype)


def _zero(draw, rng: np.random.Generator, dtype: str, per: int | None) -> np.ndarray:
    """A zero point of ``dtype``: one value (shape () or (1,)), or ``per`` of them."""
    shape = draw(st.sampled_from([(), (1,)] + ([(per,)] if per is not None else [])))
    return codes(rng, shape, dtype)


def _centred(codes: np.ndarray, zero: np.ndarray, shape) -> np.ndarray:
    """The codes less their zero point, as Python integers in an object array."""
    return codes.astype(object) - (
        zero.astype(object).reshape(shape) if zero.size > 1 else int(zero.ravel()[0])
    )


@st.composite
def conv_integer_case(draw, dtype: str, spatial: int | None = None) -> OpCase:
    """x of the drawn dtype (``spatial`` axes, else 1 to 3), w of either 8-bit type; w's
    zero point one value or one per output channel. A zero point of another type than
    its codes is refused."""
    x, w, attrs = draw(conv_case(spatial))
    rng = draw_rng(draw)
    w_type = draw(st.sampled_from(CODES))
    x, w = codes(rng, x.shape, dtype), codes(rng, w.shape, w_type)
    xz, wz = _zero(draw, rng, dtype, None), _zero(draw, rng, w_type, w.shape[0])
    if draw(st.integers(0, 5)) == 5:  # not the first draw: derandomized runs take that one
        other = "int8" if dtype == "uint8" else "uint8"
        return OpCase([x, w, xz.astype(other), wz], dict(attrs), expected=None, error="zero point")
    xc = _centred(x, xz, None)
    wc = _centred(w, wz, (-1,) + (1,) * (w.ndim - 1))
    exact = loop_conv(xc, wc, **attrs)
    expected = wrapped(exact.ravel().tolist(), "int32", exact.shape)
    return OpCase([x, w, xz, wz], dict(attrs), expected, out_dtype="int32")


@st.composite
def matmul_integer_case(draw, dtype: str, batched: bool = True) -> OpCase:
    """a of the drawn dtype and (``batched``) batch axes that broadcast, b of either
    8-bit type; b's zero point one value or one per column. A per-row zero point of a is
    refused."""
    rng = draw_rng(draw)
    ba, bb = draw(broadcast_pair()) if batched else ((), ())
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    b_type = draw(st.sampled_from(CODES))
    a, b = codes(rng, (*ba, m, k), dtype), codes(rng, (*bb, k, n), b_type)
    az, bz = _zero(draw, rng, dtype, None), _zero(draw, rng, b_type, n)
    if m > 1 and draw(st.integers(0, 5)) == 5:
        return OpCase([a, b, codes(rng, (m,), dtype), bz], expected=None, error="not one value")
    exact = np.einsum("...ij,...jk->...ik", _centred(a, az, None), _centred(b, bz, (-1,)))
    expected = wrapped(np.asarray(exact).ravel().tolist(), "int32", np.shape(exact))
    return OpCase([a, b, az, bz], expected=expected, out_dtype="int32")


INTEGER_CASES = {"conv_integer": conv_integer_case, "matmul_integer": matmul_integer_case}
