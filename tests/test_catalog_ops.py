"""Every op of the op catalog (spec/ops.yaml), against an independent computation.

For each op, hypothesis draws a dtype the op accepts, inputs and attributes
(tests/catalog_cases.py), writes a one-node graph in the DSL and checks: the reference
evaluator's result equals the case's independently computed one, the inferred output
type is the computed array's, and the printed graph parses back equal (every attribute
form round-trips). Then the op runs on the json backend and as a host op of a built
model, both through the catalog's reference, and must agree with the evaluator.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from catalog_cases import CASES
from catalog_cases_support import OpCase, call_text, graph_text
from conftest import EXAMPLES, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import byoc
import byoc.spec
from byoc.api import parse, parse_file, print_program
from byoc.building import build
from byoc.errors import GraphError
from byoc.ir import is_half

CATALOG = byoc.spec.load_catalog()
OPS = list(CATALOG)
OP_DTYPES = [pytest.param(op, dtype, id=f"{op}-{dtype}") for op in CATALOG for dtype in CATALOG[op].dtypes]
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


def test_every_catalog_op_has_a_case():
    assert set(CASES) == set(CATALOG)
    assert len(CATALOG) >= 60


def test_json_and_fused_map_every_op():
    """json maps every op; fused every op of a rule its kind computes (the others, such
    as top_k's, stay on the host)."""
    assert set(byoc.load_backend("json").ops) == set(CATALOG)
    fused = byoc.load_backend("fused")
    assert set(fused.ops) == {op for op in CATALOG if CATALOG[op].shape_rule in fused.kind.shape_rules}


def check(out: np.ndarray, expected: np.ndarray) -> None:
    """``out`` against the independently computed ``expected`` (float64 for a float op):
    integers and bools exactly; a 16-bit float within one unit in the last place of
    ``expected`` rounded to it (the reference rounds its float64 result once; the case's
    float64 may differ from it in the last float64 bits), compared in float32."""
    if out.dtype.kind in "iub":
        np.testing.assert_array_equal(out, expected.astype(out.dtype))
    elif is_half(str(out.dtype)):
        info = ml_dtypes.finfo(out.dtype)
        # a float64 beyond the dtype's range rounds to inf; a signaling NaN (a bitcast's) turns quiet
        with np.errstate(over="ignore", invalid="ignore"):
            want = expected.astype(np.float64).astype(out.dtype).astype(np.float32)
        np.testing.assert_allclose(out.astype(np.float32), want, rtol=float(info.eps), atol=float(info.tiny))
    elif out.dtype == np.float32:
        np.testing.assert_allclose(out, expected.astype(np.float64), rtol=2e-6, atol=2e-6)
    else:
        np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def _draw_case(data, op: str, dtype: str | None = None) -> OpCase:
    dtype = dtype or data.draw(st.sampled_from(CATALOG[op].dtypes), label="dtype")
    return data.draw(CASES[op](dtype), label="case")


def _inputs(case: OpCase) -> dict[str, np.ndarray]:
    return {f"p{i}": a for i, a in enumerate(case.inputs)}


@pytest.mark.parametrize(("op", "dtype"), OP_DTYPES)
@settings(max_examples=20, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_reference_matches_the_definition(op, dtype, data):
    case = _draw_case(data, op, dtype)
    text = graph_text(op, case)
    if case.expected is None:
        with pytest.raises(GraphError, match=case.error):
            parse(text, "graph")
        return
    program = parse(text, "graph")
    fn = program.functions[0]
    outs = byoc.evaluate(fn, _inputs(case))
    assert len(outs) == len(fn.output_types) == len(case.outputs)
    wanted = case.out_dtype if isinstance(case.out_dtype, tuple) else (case.out_dtype or dtype,) * len(outs)
    for out, t, expected, want in zip(outs, fn.output_types, case.outputs, wanted, strict=True):
        assert out.shape == t.shape == np.shape(expected)
        assert out.dtype == np.dtype(t.dtype) == np.dtype(want)
        check(out, np.asarray(expected))
    assert parse(print_program(program, "graph"), "graph") == program


def _on_json(op: str, case: OpCase) -> str:
    """The op inside an @json region."""
    names = case.targets()
    return graph_text(
        op, case, [f"{names} = @json {{", f"  {names} = {call_text(op, case)}", f"  return {names}", "}"]
    )


def _on_host(op: str, case: OpCase) -> str:
    """The op on the host, its first input coming out of an @json region."""
    return graph_text(
        op, case, ["q0 = @json { return copy(p0) }", f"{case.targets()} = {call_text(op, case, 'q0')}"]
    )


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=3, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_json_backend_and_host_run_the_op(op, data):
    case = _draw_case(data, op)
    if case.expected is None:
        return
    inputs = _inputs(case)
    want = byoc.evaluate(parse(graph_text(op, case), "graph").functions[0], inputs)
    for text in (_on_json(op, case), _on_host(op, case)):
        got = build(parse(text, "graph"))(**inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if is_half(str(w.dtype)):  # bit for bit: == finds no NaN of ml_dtypes' bfloat16 equal
                g, w = g.view(np.uint16), w.view(np.uint16)
            np.testing.assert_array_equal(g, w, err_msg=text)


# ------------------------------------------------------------------ the network examples


@pytest.mark.parametrize("name", ["resnet_basic_block", "mlp"])
def test_network_examples_run_on_the_json_backend(name, capsys):
    rc, out, err = run_cli(capsys, "run", EXAMPLES / f"{name}.graph", "--backend", "json", "--seed", "3")
    assert rc == 0, err
    assert "result: every output matches the numpy reference" in out


def test_resnet_basic_block_is_the_residual_formula(rng):
    fn = parse_file(EXAMPLES / "resnet_basic_block.graph").functions[0]
    inputs = {p.name: rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in fn.params}
    consts = {c.name: np.array(c.values, np.float64) for c in fn.constants}
    x = inputs["x"].astype(np.float64)

    def conv3x3(v, w):  # zero padding 1, stride 1, as a sum over the 9 taps
        padded = np.pad(v, [(0, 0), (0, 0), (1, 1), (1, 1)])
        out = np.zeros((v.shape[0], w.shape[0], *v.shape[2:]))
        for i, j in np.ndindex(3, 3):
            window = padded[:, :, i : i + v.shape[2], j : j + v.shape[3]]
            out += np.einsum("nchw,mc->nmhw", window, w[:, :, i, j].astype(np.float64))
        return out

    def bn(v, k):
        per = (1, -1, 1, 1)
        scale, bias = (inputs[f"{p}{k}"].astype(np.float64).reshape(per) for p in ("scale", "bias"))
        mean, var = consts[f"mean{k}"].reshape(per), consts[f"var{k}"].reshape(per)
        return (v - mean) / np.sqrt(var + 1e-5) * scale + bias

    h = np.maximum(bn(conv3x3(x, inputs["w1"]), 1), 0)
    want = np.maximum(bn(conv3x3(h, inputs["w2"]), 2) + x, 0)
    (got,) = byoc.evaluate(fn, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mlp_rows_are_probabilities(rng):
    fn = parse_file(EXAMPLES / "mlp.graph").functions[0]
    inputs = {p.name: rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in fn.params}
    (got,) = byoc.evaluate(fn, inputs)
    assert got.shape == (4, 10) and got.dtype == np.float32
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-6)
    w = {k: v.astype(np.float64) for k, v in inputs.items()}
    h = np.maximum(w["x"] @ w["w1"].T + w["b1"], 0)
    h = np.maximum(h @ w["w2"].T + w["b2"], 0)
    logits = h @ w["w3"].T + w["b3"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
