"""The numpy reference evaluator against hand-written numpy expressions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from catalog_cases_elementwise import BINARY
from conftest import GUIDE_SUBGRAPH, GUIDE_WHOLE_GRAPH, parse_graph_text, random_array

import byoc
import byoc.spec
from byoc.api import parse_file
from byoc.errors import ByocError, UsageError
from byoc.ir import is_integer

# Every op's reference against an independent computation: tests/test_catalog_ops.py,
# over the ops of the catalog (tests/catalog_cases.py holds one case per op).

BINARY_FLOAT_OPS = [
    name
    for name, op in byoc.spec.load_catalog().items()
    if op.shape_rule == "elementwise" and op.min_inputs == op.max_inputs == 2 and "float64" in op.dtypes
]
"""The catalog's binary ops of the `elementwise` rule (both inputs broadcast) on float64."""


def _check(actual: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    expected = np.asarray(expected).astype(dtype)
    assert actual.dtype == np.dtype(dtype)
    assert actual.shape == expected.shape
    if is_integer(dtype):
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-6 if dtype == "float32" else 1e-12)


def test_guide_whole_graph_matches_numpy(rng):
    fn = parse_file(GUIDE_WHOLE_GRAPH).functions[0]
    inputs = {p.name: rng.standard_normal(p.type.shape).astype(np.float32) for p in fn.params}
    x = inputs["x"]
    w = [inputs[f"w{i}"] for i in range(8)]
    expected = np.concatenate(
        (((x + w[0]) - w[1]) * w[2], ((x + w[3]) - w[4]) * w[5], (x + w[6]) - w[7]), axis=0
    )
    (out,) = byoc.evaluate(fn, inputs)
    assert out.shape == (30, 10)
    _check(out, expected, "float32")


def test_guide_subgraph_matches_numpy(rng):
    fn = parse_file(GUIDE_SUBGRAPH).functions[0]
    v = [rng.standard_normal((10, 10)).astype(np.float32) for _ in range(4)]
    (out,) = byoc.evaluate(fn, {f"v{i}": a for i, a in enumerate(v)})
    _check(out, ((v[0] + v[1]) - v[2]) * v[3], "float32")


@pytest.mark.parametrize(
    ("a", "b"),
    [((4, 1, 3), (5, 1)), ((3,), (2, 3)), ((), (2, 2)), ((2, 1), (1, 3)), ((1,), (4,))],
)
@pytest.mark.parametrize("op_name", BINARY_FLOAT_OPS)
def test_broadcasting_matches_numpy(op_name, a, b, rng):
    def t(shape):
        return f"float64[{', '.join(map(str, shape))}]"

    assert op_name in BINARY, (
        f"tests/catalog_cases_elementwise.py has no independent computation of {op_name}"
    )
    fn = parse_graph_text(f"graph g(p: {t(a)}, q: {t(b)}) {{ return {op_name}(p, q) }}").functions[0]
    # positive values are in every binary op's domain (power's base included)
    p, q = rng.uniform(0.5, 4.0, a), rng.uniform(0.5, 4.0, b)
    (out,) = byoc.evaluate(fn, {"p": p, "q": q})
    expected = BINARY[op_name](p, q)
    assert fn.output_types[0].shape == np.broadcast_shapes(a, b)
    _check(out, expected, "float64")


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concatenate_axes(axis, rng):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s, extra in zip(shapes, (1, 2, 3)):
        s[axis] = extra
    params = ", ".join(f"c{i}: int64[{', '.join(map(str, s))}]" for i, s in enumerate(shapes))
    fn = parse_graph_text(f"graph g({params}) {{ return concatenate(c0, c1, c2, axis={axis}) }}").functions[0]
    arrays = [random_array(rng, tuple(s), "int64") for s in shapes]
    (out,) = byoc.evaluate(fn, {f"c{i}": a for i, a in enumerate(arrays)})
    _check(out, np.concatenate(arrays, axis=axis), "int64")


def test_constants_regions_and_several_outputs(rng):
    fn = parse_graph_text(
        """graph main(x: float32[2, 3], y: float32[3]) {
          k = const float32[3] [0.5, -1.25, 3]
          f = const float32[2, 3] 2
          a, b = @engine {
            p = add(x, y)
            return maximum(p, k), multiply(y, x)
          }
          h = divide(subtract(a, f), b)
          return h, concatenate(a, b, axis=1), k
        }"""
    ).functions[0]
    x = random_array(rng, (2, 3), "float32")
    y = random_array(rng, (3,), "float32")
    k = np.array([0.5, -1.25, 3], dtype=np.float32)
    f = np.full((2, 3), 2, dtype=np.float32)
    h, cat, k_out = byoc.evaluate(fn, {"x": x, "y": y})
    a = np.maximum(x + y, k)
    b = y * x
    _check(h, (a - f) / b, "float32")
    _check(cat, np.concatenate((a, b), axis=1), "float32")
    _check(k_out, k, "float32")


def test_int_constant_and_relu(rng):
    fn = parse_graph_text(
        "graph g(x: int32[4]) {\n  k = const int32[4] [-2, 0, 5, 1]\n  return relu(add(x, k))\n}"
    ).functions[0]
    x = random_array(rng, (4,), "int32")
    (out,) = byoc.evaluate(fn, {"x": x})
    _check(out, np.maximum(x + np.array([-2, 0, 5, 1], dtype=np.int32), 0), "int32")


def test_evaluate_rejects_missing_and_mistyped_inputs(rng):
    fn = parse_graph_text("graph g(x: float32[4], y: float32[4]) { return add(x, y) }").functions[0]
    x = random_array(rng, (4,), "float32")
    with pytest.raises(UsageError, match="missing input 'y'"):
        byoc.evaluate(fn, {"x": x})
    with pytest.raises(UsageError, match="input 'y' is float64"):
        byoc.evaluate(fn, {"x": x, "y": x.astype(np.float64)})
    with pytest.raises(UsageError, match=r"input 'y' is float32\[2\]"):
        byoc.evaluate(fn, {"x": x, "y": x[:2]})
    assert issubclass(UsageError, ByocError)


def test_special_values_are_results_not_warnings(rng):
    """log(-1), 0/0 and inf - inf give NaN silently, as the generated C does: a user's
    `byoc run` with such inputs prints no numpy RuntimeWarning."""
    text = "graph g(p: float64[3], q: float64[3]) { return subtract(divide(log(p), q), multiply(p, q)) }"
    fn = parse_graph_text(text).functions[0]
    p = np.array([-1.0, 0.0, np.inf])
    q = np.array([0.0, 0.0, np.inf])
    model = byoc.build(parse_graph_text(text), backends=["json"])  # the JSON interpreter's loop
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,) = byoc.evaluate(fn, {"p": p, "q": q})
        (interpreted,) = model(p=p, q=q)
    np.testing.assert_array_equal(interpreted, out)
    with np.errstate(all="ignore"):
        expected = np.log(p) / q - p * q
    np.testing.assert_array_equal(out, expected)
