"""NaN and infinities through the C backends: every op they map computes what the numpy
reference does, NaN for NaN included (numpy's maximum, minimum and relu propagate a NaN
from either operand; a max pool or max reduction over a window holding a NaN is NaN).

Each op runs in a region of ``fused``, ``ccompiler``, ``engine`` and ``dnnl`` (for the
ops and dtypes the backend maps) on inputs holding NaN, +inf, -inf, signed zeros and finite
values, every special value meeting every other in the binary ops, and is compared
with byoc's reference: NaN where the reference has NaN, the same infinities, and the
finite values within rounding (assert_allclose treats NaN as equal to NaN).
"""

from __future__ import annotations

import numpy as np
import pytest
from libraries import missing_library

from byoc.api import evaluate, load_backend, parse
from byoc.building import build

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 0.25])
BACKENDS = ("fused", "ccompiler", "engine") + (() if missing_library("dnnl") else ("dnnl",))
# Where oneDNN's primitive itself differs, recorded rather than hidden: its relu is
# max(x, 0), 0 at a NaN (dnnl keeps it: its convolutions' and inner products' relu
# post-ops compute the same), its max pool skips a NaN, and its softmax of a row
# holding a NaN or +inf is NaN there and 0 elsewhere, not NaN throughout. The eltwise ops whose oneDNN form differs (exp,
# hard_sigmoid) are not mapped by dnnl at all, nor log and sqrt, which make NaNs; gelu
# and gelu_tanh are, with their NaN at +inf set to +inf after the primitive (DNNL_GELU).
KNOWN_DIFFERENCES = {
    ("dnnl", "relu"): "oneDNN's relu gives 0 for a NaN",
    ("dnnl", "max_pool"): "oneDNN's max pool skips a NaN",
    ("dnnl", "softmax"): "oneDNN's softmax of a row with a NaN is NaN there, 0 elsewhere",
}
DTYPES = ("float32", "float64")

UNARY = [
    "relu(x)",
    "abs(x)",
    "sign(x)",
    "negative(x)",
    "copy(x)",
    "square(x)",
    "exp(x)",
    "tanh(x)",
    "sigmoid(x)",
    "softplus(x)",
    "softsign(x)",
    "gelu(x)",
    "gelu_tanh(x)",
    "erf(x)",
    "floor(x)",
    "ceil(x)",
    "elu(x)",
    "selu(x)",
    "leaky_relu(x, alpha=0.1)",
    "hard_sigmoid(x)",
    "clip(x, min=-1.0, max=1.0)",
]
BINARY = ["maximum(x, y)", "minimum(x, y)", "add(x, y)", "multiply(x, y)", "prelu(x, y)"]
WINDOWS = [
    "max_pool(w, kernel_shape=[2, 2])",
    "max_pool(w, kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])",
    "global_max_pool(w)",
    "global_avg_pool(w)",
    "max(w, axes=[3])",
    "min(w, axes=[2, 3])",
    "sum(w, axes=[1])",
    "softmax(w, axis=-1)",
    "log_softmax(w, axis=1)",
]


def inputs(dtype: str) -> dict[str, np.ndarray]:
    """x and y: every pair of special values (8 x 8); w: (2, 2, 4, 4), a NaN in some
    windows and rows, infinities of both signs in others, and rows of finite values."""
    x = np.repeat(SPECIALS, SPECIALS.size).reshape(8, 8)
    y = np.tile(SPECIALS, SPECIALS.size).reshape(8, 8)
    w = np.linspace(-3.0, 3.0, 64).reshape(2, 2, 4, 4)
    w[0, 0, 0, 1] = np.nan
    w[0, 1, 2, 2] = np.inf
    w[1, 0, 3, 0] = -np.inf
    w[1, 1, 1, 3] = np.nan
    w[1, 1, 2, 1] = np.inf
    return {k: v.astype(dtype) for k, v in {"x": x, "y": y, "w": w}.items()}


def op_of(expr: str) -> str:
    return expr.split("(", 1)[0]


SPECS = {backend: load_backend(backend) for backend in BACKENDS}
"""Each backend's spec, loaded once for the cases (a load checks its files each time)."""

CASES = [
    pytest.param(
        backend,
        dtype,
        expr,
        id=f"{backend}-{dtype}-{expr}",
        marks=[pytest.mark.xfail(reason=KNOWN_DIFFERENCES[backend, op_of(expr)], strict=True)]
        if (backend, op_of(expr)) in KNOWN_DIFFERENCES
        else [],
    )
    for backend in BACKENDS
    for dtype in DTYPES
    for expr in UNARY + BINARY + WINDOWS
    if op_of(expr) in SPECS[backend].ops and dtype in SPECS[backend].dtypes
]


@pytest.mark.parametrize(("backend", "dtype", "expr"), CASES)
def test_special_values_match_the_reference(backend, dtype, expr):
    args = inputs(dtype)
    used = [name for name in args if f"({name}" in expr or f" {name})" in expr]
    params = ", ".join(f"{n}: {dtype}[{', '.join(map(str, args[n].shape))}]" for n in used)
    text = f"graph main({params}) {{\n  r = @{backend} {{ return {expr} }}\n  return r\n}}\n"
    program = parse(text, "graph", file="nan.graph")
    feed = {n: args[n] for n in used}
    (got,) = build(program)(**feed)
    (want,) = evaluate(program.functions[0], feed)
    assert np.isnan(want).any()  # the case reaches a NaN
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{backend} {expr} {dtype}")


def test_every_backend_is_exercised():
    ran = {backend for backend, _, _ in (c.values for c in CASES)}
    assert ran == set(BACKENDS)
    assert {"maximum(x, y)", "relu(x)"} <= {expr for b, _, expr in (c.values for c in CASES) if b == "fused"}


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_integer_max_and_min_of_buffered_values_compile(op, dtype):
    """The NaN clause of maximum and minimum is no self-comparison that gcc rejects
    (-Werror=tautological-compare) when an integer operand is a buffered value: here
    both concatenations feed the op from a temporary buffer of the fused nest."""
    text = (
        f"graph main(p0: {dtype}[1]) {{\n"
        "  r = @fused {\n"
        "    v0 = concatenate(p0, p0, axis=0)\n"
        "    v1 = concatenate(p0, p0, axis=0)\n"
        f"    return {op}(v0, v1)\n"
        "  }\n"
        "  return r\n}\n"
    )
    program = parse(text, "graph", file="int_max.graph")
    feed = {"p0": np.asarray([-3], dtype=dtype)}
    (got,) = build(program)(**feed)
    (want,) = evaluate(program.functions[0], feed)
    np.testing.assert_array_equal(got, want)
