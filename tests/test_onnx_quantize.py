"""ONNX's QuantizeLinear and DequantizeLinear (byoc/onnx/quantize.py): QDQ models as
ONNX Runtime's own quantize_static writes them (per tensor and per channel) import and
compute what ONNX Runtime computes with its graph optimisations off (the QDQ nodes
run as written); bad scales, zero points and axes get located errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_import_support import refusal  # noqa: E402

from byoc.onnx.backend import backend_for  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
RNG = np.random.default_rng(31)


def float_mlp() -> onnx.ModelProto:
    """x [4, 16] -> MatMul 16x32 -> Add -> Relu -> MatMul 32x8 -> Add."""
    w1, b1 = RNG.standard_normal((16, 32)).astype(np.float32), RNG.standard_normal(32).astype(np.float32)
    w2, b2 = RNG.standard_normal((32, 8)).astype(np.float32), RNG.standard_normal(8).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["o"]),
        helper.make_node("Add", ["o", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class Calibration(quantization.CalibrationDataReader):
    def __init__(self) -> None:
        self.batches = iter([{"x": RNG.standard_normal((4, 16)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


@pytest.fixture(scope="module", params=[False, True], ids=["per-tensor", "per-channel"])
def qdq_model(request, tmp_path_factory) -> onnx.ModelProto:
    folder = tmp_path_factory.mktemp("qdq")
    onnx.save(float_mlp(), folder / "float.onnx")
    quantization.quantize_static(
        str(folder / "float.onnx"),
        str(folder / "qdq.onnx"),
        Calibration(),
        quant_format=quantization.QuantFormat.QDQ,
        per_channel=request.param,
        activation_type=quantization.QuantType.QUInt8,
        weight_type=quantization.QuantType.QInt8,
    )
    return onnx.load(folder / "qdq.onnx")


@pytest.mark.parametrize("config", CONFIGS)
def test_a_qdq_model_of_quantize_static_matches_onnxruntime(qdq_model, config):
    ops = {n.op_type for n in qdq_model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(
        qdq_model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    (want,) = session.run(None, {"x": x})
    (got,) = backend_for(config).prepare(qdq_model).run([x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def qdq(op: str, x_type, x_shape, scale, zero=None, **attrs) -> onnx.ModelProto:
    """One QuantizeLinear or DequantizeLinear of a model input x and constant parameters."""
    inits = [numpy_helper.from_array(np.asarray(scale), "s")]
    names = ["x", "s"]
    if zero is not None:
        inits.append(numpy_helper.from_array(np.asarray(zero), "z"))
        names.append("z")
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", x_type, list(x_shape))],
        [
            helper.make_tensor_value_info(
                "y", TensorProto.FLOAT if op.startswith("De") else TensorProto.INT8, list(x_shape)
            )
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_a_scale_of_the_wrong_length_is_invalid():
    message = refusal(qdq("DequantizeLinear", TensorProto.INT8, (2, 3), np.ones(4, np.float32), axis=1))
    assert "DequantizeLinear" in message and "shape [4], not [3]" in message


def test_a_zero_point_of_another_type_than_x_is_invalid():
    m = qdq("DequantizeLinear", TensorProto.INT8, (2, 3), np.float32(0.5), np.uint8(3))
    assert "its zero point is uint8, not x's int8" in refusal(m)


def test_an_axis_out_of_range_is_invalid():
    m = qdq("QuantizeLinear", TensorProto.FLOAT, (2, 3), np.ones(3, np.float32), np.zeros(3, np.int8), axis=4)
    assert "its axis 4 is out of range for an input of rank 2" in refusal(m)
