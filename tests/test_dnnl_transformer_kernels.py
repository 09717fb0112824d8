"""dnnl's kernels for transformers' layers (spec/backends/dnnl): a matmul by constant
weights packed at init (matmul_const), a linear layer with its gelu as the matmul's
post-op (matmul_bias_gelu_const, matmul_bias_gelu_tanh_const), a matmul with its swish as
its post-op (matmul_swish_const), a SwiGLU's product as a matmul's post-op
(multiply_matmul_const, matmul_multiply_const), layer normalization as
one primitive (layer_norm), RMS normalization as byoc's loop over the rows (rms_norm),
and a constant that two regions read, copied into each:
golden C, and runs against the numpy reference and ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from dnnl_support import const, gate, layer_norm_graph, linear, linear_gelu, rms_norm_graph, swiglu
from libraries import missing_library
from test_gen_dnnl import BACKEND, generate, run_against_reference

import byoc
from byoc.api import load_backend, load_catalog, parse, print_program
from byoc.generator.partition import partition
from byoc.onnx.model_import import import_program
from byoc.reference import evaluate

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)


def test_a_constant_two_regions_read_is_copied_into_each(rng):
    """w feeds a packed matmul (matmul_bias_const: w must be a constant in its region)
    and, after the host's exp (which dnnl does not map), a dense in another dnnl region:
    each region gets its own copy of w, instead of a parameter that the pattern would
    refuse at lowering."""
    text = f"""\
graph main(x: float32[3, 8], b: float32[8]) {{
  w = {const(np.random.default_rng(3), (8, 8), -0.5, 0.5)}
  return dense(exp(add(matmul(x, w), b)), w)
}}
"""
    program = partition(parse(text, "graph", file="shared.graph"), [load_backend(BACKEND)], load_catalog())
    regions = [n.callee for n in program.functions[0].nodes if n.callee is not None]
    assert len(regions) == 2 and all([c.name for c in r.constants] == ["w"] for r in regions)
    assert "@dnnl.matmul_bias_const " in print_program(program)
    run_against_reference(program, rng)


MATMUL_CONST = """\
graph main(x: float32[2, 3, 5]) {
  w = const float32[5, 2] [0.5, -1.0, 0.25, 2.0, -0.75, 1.5, 1.0, -0.5, 0.125, 0.0]
  return matmul(x, w)
}
"""


def test_golden_matmul_by_constant_weights(golden):
    """matmul_const: the weights packed by the init (DNNL_MATMUL_PACKED)."""
    program = partition(
        parse(MATMUL_CONST, "graph", file="matmul_const.graph"), [load_backend(BACKEND)], load_catalog()
    )
    assert generate(program) == golden("c")
    run_against_reference(program, np.random.default_rng(2))


def test_golden_layer_norm(golden):
    """layer_norm: the nine ops as one oneDNN layer normalization (DNNL_LAYER_NORM)."""
    program = partition(
        parse(layer_norm_graph(), "graph", file="layer_norm.graph"), [load_backend(BACKEND)], load_catalog()
    )
    assert "@dnnl.layer_norm " in print_program(program)
    assert generate(program) == golden("c")


@pytest.mark.parametrize("scale", [8, 1])
def test_layer_norm_runs_like_the_reference(scale, rng):
    program = partition(parse(layer_norm_graph(scale), "graph"), [load_backend(BACKEND)], load_catalog())
    assert "@dnnl.layer_norm " in print_program(program)
    run_against_reference(program, rng)


def test_onnx_layer_normalization_runs_on_dnnl_as_onnxruntime_computes_it():
    from onnx import helper, numpy_helper
    from onnx_import_support import model, same_as_onnxruntime

    r = np.random.default_rng(4)
    weights = [numpy_helper.from_array(r.uniform(0.5, 1.5, 16).astype(np.float32), n) for n in ("g", "b")]
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)
    m = model([node], [("x", [2, 5, 16])], ["y"], weights, opset=17)
    program = partition(import_program(m), [load_backend(BACKEND)], load_catalog())
    assert "@dnnl.layer_norm " in print_program(program)
    same_as_onnxruntime(m, {"x": (3 * r.standard_normal((2, 5, 16)) + 1).astype(np.float32)}, "dnnl,fused")


def test_layer_norm_over_another_axis_is_not_the_pattern():
    text = layer_norm_graph().replace("axes=[2]", "axes=[1]")
    program = partition(parse(text, "graph"), [load_backend(BACKEND)], load_catalog())
    assert "layer_norm" not in print_program(program)


def test_golden_linear_layer(golden):
    """matmul_bias_const: the bias added by the matmul (DNNL_MATMUL_BIAS_PACKED)."""
    program = partition(
        parse(linear(), "graph", file="linear.graph"), [load_backend(BACKEND)], load_catalog()
    )
    assert "@dnnl.matmul_bias_const " in print_program(program)
    assert generate(program) == golden("c")


@pytest.mark.parametrize("k, bias", [(5, 2), (5, 1), (0, 2)], ids=["bias", "one-value", "empty-sum"])
def test_linear_layer_runs_like_the_reference(k, bias, rng):
    program = partition(parse(linear(k, bias), "graph"), [load_backend(BACKEND)], load_catalog())
    assert "@dnnl.matmul_bias_const " in print_program(program)
    run_against_reference(program, rng)


# A linear layer and its gelu (matmul_bias_gelu_const, matmul_bias_gelu_tanh_const):
# one matmul with the gelu as its post-op (DNNL_MATMUL_BIAS_GELU_PACKED).
GELUS = {"gelu": "matmul_bias_gelu_const", "gelu_tanh": "matmul_bias_gelu_tanh_const"}


def linear_gelu_program(op: str, k: int = 5, bias: int = 2, file: str = "<graph>"):
    return partition(
        parse(linear_gelu(op, k, bias), "graph", file=file), [load_backend(BACKEND)], load_catalog()
    )


def test_golden_linear_layer_and_its_gelu(golden):
    program = linear_gelu_program("gelu_tanh", file="linear_gelu_tanh.graph")
    assert f"@dnnl.{GELUS['gelu_tanh']} " in print_program(program)
    assert generate(program) == golden("c")


@pytest.mark.parametrize("op", GELUS)
@pytest.mark.parametrize("bias", [2, 1], ids=["bias", "one-value"])
def test_linear_layer_and_its_gelu_run_like_the_reference(op, bias, rng):
    program = linear_gelu_program(op, bias=bias)
    assert f"@dnnl.{GELUS[op]} " in print_program(program)
    assert "@dnnl.matmul_bias_const " not in print_program(program)
    run_against_reference(program, rng)


@pytest.mark.parametrize("op", GELUS)
def test_a_sum_of_plus_infinity_gives_plus_infinity(op):
    """oneDNN's gelu of +inf is NaN; the catalog's is +inf. Rows of x hold +inf, -inf
    and NaN, so sums are +inf, -inf, NaN (inf - inf) and finite side by side."""
    program = linear_gelu_program(op)
    x = np.random.default_rng(5).uniform(-1, 1, (2, 3, 5)).astype(np.float32)
    x[0, 0, 2] = np.inf  # w's row 2 is positive: sums of +inf
    x[0, 1, 2] = -np.inf  # sums of -inf
    x[1, 2, [0, 2]] = np.inf  # w's row 0 is negative: +inf - inf, NaN
    x[1, 0, 4] = np.nan
    b = np.array([0.5, -0.25], np.float32)
    got = byoc.build(program)(x=x, b=b)[0]
    want = evaluate(program.functions[0], {"x": x, "b": b}, load_catalog())[0]
    assert np.isposinf(want).any(), "the case has no sum of +inf"
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


def test_an_empty_sum_is_not_the_gelu_pattern(rng):
    """k = 0: the sum is the bias alone, which the matmul primitive cannot take; the
    linear layer's pattern makes it, and gelu runs on its own."""
    program = linear_gelu_program("gelu", k=0)
    text = print_program(program)
    assert "matmul_bias_gelu" not in text and "@dnnl.matmul_bias_const " in text
    run_against_reference(program, rng)


def test_a_float16_linear_layer_and_its_gelu_is_not_the_pattern():
    """The pattern is float32's: oneDNN's half-precision sums overflow where float32's do
    not, and dnnl_byoc_matmul_gelu_infinities reads floats."""
    text = linear_gelu("gelu").replace("float32", "float16")
    program = partition(parse(text, "graph"), [load_backend(BACKEND)], load_catalog())
    assert "matmul_bias_gelu" not in print_program(program)


# A matmul and the swish of its result, m * sigmoid(m) (matmul_swish_const): one matmul
# with oneDNN's swish (alpha 1) as its post-op (DNNL_MATMUL_PACKED, alg dnnl_eltwise_swish).
def test_golden_matmul_and_its_swish(golden):
    program = partition(parse(gate(), "graph", file="gate.graph"), [load_backend(BACKEND)], load_catalog())
    assert "@dnnl.matmul_swish_const " in print_program(program)
    assert generate(program) == golden("c")


@pytest.mark.parametrize(
    "k, shape", [(5, "2, 3"), (5, "4"), (0, "2, 3")], ids=["rank-3", "rank-2", "empty-sum"]
)
def test_matmul_and_its_swish_run_like_the_reference(k, shape, rng):
    program = partition(parse(gate(k, shape), "graph"), [load_backend(BACKEND)], load_catalog())
    text = print_program(program)
    assert "@dnnl.matmul_swish_const " in text and text.count("sigmoid(") == 1  # the composite's own
    run_against_reference(program, rng)


def test_the_swish_of_infinities_and_nan_is_the_catalogs():
    """Sums of +inf give +inf, of -inf NaN (-inf * sigmoid(-inf) = -inf * 0), large
    negative sums -0 or a tiny negative, as the catalog's multiply and sigmoid give."""
    program = partition(parse(gate(), "graph"), [load_backend(BACKEND)], load_catalog())
    x = np.random.default_rng(5).uniform(-1, 1, (2, 3, 5)).astype(np.float32)
    x[0, 0, 2] = np.inf  # w's row 2 is positive: sums of +inf
    x[0, 1, 2] = -np.inf  # sums of -inf
    x[1, 2, [0, 2]] = np.inf  # w's row 0 is negative: +inf - inf, NaN
    x[1, 0, 4] = np.nan
    x[1, 1] = [-200.0, -100.0, -300.0, -90.0, -150.0]  # large negative sums
    got = byoc.build(program)(x=x)[0]
    want = evaluate(program.functions[0], {"x": x}, load_catalog())[0]
    assert np.isposinf(want).any() and np.isnan(want).any(), "the case has no +inf or NaN"
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


def test_a_float16_gate_is_not_the_swish_pattern():
    program = partition(parse(gate(dtype="float16"), "graph"), [load_backend(BACKEND)], load_catalog())
    assert "matmul_swish" not in print_program(program)


# A SwiGLU's product, s * (x @ u) (multiply_matmul_const; the other order
# matmul_multiply_const): one matmul with the product as its post-op
# (DNNL_MATMUL_MUL_PACKED), so x @ u is never stored by itself.
def swiglu_program(*args, **kwargs):
    return partition(
        parse(swiglu(*args, **kwargs), "graph", file="swiglu.graph"), [load_backend(BACKEND)], load_catalog()
    )


def test_golden_swiglu_product(golden):
    program = swiglu_program()
    text = print_program(program)
    assert "@dnnl.multiply_matmul_const " in text and "@dnnl.matmul_swish_const " in text
    assert generate(program) == golden("c")


@pytest.mark.parametrize(
    "gate_first, pattern", [(True, "multiply_matmul_const"), (False, "matmul_multiply_const")]
)
@pytest.mark.parametrize(
    "k, shape",
    [(5, "2, 3"), (5, "4"), (3, "2, 2, 3"), (0, "2, 3")],
    ids=["rank-3", "rank-2", "rank-4", "empty-sum"],
)
def test_swiglu_product_runs_like_the_reference(gate_first, pattern, k, shape, rng):
    program = swiglu_program(k, shape, gate_first)
    text = print_program(program)
    assert f"@dnnl.{pattern} " in text and "@dnnl.matmul_const " not in text
    run_against_reference(program, rng)


@pytest.mark.parametrize("k", [5, 0], ids=["sums", "empty-sum"])
def test_a_swiglu_product_of_infinities_and_nan_is_the_catalogs(k):
    """A factor of inf times a sum of 0 is NaN, of a positive sum inf; NaN stays NaN;
    an empty sum is zeros, so every infinite factor gives NaN there."""
    program = swiglu_program(k, gate_shape="2, 3, 2")
    assert "@dnnl.multiply_matmul_const " in print_program(program)
    x = np.random.default_rng(6).uniform(-1, 1, (2, 3, k)).astype(np.float32)
    g = np.random.default_rng(7).uniform(-1, 1, (2, 3, 2)).astype(np.float32)
    if k:
        x[0, 0] = 0.0  # sums of zero
    g[0, 0] = [np.inf, -np.inf]
    g[1, 1] = [np.nan, np.inf]
    got = byoc.build(program)(x=x, g=g)[0]
    want = evaluate(program.functions[0], {"x": x, "g": g}, load_catalog())[0]
    assert np.isnan(want).any() and (k == 0 or np.isinf(want).any()), "the case has no NaN or inf"
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("gate_shape", ["2", "3, 2", "1, 1"], ids=["last-axis", "rows", "one-value"])
def test_a_factor_that_broadcasts_is_not_the_product_pattern(gate_shape, rng):
    """The post-op reads a tensor of the result's shape; a factor that broadcasts stays
    an elementwise multiply (the kernel takes no strides)."""
    program = swiglu_program(gate_shape=gate_shape)
    assert "multiply_matmul_const" not in print_program(program)
    run_against_reference(program, rng)


def rms_norm_program(*args, **kwargs):
    text = rms_norm_graph(*args, **kwargs)
    return partition(parse(text, "graph", file="rms_norm.graph"), [load_backend(BACKEND)], load_catalog())


def test_golden_rms_norm(golden):
    """rms_norm: the seven ops as one loop over the rows (DNNL_RMS_NORM)."""
    program = rms_norm_program()
    assert "@dnnl.rms_norm " in print_program(program)
    assert generate(program) == golden("c")


@pytest.mark.parametrize(
    "scale, shape, power, axis",
    [
        (8, (2, 3, 8), "2.0", 2),
        (1, (2, 3, 8), "2.0", 2),
        (13, (2, 5, 13), "2.0", -1),  # rows that are not whole groups of 8 lanes; ONNX's axis
        (1024, (1, 128, 1024), "2.0", -1),  # Llama's: on the threads
        (7, (1, 3, 7), "3.0", 2),  # another exponent: powf
    ],
)
def test_rms_norm_runs_like_the_reference(scale, shape, power, axis, rng):
    program = rms_norm_program(scale, shape, power, axis)
    assert "@dnnl.rms_norm " in print_program(program)
    run_against_reference(program, rng)


def test_rms_norm_of_zeros_infinities_and_nans_is_the_references():
    """A row of zeros divides 0 by sqrt(eps); an infinity makes its row's root infinite
    (its finite elements 0, itself NaN); a NaN makes its row NaN; a row of 3e20 has a
    mean square past float32's range (summed in double, then rounded), so its root is
    infinite and the row 0, as in the reference's float32 ops."""
    program = rms_norm_program(8, (1, 5, 8))
    fn = program.functions[0]
    x = np.random.default_rng(3).standard_normal((1, 5, 8)).astype(np.float32)
    x[0, 0] = 0.0
    x[0, 1, 2] = np.inf
    x[0, 2, 5] = np.nan
    x[0, 3] = 3e20
    g = np.linspace(0.5, 1.5, 8).astype(np.float32)
    (got,) = byoc.build(program)(x=x, g=g)
    (want,) = evaluate(fn, {"x": x, "g": g}, load_catalog())
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want[0, 2]).all() and np.all(want[0, 3] == 0) and want[0, 1, 2] != want[0, 1, 2]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("axes=[2]", "axes=[1]"),
        lambda t: t.replace("float32[] [0.000001]", "float32[1] [0.000001]"),
        lambda t: t.replace("float32[] [2.0]", "float32[1] [2.0]"),
        lambda t: t.replace("float32[8]) {", "float32[3, 8]) {").replace("g: float32[8]", "g: float32[3, 8]"),
    ],
    ids=["another-axis", "eps-not-a-scalar", "exponent-not-a-scalar", "scale-of-rank-2"],
)
def test_what_is_not_the_rms_norm_pattern(edit):
    text = edit(rms_norm_graph())
    program = partition(parse(text, "graph"), [load_backend(BACKEND)], load_catalog())
    assert "rms_norm" not in print_program(program)
