"""Hypothesis cases for every op of the catalog, each with an independently computed result.

``CASES[op](dtype)`` is a strategy of :class:`OpCase`: input arrays, attributes (as the DSL
writes them) and the expected result, computed here from definitions: Python's ``math`` per
element, plain numpy array expressions, or the nested-loop definitions of
tests/test_reference_kernels.py (convolutions, pooling). ``CASES`` names exactly the ops of
spec/ops.yaml (tests/test_catalog_ops.py checks), so a new op needs a case here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from test_reference_kernels import (
    conv_case,
    conv_transpose_case,
    loop_conv,
    loop_conv_transpose,
    loop_pool,
    pool_case,
)

from byoc.ir import DTYPES, is_float, is_integer
from byoc.shape_rule_quantize import QUANTIZED

Attr = int | float | bool | str | tuple[int, ...]


@dataclass
class OpCase:
    inputs: list[np.ndarray]
    attrs: dict[str, Attr] = field(default_factory=dict)
    expected: np.ndarray | tuple[np.ndarray, ...] | None = None
    """None: the op must reject the case (``error`` is a fragment of the message); a tuple
    for an op of several outputs, one array per output."""
    error: str = ""
    out_dtype: str | tuple[str, ...] | None = None
    """The outputs' dtype when it is not the drawn one (a comparison's bool, a cast's
    ``to``), or one per output when they differ (top_k's values and int64 indices)."""

    @property
    def outputs(self) -> tuple[np.ndarray, ...]:
        """The expected outputs, one or several."""
        return self.expected if isinstance(self.expected, tuple) else (self.expected,)

    def targets(self) -> str:
        """The names the case's node binds: ``r``, or ``r0, r1, ...`` for several outputs."""
        if not isinstance(self.expected, tuple):
            return "r"
        return ", ".join(f"r{k}" for k in range(len(self.expected)))


def attr_text(value: Attr) -> str:
    """An attribute value as the graph DSL writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def call_text(op: str, case: OpCase, first: str = "p0") -> str:
    """``op(p0, p1, ..., key=value, ...)``; ``first`` names the first input."""
    names = [first] + [f"p{i}" for i in range(1, len(case.inputs))]
    args = names[: len(case.inputs)] + [f"{k}={attr_text(v)}" for k, v in case.attrs.items()]
    return f"{op}({', '.join(args)})"


def graph_text(op: str, case: OpCase, body: list[str] | None = None) -> str:
    """One graph computing ``op`` on parameters p0, p1, ... of the inputs' types; ``body``
    replaces the statement that binds the case's targets."""
    params = ", ".join(f"p{i}: {a.dtype}[{', '.join(map(str, a.shape))}]" for i, a in enumerate(case.inputs))
    lines = body if body is not None else [f"{case.targets()} = {call_text(op, case)}"]
    statements = "".join(f"  {line}\n" for line in lines)
    return f"graph main({params}) {{\n{statements}  return {case.targets()}\n}}\n"


# ------------------------------------------------------------------------------ arrays


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def shapes(min_rank=0, max_rank=3, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def array(rng: np.random.Generator, shape, dtype: str, low=-3.0, high=3.0) -> np.ndarray:
    """Random data of ``dtype``: floats uniform in [low, high) rounded to the dtype,
    integers in [low - 2, high + 2] (negative ones wrap for an unsigned dtype, as numpy's
    astype does), bools half true."""
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    if is_integer(dtype):
        return rng.integers(int(low) - 2, int(high) + 3, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def wrapped(values, dtype: str, shape=None) -> np.ndarray:
    """Python integers reduced modulo 2**bits into ``dtype`` (two's complement for a
    signed one): what C's and numpy's fixed-width integer arithmetic gives."""
    info = np.iinfo(dtype)
    bits, low = info.bits, int(info.min)
    flat = [(int(v) - low) % 2**bits + low for v in np.ravel(np.asarray(values, dtype=object))]
    out = np.array(flat, dtype=object).astype(dtype)
    return out.reshape(np.shape(values) if shape is None else shape)


def _per_element(fn: Callable[[float], float], x: np.ndarray) -> np.ndarray:
    flat = [fn(float(v)) for v in np.asarray(x, np.float64).ravel()]
    return np.array(flat, dtype=np.float64).reshape(x.shape)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast (numpy's rule), in either order."""
    a = draw(shapes())
    keep = draw(st.integers(0, len(a)))
    b = tuple(1 if draw(st.booleans()) else d for d in a[len(a) - keep :])
    return (a, b) if draw(st.booleans()) else (b, a)


# ------------------------------------------------------------------- elementwise ops


def _gelu(v: float) -> float:
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


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
    "softplus": (_softplus, -40, 40),
    "softsign": (lambda v: v / (1 + abs(v)), -5, 5),
}
"""Unary ops without attributes, by their scalar definition."""


def _unary(op: str):
    fn, low, high = UNARY[op]

    @st.composite
    def case(draw, dtype: str) -> OpCase:
        x = array(_rng(draw), draw(shapes()), dtype, low, high)
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
        x = array(_rng(draw), draw(shapes()), dtype, -4, 4)
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
        rng = _rng(draw)
        sa, sb = draw(broadcast_pair())
        low = 0.1 if op == "power" else -3
        a, b = array(rng, sa, dtype, low, 3), array(rng, sb, dtype, -3, 3)
        if op == "divide":
            b[np.abs(b) < 0.1] = 0.5
        wide = [x if is_integer(dtype) else x.astype(np.float64) for x in (a, b)]
        return OpCase([a, b], expected=BINARY[op](*wide))

    return case


@st.composite
def broadcast_triple(draw):
    """Three shapes that broadcast together: a shape and two broadcast partners of it."""
    a, b = draw(broadcast_pair())
    c, _ = draw(broadcast_pair())
    return draw(st.permutations([a, b, c if _broadcasts(a, b, c) else a]))


def _broadcasts(*shapes) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


@st.composite
def where_case(draw, dtype: str) -> OpCase:
    rng = _rng(draw)
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


# ------------------------------------------------------------ comparisons, logic, types


def _special(rng: np.random.Generator, x: np.ndarray, values) -> np.ndarray:
    """``x`` with about a quarter of its elements replaced by ``values`` (NaN, inf, ...)."""
    x = np.array(x)
    if x.size and is_float(str(x.dtype)):
        mask = rng.random(x.shape) < 0.25
        with np.errstate(over="ignore", invalid="ignore"):
            picks = np.array(values, np.float64)[rng.integers(0, len(values), size=x.shape)].astype(x.dtype)
        x[mask] = picks[mask]
    return x


def _scalar(v):
    """One element as a Python bool, int or float."""
    return v.item() if v.dtype.kind in "biu" else float(v)


def _elementwise_expected(fn, arrays, out_dtype) -> np.ndarray:
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = zip(*(np.broadcast_to(a, shape).ravel() for a in arrays))
    values = [fn(*map(_scalar, items)) for items in flat]
    if is_integer(out_dtype):
        return wrapped(values, out_dtype, shape)
    return np.array(values, dtype=np.float64 if is_float(out_dtype) else out_dtype).reshape(shape)


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
        rng = _rng(draw)
        sa, sb = draw(broadcast_pair())
        a, b = array(rng, sa, dtype, -2, 2), array(rng, sb, dtype, -2, 2)
        if is_float(dtype):  # equal elements, NaN and infinities
            a = np.round(a.astype(np.float64)).astype(dtype)
            b = _special(rng, np.round(b.astype(np.float64)).astype(dtype), [np.nan, np.inf, -np.inf, 1.0])
        return OpCase([a, b], expected=_elementwise_expected(COMPARE[op], [a, b], "bool"), out_dtype="bool")

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
        rng = _rng(draw)
        shapes_ = draw(broadcast_pair())[: 1 if op == "logical_not" else 2]
        xs = [array(rng, s, "bool") for s in shapes_]
        return OpCase(xs, expected=_elementwise_expected(LOGICAL[op], xs, "bool"))

    return case


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
    rng = _rng(draw)
    to = draw(st.sampled_from(DTYPES))
    x = array(rng, draw(shapes()), dtype, -300, 300)
    x = _special(
        rng, x, [np.nan, np.inf, -np.inf, 0.5, -0.5, 2.5, -1.7, 1e10, -1e10, 7e4, 3e38, 70000.5, -0.0]
    )
    values = [_cast_one(_scalar(v), dtype, to) for v in x.ravel()]
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
    rng = _rng(draw)
    width = np.dtype(dtype).itemsize
    same = [d for d in DTYPES if np.dtype(d).itemsize == width and (d != "bool" or dtype == "bool")]
    to = draw(st.sampled_from(same)) if draw(st.integers(0, 3)) else draw(st.sampled_from(DTYPES))
    x = array(rng, draw(shapes()), dtype, -300, 300)
    x = _special(rng, x, [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -65504.0])
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
    rng = _rng(draw)
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
    expected = np.array(values, np.float32).astype(s_type).reshape(out)
    return OpCase([x, scale, zero], expected=expected, out_dtype=s_type)


@st.composite
def quantize_case(draw, dtype: str) -> OpCase:
    """float32 x with NaN, infinities and exact halves, a float32 scale and a zero point
    of an 8- or 16-bit type (the drawn dtype, else any), all broadcast. Expected: each
    element's x / scale in float32 rounded half to even, plus the zero point, clamped to
    the zero point's range (NaN to its low end); an integer x is refused."""
    rng = _rng(draw)
    z_type = dtype if dtype in QUANTIZED else draw(st.sampled_from(QUANTIZED))
    sx, ss, sz = draw(broadcast_triple())
    scale = rng.choice(np.array([0.5, 0.25, 1.0, 0.1, 3.0], np.float32), size=ss)
    x = _special(rng, array(rng, sx, "float32", -200, 200), [np.nan, np.inf, -np.inf, 0.5, -1.5, 2.5, 1e9])
    zero = array(rng, sz, z_type, -4, 4)
    if draw(st.integers(0, 5)) == 5:  # not the first draw: derandomized runs take that one
        return OpCase([x.astype("int16"), scale, zero], expected=None, error="not float32")
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


def _predicate(op: str):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = _rng(draw)
        x = _special(rng, array(rng, draw(shapes()), dtype), [np.nan, np.inf, -np.inf])
        attrs: dict[str, Attr] = {}
        if op == "isinf":
            attrs = {
                k: draw(st.booleans()) for k in ("detect_positive", "detect_negative") if draw(st.booleans())
            }
            pos, neg = attrs.get("detect_positive", True), attrs.get("detect_negative", True)
            fn = lambda v: math.isinf(v) and (pos if v > 0 else neg)  # noqa: E731
        else:
            fn = math.isnan
        return OpCase([x], attrs, _elementwise_expected(fn, [x], "bool"), out_dtype="bool")

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
    rng = _rng(draw)
    sa, sb = draw(broadcast_pair())
    a, b = array(rng, sa, dtype, -9, 9), array(rng, sb, dtype, -4, 4)
    if is_float(dtype):
        b[np.abs(b.astype(np.float64)) < 0.25] = 0.5
    fmod = draw(st.booleans())
    attrs: dict[str, Attr] = {"fmod": fmod} if fmod or draw(st.booleans()) else {}
    return OpCase([a, b], attrs, _elementwise_expected(lambda x, y: _mod_one(x, y, fmod), [a, b], dtype))


BITWISE: dict[str, Callable[..., int]] = {
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    "bitwise_not": lambda a: ~a,
}


def _bitwise(op: str):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        rng = _rng(draw)
        shapes_ = draw(broadcast_pair())[: 1 if op == "bitwise_not" else 2]
        info = np.iinfo(dtype)
        xs = [rng.integers(int(info.min), int(info.max), size=s, endpoint=True, dtype=dtype) for s in shapes_]
        return OpCase(xs, expected=_elementwise_expected(BITWISE[op], xs, dtype))

    return case


@st.composite
def bit_shift_case(draw, dtype: str) -> OpCase:
    """Counts from -2 (signed types) to the width + 2; ONNX's rule: an out-of-range count
    gives 0, or -1 for a negative value shifted right; values as two's complement bits."""
    rng = _rng(draw)
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

    return OpCase([a, b], {"direction": direction}, _elementwise_expected(shift, [a, b], dtype))


@st.composite
def round_case(draw, dtype: str) -> OpCase:
    """Halves (which go to the even neighbour), other values, NaN and infinities."""
    rng = _rng(draw)
    shape = draw(shapes())
    x = (rng.integers(-12, 13, size=shape) / 2 + rng.choice([0.0, 0.2], size=shape)).astype(dtype)
    x = _special(rng, x, [np.nan, np.inf, -np.inf, -0.5, 0.5, 1.5, 2.5])
    return OpCase(
        [x], expected=_elementwise_expected(lambda v: float(round(v)) if math.isfinite(v) else v, [x], dtype)
    )


@st.composite
def prelu_case(draw, dtype: str) -> OpCase:
    rng = _rng(draw)
    shape = draw(shapes(1, 4))
    slope_shape = tuple(d if draw(st.booleans()) else 1 for d in shape[draw(st.integers(0, len(shape))) :])
    x, slope = array(rng, shape, dtype), array(rng, slope_shape, dtype)
    s = np.broadcast_to(slope.astype(np.float64), shape)
    expected = np.array([v if v >= 0 else k * v for v, k in zip(x.astype(np.float64).ravel(), s.ravel())])
    return OpCase([x, slope], expected=expected.reshape(shape))


@st.composite
def concatenate_case(draw, dtype: str) -> OpCase:
    rng = _rng(draw)
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


# ---------------------------------------------------------------- networks' ops


def _maybe_default(draw, attrs: dict, name: str, default_value) -> None:
    """Drop ``attrs[name]`` (or write it as []) when it equals what an empty list means."""
    if list(attrs[name]) == list(default_value) and draw(st.booleans()):
        if draw(st.booleans()):
            del attrs[name]
        else:
            attrs[name] = []


def _as(dtype: str, *arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(dtype) for a in arrays]


@st.composite
def conv_op_case(draw, dtype: str, spatial: int | None = None) -> OpCase:
    x, w, attrs = draw(conv_case(spatial))
    x, w = _as(dtype, x, w)
    expected = loop_conv(x.astype(np.float64), w.astype(np.float64), **attrs)
    n = x.ndim - 2
    attrs = dict(attrs)
    _maybe_default(draw, attrs, "strides", [1] * n)
    _maybe_default(draw, attrs, "dilations", [1] * n)
    _maybe_default(draw, attrs, "pads", [0] * 2 * n)
    if attrs["groups"] == 1 and draw(st.booleans()):
        del attrs["groups"]
    return OpCase([x, w], attrs, expected)


@st.composite
def conv_transpose_op_case(draw, dtype: str) -> OpCase:
    x, w, attrs = draw(conv_transpose_case())
    x, w = _as(dtype, x, w)
    expected = loop_conv_transpose(x.astype(np.float64), w.astype(np.float64), **attrs)
    attrs = dict(attrs)
    _maybe_default(draw, attrs, "output_padding", [0] * (x.ndim - 2))
    return OpCase([x, w], attrs, expected)


def _pool(kind: str):
    @st.composite
    def case(draw, dtype: str, spatial: int | None = None) -> OpCase:
        x, attrs = draw(pool_case(spatial))
        (x,) = _as(dtype, x)
        attrs = {**attrs, "ceil_mode": bool(attrs["ceil_mode"])}
        if kind == "avg":
            attrs["count_include_pad"] = draw(st.booleans())
        expected = loop_pool(x.astype(np.float64), kind=kind, **attrs)
        if expected is None:
            return OpCase([x], attrs, None, "covers padding only")
        return OpCase([x], attrs, expected)

    return case


def _global_pool(reduce: Callable[..., np.ndarray]):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        x = array(_rng(draw), draw(shapes(3, 5)), dtype)
        axes = tuple(range(2, x.ndim))
        return OpCase([x], expected=reduce(x.astype(np.float64), axis=axes, keepdims=True))

    return case


@st.composite
def dense_case(draw, dtype: str, rank: int | None = None) -> OpCase:
    rng = _rng(draw)
    shape = draw(shapes(rank or 1, rank or 3))
    x, w = array(rng, shape, dtype), array(rng, (draw(st.integers(1, 4)), shape[-1]), dtype)
    expected = np.einsum("...i,ui->...u", x.astype(np.float64), w.astype(np.float64))
    return OpCase([x, w], expected=expected)


@st.composite
def matmul_case(draw, dtype: str, batched: bool = True) -> OpCase:
    rng = _rng(draw)
    ba, bb = draw(broadcast_pair()) if batched else ((), ())
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    a, b = array(rng, (*ba, m, k), dtype), array(rng, (*bb, k, n), dtype)
    expected = np.einsum("...ij,...jk->...ik", a.astype(np.float64), b.astype(np.float64))
    return OpCase([a, b], expected=expected)


@st.composite
def bias_add_case(draw, dtype: str) -> OpCase:
    rng = _rng(draw)
    shape = draw(shapes(1, 4))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    x, b = array(rng, shape, dtype), array(rng, (shape[axis],), dtype)
    view = [1] * len(shape)
    view[axis] = shape[axis]
    attrs = {} if axis == 1 and draw(st.booleans()) else {"axis": axis}
    return OpCase([x, b], attrs, x.astype(np.float64) + b.astype(np.float64).reshape(view))


@st.composite
def batch_norm_case(draw, dtype: str) -> OpCase:
    rng = _rng(draw)
    shape = draw(shapes(2, 4))
    c = shape[1]
    x = array(rng, shape, dtype)
    scale, bias, mean = (array(rng, (c,), dtype) for _ in range(3))
    var = array(rng, (c,), dtype, 0.1, 2.0)
    epsilon = draw(st.sampled_from([1e-5, 0.001, 0.5]))
    per = (1, c) + (1,) * (len(shape) - 2)
    s, b, m, v = (p.astype(np.float64).reshape(per) for p in (scale, bias, mean, var))
    expected = (x.astype(np.float64) - m) / np.sqrt(v + epsilon) * s + b
    return OpCase([x, scale, bias, mean, var], {"epsilon": epsilon}, expected)


@st.composite
def lrn_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(3, 4))
    x = array(_rng(draw), shape, dtype)
    size = draw(st.integers(1, shape[1] + 1))
    alpha, beta, bias = draw(st.sampled_from([1e-4, 0.3])), draw(st.sampled_from([0.75, 0.5])), 2.0
    wide = x.astype(np.float64)
    expected = np.empty_like(wide)
    channels = shape[1]
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + math.ceil((size - 1) / 2))
        square_sum = (wide[:, lo : hi + 1] ** 2).sum(axis=1)
        expected[:, c] = wide[:, c] / (bias + alpha / size * square_sum) ** beta
    return OpCase([x], {"size": size, "alpha": alpha, "beta": beta, "bias": bias}, expected)


def _softmax(log: bool):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        shape = draw(shapes(1, 3))
        x = array(_rng(draw), shape, dtype, -10, 10)
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        wide = x.astype(np.float64)
        e = np.exp(wide - wide.max(axis=axis, keepdims=True))
        total = e.sum(axis=axis, keepdims=True)
        expected = np.log(e / total) if log else e / total
        attrs = {} if axis == -1 and draw(st.booleans()) else {"axis": axis}
        return OpCase([x], attrs, expected)

    return case


def _reduce(fn: Callable[..., np.ndarray]):
    @st.composite
    def case(draw, dtype: str) -> OpCase:
        shape = draw(shapes(1, 4))
        x = array(_rng(draw), shape, dtype, 0.5, 2.0)
        chosen = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
        axes = [a - len(shape) if draw(st.booleans()) else a for a in chosen]
        keepdims = draw(st.booleans())
        expected = fn(x.astype(np.float64), axis=tuple(chosen) or None, keepdims=keepdims)
        return OpCase([x], {"axes": tuple(axes), "keepdims": keepdims}, np.asarray(expected))

    return case


@st.composite
def reshape_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 4))
    x = array(_rng(draw), shape, dtype)
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
    x = array(_rng(draw), shape, dtype)
    axis = draw(st.integers(-len(shape), len(shape)))
    a = axis + len(shape) if axis < 0 else axis
    expected = x.reshape(math.prod(shape[:a]), math.prod(shape[a:]))
    return OpCase([x], {"axis": axis}, expected)


@st.composite
def transpose_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 4))
    x = array(_rng(draw), shape, dtype)
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
    x = array(_rng(draw), shape, dtype)
    ones = [i for i, d in enumerate(shape) if d == 1]
    axes = draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    gone = set(axes) if axes else set(ones)
    axes = [a - len(shape) if draw(st.booleans()) else a for a in axes]
    return OpCase([x], {"axes": tuple(axes)}, x.reshape([d for i, d in enumerate(shape) if i not in gone]))


@st.composite
def unsqueeze_case(draw, dtype: str) -> OpCase:
    shape = draw(shapes(0, 3))
    x = array(_rng(draw), shape, dtype)
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
    x = array(_rng(draw), shape, dtype)
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
    x = array(_rng(draw), shape, dtype)
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
    x = array(_rng(draw), shape, dtype)
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
    rng = _rng(draw)
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
    x = array(_rng(draw), shape, dtype)
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


# ------------------------------------------------------------------------------ the table

CASES: dict[str, Callable[[str], st.SearchStrategy[OpCase]]] = {
    **{op: _unary(op) for op in UNARY},
    **ATTR_UNARY,
    **{op: _binary(op) for op in BINARY},
    "where": where_case,
    **{op: _compare(op) for op in COMPARE},
    **{op: _logical(op) for op in LOGICAL},
    **{op: _bitwise(op) for op in BITWISE},
    "cast": cast_case,
    "bitcast": bitcast_case,
    "dequantize_linear": dequantize_case,
    "quantize_linear": quantize_case,
    "isnan": _predicate("isnan"),
    "isinf": _predicate("isinf"),
    "mod": mod_case,
    "bit_shift": bit_shift_case,
    "round": round_case,
    "prelu": prelu_case,
    "concatenate": concatenate_case,
    "conv": conv_op_case,
    "conv_transpose": conv_transpose_op_case,
    "max_pool": _pool("max"),
    "avg_pool": _pool("avg"),
    "global_avg_pool": _global_pool(np.mean),
    "global_max_pool": _global_pool(np.max),
    "dense": dense_case,
    "matmul": matmul_case,
    "bias_add": bias_add_case,
    "batch_norm": batch_norm_case,
    "lrn": lrn_case,
    "softmax": _softmax(log=False),
    "log_softmax": _softmax(log=True),
    "sum": _reduce(np.sum),
    "mean": _reduce(np.mean),
    "max": _reduce(np.max),
    "min": _reduce(np.min),
    "prod": _reduce(np.prod),
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

# The indexing and ordering ops' cases build on the helpers above.
from catalog_cases_indexing import INDEXING_CASES  # noqa: E402

CASES.update(INDEXING_CASES)
