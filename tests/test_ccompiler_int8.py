"""ccompiler's int8 (QDQ) composites: ``qdq_conv_bias_relu``, ``qdq_conv_bias``,
``qdq_conv`` and ``qdq_matmul`` (spec/backends/ccompiler.yaml).

Each kernel sums the codes minus their zero points exactly in int32 and requantises
once; the float reference dequantises, sums in float and quantises, so the two may
be one code apart where the float value lies within rounding of a .5 tie. The tests
hold the kernels to an exact integer reference computed here, to the float reference
within one code, and the example models to ONNX Runtime's outputs.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from compile_util import module_artifact
from conftest import EXAMPLES
from partition_support import graph

from byoc.api import evaluate, load_backend, load_catalog, parse_file, print_program
from byoc.building import build
from byoc.generator import generator_for
from byoc.generator.composite import GraphView, Match, match_pattern
from byoc.generator.lowering import lower
from byoc.generator.partition import partition

QUANTIZED = EXAMPLES / "quantized"


def literal(a: np.ndarray) -> str:
    dims = ", ".join(map(str, a.shape))
    return f"const {a.dtype}[{dims}] [{', '.join(str(v) for v in a.ravel().tolist())}]"


def qconv_case(rng, *, relu: bool, bias: bool, per_channel: bool, out: str = "uint8"):
    """A QDQ conv written as a ccompiler composite by hand, its inputs and constants."""
    m, c = 4, 3
    k = {
        "xs": np.float32(0.0287),
        "xz": np.uint8(126),
        "w": rng.integers(-127, 128, (m, c, 3, 3)).astype(np.int8),
        "ws": (rng.uniform(0.002, 0.01, (m, 1, 1, 1)) if per_channel else np.array(0.005)).astype(np.float32),
        "wz": np.zeros((m, 1, 1, 1) if per_channel else (), np.int8),
        "ys": np.float32(0.0213),
        "yz": np.array(0 if relu else 120 if out == "uint8" else -3, out),
    }
    if bias:
        k["bs"] = (np.float32(k["xs"]) * k["ws"].reshape(-1)).astype(np.float32) * np.ones(m, np.float32)
        k["b"] = rng.integers(-3000, 3000, m).astype(np.int32)
        k["bz"] = np.zeros(m, np.int32)
    value = (
        "conv(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz), pads=[1, 1, 1, 1], strides=[2, 1])"
    )
    if bias:
        value = f"bias_add({value}, dequantize_linear(b, bs, bz), axis=1)"
    if relu:
        value = f"relu({value})"
    name = "qdq_conv" + ("_bias" if bias else "") + ("_relu" if relu else "")
    consts = "\n".join(f"    {n} = {literal(np.asarray(v))}" for n, v in k.items())
    text = f"""\
graph main(x: uint8[1, {c}, 6, 5]) {{
  y = @ccompiler {{
{consts}
    h = @ccompiler.{name} {{
      return quantize_linear({value}, ys, yz)
    }}
    return h
  }}
  return y
}}
"""
    x = rng.integers(0, 256, (1, c, 6, 5)).astype(np.uint8)
    return text, x, {n: np.asarray(v) for n, v in k.items()}


def exact_qconv(x, k, *, relu: bool) -> np.ndarray:
    """The kernel's arithmetic, independently: the int64 sum of (x - xz) * (w - wz)
    (exact), v = acc * xs * ws + (b - bz) * bs in float64, then quantize_linear of
    float32(v): float32 division, half to even, plus yz, saturated."""
    xi = np.pad(x.astype(np.int64) - int(k["xz"]), ((0, 0), (0, 0), (1, 1), (1, 1)))
    wi = k["w"].astype(np.int64) - k["wz"].astype(np.int64)
    m, _, kh, kw = wi.shape
    oh, ow = (xi.shape[2] - kh) // 2 + 1, xi.shape[3] - kw + 1
    acc = np.zeros((1, m, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            acc += np.einsum("nchw,mc->nmhw", xi[:, :, i : i + 2 * oh : 2, j : j + ow], wi[:, :, i, j])
    assert np.abs(acc).max() < 2**31
    ws = np.broadcast_to(k["ws"].astype(np.float64).reshape(-1), (m,)).reshape(1, m, 1, 1)
    v = acc * (np.float64(k["xs"]) * ws)
    if "b" in k:
        v = v + ((k["b"].astype(np.float64) - k["bz"]) * k["bs"].astype(np.float64)).reshape(1, m, 1, 1)
    if relu:
        v = np.maximum(v, 0)
    q = np.rint(v.astype(np.float32) / np.float32(k["ys"])).astype(np.float64) + int(k["yz"])
    info = np.iinfo(k["yz"].dtype)
    return np.clip(q, info.min, info.max).astype(k["yz"].dtype)


CASES = [
    dict(relu=True, bias=True, per_channel=True),
    dict(relu=False, bias=True, per_channel=True),
    dict(relu=False, bias=True, per_channel=False, out="int8"),
    dict(relu=False, bias=False, per_channel=True),
    dict(relu=False, bias=False, per_channel=False, out="int8"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_qdq_conv_equals_the_exact_integer_reference(case):
    """Exactly the integer reference; the float reference (op by op) within one code."""
    rng = np.random.default_rng(11)
    text, x, k = qconv_case(rng, **case)
    program = graph(text)
    (fn,) = program.functions
    run = build(program, backends=[])
    reference = evaluate(fn, {"x": x}, load_catalog())[0]
    for seed in range(4):
        (got,) = run(x=x)
        want = exact_qconv(x, k, relu=case["relu"])
        assert got.dtype == want.dtype == reference.dtype
        np.testing.assert_array_equal(got, want)
        assert np.abs(got.astype(np.int64) - reference).max() <= 1
        assert len(np.unique(got)) > 10  # not saturated to one value
        x = np.random.default_rng(seed).integers(0, 256, x.shape).astype(np.uint8)
        reference = evaluate(fn, {"x": x}, load_catalog())[0]


def test_qdq_matmul_equals_the_exact_integer_reference():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (4, 16)).astype(np.uint8)
    k = {
        "xs": np.float32(0.0156),
        "xz": np.array(7, np.uint8),
        "w": rng.integers(-127, 128, (16, 10)).astype(np.int8),
        "ws": rng.uniform(0.002, 0.01, (1, 10)).astype(np.float32),
        "wz": np.zeros((1, 10), np.int8),
        "ys": np.float32(0.0305),
        "yz": np.array(84, np.uint8),
    }
    consts = "\n".join(f"    {n} = {literal(np.asarray(v))}" for n, v in k.items())
    text = f"""\
graph main(a: uint8[4, 16]) {{
  y = @ccompiler {{
{consts}
    h = @ccompiler.qdq_matmul {{
      return quantize_linear(matmul(dequantize_linear(a, xs, xz), dequantize_linear(w, ws, wz)), ys, yz)
    }}
    return h
  }}
  return y
}}
"""
    program = graph(text)
    (got,) = build(program, backends=[])(a=a)
    acc = (a.astype(np.int64) - 7) @ (k["w"].astype(np.int64) - k["wz"])
    v = acc * (np.float64(k["xs"]) * k["ws"].astype(np.float64))
    want = np.clip(np.rint(v.astype(np.float32) / k["ys"]) + 84, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
    reference = evaluate(program.functions[0], {"a": a}, load_catalog())[0]
    assert np.abs(got.astype(np.int64) - reference).max() <= 1


def test_golden_c_of_a_qdq_conv(golden):
    """The generated C (which compiles under -Wall -Wextra -Werror in the tests above)."""
    text, _, _ = qconv_case(np.random.default_rng(0), relu=False, bias=True, per_channel=True)
    spec = load_backend("ccompiler")
    externals = lower(graph(text), load_backend, load_catalog()).externals_for("ccompiler")
    artifact = module_artifact(generator_for(spec.kind)(externals, spec, load_catalog(), {}))
    assert artifact.text.count("\nCSOURCE_QCONV2D_BIAS(") == 1
    assert artifact.text == golden("c")


def imported(name: str, tmp_path):
    from byoc.cli import main

    assert main(["import", str(QUANTIZED / f"{name}.onnx"), "-o", str(tmp_path)]) == 0
    (program,) = [parse_file(p) for p in tmp_path.glob(f"{name}.graph")]
    return program


@pytest.mark.parametrize(
    ("name", "want"),
    [
        (
            "cnn_qdq",
            {
                "relu1_QuantizeLinear_Output": "qdq_conv_bias",
                "relu2_QuantizeLinear_Output": "qdq_conv_bias",
                "conv3_QuantizeLinear_Output": "qdq_conv_bias",
            },
        ),
        (
            "cnn_qdq_per_channel",
            {
                "relu1_QuantizeLinear_Output": "qdq_conv_bias",
                "relu2_QuantizeLinear_Output": "qdq_conv_bias",
                "conv3_QuantizeLinear_Output": "qdq_conv_bias",
            },
        ),
        (
            "mlp_qdq",
            {
                "fc1_matmul_QuantizeLinear_Output": "qdq_matmul",
                "y_matmul_QuantizeLinear_Output": "qdq_matmul",
            },
        ),
        (
            "mlp_qdq_per_channel",
            {
                "fc1_matmul_QuantizeLinear_Output": "qdq_matmul",
                "y_matmul_QuantizeLinear_Output": "qdq_matmul",
            },
        ),
    ],
)
def test_the_patterns_match_the_models_chains(name, want, tmp_path):
    """Matched on the imported models (before folding). The CNN's second conv matches
    too, although its dequantised input also feeds the block's skip add (TVM's rule,
    that a value inside a match is used by the match alone, would refuse it): that
    dequantize_linear is shared, computed again inside the composite. The CNN's head
    is a MatMul of the flattened activations; ``flatten`` stays on the host, so it
    matches too (checked below). qdq_add matches the skip add, and the adds of the
    MatMul heads' biases too: partitioning leaves those, as their bias broadcasts,
    which ccompiler does not (checked below)."""
    (fn,) = [f for f in imported(name, tmp_path).functions if f.name == "main"]
    spec, catalog = load_backend("ccompiler"), load_catalog()
    view = GraphView.of(fn)
    found = {}
    for k, node in enumerate(fn.nodes):
        for pname, pattern in spec.patterns.items():
            if pname.startswith("qdq") and isinstance(match_pattern(pattern, view, k, catalog), Match):
                found.setdefault(node.name, pname)
    if name.startswith("cnn"):
        want = {**want, "logits_matmul_QuantizeLinear_Output": "qdq_matmul"}
        want |= {"relu3_QuantizeLinear_Output": "qdq_add", "logits_QuantizeLinear_Output": "qdq_add"}
        relu2 = fn.nodes[view.producer["relu2_QuantizeLinear_Output"]]
        match = match_pattern(spec.patterns["qdq_conv_bias"], view, fn.nodes.index(relu2), catalog)
        assert [fn.nodes[j].name for j in match.shared] == ["relu1_DequantizeLinear_Output"]
    else:
        want = {**want, "relu_QuantizeLinear_Output": "qdq_add", "y_QuantizeLinear_Output": "qdq_add"}
    assert found == want


def _composites_in(program) -> list[str]:
    return re.findall(r"@ccompiler\.(\w+)", str(program))


def test_partitioning_takes_the_models_chains(tmp_path):
    """``--backend ccompiler`` partitioning takes them (before folding the weights); the
    skip add's dequantize_linear stays for the add, outside the second conv's composite."""
    from byoc.api import print_program

    program = imported("cnn_qdq_per_channel", tmp_path)
    done = partition(program, [load_backend("ccompiler")], load_catalog())
    printed = print_program(done)
    assert _composites_in(printed) == ["qdq_conv_bias"] * 3 + ["qdq_add", "qdq_matmul"]
    # the second conv and the skip add both compute the block input's dequantization
    # again, so the one it had is gone
    assert "relu1_DequantizeLinear_Output = dequantize_linear(" not in printed


MODELS = ["cnn_qdq", "cnn_qdq_per_channel", "mlp_qdq", "mlp_qdq_per_channel"]


@pytest.mark.parametrize("name", MODELS)
def test_the_models_on_ccompiler_int8_equal_onnxruntime(name, tmp_path):
    """With the int8 composites, the models equal ONNX Runtime's outputs bit for bit on
    the committed input and 12 seeded ones (measured on 199 inputs per model when this
    test was written: no element differed)."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from test_quantized_models import inputs, make_models

    from byoc.api import print_program
    from byoc.onnx.backend import backend_for

    done = partition(imported(name, tmp_path), [load_backend("ccompiler")], load_catalog())
    taken = re.findall(r"@ccompiler\.(qdq_\w+)", print_program(done))
    cnn = ["qdq_conv_bias"] * 3 + ["qdq_add", "qdq_matmul"]
    assert taken == (cnn if name.startswith("cnn") else ["qdq_matmul"] * 2)
    m = onnx.load(QUANTIZED / f"{name}.onnx")
    rep = backend_for("ccompiler").prepare(m)
    reference = make_models().reference
    rng = np.random.default_rng(9)
    xs = inputs(name) + [
        (rng.standard_normal(xs_.shape) * s).astype(np.float32)
        for xs_ in inputs(name)[:1]
        for s in (1, 2, 4)
        for _ in range(3)
    ]
    for k, x in enumerate(xs):
        (got,) = rep.run([x])
        np.testing.assert_array_equal(got, reference(m, x), err_msg=f"{name}, input {k}")


def test_a_weight_scale_that_is_not_a_constant_does_not_match():
    """ws computed (here a parameter): qdq_conv_bias does not match, the float path runs."""
    text = """\
graph main(x: uint8[1, 3, 6, 5], w: int8[4, 3, 3, 3], ws: float32[4, 1, 1, 1]) {
  xs = const float32[] [0.03]
  xz = const uint8[] [128]
  wz = const int8[4, 1, 1, 1] [0, 0, 0, 0]
  ys = const float32[] [0.02]
  yz = const uint8[] [100]
  return quantize_linear(conv(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz)), ys, yz)
}
"""
    program = graph(text)
    (fn,) = program.functions
    spec, catalog = load_backend("ccompiler"), load_catalog()
    view = GraphView.of(fn)
    why = match_pattern(spec.patterns["qdq_conv"], view, len(fn.nodes) - 1, catalog)
    assert why == "pattern input ws must be a constant, but ws is not"
    from byoc.api import print_program

    done = partition(program, [spec], catalog)
    assert _composites_in(print_program(done)) == []


QADD = """\
graph main(a: {a}[2, 3, 4, 5], b: {b}[{b_shape}]) {{
  sa = const float32[] [0.0371]
  za = const {a}[] [{az}]
  sb = const float32[] [0.0213]
  zb = const {b}[] [20]
  ys = const float32[] [0.02]
  yz = const {y}[] [{yz}]
  return quantize_linear(add(dequantize_linear(a, sa, za), dequantize_linear(b, sb, zb)), ys, yz)
}}
"""


@pytest.mark.parametrize(("a", "y"), [("uint8", "uint8"), ("int8", "int8"), ("uint8", "int8")])
def test_qdq_add_equals_the_reference_bit_for_bit(a, y):
    """qdq_add computes ONNX's float32 arithmetic as the reference does: every element
    equal, saturation at both ends included (the scales make sums past the range)."""
    text = QADD.format(a=a, b="int8", b_shape="2, 3, 4, 5", az=128 if a == "uint8" else 3, y=y, yz=5)
    program = partition(graph(text), [load_backend("ccompiler")], load_catalog())
    assert _composites_in(print_program(program)) == ["qdq_add"]
    fn = graph(text).functions[0]
    rng = np.random.default_rng(4)
    for _ in range(3):
        inputs = {
            p.name: rng.integers(
                np.iinfo(p.type.dtype).min, np.iinfo(p.type.dtype).max + 1, p.type.shape
            ).astype(p.type.dtype)
            for p in fn.params
        }
        (got,) = build(program)(**inputs)
        (want,) = evaluate(fn, inputs, load_catalog())
        np.testing.assert_array_equal(got, want)
        info = np.iinfo(y)
        assert (got == info.min).any() and (got == info.max).any()


def test_a_broadcasting_qdq_add_stays_off_ccompiler():
    """A bias add broadcasts, which ccompiler does not: the add is not taken."""
    text = QADD.format(a="uint8", b="int8", b_shape="5", az=3, y="uint8", yz=5)
    program = partition(graph(text), [load_backend("ccompiler")], load_catalog())
    assert "qdq_add" not in _composites_in(print_program(program))


def qdq_gemm_model(relu: bool, seed: int = 0, bias: bool = True):
    """ONNX's QDQ Gemm (transB, an int32 bias per output unit, weights per unit), as
    quantize_static writes a classifier head, optionally followed by a Relu, and its
    constants; with ``bias`` false, a Gemm without its C input."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    n, k = 7, 24
    c = {"xs": np.float32(0.02), "xz": np.uint8(128), "w": rng.integers(-127, 128, (n, k)).astype(np.int8)}
    c["ws"] = rng.uniform(0.002, 0.01, n).astype(np.float32)
    c["wz"] = np.zeros(n, np.int8)
    if bias:
        c["b"] = rng.integers(-3000, 3000, n).astype(np.int32)
        c["bs"] = (c["xs"] * c["ws"]).astype(np.float32)
        c["bz"] = np.zeros(n, np.int32)
    c["ys"], c["yz"] = np.float32(0.03), np.uint8(0 if relu else 100)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
    ]
    if bias:
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"], axis=0))
    nodes.append(helper.make_node("Gemm", ["xf", "wf", "bf"] if bias else ["xf", "wf"], ["g"], transB=1))
    if relu:
        nodes.append(helper.make_node("Relu", ["g"], ["r"]))
    nodes.append(helper.make_node("QuantizeLinear", ["r" if relu else "g", "ys", "yz"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "qgemm",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [5, k])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [5, n])],
        [numpy_helper.from_array(np.asarray(v), name) for name, v in c.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model, c


def dense_integer_reference(x: np.ndarray, c: dict, relu: bool) -> np.ndarray:
    """CSOURCE_QDENSE_BIAS's arithmetic (and CSOURCE_QMATMUL_2D's, without a bias): the
    codes' exact sum, in double times xs * ws plus the dequantized bias, then ONNX's
    QuantizeLinear in float32."""
    acc = (x.astype(np.int64) - int(c["xz"])) @ (
        c["w"].astype(np.int64) - c["wz"].astype(np.int64)[:, None]
    ).T
    v = acc * (np.float64(c["xs"]) * c["ws"].astype(np.float64))
    if "b" in c:
        v = v + (c["b"] - c["bz"]) * c["bs"].astype(np.float64)
    if relu:
        v = np.maximum(v, 0)
    q = np.rint(v.astype(np.float32) / np.float32(c["ys"])).astype(np.float64) + float(c["yz"])
    return np.clip(q, 0, 255).astype(np.uint8)


@pytest.mark.parametrize(
    ("bias", "relu"),
    [(True, False), (True, True), (False, False), (False, True)],
    ids=["bias", "bias-relu", "no-bias", "no-bias-relu"],
)
def test_qdq_gemm_is_one_int8_dense_kernel(bias, relu):
    """The Gemm's bias imports as a bias_add, so the whole chain is qdq_dense_bias(_relu),
    and a Gemm without one is qdq_dense(_relu) (the matmul kernel reading w by rows):
    equal to the integer reference, and within one step of the float reference and of
    ONNX Runtime (which computes the float QDQ graph with its optimisations off)."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from byoc.onnx.model_import import import_program

    model, c = qdq_gemm_model(relu, bias=bias)
    program = partition(import_program(model), [load_backend("ccompiler")], load_catalog())
    want = "qdq_dense" + ("_bias" if bias else "") + ("_relu" if relu else "")
    assert _composites_in(print_program(program)) == [want]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    built = build(program)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = rng.integers(0, 256, (5, 24)).astype(np.uint8)
        (got,) = built(x=x)
        np.testing.assert_array_equal(got, dense_integer_reference(x, c, relu))
        (want,) = session.run(None, {"x": x})
        assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
        (ref,) = evaluate(program.functions[0], {"x": x}, load_catalog())
        assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 1
