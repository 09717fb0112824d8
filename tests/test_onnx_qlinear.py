"""ONNX's integer ops MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv
(byoc/onnx/qlinear.py): small models of them, per tensor and per row, column or output
channel, int8 and uint8, with and without zero points, compute exactly what ONNX
Runtime computes on both configurations (where its uint8-by-int8 kernels are exact: on
x86 without VNNI they saturate, and ONNX's reference evaluator judges instead); what
ONNX Runtime refuses (vector zero points of a and of ConvInteger's w, bfloat16 scales)
exactly what the arithmetic of ONNX's reference gives; bad zero points, scales and
types get located errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx_import_support import refusal  # noqa: E402

from byoc.onnx.backend import backend_for  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
RNG = np.random.default_rng(53)


def ints(dtype, *shape) -> np.ndarray:
    """Random values over the whole range of the 8-bit ``dtype``."""
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def scales(*shape, dtype=np.float32) -> np.ndarray:
    return np.asarray(RNG.uniform(0.002, 0.03, shape), dtype)


def model(nodes, inputs: dict, consts: dict, opset: int) -> onnx.ModelProto:
    """``nodes`` as a model: ``inputs`` are fed (their arrays give their types),
    ``consts`` are initializers; its outputs are the nodes', typed by ONNX's inference."""
    typed = lambda name, a: helper.make_tensor_value_info(  # noqa: E731
        name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape
    )
    graph = helper.make_graph(
        nodes,
        "g",
        [typed(n, np.asarray(a)) for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for n in nodes for o in n.output],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    del m.graph.output[:]
    m.graph.output.extend(inferred.graph.output)
    return m


def through_byoc(m, config: str, inputs: dict) -> list[np.ndarray]:
    return [np.asarray(y) for y in backend_for(config).prepare(m).run(list(inputs.values()))]


def through_onnxruntime(m, inputs: dict) -> list[np.ndarray]:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def through_onnx(m, inputs: dict) -> list[np.ndarray]:
    """ONNX's integer arithmetic for ``m``: ONNX Runtime's, where its uint8-by-int8
    kernels sum exactly, else (an x86 CPU without VNNI, where they saturate pairs of
    products in int16: benchmarks/peers.py) ONNX's reference evaluator's."""
    from benchmarks.peers import int8_saturation_caveat

    if int8_saturation_caveat("ONNX Runtime") is None:
        return through_onnxruntime(m, inputs)
    return ReferenceEvaluator(m).run(None, inputs)


def same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


def requantised(product, multiplier, zero) -> np.ndarray:
    """ONNX's reference requantisation of an exact integer product: times the (float32)
    multiplier in float64, plus the zero point, rounded half to even, saturated."""
    info = np.iinfo(zero.dtype)
    y = product.astype(np.float64) * multiplier.astype(np.float64) + zero.astype(np.float64)
    return np.clip(np.rint(y), info.min, info.max).astype(zero.dtype)


# ---------------------------------------------------------------- against ONNX Runtime


@pytest.mark.parametrize("config", CONFIGS)
def test_matmul_integer_matches_onnxruntime(config):
    inputs = {"a": ints(np.uint8, 3, 4, 16), "a2": ints(np.int8, 4, 16)}
    consts = {
        "b": ints(np.int8, 16, 8),
        "az": np.uint8(131),
        "bz": np.int8(-7),
        "bz_columns": ints(np.int8, 8),
        "bz_one": ints(np.int8, 1),
        "b2": ints(np.uint8, 16, 5),
    }
    nodes = [
        helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["per_tensor"]),
        helper.make_node("MatMulInteger", ["a", "b", "az", "bz_columns"], ["per_column"]),
        helper.make_node("MatMulInteger", ["a", "b", "", "bz_one"], ["b_zero_point_only"]),
        helper.make_node("MatMulInteger", ["a2", "b2"], ["no_zero_points"]),
    ]
    m = model(nodes, inputs, consts, 10)
    same(through_byoc(m, config, inputs), through_onnx(m, inputs))


@pytest.mark.parametrize("config", CONFIGS)
def test_qlinear_matmul_matches_onnxruntime(config):
    inputs = {"a": ints(np.uint8, 2, 3, 16), "a2": ints(np.int8, 5, 16)}
    consts = {
        "a_s": scales(),
        "a_z": np.uint8(120),
        "b": ints(np.uint8, 16, 8),
        "b_s": scales(1),
        "b_z": np.uint8([133]),
        "y_s": np.float32(0.25),
        "y_z": np.uint8(128),
        "a2_s": scales(),
        "a2_z": np.int8(-3),
        "b2": ints(np.int8, 16, 8),
        "b2_s": scales(8),
        "b2_z": ints(np.int8, 8),
        "y2_s": np.float32(0.4),
        "y2_z": np.int8(5),
        "h_s": scales(dtype=np.float16),
        "hb_s": scales(dtype=np.float16),
        "hy_s": np.float16(0.25),
    }
    nodes = [
        helper.make_node("QLinearMatMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"], ["uint8"]),
        helper.make_node(
            "QLinearMatMul", ["a2", "a2_s", "a2_z", "b2", "b2_s", "b2_z", "y2_s", "y2_z"], ["int8_per_column"]
        ),
        helper.make_node(
            "QLinearMatMul", ["a", "h_s", "a_z", "b", "hb_s", "b_z", "hy_s", "y_z"], ["float16"]
        ),
    ]
    m = model(nodes, inputs, consts, 21)
    same(through_byoc(m, config, inputs), through_onnxruntime(m, inputs))


@pytest.mark.parametrize("config", CONFIGS)
def test_conv_integer_matches_onnxruntime(config):
    inputs = {"x": ints(np.uint8, 2, 4, 9, 9), "x2": ints(np.int8, 1, 3, 8, 8)}
    consts = {
        "w": ints(np.uint8, 6, 2, 3, 3),
        "xz": np.uint8(97),
        "wz": np.uint8(140),
        "w2": ints(np.int8, 4, 3, 3, 3),
    }
    nodes = [
        helper.make_node(
            "ConvInteger",
            ["x", "w", "xz", "wz"],
            ["grouped"],
            pads=[1, 0, 2, 1],
            strides=[2, 1],
            dilations=[1, 2],
            group=2,
        ),
        helper.make_node("ConvInteger", ["x2", "w2"], ["same_lower"], auto_pad="SAME_LOWER", strides=[2, 2]),
    ]
    m = model(nodes, inputs, consts, 10)
    same(through_byoc(m, config, inputs), through_onnxruntime(m, inputs))


@pytest.mark.parametrize("config", CONFIGS)
def test_qlinear_conv_matches_onnxruntime(config):
    inputs = {
        "x": ints(np.uint8, 2, 4, 9, 9),
        "x2": ints(np.int8, 1, 3, 7, 7),
        "x3": ints(np.uint8, 1, 2, 10),
    }
    consts = {
        "x_s": scales(),
        "x_z": np.uint8(110),
        "w": ints(np.int8, 6, 2, 3, 3),
        "w_s": scales(6),
        "w_z": np.zeros(6, np.int8),
        "y_s": np.float32(0.3),
        "y_z": np.uint8(100),
        "bias": RNG.integers(-4000, 4000, 6).astype(np.int32),
        "x2_s": scales(),
        "x2_z": np.int8(-4),
        "w2": ints(np.int8, 5, 3, 3, 3),
        "w2_s": scales(),
        "w2_z": np.int8(0),
        "y2_s": np.float32(0.5),
        "y2_z": np.int8(-2),
        "w3": ints(np.uint8, 3, 2, 3),
        "w3_z": np.uint8(125),
    }
    nodes = [
        helper.make_node(
            "QLinearConv",
            ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z", "bias"],
            ["per_channel_with_bias"],
            pads=[1, 0, 2, 1],
            strides=[2, 1],
            group=2,
        ),
        helper.make_node(
            "QLinearConv",
            ["x2", "x2_s", "x2_z", "w2", "w2_s", "w2_z", "y2_s", "y2_z"],
            ["int8"],
            strides=[2, 2],
        ),
        helper.make_node(
            "QLinearConv", ["x3", "x_s", "x_z", "w3", "w2_s", "w3_z", "y_s", "y_z"], ["one_d"], pads=[1, 1]
        ),
    ]
    m = model(nodes, inputs, consts, 10)
    same(through_byoc(m, config, inputs), through_onnx(m, inputs))


# ---------------------------------------------------------------- what ONNX Runtime refuses


@pytest.mark.parametrize("config", CONFIGS)
def test_per_row_zero_points_and_scales_of_a(config):
    """ONNX Runtime takes a's zero point and scale as one value only, and ONNX's
    reference subtracts a vector along K: byoc's is per row, as ONNX documents, checked
    against exact integer arithmetic."""
    a, a2, b = ints(np.uint8, 4, 16), ints(np.int8, 2, 4, 16), ints(np.int8, 16, 3)
    az, az2, bz = ints(np.uint8, 4), ints(np.int8, 2, 4, 1), ints(np.int8, 1, 3)
    a_s, b_s, y_s, y_z = scales(4), scales(3), np.float32(0.2), np.int8(3)
    consts = {"b": b, "az": az, "az2": az2, "bz": bz, "a_s": a_s, "b_s": b_s, "y_s": y_s, "y_z": y_z}
    nodes = [
        helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["rows"]),
        helper.make_node("MatMulInteger", ["a2", "b", "az2"], ["batched_rows"]),
        helper.make_node(
            "QLinearMatMul", ["a", "a_s", "az", "b", "b_s", "bz", "y_s", "y_z"], ["requantised"]
        ),
    ]
    inputs = {"a": a, "a2": a2}
    rows = (a.astype(np.int64) - az[:, None]) @ (b.astype(np.int64) - bz)
    batched = (a2.astype(np.int64) - az2) @ b.astype(np.int64)
    multiplier = a_s[:, None] * b_s / y_s  # in float32, as ONNX's reference
    want = [rows.astype(np.int32), batched.astype(np.int32), requantised(rows, multiplier, y_z)]
    same(through_byoc(model(nodes, inputs, consts, 21), config, inputs), want)


@pytest.mark.parametrize("config", CONFIGS)
def test_per_channel_conv_integer_and_bfloat16_scales_match_the_reference(config):
    """ONNX Runtime refuses ConvInteger's per-channel w zero point and has no
    QLinearMatMul of bfloat16 scales: both compute ONNX's reference's values."""
    bf16 = ml_dtypes.bfloat16
    inputs = {"x": ints(np.uint8, 1, 2, 6, 6), "a": ints(np.uint8, 3, 16)}
    consts = {
        "w": ints(np.uint8, 3, 2, 3, 3),
        "xz": np.uint8(9),
        "wz": ints(np.uint8, 3),
        "b": ints(np.uint8, 16, 4),
    }
    consts |= {"s": scales(dtype=bf16), "z": np.uint8(118), "y_s": np.asarray(0.5, bf16)}
    nodes = [
        helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("QLinearMatMul", ["a", "s", "z", "b", "s", "z", "y_s", "z"], ["bfloat16"]),
    ]
    m = model(nodes, inputs, consts, 21)
    same(through_byoc(m, config, inputs), ReferenceEvaluator(m).run(None, inputs))


@pytest.mark.parametrize("config", CONFIGS)
def test_a_near_tie_rounds_as_the_reference_not_as_onnxruntime(config):
    """204 * 0.74754906 is 152.5000076 in float64, which ONNX's reference rounds to 153;
    ONNX Runtime rounds the product to float32 first, 152.5, and gives 152."""
    consts = {"s": np.float32(0.74754906), "one": np.float32(1), "zero": np.uint8(0), "b": np.uint8([[1]])}
    node = helper.make_node("QLinearMatMul", ["a", "s", "zero", "b", "one", "zero", "one", "zero"], ["y"])
    inputs = {"a": np.uint8([[204]])}
    m = model([node], inputs, consts, 10)
    assert ReferenceEvaluator(m).run(None, inputs)[0] == 153
    assert through_byoc(m, config, inputs)[0] == 153


# ---------------------------------------------------------------- refusals


def qlinear_matmul(opset=21, **given) -> onnx.ModelProto:
    """a [2, 4] uint8 @ b [4, 3] uint8, one-value scales and zero points, but ``given``."""
    consts = {"a_s": np.float32(0.1), "a_z": np.uint8(1), "b": ints(np.uint8, 4, 3), "b_s": np.float32(0.2)}
    consts |= {"b_z": np.uint8(2), "y_s": np.float32(0.3), "y_z": np.uint8(3), **given}
    consts.setdefault("a", ints(np.uint8, 2, 4))
    a = consts.pop("a")
    node = helper.make_node("QLinearMatMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"], ["y"])
    return model([node], {"a": a}, consts, opset)


def retyped(m: onnx.ModelProto, names: tuple[str, ...], elem_type: int) -> onnx.ModelProto:
    """``m`` with its initializers ``names`` zeros of ``elem_type``, after ONNX's inference
    typed its outputs (it would refuse a type it does not allow)."""
    for t in m.graph.initializer:
        if t.name in names:
            t.CopyFrom(helper.make_tensor(t.name, elem_type, t.dims, [0] * int(np.prod(t.dims))))
    return m


def test_a_zero_point_of_another_type_than_its_operand_is_invalid():
    message = refusal(retyped(qlinear_matmul(), ("b_z",), TensorProto.INT8))
    assert "QLinearMatMul" in message and "its b_zero_point (input 5) is int8, not uint8 as its b" in message


def test_a_scale_of_the_wrong_length_is_invalid():
    consts = {"w": ints(np.uint8, 2, 1, 1, 1), "s": np.float32(0.1), "w_s": scales(3), "z": np.uint8(0)}
    node = helper.make_node("QLinearConv", ["x", "s", "z", "w", "w_s", "z", "s", "z"], ["y"])
    message = refusal(model([node], {"x": ints(np.uint8, 1, 1, 3, 3)}, consts, 10))
    assert (
        "its w_scale (input 4) has shape [3], not one value or [2] (one per output channel of w)" in message
    )


def test_a_scale_of_the_wrong_rank_is_invalid():
    message = refusal(qlinear_matmul(a_s=scales(2, 2)))
    assert (
        "its a_scale (input 1) has shape [2, 2], not one value or [2] or [2, 1] (one per row of a)" in message
    )


def test_x_zero_point_is_one_value():
    node = helper.make_node("ConvInteger", ["x", "w", "x_z"], ["y"])
    consts = {"w": ints(np.uint8, 2, 3, 1, 1), "x_z": ints(np.uint8, 3)}
    message = refusal(model([node], {"x": ints(np.uint8, 1, 3, 3, 3)}, consts, 10))
    assert "ConvInteger" in message and "its x_zero_point (input 2) has shape [3], not one value" in message


def test_a_bias_of_the_wrong_shape_is_invalid():
    consts = {
        "w": ints(np.uint8, 2, 1, 1, 1),
        "s": np.float32(0.1),
        "z": np.uint8(0),
        "B": np.int32([1, 2, 3]),
    }
    node = helper.make_node("QLinearConv", ["x", "s", "z", "w", "s", "z", "s", "z", "B"], ["y"])
    message = refusal(model([node], {"x": ints(np.uint8, 1, 1, 3, 3)}, consts, 10))
    assert "its B (input 8) has shape [3], not [2]" in message


def test_float16_scales_before_opset_21_are_invalid():
    message = refusal(qlinear_matmul(opset=10, a_s=np.float16(0.1), b_s=np.float16(0.2), y_s=np.float16(0.3)))
    assert "its a_scale (input 1) is float16, which ONNX's QLinearMatMul does not take" in message


def test_float8_is_refused_by_name():
    m = retyped(qlinear_matmul(), ("b", "b_z"), TensorProto.FLOAT8E4M3FN)
    assert "byoc does not support its b (input 3) of type float8e4m3fn" in refusal(m)


def test_per_column_scales_with_a_vector_a_are_not_supported():
    message = refusal(qlinear_matmul(a=ints(np.uint8, 4), b_s=scales(3), b_z=ints(np.uint8, 3)))
    assert "byoc does not support scales or zero points per row or column with a 1-D a or b" in message
