"""Hypothesis cases of the catalog's type conversions (cast, bitcast, dequantize_linear,
quantize_linear), each element's expected value computed one at a time by the conversion's
rule, with NaN, infinities, ties and the integer types' extremes among the inputs."""

from __future__ import annotations

import math

import numpy as np
from catalog_cases_support import (
    OpCase,
    array,
    broadcast_triple,
    draw_rng,
    python_scalar,
    shapes,
    with_special,
    wrapped,
)
from hypothesis import strategies as st

from byoc.ir import DTYPES, is_float, is_integer
from byoc.shape_rule_quantize import QUANTIZED


def _cast_one(v, src: str, to: str):
    """byoc's cast rule for one element ``v`` (a Python bool, int or float)."""
    if to == "bool":
        return v != 0  # NaN != 0 is true
    if src == "bool":
        return int(v)
    if is_integer(to):
        if isinstance(v, float):
            if math.isnan(v):
                return 0
            info = np.iinfo(to)
            if math.isinf(v):
                return int(info.max) if v > 0 else int(info.min)
            return min(max(math.trunc(v), int(info.min)), int(info.max))
        return v  # an integer wraps (wrapped() reduces it)
    return v


@st.composite
def cast_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    to = draw(st.sampled_from(DTYPES))
    x = array(rng, draw(shapes()), dtype, -300, 300)
    x = with_special(
        rng, x, [np.nan, np.inf, -np.inf, 0.5, -0.5, 2.5, -1.7, 1e10, -1e10, 7e4, 3e38, 70000.5, -0.0]
    )
    values = [_cast_one(python_scalar(v), dtype, to) for v in x.ravel()]
    if is_integer(to):
        expected = wrapped(values, to, x.shape)
    elif to == "bool":
        expected = np.array(values, bool).reshape(x.shape)
    else:  # a float: each element rounded once from its exact value (float64 -> bfloat16 via float32)
        with np.errstate(over="ignore"):
            exact = np.array(values, np.float64)
            if to == "bfloat16" and dtype == "float64":
                exact = exact.astype(np.float32)
            expected = exact.astype(to).reshape(x.shape)
    return OpCase([x], {"to": to}, expected, out_dtype=to)


@st.composite
def bitcast_case(draw, dtype: str) -> OpCase:
    """x's bytes read as ``to`` (mostly of x's width; another width, or bool from another
    dtype, is refused): integers near 0 and their extremes, floats with NaN, infinities
    and -0.0. A NaN result is compared as a NaN, whatever its payload (the C's half types
    quieten a signaling one: int16 -127 is one as bfloat16)."""
    rng = draw_rng(draw)
    width = np.dtype(dtype).itemsize
    same = [d for d in DTYPES if np.dtype(d).itemsize == width and (d != "bool" or dtype == "bool")]
    to = draw(st.sampled_from(same)) if draw(st.integers(0, 3)) else draw(st.sampled_from(DTYPES))
    x = array(rng, draw(shapes()), dtype, -300, 300)
    x = with_special(rng, x, [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -65504.0])
    if is_integer(dtype) and x.size:
        info = np.iinfo(dtype)
        extremes = np.array([info.min, info.max, 0, 1], dtype)
        mask = rng.random(x.shape) < 0.25
        x[mask] = extremes[rng.integers(0, len(extremes), size=x.shape)][mask]
    if to not in same:
        return OpCase([x], {"to": to}, None, error="cannot reinterpret")
    expected = np.frombuffer(x.tobytes(), dtype=np.dtype(to)).reshape(x.shape)
    return OpCase([x], {"to": to}, expected, out_dtype=to)


@st.composite
def dequantize_case(draw, dtype: str) -> OpCase:
    """x of an integer dtype, a scale and a zero point of x's type, all broadcast; the
    drawn dtype is x's or, a float one, the scale's (and the result's). Expected: each
    element's (x - zero) * scale in float32, one at a time; a zero point of another
    type than x is refused."""
    rng = draw_rng(draw)
    x_type = dtype if is_integer(dtype) else draw(st.sampled_from([*QUANTIZED, "int32"]))
    s_type = dtype if is_float(dtype) else "float32"
    sx, ss, sz = draw(broadcast_triple())
    x, zero = array(rng, sx, x_type, -130, 130), array(rng, sz, x_type, -5, 5)
    scale = rng.uniform(0.001, 2.0, size=ss).astype(s_type)
    if draw(st.integers(0, 5)) == 5:  # not the first draw: derandomized runs take that one
        other = "int16" if x_type == "int8" else "int8"
        return OpCase([x, scale, zero.astype(other)], expected=None, error="zero point")
    out = np.broadcast_shapes(sx, ss, sz)
    flat = zip(*(np.broadcast_to(a, out).ravel() for a in (x, scale, zero)))
    f32 = np.float32
    values = [(f32(v) - f32(z)) * f32(sv) for v, sv, z in flat]
    with np.errstate(over="ignore"):  # a float16 result beyond its range is inf, as ONNX's is
        expected = np.array(values, np.float32).astype(s_type).reshape(out)
    return OpCase([x, scale, zero], expected=expected, out_dtype=s_type)


@st.composite
def quantize_case(draw, dtype: str) -> OpCase:
    """float32 x with NaN, infinities and exact halves, a float32 scale and a zero point
    of an 8- or 16-bit type (the drawn dtype, else any), all broadcast. Expected: each
    element's x / scale in float32 rounded half to even, plus the zero point, clamped to
    the zero point's range (NaN to its low end); an integer x is refused."""
    rng = draw_rng(draw)
    z_type = dtype if dtype in QUANTIZED else draw(st.sampled_from(QUANTIZED))
    sx, ss, sz = draw(broadcast_triple())
    scale = rng.choice(np.array([0.5, 0.25, 1.0, 0.1, 3.0], np.float32), size=ss)
    x = with_special(
        rng, array(rng, sx, "float32", -200, 200), [np.nan, np.inf, -np.inf, 0.5, -1.5, 2.5, 1e9]
    )
    zero = array(rng, sz, z_type, -4, 4)
    if draw(st.integers(0, 5)) == 5:  # not the first draw: derandomized runs take that one
        integers = np.clip(np.nan_to_num(x), -200, 200).astype("int16")  # x's specials have no int16
        return OpCase([integers, scale, zero], expected=None, error="not float32")
    info = np.iinfo(z_type)
    out = np.broadcast_shapes(sx, ss, sz)
    values = []
    for v, sv, z in zip(*(np.broadcast_to(a, out).ravel() for a in (x, scale, zero))):
        with np.errstate(all="ignore"):
            q = float(np.float32(v) / np.float32(sv))
        if math.isnan(q):
            values.append(info.min)
        elif math.isinf(q):
            values.append(info.max if q > 0 else info.min)
        else:  # Python's round() rounds half to even
            values.append(min(max(round(q) + int(z), info.min), info.max))
    return OpCase([x, scale, zero], expected=np.array(values, z_type).reshape(out), out_dtype=z_type)


CONVERSION_CASES = {
    "cast": cast_case,
    "bitcast": bitcast_case,
    "dequantize_linear": dequantize_case,
    "quantize_linear": quantize_case,
}
