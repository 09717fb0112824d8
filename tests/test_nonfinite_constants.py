"""NaN and infinite constants in every artifact (byoc issue 31).

The DSL spells them ``nan``, ``inf``, ``-inf`` (also ``+inf`` and ``-nan``, a NaN with
its sign bit set), in float constants only. Each artifact that holds a constant writes
and reads them back: the DSL printer and parser, the host graph's host functions (DSL
text the runtime parses), the JSON module (its ``.npz``), C and C++ constant arrays
(``NAN``/``INFINITY``, ``numeric_limits``), and a bundle's copy of the source. Every
backend that takes the graph runs it, and its outputs are compared with the numpy
reference: equal NaN positions, equal infinities, finite values within tolerance.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from conftest import run_cli
from libraries import missing_library

import byoc
from byoc.api import parse, print_program
from byoc.building import build
from byoc.errors import GraphError, ParseError
from byoc.generator.partition import partition
from byoc.ir import Constant, Program

FLOATS = ("float32", "float64", "float16", "bfloat16")
SPECIALS = "[nan, inf, -inf, 1.5, -nan, +inf, 0.0, -2.0]"


def assert_like_reference(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype and shape, NaN where the reference has NaN, the same infinities,
    and finite values within float32's tolerance (or the half dtype's)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), (g, w)
    assert np.array_equal(np.isposinf(g), np.isposinf(w)), (g, w)
    assert np.array_equal(np.isneginf(g), np.isneginf(w)), (g, w)
    finite = np.isfinite(w)
    rtol = 1e-5 if want.dtype in (np.float32, np.float64) else 1e-2
    np.testing.assert_allclose(g[finite], w[finite], rtol=rtol, atol=1e-6)


def run_against_reference(program, backends, seed=0) -> None:
    fn = program.functions[0]
    rng = np.random.default_rng(seed)
    inputs = {p.name: rng.uniform(-2, 2, size=p.type.shape).astype(p.type.dtype) for p in fn.params}
    got = build(program, backends=backends)(**inputs)
    want = byoc.evaluate(fn, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_like_reference(np.asarray(g), w)
    return got


# ------------------------------------------------------------------ the DSL


@pytest.mark.parametrize("dtype", FLOATS)
def test_dsl_reads_and_prints_nan_and_infinities(dtype):
    text = f"graph main(x: {dtype}[8]) {{\n  k = const {dtype}[8] {SPECIALS}\n  return add(x, k)\n}}\n"
    program = parse(text, "graph")
    values = program.functions[0].constants[0].values.astype(np.float64)
    assert np.isnan(values[[0, 4]]).all()
    assert list(np.signbit(values[[0, 4]])) == [False, True]
    assert values[1] == values[5] == math.inf and values[2] == -math.inf
    assert list(values[[3, 6, 7]]) == [1.5, 0.0, -2.0]
    printed = print_program(program, "graph")
    assert "[nan, inf, -inf, 1.5, -nan, inf, 0.0, -2.0]" in printed
    again = parse(printed, "graph")
    assert again == program  # bit for bit: the sign of the NaN included


@pytest.mark.parametrize("fill", ["nan", "-inf", "inf", "-nan"])
def test_one_nonfinite_value_fills_a_constant(fill):
    program = parse(f"graph main() {{\n  k = const float32[2, 3] {fill}\n  return k\n}}\n", "graph")
    values = program.functions[0].constants[0].values
    want = np.full(6, float(fill), np.float32)
    assert values.tobytes() == want.tobytes()
    assert f"const float32[2, 3] {fill}\n" in print_program(program, "graph")


def test_a_nan_payload_prints_as_the_quiet_nan():
    """A NaN's payload is not kept by the text: it reads back as the quiet NaN of its sign."""
    program = parse("graph main() {\n  k = const float32[1] 0\n  return k\n}\n", "graph")
    fn = program.functions[0]
    payload = np.array([0x7FC00123], np.uint32).view(np.float32)
    odd = Constant("k", fn.constants[0].type, payload)
    text = print_program(Program((replace(fn, constants=(odd,)),)), "graph")
    assert "const float32[1] [nan]" in text
    back = parse(text, "graph").functions[0].constants[0].values
    assert back.view(np.uint32).tolist() == [0x7FC00000]


@pytest.mark.parametrize(
    ("dtype", "word"),
    [("int32", "nan"), ("int8", "inf"), ("uint8", "-inf"), ("int64", "+inf"), ("bool", "nan")],
)
def test_nonfinite_words_are_refused_outside_float_constants(dtype, word):
    text = f"graph main() {{\n  k = const {dtype}[2] [0, {word}]\n  return k\n}}\n"
    with pytest.raises(GraphError) as info:
        parse(text, "graph")
    assert f"cannot hold {word}" in info.value.message
    assert (info.value.location.line, info.value.location.column) == (2, 21 + len(dtype))
    assert "float constants" in info.value.hint


@pytest.mark.parametrize("text", ["nan1", "-infinity", "NaN", "Inf", "-nanx"])
def test_other_spellings_are_parse_errors(text):
    with pytest.raises((ParseError, GraphError)):
        parse(f"graph main() {{\n  k = const float32[1] [{text}]\n  return k\n}}\n", "graph")


def test_nan_and_inf_stay_usable_as_value_names():
    text = "graph main(nan: float32[2]) {\n  inf = add(nan, nan)\n  return inf\n}\n"
    program = parse(text, "graph")
    assert print_program(program, "graph") == text


# ------------------------------------------------------------------ backends

REGION_GRAPH = """\
graph main(x: DTYPE[8], y: DTYPE[8]) {
  k = const DTYPE[8] SPECIALS
  t, u = @BACKEND {
    c = const DTYPE[8] [-inf, 2.0, nan, inf, 1.0, -nan, -inf, 3.0]
    return multiply(add(x, k), c), subtract(y, c)
  }
  return t, u
}
"""


def region_program(backend: str, dtype: str = "float32"):
    text = REGION_GRAPH.replace("SPECIALS", SPECIALS).replace("DTYPE", dtype).replace("BACKEND", backend)
    return parse(text, "graph")


@pytest.mark.parametrize("backend", ["ccompiler", "fused", "engine", "json"])
def test_each_backend_runs_nonfinite_constants_in_a_region(backend):
    run_against_reference(region_program(backend), [backend])


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_fused_runs_nonfinite_constants_of_every_float_dtype(dtype):
    run_against_reference(region_program("fused", dtype), ["fused"])


def test_examplejson_backend_runs_a_nonfinite_constant():
    text = f"graph main(x: float32[8]) {{\n  k = const float32[8] {SPECIALS}\n  return add(x, k)\n}}\n"
    run_against_reference(parse(text, "graph"), ["examplejson"])


def test_dnnl_dense_with_nonfinite_weights():
    """A dense layer whose constant weights hold NaN, +inf and -inf rows: NaN rows give
    NaN, an infinity row gives the infinities numpy gives (NaN where they cancel)."""
    text = """\
graph main(x: float32[3, 4]) {
  w = const float32[4, 4] [nan, 1, 1, 1, inf, 1, 1, 1, -inf, 0.5, 0.5, 0.5, 1, 2, 3, 4]
  return dense(x, w)
}
"""
    if missing_library("dnnl"):
        pytest.skip(missing_library("dnnl"))
    program = parse(text, "graph")
    (fn,) = partition(program, [byoc.load_backend("dnnl")]).functions
    if not any(n.callee is not None for n in fn.nodes):
        pytest.skip("dnnl does not run dense here")
    got = run_against_reference(program, ["dnnl"])
    assert np.isnan(got[0][:, 0]).all() and np.isinf(got[0][:, 1:3]).all()


def test_generated_c_spells_nan_and_infinity(tmp_path):
    program = region_program("ccompiler")
    path = tmp_path / "g.graph"
    path.write_text(print_program(program, "graph"))
    out = tmp_path / "out"
    from byoc.cli import main

    assert main(["gen", str(path), "-o", str(out)]) == 0
    c_text = (out / "ccompiler.c").read_text()
    assert "NAN" in c_text and "-INFINITY" in c_text and "INFINITY" in c_text


def test_host_graph_and_bundle_keep_nonfinite_constants(tmp_path, capsys):
    """Host ops that use a NaN/inf constant: the host functions file writes it as DSL
    and the runtime parses it back; a bundle's copy of the source does the same."""
    text = f"""\
graph main(x: float32[8], y: float32[8]) {{
  k = const float32[8] {SPECIALS}
  h = const float16[3] [nan, -inf, 65504]
  s = @ccompiler {{
    return multiply(add(x, k), y)
  }}
  return subtract(s, k), add(x, k), k, h
}}
"""
    path = tmp_path / "g.graph"
    path.write_text(text)
    program = parse(text, "graph")
    run_against_reference(program, ["ccompiler"])
    rc, out, err = run_cli(capsys, "gen", path, "-o", tmp_path / "out")
    assert rc == 0, err
    host = (tmp_path / "out" / "main.host.graph").read_text()
    assert "[nan, inf, -inf, 1.5, -nan, inf, 0.0, -2.0]" in host
    assert "[nan, -inf, 65500.0]" in host
    rc, out, err = run_cli(capsys, "build", path, "-o", tmp_path / "g.byoc")
    assert rc == 0, err
    rc, out, err = run_cli(capsys, "run", tmp_path / "g.byoc")
    assert rc == 0, err
    assert "every output matches the numpy reference" in out


def test_json_module_moves_nonfinite_constants_to_its_npz(tmp_path, capsys):
    path = tmp_path / "g.graph"
    path.write_text(print_program(region_program("json"), "graph"))
    rc, out, err = run_cli(capsys, "gen", path, "-o", tmp_path / "out")
    assert rc == 0, err

    def refuse(word: str) -> None:
        pytest.fail(f"a JSON artifact holds {word}")

    for artifact in (tmp_path / "out").glob("*.json"):  # strict JSON: no NaN or Infinity
        json.loads(artifact.read_text(), parse_constant=refuse)
    with np.load(tmp_path / "out" / "json.consts.npz") as npz:
        arrays = [npz[name] for name in npz.files]
    assert any(np.isnan(a).any() and np.isneginf(a).any() for a in arrays)


# ------------------------------------------------------------------ ONNX


@pytest.mark.parametrize(("low", "high"), [(-math.inf, math.inf), (-math.inf, 2.0), (-1.0, math.inf)])
def test_onnx_clip_at_opset_6_takes_infinite_bounds(tmp_path, low, high):
    """Clip's bounds are attributes before opset 11; an infinite one (no bound on that
    side) imports as a maximum and minimum with constants, and runs like numpy's clip."""
    from onnx import TensorProto, helper, save

    node = helper.make_node("Clip", ["x"], ["y"], min=low, max=high)
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [6]) for n in "xy"]
    model = helper.make_model(
        helper.make_graph([node], "g", info[:1], info[1:]), opset_imports=[helper.make_opsetid("", 6)]
    )
    path = tmp_path / "clip.onnx"
    save(model, str(path))
    x = np.array([math.inf, -math.inf, math.nan, -3.0, 0.5, 5.0], np.float32)
    (got,) = build(path, backends=["fused"])(x=x)
    assert_like_reference(np.asarray(got), np.clip(x, np.float32(low), np.float32(high)))
