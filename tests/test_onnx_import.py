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
from onnx import helper, numpy_helper  # noqa: E402
from onnx_import_support import FLOAT, RNG, ints, model, onnx_outputs, weight, x  # noqa: E402

import byoc  # noqa: E402
from byoc.building import build  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


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


def test_convtranspose_output_shape_and_same_upper(tmp_path):
    """ConvTranspose's output_shape sets the pads (a size beyond the unpadded output is
    output padding), and auto_pad SAME_UPPER makes the output input * stride."""
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w"], ["a"], strides=[3, 2], output_shape=[10, 8]),
        helper.make_node("ConvTranspose", ["x", "w"], ["b"], strides=[2, 2], output_shape=[6, 5]),
        helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("ConvTranspose", ["x", "w"], ["d"], strides=[2, 3], auto_pad="SAME_LOWER"),
    ]
    m = model(nodes, [("x", [1, 2, 3, 3])], ["a", "b", "c", "d"], [weight(2, 3, 3, 3, name="w")])
    graph = run_case(m, {"x": x(1, 2, 3, 3)}, tmp_path)
    assert "output_padding=[1, 1]" in graph.read_text()  # output_shape [10, 8] is one past 9 and 7


def test_flatten_negative_axis_and_dilated_average_pool(tmp_path):
    nodes = [
        helper.make_node("Flatten", ["x"], ["a"], axis=-1),
        helper.make_node("Flatten", ["x"], ["b"], axis=-3),
        helper.make_node(
            "AveragePool", ["x"], ["c"], kernel_shape=[2, 2], dilations=[2, 1], pads=[1, 0, 1, 1]
        ),
    ]
    m = model(nodes, [("x", [2, 3, 5, 4])], ["a", "b", "c"], opset=19)
    run_case(m, {"x": x(2, 3, 5, 4)}, tmp_path)


def test_tile_instance_normalization_shrink_and_castlike(tmp_path):
    """Ops composed of catalog ops: Tile (reshape, expand, reshape), InstanceNormalization
    (mean, variance, rsqrt, per-channel scale and bias) and Shrink (clip, sign)."""
    nodes = [
        helper.make_node("Tile", ["x", "reps"], ["a"]),
        helper.make_node("InstanceNormalization", ["x", "s", "b"], ["n"], epsilon=1e-3),
        helper.make_node("InstanceNormalization", ["x", "sr", "br"], ["n2"]),
        helper.make_node("Shrink", ["x"], ["k"], lambd=0.4, bias=0.3),
        helper.make_node("CastLike", ["k", "x"], ["c"]),
    ]
    inits = [ints([2, 1, 3], "reps"), weight(3, name="s"), weight(3, name="b")]
    m = model(
        nodes,
        [("x", [2, 3, 4]), ("sr", [3]), ("br", [3])],
        [("a", [4, 3, 12]), "n", "n2", ("c", [2, 3, 4])],
        inits,
        opset=15,
    )
    run_case(m, {"x": x(2, 3, 4), "sr": x(3), "br": x(3)}, tmp_path)


def test_opset_6_broadcasting_by_axis(tmp_path):
    """Before opset 7, Add..Pow broadcast only with broadcast=1, the second input's
    dimensions matching the first's from ``axis`` (default: its last ones). onnxruntime
    does not run opset 6 and ONNX's version converter rejects these models, so the
    oracle is the ONNX operator documentation's own example, written in numpy."""
    nodes = [
        helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1),
        helper.make_node("Mul", ["y", "c"], ["z"], broadcast=1),
        helper.make_node("Sub", ["z", "k"], ["u"], broadcast=1, axis=0),
    ]
    inits = [weight(2, 3, name="k")]
    m = model(nodes, [("a", [2, 3, 4, 5]), ("b", [3, 4]), ("c", [5])], ["u"], inits, opset=6)
    feeds = {"a": x(2, 3, 4, 5), "b": x(3, 4), "c": x(5)}
    k = numpy_helper.to_array(inits[0])
    want = (feeds["a"] + feeds["b"][:, :, None]) * feeds["c"] - k[:, :, None, None]
    check_backends(import_model(m, tmp_path), feeds, [want])


def test_a_rank_0_constant_keeps_its_rank(tmp_path):
    """Gather by a scalar index drops the axis (BERT's pooler takes token 0 so, ViT its
    class token): the index initializer is rank 0, and must stay so through the import
    (it once became shape [1], and the result kept the axis, in byoc and in its
    reference alike)."""
    nodes = [
        helper.make_node("Gather", ["x", "first"], ["token"], axis=1),
        helper.make_node("Add", ["token", "scalar"], ["shifted"]),
    ]
    inits = [ints(0, "first"), numpy_helper.from_array(np.asarray(0.25, np.float32), "scalar")]
    graph = run_case(model(nodes, [("x", [2, 5, 8])], ["shifted"], inits), {"x": x(2, 5, 8)}, tmp_path)
    assert "first = const int64[] [0]" in graph.read_text()  # rank 0: no dimensions


def test_a_constant_dequantize_linear_folds_at_opset_17(tmp_path):
    """Weights stored as int8 with a scale and zero point, dequantized by a node whose
    inputs are all constants: folded at import, although ONNX's reference evaluator
    implements DequantizeLinear only from opset 19 (it was refused at opset 17)."""
    q = numpy_helper.from_array(RNG.integers(-128, 128, (4, 3)).astype(np.int8), "q")
    scale = numpy_helper.from_array(np.asarray(0.05, np.float32), "scale")
    zero = numpy_helper.from_array(np.asarray(3, np.int8), "zero")
    nodes = [
        helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    m = model(nodes, [("x", [2, 4])], ["y"], [q, scale, zero], opset=17)
    feeds = {"x": x(2, 4)}
    # onnxruntime without its graph optimizations: with them, it fuses the pair into an
    # int8 matmul that quantizes x too (2e-3 of the largest output away from the model)
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    check_backends(import_model(m, tmp_path), feeds, session.run(None, feeds))


def test_shapes_flow_through_a_reshape_to_a_computed_shape(tmp_path):
    """An exporter's shape chain: Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))
    folds to a constant shape, but ONNX's inference leaves the Reshape's result without
    one; byoc types it by its own rules, so the Softmax after it (which needs the rank
    for its axis) imports (it was refused as 'a value of unknown shape')."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Softmax", ["flat"], ["y"], axis=-1),
    ]
    inits = [ints(0, "zero"), ints([0], "axes"), ints([-1], "rest")]
    m = model(nodes, [("x", [2, 3, 4])], [("y", ["a", "b"])], inits)
    assert not any(v.name == "flat" and v.type.tensor_type.shape.dim for v in m.graph.value_info)
    run_case(m, {"x": x(2, 3, 4)}, tmp_path)


def test_pad_of_opset_18_with_axes(tmp_path):
    """Pad's axes input (opset 18): pads for the listed axes only, a negative one too."""
    nodes = [helper.make_node("Pad", ["x", "pads", "value", "axes"], ["y"], mode="constant")]
    inits = [ints([1, 2, 0, 3], "pads"), numpy_helper.from_array(np.asarray(0.5, np.float32), "value")]
    inits.append(ints([0, -1], "axes"))
    run_case(model(nodes, [("x", [2, 3, 4])], ["y"], inits, opset=18), {"x": x(2, 3, 4)}, tmp_path)


def test_shape_inference_sets_the_weights_bytes_aside_and_gives_them_back():
    """ONNX's shape inference needs an initializer's type and dims, not its bytes: the
    large ones are set aside while it runs, and the caller's model ends with the very
    same bytes, also when the block fails."""
    from byoc.onnx.model_import import ASIDE_BYTES, weight_bytes_aside

    rng = np.random.default_rng(3)
    big = numpy_helper.from_array(rng.standard_normal(ASIDE_BYTES // 4 + 1).astype(np.float32), "big")
    small = numpy_helper.from_array(np.arange(4, dtype=np.int64), "small")
    graph = helper.make_graph([], "g", [], [], initializer=[big, small])
    before = graph.SerializeToString()
    with weight_bytes_aside(graph):
        assert graph.initializer[0].raw_data == b"" and list(graph.initializer[0].dims) == [
            ASIDE_BYTES // 4 + 1
        ]
        assert graph.initializer[1].raw_data == small.raw_data  # a few integers: kept
    assert graph.SerializeToString() == before
    with pytest.raises(RuntimeError), weight_bytes_aside(graph):
        raise RuntimeError("inference failed")
    assert graph.SerializeToString() == before
