"""The catalog's integer products, conv_integer and matmul_integer, on the backends that
compute them in integers (``fused``: uint32 accumulators in vector lanes; ``ccompiler``:
one macro each) and on ``json``: the reference's bits for random shapes, attributes,
codes and zero points, a sum that wraps past int32 as ONNX Runtime's does, the golden C
of a QOperator-style conv on ``fused`` and of ccompiler's two macros, and located errors
for a bad accumulator ``type`` in a spec."""

from __future__ import annotations

import numpy as np
import pytest
from catalog_cases_integer import CODES, codes
from compile_util import module_artifact
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_fused import FUSED_YAML, write_fused_copy
from test_gen_fused import BACKEND, generate

from byoc.api import evaluate, load_backend, load_catalog, parse
from byoc.building import build
from byoc.errors import SpecError
from byoc.generator import generator_for
from byoc.generator.lowering import lower


def dims(shape) -> str:
    return ", ".join(map(str, shape))


def run_on(backend: str, text: str, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The output of ``text`` (@BACKEND replaced) built for ``backend``, and the reference's."""
    program = parse(text.replace("@BACKEND", f"@{backend}"), "graph", file="integer.graph")
    catalog = load_catalog()
    (got,) = build(program, catalog=catalog)(**inputs)
    (want,) = evaluate(program.functions[0], inputs, catalog=catalog)
    return np.asarray(got), want


@st.composite
def conv_cases(draw, rank: int):
    """A conv_integer of random shapes and attributes (``rank`` - 2 spatial axes), codes
    over their whole ranges, w's zero point one value or one per output channel."""
    groups = draw(st.integers(1, 2))
    c, m = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    spatial = [draw(st.integers(3, 7)) for _ in range(rank - 2)]
    kernel = [draw(st.integers(1, 3)) for _ in spatial]
    strides = [draw(st.integers(1, 2)) for _ in spatial]
    pads = [draw(st.integers(0, k - 1)) for k in kernel] * 2
    x_type, w_type = draw(st.sampled_from(CODES)), draw(st.sampled_from(CODES))
    per_channel = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs = {
        "x": codes(rng, (draw(st.integers(1, 2)), c, *spatial), x_type),
        "w": codes(rng, (m, c // groups, *kernel), w_type),
        "xz": codes(rng, (), x_type),
        "wz": codes(rng, (m,) if per_channel else (), w_type),
    }
    params = ", ".join(f"{n}: {a.dtype}[{dims(a.shape)}]" for n, a in inputs.items())
    attrs = f"strides=[{dims(strides)}], pads=[{dims(pads)}], groups={groups}"
    text = (
        f"graph main({params}) {{\n"
        f"  y = @BACKEND {{ return conv_integer(x, w, xz, wz, {attrs}) }}\n"
        "  return y\n}\n"
    )
    return text, inputs


@st.composite
def matmul_cases(draw, batched: bool):
    m, k, n = draw(st.integers(1, 9)), draw(st.integers(1, 70)), draw(st.integers(1, 40))
    a_type, b_type = draw(st.sampled_from(CODES)), draw(st.sampled_from(CODES))
    batch = (draw(st.integers(1, 3)),) if batched else ()
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs = {
        "a": codes(rng, (*batch, m, k), a_type),
        "b": codes(rng, (k, n), b_type),
        "az": codes(rng, (), a_type),
        "bz": codes(rng, (n,) if draw(st.booleans()) else (), b_type),
    }
    params = ", ".join(f"{name}: {v.dtype}[{dims(v.shape)}]" for name, v in inputs.items())
    text = (
        f"graph main({params}) {{\n  y = @BACKEND {{ return matmul_integer(a, b, az, bz) }}\n  return y\n}}\n"
    )
    return text, inputs


CASES = [
    pytest.param("fused", conv_cases(4), id="conv2d-fused"),
    pytest.param("fused", conv_cases(3), id="conv1d-fused"),
    pytest.param("fused", conv_cases(5), id="conv3d-fused"),
    pytest.param("ccompiler", conv_cases(4), id="conv2d-ccompiler"),
    pytest.param("json", conv_cases(4), id="conv2d-json"),
    pytest.param("fused", matmul_cases(True), id="batched-matmul-fused"),
    pytest.param("fused", matmul_cases(False), id="matmul-fused"),
    pytest.param("ccompiler", matmul_cases(False), id="matmul-ccompiler"),
]


@pytest.mark.parametrize(("backend", "cases"), CASES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_integer_product_is_the_reference_exactly(backend, cases, data):
    text, inputs = data.draw(cases)
    got, want = run_on(backend, text, inputs)
    assert got.dtype == want.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["fused", "ccompiler", "json"])
def test_a_sum_past_int32_wraps_as_onnx_runtimes(backend):
    """40000 products of 255 * 255 sum to 2.6e9, past int32's 2**31 - 1: the result wraps
    modulo 2**32, as ONNX Runtime's MatMulInteger gives it (and as the reference does)."""
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    helper, T = onnx.helper, onnx.TensorProto
    k = 40000
    a = np.full((1, k), 255, np.uint8)
    b = np.full((k, 2), 127, np.int8)
    b[:, 1] = -128
    az, bz = np.array(0, np.uint8), np.array(-128, np.int8)  # b - bz: 255, then 0
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(
            [node],
            "wrap",
            [
                vi("a", T.UINT8, a.shape),
                vi("b", T.INT8, b.shape),
                vi("az", T.UINT8, []),
                vi("bz", T.INT8, []),
            ],
            [vi("y", T.INT32, None)],
        ),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    (theirs,) = ort.InferenceSession(model.SerializeToString()).run(
        None, {"a": a, "b": b, "az": az, "bz": bz}
    )
    text = (
        f"graph main(a: uint8[1, {k}], b: int8[{k}, 2], az: uint8[], bz: int8[]) {{\n"
        "  y = @BACKEND { return matmul_integer(a, b, az, bz) }\n  return y\n}\n"
    )
    got, want = run_on(backend, text, {"a": a, "b": b, "az": az, "bz": bz})
    assert int(theirs[0, 0]) == 255 * 255 * k - 2**32  # wrapped, not saturated
    np.testing.assert_array_equal(got, theirs)
    np.testing.assert_array_equal(want, theirs)


WEIGHTS = codes(np.random.default_rng(5), (4, 8, 3, 3), "int8")
QOPERATOR_CONV = f"""\
graph main(x: uint8[1, 8, 6, 20]) {{
  y = @fused {{
    c = conv_integer(x, w, xz, wz, pads=[1, 1, 1, 1])
    v = multiply(bias_add(cast(c, to="float32"), b, axis=1), scale)
    return quantize_linear(v, ys, yz)
  }}
  w = const int8[4, 8, 3, 3] [{", ".join(map(str, WEIGHTS.ravel().tolist()))}]
  xz = const uint8[] [131]
  wz = const int8[4] [0, 1, -1, 3]
  b = const float32[4] [12.0, -40.0, 7.0, 0.0]
  scale = const float32[] [0.0041]
  ys = const float32[] [0.03]
  yz = const uint8[] [128]
  return y
}}
"""


def test_golden_fused_integer_conv_with_its_requantisation(golden):
    """A QOperator-style conv: the integer nest's uint32 tiles, the requantisation fused
    after its sum, in one nest."""
    program = parse(QOPERATOR_CONV, "graph", file="qconv.graph")
    fns = lower(program, load_backend, load_catalog()).externals_for(BACKEND)
    text = generate(fns)
    assert "uint32_t t0_acc_tile" in text
    assert "/* nest 0: t0 conv_integer, t1 cast, t2 bias_add, t3 multiply, t4 quantize_linear" in text
    assert text == golden("c")


CCOMPILER_PRODUCTS = """\
graph main(x: uint8[1, 4, 6, 6], w: int8[3, 4, 3, 3], a: int8[5, 7], b: uint8[7, 2]) {
  c, m = @ccompiler {
    xz = const uint8[] [3]
    wz = const int8[3] [0, 1, -2]
    az = const int8[] [-5]
    bz = const uint8[2] [128, 120]
    return conv_integer(x, w, xz, wz, pads=[1, 1, 1, 1], strides=[2, 2]), matmul_integer(a, b, az, bz)
  }
  return c, m
}
"""


def test_golden_ccompiler_integer_products(golden):
    """ccompiler's two integer-product macros, each used once; the module compiles and
    runs as the reference in test_an_integer_product_is_the_reference_exactly."""
    program = parse(CCOMPILER_PRODUCTS, "graph", file="products.graph")
    spec = load_backend("ccompiler")
    externals = lower(program, load_backend, load_catalog()).externals_for("ccompiler")
    text = module_artifact(generator_for(spec.kind)(externals, spec, load_catalog(), {})).text
    assert text.count("\nCSOURCE_CONV2D_INTEGER(") == text.count("\nCSOURCE_MATMUL_2D_INTEGER(") == 1
    assert text == golden("c")
    rng = np.random.default_rng(9)
    inputs = {
        "x": codes(rng, (1, 4, 6, 6), "uint8"),
        "w": codes(rng, (3, 4, 3, 3), "int8"),
        "a": codes(rng, (5, 7), "int8"),
        "b": codes(rng, (7, 2), "uint8"),
    }
    got = build(program, catalog=load_catalog())(**inputs)
    for out, want in zip(got, evaluate(program.functions[0], inputs), strict=True):
        np.testing.assert_array_equal(np.asarray(out), want)


def test_golden_graph_runs_as_the_reference():
    program = parse(QOPERATOR_CONV, "graph", file="qconv.graph")
    x = codes(np.random.default_rng(6), (1, 8, 6, 20), "uint8")
    (got,) = build(program, catalog=load_catalog())(x=x)
    (want,) = evaluate(program.functions[0], {"x": x})
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize(
    ("edit", "message", "hint"),
    [
        ("type: uint32_t", "type: int128_t", "is not an accumulator type"),
        (
            'update: "${acc} + (uint32_t)((${x0} - ${x2}) * (${x1} - ${x3}))"\n',
            'update: "${acc} + (uint32_t)((${x0} - ${x2}) * (${x1} - ${x3}))"\n'
            '      other: {init: "0", update: "${other}"}\n',
            "accumulator other: type double differs from accumulator acc's uint32_t",
        ),
    ],
    ids=["unknown type", "two types in one op"],
)
def test_a_bad_accumulator_type_is_a_located_spec_error(tmp_path, edit, message, hint):
    shipped = FUSED_YAML.read_text(encoding="utf-8")
    at = shipped.index(edit, shipped.index("  conv_integer: &integer_dot\n"))
    write_fused_copy(tmp_path, shipped[:at] + shipped[at:].replace(edit, message, 1))
    with pytest.raises(SpecError) as info:
        load_backend(BACKEND, spec_path=[tmp_path])
    assert hint in info.value.message
    assert info.value.location.file.endswith("fused.yaml")
    assert info.value.location.line >= shipped.count("\n", 0, at) + 1
