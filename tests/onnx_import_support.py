"""What the ONNX import tests share (test_onnx_import.py, test_onnx_backend.py): ONNX
models built with ``onnx.helper``, their weights and inputs, and their outputs by
onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
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
    computes them. Not ONNX's reference evaluator (onnx 1.23), which disagrees with
    onnxruntime, byoc and the BackendTest's expected outputs on three models of
    test_onnx_import.py, each by a bug of its own: its BatchNormalization of opsets
    9-13 takes the batch's statistics whenever ``momentum`` has a value (the schema's
    default 0.9 gives it one) although one output means inference; its LRN loops over
    the batch size instead of the channels; and its one Softmax and LogSoftmax use
    opset 13's single axis where opsets 1-11 flatten the input to 2-D at ``axis``."""
    import onnxruntime

    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def same_as_onnxruntime(m, feeds: dict, config: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``m`` imported and run on byoc's ``config`` (``"json"``, ``"fused,ccompiler"``)
    gives ONNX Runtime's outputs: the same count, shapes and dtypes, and values within
    ``rtol``/``atol``."""
    import onnxruntime

    from byoc.onnx.backend import backend_for

    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    got = backend_for(config).prepare(m).run([feeds[i.name] for i in m.graph.input])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def refusal(m) -> str:
    """The message of the GraphError that importing ``m`` raises."""
    import pytest

    from byoc.errors import GraphError
    from byoc.onnx.model_import import import_program

    with pytest.raises(GraphError) as info:
        import_program(m)
    return str(info.value)
