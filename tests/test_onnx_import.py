"""``byoc import``: ONNX models built here with ``onnx.helper`` (and the light real
models shipped in the onnx wheel) imported as graph + weights, run on byoc backends,
and compared with the ONNX model's own semantics (onnxruntime) and with byoc's numpy
reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import byoc  # noqa: E402
from byoc.building import build  # noqa: E402

FLOAT = TensorProto.FLOAT
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
RNG = np.random.default_rng(7)


def weight(*shape: int, name: str) -> TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def ints(values, name: str) -> TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def model(nodes, inputs, outputs, initializers=(), opset: int = 13):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs],
        [
            helper.make_tensor_value_info(*((o, None) if isinstance(o, str) else o)[:1], FLOAT, _shape(o))
            for o in outputs
        ],
        list(initializers),
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m = onnx.shape_inference.infer_shapes(m, data_prop=True)  # the outputs' shapes, which the checker wants
    onnx.checker.check_model(m)
    return m


def _shape(output):
    """An output is a name (its shape inferred) or (name, shape)."""
    return None if isinstance(output, str) else output[1]


def onnx_outputs(m, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs by ONNX's semantics, as onnxruntime (in the test extra)
    computes them. Not ONNX's reference evaluator: on the conv + batch-norm, pooling
    and opset-11 softmax models below it disagreed with both onnxruntime and byoc."""
    import onnxruntime

    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def import_model(m, tmp_path: Path, *extra: str) -> Path:
    """``byoc import`` of ``m`` (saved as tmp_path/model.onnx); the graph's path."""
    source = tmp_path / "model.onnx"
    source.write_bytes(m.SerializeToString())
    out = subprocess.run(
        [sys.executable, "-m", "byoc", "import", str(source), "-o", str(tmp_path), *extra],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stdout
    return tmp_path / "model.graph"


def check_backends(graph: Path, feeds, want, rtol=1e-4, atol=1e-5) -> None:
    """The imported graph on the numpy reference and on json and fused matches ``want``."""
    program = byoc.parse_file(graph)
    inputs = {p.name: feeds[p.name] for p in program.functions[0].params}
    results = {"reference": byoc.evaluate(program.functions[0], inputs)}
    for backend in ("json", "fused"):
        results[backend] = build(graph, backends=[backend]).run("main", **inputs)
    for where, got in results.items():
        assert len(got) == len(want), where
        for g, w in zip(got, want):
            assert g.shape == w.shape, where
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=where)


def run_case(m, feeds, tmp_path, *extra, rtol=1e-4, atol=1e-5) -> Path:
    graph = import_model(m, tmp_path, *extra)
    check_backends(graph, feeds, onnx_outputs(m, feeds), rtol, atol)
    return graph


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_conv_batchnorm_relu(tmp_path):
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node(
            "ConvTranspose", ["r", "wt"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]
        ),
        helper.make_node("Conv", ["y", "w2"], ["z"], auto_pad="SAME_LOWER", group=2),
    ]
    var = numpy_helper.from_array(RNG.uniform(0.5, 2, 4).astype(np.float32), "v")
    inits = [weight(4, 3, 3, 3, name="w"), weight(4, name="b"), weight(4, name="s"), weight(4, name="bb")]
    inits += [weight(4, name="m"), var, weight(4, 2, 3, 3, name="wt"), weight(2, 1, 2, 2, name="w2")]
    graph = run_case(model(nodes, [("x", [1, 3, 7, 7])], ["r", "z"], inits), {"x": x(1, 3, 7, 7)}, tmp_path)
    text = graph.read_text()
    assert 'weights "model.npz" sha256 "' in text and 'weights["w"]' in text
    for backend in ("json", "fused"):  # the command line: run and compare with the reference
        out = subprocess.run(
            [sys.executable, "-m", "byoc", "run", str(graph), "--backend", backend],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.count(" ok") == 2 and "MISMATCH" not in out.stdout, out.stdout


def test_gemm_transposes_alpha_and_beta(tmp_path):
    nodes = [
        helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("MatMul", ["y", "m"], ["y2"]),
        helper.make_node("Gemm", ["at", "y2"], ["z"], transA=1),
    ]
    inits = [weight(5, 4, name="b"), weight(5, name="c"), weight(5, 6, name="m")]
    m = model(nodes, [("a", [3, 4]), ("at", [3, 2])], ["y", "z"], inits)
    run_case(m, {"a": x(3, 4), "at": x(3, 2)}, tmp_path)


def test_pooling(tmp_path):
    nodes = [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node(
            "AveragePool", ["x"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1
        ),
        helper.make_node("AveragePool", ["x"], ["c"], kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("GlobalAveragePool", ["x"], ["d"]),
        helper.make_node("GlobalMaxPool", ["x"], ["e"]),
        helper.make_node("LRN", ["x"], ["f"], size=3, alpha=1e-3),
    ]
    m = model(nodes, [("x", [1, 2, 6, 6])], ["a", "b", "c", "d", "e", "f"])
    run_case(m, {"x": x(1, 2, 6, 6)}, tmp_path)


def test_reshape_from_folded_shape_flatten_transpose(tmp_path):
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "first"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Flatten", ["x"], ["f"], axis=2),
        helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
        helper.make_node("Identity", ["t"], ["i"]),
        helper.make_node("Dropout", ["i"], ["d"]),
        helper.make_node("Expand", ["col", "eshape"], ["e"]),
    ]
    inits = [
        ints(0, "first"),
        ints([0], "zero"),
        ints([-1], "minus1"),
        weight(3, 1, name="col"),
        ints([2, 3, 4], "eshape"),
    ]
    m = model(nodes, [("x", [2, 3, 4])], [("r", [2, 12]), "f", "d", "e"], inits)
    graph = run_case(m, {"x": x(2, 3, 4)}, tmp_path)
    assert "reshape(x, newshape=[2, -1]" in graph.read_text()  # Shape/Gather/Concat folded


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_semantics_of_each_opset(tmp_path, opset):
    nodes = [
        helper.make_node("Softmax", ["x"], ["a"], axis=1),
        helper.make_node("LogSoftmax", ["x"], ["b"]),
    ]
    m = model(nodes, [("x", [2, 3, 4])], ["a", "b"], opset=opset)
    run_case(m, {"x": x(2, 3, 4)}, tmp_path)


def test_concat_split_slice_pad_squeeze(tmp_path):
    nodes = [
        helper.make_node("Concat", ["x", "y"], ["c"], axis=1),
        helper.make_node("Split", ["c", "sizes"], ["s0", "s1"], axis=1),
        helper.make_node("Slice", ["c", "st", "en", "ax", "sp"], ["sl"]),
        helper.make_node("Pad", ["x", "pads", "pv"], ["p"], mode="constant"),
        helper.make_node("Pad", ["x", "pads"], ["pr"], mode="reflect"),
        helper.make_node("Unsqueeze", ["s1", "zero"], ["u"]),
        helper.make_node("Squeeze", ["u", "zero"], ["q"]),
    ]
    inits = [
        ints([1, 4], "sizes"),
        ints([1, 9223372036854775807], "st"),
        ints([0, -9223372036854775807], "en"),
    ]
    inits += [ints([0, 1], "ax"), ints([1, -2], "sp"), ints([0, 1, 0, 1], "pads"), ints([0], "zero")]
    inits += [numpy_helper.from_array(np.asarray(1.5, np.float32), "pv")]
    m = model(nodes, [("x", [2, 2]), ("y", [2, 3])], ["s0", "q", "sl", "p", "pr"], inits)
    run_case(m, {"x": x(2, 2), "y": x(2, 3)}, tmp_path)


def test_elementwise_ops(tmp_path):
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.2),
        helper.make_node("Elu", ["x"], ["b"], alpha=0.7),
        helper.make_node("Selu", ["x"], ["c"]),
        helper.make_node("HardSigmoid", ["x"], ["d"]),
        helper.make_node("Clip", ["x", "lo", "hi"], ["e"]),
        helper.make_node("Sum", ["a", "b", "c"], ["f"]),
        helper.make_node("Max", ["a", "b", "d"], ["g"]),
        helper.make_node("Div", ["x", "two"], ["h"]),
        helper.make_node("Abs", ["x"], ["ab"]),
        helper.make_node("Sqrt", ["ab"], ["i"]),
        helper.make_node("PRelu", ["x", "slope"], ["j"]),
        helper.make_node("Where", ["mask", "x", "h"], ["k"]),
        helper.make_node("Softsign", ["x"], ["l"]),
        helper.make_node("Tanh", ["x"], ["m"]),
        helper.make_node("Erf", ["x"], ["n"]),
    ]
    inits = [
        numpy_helper.from_array(np.asarray(v, np.float32), n)
        for n, v in (("lo", -0.5), ("hi", 0.5), ("two", 2.0))
    ]
    inits += [weight(3, 1, name="slope"), numpy_helper.from_array(RNG.random((3, 4)) > 0.5, "mask")]
    outputs = ["e", "f", "g", "i", "j", "k", "l", "m", "n"]
    run_case(model(nodes, [("x", [3, 4])], outputs, inits), {"x": x(3, 4)}, tmp_path)


def test_reductions(tmp_path):
    nodes = [
        helper.make_node("ReduceSum", ["x", "axes"], ["a"], keepdims=0),
        helper.make_node("ReduceMean", ["x"], ["b"], axes=[1, 2]),
        helper.make_node("ReduceMax", ["x"], ["c"], axes=[-1], keepdims=0),
        helper.make_node("ReduceMin", ["x"], ["d"]),
        helper.make_node("ReduceProd", ["x"], ["e"], axes=[0]),
    ]
    m = model(nodes, [("x", [2, 3, 4])], ["a", "b", "c", "d", "e"], [ints([1], "axes")])
    run_case(m, {"x": x(2, 3, 4)}, tmp_path)


def test_a_dynamic_dimension_is_fixed_by_shape(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", ["N", 4])], ["y"])
    source = tmp_path / "model.onnx"
    source.write_bytes(m.SerializeToString())
    out = subprocess.run(
        [sys.executable, "-m", "byoc", "import", str(source), "-o", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "input 'x' has a dynamic dimension 0 ('N')" in out.stderr and "--shape x=1,4" in out.stderr
    run_case(m, {"x": x(3, 4)}, tmp_path, "--shape", "x=3,4")


@pytest.mark.parametrize(
    "name", ["light_squeezenet", "light_shufflenet", "light_bvlc_alexnet", "light_resnet50"]
)
def test_a_light_real_model_matches_the_output_shipped_with_it(tmp_path, name):
    """The wheel's light SqueezeNet (ConstantOfShape weights, Dropout, Concat, global
    pooling) and ShuffleNet (BatchNormalization, Transpose and Reshape channel shuffles,
    Sum, Gemm): the input is the BackendTest's (arange / n), the expected output the
    shipped output_0.pb."""
    m = onnx.load(LIGHT / f"{name}.onnx")
    graph = import_model(m, tmp_path)
    program = byoc.parse_file(graph)
    (param,) = program.functions[0].params
    n = param.type.size
    feeds = {param.name: (np.arange(n).reshape(param.type.shape) / n).astype(np.float32)}
    expected = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / f"{name}_output_0.pb")))
    check_backends(graph, feeds, [expected], rtol=1e-3, atol=1e-5)


def test_attribute_forms_of_opset_9(tmp_path):
    """Before opsets 10, 11 and 13, Slice, Pad, Clip, Split, Unsqueeze and ReduceSum take
    attributes where later opsets take inputs."""
    nodes = [
        helper.make_node("Slice", ["x"], ["a"], starts=[0, 1], ends=[2, 100], axes=[0, 1]),
        helper.make_node("Pad", ["x"], ["b"], pads=[1, 0, 0, 2], mode="edge"),
        helper.make_node("Clip", ["x"], ["c"], min=-0.3),
        helper.make_node("Split", ["x"], ["d0", "d1"], axis=1, split=[1, 3]),
        helper.make_node("Unsqueeze", ["d1"], ["e"], axes=[0]),
        helper.make_node("ReduceSum", ["x"], ["f"], axes=[1], keepdims=1),
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(x(3, 4), "k")),
        helper.make_node("Mul", ["x", "k"], ["g"]),
        helper.make_node(
            "ConstantOfShape", ["shape"], ["h"], value=numpy_helper.from_array(np.asarray([0.25], np.float32))
        ),
        helper.make_node("Sub", ["x", "h"], ["i"]),
    ]
    m = model(
        nodes, [("x", [3, 4])], ["a", "b", "c", "d0", "e", "f", "g", "i"], [ints([3, 4], "shape")], opset=9
    )
    run_case(m, {"x": x(3, 4)}, tmp_path)


def test_more_elementwise_ops_and_a_runtime_gather(tmp_path):
    unary = ["Sigmoid", "Exp", "Neg", "Floor", "Ceil", "Sign", "Softplus", "Reciprocal", "Relu"]
    nodes = [helper.make_node(op, ["x"], [op.lower()]) for op in unary]
    nodes += [
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Log", ["ax"], ["log"]),
        helper.make_node("Pow", ["ax", "half"], ["pow"]),
        helper.make_node("Min", ["x", "ax", "exp"], ["min"]),
        helper.make_node("Gather", ["x", "rows"], ["gather"], axis=0),
        helper.make_node("Cast", ["x"], ["cast"], to=FLOAT),
        helper.make_node("Sum", ["cast"], ["single"]),
    ]
    inits = [numpy_helper.from_array(np.asarray(0.5, np.float32), "half"), ints([[2, 0], [1, 1]], "rows")]
    outputs = [op.lower() for op in unary] + ["log", "pow", "min", "gather", "single"]
    run_case(model(nodes, [("x", [3, 4])], outputs, inits), {"x": x(3, 4)}, tmp_path)
