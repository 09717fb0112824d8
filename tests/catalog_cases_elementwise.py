"""Hypothesis cases of the catalog's elementwise ops (unary, with float attributes, broadcasting
binary, where, comparisons, logic, isnan/isinf, mod, bitwise, bit_shift, round, prelu), each
expected result computed per element from Python's ``math`` or plain numpy expressions."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from catalog_cases_support import (
    Attr,
    OpCase,
    array,
    broadcast_pair,
    broadcast_triple,
    draw_rng,
    elementwise_expected,
    shapes,
    with_special,
    wrapped,
)
from hypothesis import strategies as st

from byoc.ir import DTYPES, is_float, is_integer

# ------------------------------------------------------------------- elementwise ops


def _per_element(fn: Callable[[float], float], x: np.ndarray) -> np.ndarray:
    flat = [fn(float(v)) for v in np.asarray(x, np.float64).ravel()]
    return np.array(flat, dtype=np.float64).reshape(x.shape)


def _gelu(v: float) -> float:
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def _gelu_tanh(v: float) -> float:
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))


def _softplus(v: float) -> float:
    return v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))


UNARY: dict[str, tuple[Callable[[float], float], float, float]] = {
    # op: (definition, lowest input, highest input)
    "negative": (lambda v: -v, -3, 3),
    "relu": (lambda v: v if v > 0 else 0.0, -3, 3),
    "copy": (lambda v: v, -3, 3),
    "exp": (math.exp, -20, 20),
    "log": (math.log, 0.01, 50),
    "sqrt": (math.sqrt, 0, 50),
    "rsqrt": (lambda v: 1 / math.sqrt(v), 0.01, 50),
    "square": (lambda v: v * v, -3, 3),
    "abs": (abs, -3, 3),
    "sign": (lambda v: float((v > 0) - (v < 0)), -3, 3),
    "floor": (math.floor, -3, 3),
    "ceil": (math.ceil, -3, 3),
    "reciprocal": (lambda v: 1 / v, 0.1, 5),
    "sin": (math.sin, -7, 7),
    "cos": (math.cos, -7, 7),
    "tan": (math.tan, -1.4, 1.4),
    "asin": (math.asin, -1, 1),
    "acos": (math.acos, -1, 1),
    "atan": (math.atan, -5, 5),
    "sinh": (math.sinh, -5, 5),
    "cosh": (math.cosh, -5, 5),
    "asinh": (math.asinh, -5, 5),
    "acosh": (math.acosh, 1, 10),
    "atanh": (math.atanh, -0.99, 0.99),
    "tanh": (math.tanh, -5, 5),
    "sigmoid": (lambda v: 1 / (1 + math.exp(-v)), -30, 30),
    "erf": (math.erf, -4, 4),
    "gelu": (_gelu, -6, 6),
    "gelu_tanh": (_gelu_tanh, -6, 6),
    "softplus": (_softplus, -40, 40),
    "softsign": (lambda v: v / (1 + abs(v)), -5, 5),
}
"""Unary ops without attributes, by their scalar definition."""


def _unary(op: str):
    fn, low, high = UNARY[op]

    @st.composite
    def case(draw, dtype: str) -> OpCase:
        x = array(draw_rng(draw), draw(shapes()), dtype, low, high)
        if is_integer(dtype):
            return OpCase([x], expected=wrapped([int(fn(int(v))) for v in x.ravel()], dtype, x.shape))
        if dtype == "bool":
            return OpCase(
                [x], expected=np.array([bool(fn(bool(v))) for v in x.ravel()], bool).reshape(x.shape)
            )
        return OpCase([x], expected=_per_element(fn, x))

    return case


def _attr_unary(definition, attrs):
    """A unary op with float attributes: ``attrs`` draws them, ``definition(v, **attrs)``."""

    @st.composite
    def case(draw, dtype: str) -> OpCase:
        x = array(draw_rng(draw), draw(shapes()), dtype, -4, 4)
        values = draw(attrs)
        return OpCase([x], values, _per_element(lambda v: definition(v, **values), x))

    return case


_ALPHA = st.floats(0.0, 2.0).map(lambda v: round(v, 3))


def _clip_bounds():
    return st.tuples(st.floats(-3, 3), st.floats(-3, 3)).map(lambda p: {"min": p[0], "max": p[1]})


def _clip(v: float, **bounds: float) -> float:
    """ONNX Clip: min(max(v, min), max), so a min above max gives max."""
    low = bounds["min"] if v < bounds["min"] else v
    return bounds["max"] if low > bounds["max"] else low


def _leaky_relu(v: float, alpha: float) -> float:
    return v if v >= 0 else alpha * v


def _elu(v: float, alpha: float) -> float:
    return v if v > 0 else alpha * math.expm1(v)


def _selu(v: float, alpha: float, gamma: float) -> float:
    return gamma * _elu(v, alpha)


def _hard_sigmoid(v: float, alpha: float, beta: float) -> float:
    return min(1.0, max(0.0, alpha * v + beta))


def _floats(*names: str):
    return st.fixed_dictionaries({name: _ALPHA for name in names})


ATTR_UNARY = {
    "clip": _attr_unary(_clip, _clip_bounds()),
    "leaky_relu": _attr_unary(_leaky_relu, _floats("alpha")),
    "elu": _attr_unary(_elu, _floats("alpha")),
    "selu": _attr_unary(_selu, _floats("alpha", "gamma")),
    "hard_sigmoid": _attr_unary(_hard_sigmoid, _floats("alpha", "beta")),
}


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": lambda a, b: np.where(a > b, a, b),
    "minimum": lambda a, b: np.where(a < b, a, b),
    "power": lambda a, b: np.vectorize(math.pow, otypes=[np.float64])(a, b),
}
"""Broadcasting binary ops, on float64 (or the integer dtype) arrays."""


def _binary(op: str):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = draw_rng(draw)
        sa, sb = draw(broadcast_pair())
        low = 0.1 if op == "power" else -3
        a, b = array(rng, sa, dtype, low, 3), array(rng, sb, dtype, -3, 3)
        if op == "divide":
            b[np.abs(b) < 0.1] = 0.5
        wide = [x if is_integer(dtype) else x.astype(np.float64) for x in (a, b)]
        return OpCase([a, b], expected=BINARY[op](*wide))

    return case


@st.composite
def where_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    sc, sx, sy = draw(broadcast_triple())
    c = array(rng, sc, "bool")
    x, y = array(rng, sx, dtype), array(rng, sy, dtype)
    out = np.broadcast_shapes(sc, sx, sy)
    flat = zip(*(np.broadcast_to(a, out).ravel() for a in (c, x, y)))
    expected = np.array([xv if cv else yv for cv, xv, yv in flat], dtype=x.dtype).reshape(out)
    if draw(st.booleans()):  # a condition of another dtype is refused, with a hint to cast it
        other = draw(st.sampled_from([d for d in DTYPES if d != "bool"]))
        return OpCase([c.astype(other), x, y], expected=None, error="condition must be bool")
    return OpCase([c, x, y], expected=expected)


# ------------------------------------------------ comparisons, logic, predicates, integers


COMPARE: dict[str, Callable[[object, object], bool]] = {
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less": lambda a, b: a < b,
    "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
}


def _compare(op: str):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = draw_rng(draw)
        sa, sb = draw(broadcast_pair())
        a, b = array(rng, sa, dtype, -2, 2), array(rng, sb, dtype, -2, 2)
        if is_float(dtype):  # equal elements, NaN and infinities
            a = np.round(a.astype(np.float64)).astype(dtype)
            b = with_special(
                rng, np.round(b.astype(np.float64)).astype(dtype), [np.nan, np.inf, -np.inf, 1.0]
            )
        return OpCase([a, b], expected=elementwise_expected(COMPARE[op], [a, b], "bool"), out_dtype="bool")

    return case


LOGICAL: dict[str, Callable[..., bool]] = {
    "logical_and": lambda a, b: a and b,
    "logical_or": lambda a, b: a or b,
    "logical_xor": lambda a, b: a != b,
    "logical_not": lambda a: not a,
}


def _logical(op: str):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = draw_rng(draw)
        shapes_ = draw(broadcast_pair())[: 1 if op == "logical_not" else 2]
        xs = [array(rng, s, "bool") for s in shapes_]
        return OpCase(xs, expected=elementwise_expected(LOGICAL[op], xs, "bool"))

    return case


def _predicate(op: str):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = draw_rng(draw)
        x = with_special(rng, array(rng, draw(shapes()), dtype), [np.nan, np.inf, -np.inf])
        attrs: dict[str, Attr] = {}
        if op == "isinf":
            attrs = {
                k: draw(st.booleans()) for k in ("detect_positive", "detect_negative") if draw(st.booleans())
            }
            pos, neg = attrs.get("detect_positive", True), attrs.get("detect_negative", True)
            fn = lambda v: math.isinf(v) and (pos if v > 0 else neg)  # noqa: E731
        else:
            fn = math.isnan
        return OpCase([x], attrs, elementwise_expected(fn, [x], "bool"), out_dtype="bool")

    return case


def _mod_one(a, b, fmod: bool):
    if isinstance(a, float):
        return math.fmod(a, b) if fmod else a % b  # Python's float %: the sign of the divisor
    if b == 0:
        return 0
    if fmod:  # the sign of the dividend: truncated division
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    return a % b  # Python's: the sign of the divisor


@st.composite
def mod_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    sa, sb = draw(broadcast_pair())
    a, b = array(rng, sa, dtype, -9, 9), array(rng, sb, dtype, -4, 4)
    if is_float(dtype):
        b[np.abs(b.astype(np.float64)) < 0.25] = 0.5
    fmod = draw(st.booleans())
    attrs: dict[str, Attr] = {"fmod": fmod} if fmod or draw(st.booleans()) else {}
    return OpCase([a, b], attrs, elementwise_expected(lambda x, y: _mod_one(x, y, fmod), [a, b], dtype))


BITWISE: dict[str, Callable[..., int]] = {
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    "bitwise_not": lambda a: ~a,
}


def _bitwise(op: str):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = draw_rng(draw)
        shapes_ = draw(broadcast_pair())[: 1 if op == "bitwise_not" else 2]
        info = np.iinfo(dtype)
        xs = [rng.integers(int(info.min), int(info.max), size=s, endpoint=True, dtype=dtype) for s in shapes_]
        return OpCase(xs, expected=elementwise_expected(BITWISE[op], xs, dtype))

    return case


@st.composite
def bit_shift_case(draw, dtype: str) -> OpCase:
    """Counts from -2 (signed types) to the width + 2; ONNX's rule: an out-of-range count
    gives 0, or -1 for a negative value shifted right; values as two's complement bits."""
    rng = draw_rng(draw)
    sa, sb = draw(broadcast_pair())
    info = np.iinfo(dtype)
    bits, signed = info.bits, info.min < 0
    a = rng.integers(int(info.min), int(info.max), size=sa, endpoint=True, dtype=dtype)
    b = rng.integers(-2 if signed else 0, bits + 3, size=sb).astype(dtype)
    direction = draw(st.sampled_from(["LEFT", "RIGHT"]))

    def shift(x: int, n: int) -> int:
        if n < 0 or n >= bits:
            return -1 if direction == "RIGHT" and x < 0 else 0
        return x << n if direction == "LEFT" else x >> n  # Python's >> is arithmetic

    return OpCase([a, b], {"direction": direction}, elementwise_expected(shift, [a, b], dtype))


@st.composite
def round_case(draw, dtype: str) -> OpCase:
    """Halves (which go to the even neighbour), other values, NaN and infinities."""
    rng = draw_rng(draw)
    shape = draw(shapes())
    x = (rng.integers(-12, 13, size=shape) / 2 + rng.choice([0.0, 0.2], size=shape)).astype(dtype)
    x = with_special(rng, x, [np.nan, np.inf, -np.inf, -0.5, 0.5, 1.5, 2.5])
    return OpCase(
        [x], expected=elementwise_expected(lambda v: float(round(v)) if math.isfinite(v) else v, [x], dtype)
    )


@st.composite
def prelu_case(draw, dtype: str) -> OpCase:
    rng = draw_rng(draw)
    shape = draw(shapes(1, 4))
    slope_shape = tuple(d if draw(st.booleans()) else 1 for d in shape[draw(st.integers(0, len(shape))) :])
    x, slope = array(rng, shape, dtype), array(rng, slope_shape, dtype)
    s = np.broadcast_to(slope.astype(np.float64), shape)
    expected = np.array([v if v >= 0 else k * v for v, k in zip(x.astype(np.float64).ravel(), s.ravel())])
    return OpCase([x, slope], expected=expected.reshape(shape))


ELEMENTWISE_CASES = {
    **{op: _unary(op) for op in UNARY},
    **ATTR_UNARY,
    **{op: _binary(op) for op in BINARY},
    "where": where_case,
    **{op: _compare(op) for op in COMPARE},
    **{op: _logical(op) for op in LOGICAL},
    **{op: _bitwise(op) for op in BITWISE},
    "isnan": _predicate("isnan"),
    "isinf": _predicate("isinf"),
    "mod": mod_case,
    "bit_shift": bit_shift_case,
    "round": round_case,
    "prelu": prelu_case,
}
