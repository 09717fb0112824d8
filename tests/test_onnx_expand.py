"""ONNX ops without a handler of byoc's, imported as the function ONNX defines them by
(byoc/onnx/expand.py). The tests take LayerNormalization's handler away, so that the
same model goes through its function body, and judge the result by onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from byoc.errors import ByocError  # noqa: E402
from byoc.onnx.backend import backend_for  # noqa: E402
from byoc.onnx.model_import import import_onnx  # noqa: E402
from byoc.onnx.ops import onnx_ops  # noqa: E402

RNG = np.random.default_rng(9)


def layer_norm_model(opset: int = 17):
    scale = numpy_helper.from_array(RNG.standard_normal(6).astype(np.float32), "scale")
    bias = numpy_helper.from_array(RNG.standard_normal(6).astype(np.float32), "bias")
    graph = helper.make_graph(
        [
            helper.make_node(
                "LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-3, name="ln"
            )
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 6])],
        [scale, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.fixture
def without_layer_norm(monkeypatch):
    """byoc with no handler of LayerNormalization: only ONNX's function body is left."""
    monkeypatch.delitem(onnx_ops(), "LayerNormalization")


@pytest.mark.parametrize("config", ["json", "fused,ccompiler"])
@pytest.mark.parametrize("opset", [17, 18])
def test_an_op_without_a_handler_imports_as_its_function(without_layer_norm, config, opset):
    """At opset 17 the function reduces with ReduceMean's axes attribute, at 18 with its
    axes input: each body's nodes are read at the opset it was written for."""
    model = layer_norm_model(opset)
    x = RNG.standard_normal((2, 4, 6)).astype(np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    (got,) = backend_for(config).prepare(model).run([x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_error_inside_the_function_names_the_models_node(without_layer_norm, monkeypatch):
    monkeypatch.delitem(onnx_ops(), "ReduceMean")
    with pytest.raises(ByocError) as info:
        import_onnx(layer_norm_model())
    message = str(info.value)
    assert "ONNX node 0 (LayerNormalization 'ln', opset 17)" in message
    assert "the ReduceMean node of the function ONNX defines it by" in message


def test_an_op_with_no_function_is_still_refused(monkeypatch):
    monkeypatch.delitem(onnx_ops(), "Relu")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ByocError, match=r"\(Relu '', opset 17\): byoc does not support this op"):
        import_onnx(model)
