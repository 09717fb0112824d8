"""The fused backend's vectorised math (spec/backends/fused/fused_math.h) against the
catalog's float64 reference rounded to float32: over a sample of every float bit
pattern, each result is the reference's float or one float (one ulp) beside it, few
are beside it, NaN exactly where the reference has NaN, and zeros keep their sign.

The header's doc says why one ulp: its functions are within about 1e-12 of the exact
values, so a float result differs from the correctly rounded one only where the exact
value lies that close to a midpoint between two floats."""

from __future__ import annotations

import numpy as np
import pytest

import byoc

STEP = 4099
"""Every STEP-th float32 bit pattern (a prime: the sample covers every exponent with many
significands): about a million floats, subnormals, infinities and NaNs included."""

MOST_OFF = 1e-4
"""The largest share of results one ulp from the rounded reference."""

CASES = {
    "exp": "exp(x)",
    "sigmoid": "sigmoid(x)",
    "tanh": "tanh(x)",
    "erf": "erf(x)",
    "gelu": "gelu(x)",
    "gelu_tanh": "gelu_tanh(x)",
    "cube": "power(x, c)",
}


def every_float(step: int = STEP) -> np.ndarray:
    bits = np.arange(0, 2**32, step, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits.view(np.float32), np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)])


def ulps_apart(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """How many floats lie between ``got`` and ``want`` (finite or infinite, not NaN)."""

    def ordered(a: np.ndarray) -> np.ndarray:
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    return np.abs(ordered(got) - ordered(want))


def run_fused_and_reference(expr: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.size
    const = "c = const float32[] [3]\n    " if " c)" in expr else ""  # in the region: its C knows it
    text = (
        f"graph main(x: float32[{n}]) {{\n  y = @fused {{\n    {const}return {expr}\n  }}\n  return y\n}}\n"
    )
    program = byoc.parse(text, "graph", file="math.graph")
    (got,) = byoc.build(program)(x=x)
    plain = f"graph main(x: float32[{n}]) {{\n  {const}y = {expr}\n  return y\n}}\n"
    fn = byoc.parse(plain, "graph", file="plain.graph").functions[0]
    with np.errstate(all="ignore"):
        (want,) = byoc.evaluate(fn, {"x": x})
    return got, want


@pytest.mark.parametrize("op", list(CASES))
def test_vectorised_math_is_the_rounded_reference_or_one_ulp_beside_it(op):
    x = every_float()
    got, want = run_fused_and_reference(CASES[op], x)
    assert got.dtype == want.dtype == np.float32
    nan = np.isnan(want)
    np.testing.assert_array_equal(
        np.isnan(got), nan, err_msg=f"{op}: NaN where the reference has none, or not"
    )
    g, w = got[~nan], want[~nan]
    zero = w == 0
    np.testing.assert_array_equal(
        np.signbit(g[zero]), np.signbit(w[zero]), err_msg=f"{op}: the sign of a zero"
    )
    apart = ulps_apart(g, w)
    worst = int(np.argmax(apart))
    assert apart[worst] <= 1, f"{op}({x[~nan][worst]!r}) = {g[worst]!r}, reference {w[worst]!r}"
    assert np.mean(apart > 0) <= MOST_OFF, f"{op}: {np.mean(apart > 0):.2%} of results one ulp off"


def test_the_generated_loops_call_the_header_by_dtype_and_float64_keeps_libm(tmp_path):
    text = (
        "graph main(x: float32[8], y: float64[8]) {\n"
        "  a = @fused { return tanh(x) }\n  b = @fused { return tanh(y) }\n  return a, b\n}\n"
    )
    program = byoc.parse(text, "graph", file="t.graph")
    model = byoc.build(program)
    from byoc.cli import main

    (tmp_path / "t.graph").write_text(text)
    assert main(["gen", "-q", "-o", str(tmp_path / "gen"), str(tmp_path / "t.graph")]) == 0
    c = (tmp_path / "gen" / "fused.c").read_text()
    assert '#include "fused_math.h"' in c
    assert "fused_tanh_float32(" in c and "fused_tanh_float64(" in c
    assert (tmp_path / "gen" / "fused_math.h").is_file()
    x = np.linspace(-3, 3, 8, dtype=np.float32)
    a, b = model(x=x, y=x.astype(np.float64))
    np.testing.assert_array_equal(b, np.tanh(x.astype(np.float64)))  # libm's tanh, numpy's
    np.testing.assert_allclose(a, np.tanh(x.astype(np.float64)).astype(np.float32), rtol=1.2e-7, atol=0)
