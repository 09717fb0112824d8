"""The attention-mask subgraphs of transformer exports, imported and run by byoc and
compared with ONNX Runtime.

1. HuggingFace's additive mask: an int64 mask [B, S] of 1 (attend) and 0 (padding) ->
   Unsqueeze(axes 1, 2) -> Cast to float32 -> Sub(1.0, m) -> Mul(a large negative) ->
   Add to float32 scores [B, H, S, S] -> Softmax(axis -1). Both constants exports use:
   -10000.0 (BERT) and float32's lowest value (newer exports, where 0 * lowest is -0
   and 1 * lowest + a score stays finite).
2. A bool mask [B, 1, S, S] (causal and padding): Where(mask, scores, -inf) -> Softmax,
   and the same with float32's lowest value in place of -inf.
   Every row keeps at least one true entry, so no row is all -inf (a NaN row, on
   which ONNX Runtime and numpy agree only by chance).

Each runs on json (every op offloaded), on ``fused,ccompiler`` and on ``dnnl,fused``
(oneDNN takes none of these ops at these dtypes, so ``fused`` runs them). The judge is ONNX Runtime, at
ONNX's node-test tolerances (rtol 1e-3, atol 1e-7); the masked probabilities must also
be exactly zero (an additive mask of -10000 leaves exp(-10000) = 0 in float32).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from libraries import missing_library  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from byoc.onnx.backend import backend_for  # noqa: E402

B, H, S = 2, 3, 5
RTOL, ATOL = 1e-3, 1e-7
CONFIGURATIONS = [
    pytest.param("json", {"host_fallback": False}, id="json"),
    pytest.param("fused,ccompiler", {}, id="fused-ccompiler"),
    pytest.param(
        "dnnl,fused",
        {},
        id="dnnl-fused",
        marks=pytest.mark.skipif(missing_library("dnnl") is not None, reason=str(missing_library("dnnl"))),
    ),
]


def _model(nodes, inputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "attention_mask",
        inputs,
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [B, H, S, S])],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime 1.x reads
    onnx.checker.check_model(model, full_check=True)
    return model


def additive_mask_model(negative: float) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Unsqueeze", ["mask", "axes"], ["m4"]),
        helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["one", "mf"], ["inverted"]),
        helper.make_node("Mul", ["inverted", "negative"], ["bias"]),
        helper.make_node("Add", ["scores", "bias"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
    ]
    inputs = [
        helper.make_tensor_value_info("mask", TensorProto.INT64, [B, S]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [B, H, S, S]),
    ]
    initializers = [
        numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(negative, np.float32), "negative"),
    ]
    return _model(nodes, inputs, initializers)


def bool_mask_model(fill: float) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Where", ["mask", "scores", "minus_inf"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
    ]
    inputs = [
        helper.make_tensor_value_info("mask", TensorProto.BOOL, [B, 1, S, S]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [B, H, S, S]),
    ]
    initializers = [numpy_helper.from_array(np.array(fill, np.float32), "minus_inf")]
    return _model(nodes, inputs, initializers)


def _padding(rng) -> np.ndarray:
    """An int64 [B, S] mask: each sequence of a random length >= 1, padded with zeros."""
    lengths = rng.integers(1, S + 1, size=B)
    return (np.arange(S)[None, :] < lengths[:, None]).astype(np.int64)


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, feeds)
    return out


def _byoc(model, backends: str, settings: dict, feeds: dict[str, np.ndarray]) -> np.ndarray:
    rep = backend_for(backends, **settings).prepare(model)
    (out,) = rep.run(feeds)
    return np.asarray(out)


@pytest.mark.parametrize(("backends", "settings"), CONFIGURATIONS)
@pytest.mark.parametrize(
    "negative", [-10000.0, float(np.finfo(np.float32).min)], ids=["minus_1e4", "f32_min"]
)
def test_additive_int64_mask(backends, settings, negative, rng):
    model = additive_mask_model(negative)
    mask = _padding(rng)
    feeds = {"mask": mask, "scores": (4 * rng.standard_normal((B, H, S, S))).astype(np.float32)}
    want = _onnxruntime(model, feeds)
    got = _byoc(model, backends, settings, feeds)
    assert got.dtype == np.float32 and got.shape == (B, H, S, S)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    padded = np.broadcast_to(mask[:, None, None, :] == 0, got.shape)
    assert (got[padded] == 0).all()  # the padded keys get no attention
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize(("backends", "settings"), CONFIGURATIONS)
@pytest.mark.parametrize("fill", [-np.inf, float(np.finfo(np.float32).min)], ids=["minus_inf", "f32_min"])
def test_bool_mask_with_where(backends, settings, fill, rng):
    model = bool_mask_model(fill)
    causal = np.tril(np.ones((S, S), bool))
    keep = _padding(rng).astype(bool)
    mask = causal[None, None] & keep[:, None, None, :]
    mask[..., 0] = True  # the first key is never padding: no row is all -inf
    feeds = {"mask": mask, "scores": (4 * rng.standard_normal((B, H, S, S))).astype(np.float32)}
    want = _onnxruntime(model, feeds)
    got = _byoc(model, backends, settings, feeds)
    assert got.dtype == np.float32 and got.shape == (B, H, S, S)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert (got[np.broadcast_to(~mask, got.shape)] == 0).all()
