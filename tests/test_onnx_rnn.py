"""ONNX's LSTM, GRU and RNN unrolled at import (byoc/onnx/rnn.py), judged by
onnxruntime on json and fused,ccompiler: every direction, layout, activation with its
parameters, clip, peepholes, initial states and input_forget; and the located errors
for what byoc cannot unroll."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from byoc.errors import ByocError  # noqa: E402
from byoc.onnx.backend import backend_for  # noqa: E402

CONFIGS = ["json", "fused,ccompiler"]
RNG = np.random.default_rng(21)
STEPS, BATCH, INPUTS, HIDDEN = 5, 2, 3, 4
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def layer(op: str, *, dirs: int = 1, layout: int = 0, states: bool = False, peepholes: bool = False, **attrs):
    """A model of one recurrent node with constant weights; X a model input; every
    output the op has is a model output."""
    g = GATES[op]
    consts = {
        "W": RNG.standard_normal((dirs, g * HIDDEN, INPUTS)) * 0.5,
        "R": RNG.standard_normal((dirs, g * HIDDEN, HIDDEN)) * 0.5,
        "B": RNG.standard_normal((dirs, 2 * g * HIDDEN)) * 0.2,
    }
    names = ["X", "W", "R", "B", ""]
    if states or peepholes:
        consts["h0"] = RNG.standard_normal((dirs, BATCH, HIDDEN) if not layout else (BATCH, dirs, HIDDEN))
        names.append("h0")
    if op == "LSTM" and (states or peepholes):
        consts["c0"] = RNG.standard_normal(consts["h0"].shape)
        names.append("c0")
    if peepholes:
        consts["P"] = RNG.standard_normal((dirs, 3 * HIDDEN)) * 0.3
        names.append("P")
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    direction = (
        {1: "forward", 2: "bidirectional"}[dirs] if "direction" not in attrs else attrs.pop("direction")
    )
    node = helper.make_node(
        op, names, outputs, hidden_size=HIDDEN, direction=direction, layout=layout, **attrs
    )
    x_shape = (STEPS, BATCH, INPUTS) if not layout else (BATCH, STEPS, INPUTS)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
        [
            helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"{o}_{k}" for k in range(3 + (o == "Y"))])
            for o in outputs
        ],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, RNG.standard_normal(x_shape).astype(np.float32)


def onnxruntime_outputs(model, x) -> list[np.ndarray]:
    """onnxruntime's outputs; it has no batch-first layout, so a layout-1 model runs
    as its layout-0 twin (X and the initial states transposed), outputs transposed back."""
    if not any(a.name == "layout" and a.i == 1 for a in model.graph.node[0].attribute):
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"X": x})
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    node = twin.graph.node[0]
    next(a for a in node.attribute if a.name == "layout").i = 0
    dims = twin.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_value, dims[1].dim_value = dims[1].dim_value, dims[0].dim_value
    for k, tensor in enumerate(twin.graph.initializer):
        if tensor.name in ("h0", "c0"):
            swapped = numpy_helper.to_array(tensor).transpose(1, 0, 2)
            twin.graph.initializer[k].CopyFrom(
                numpy_helper.from_array(np.ascontiguousarray(swapped), tensor.name)
            )
    session = onnxruntime.InferenceSession(twin.SerializeToString(), providers=["CPUExecutionProvider"])
    y, *states = session.run(None, {"X": x.transpose(1, 0, 2)})
    return [y.transpose(2, 0, 1, 3), *(s.transpose(1, 0, 2) for s in states)]


def same_as_onnxruntime(model, x, config):
    want = onnxruntime_outputs(model, x)
    got = backend_for(config).prepare(model).run([x])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


CASES = {
    "lstm-bidirectional-states-peepholes": ("LSTM", {"dirs": 2, "peepholes": True}),
    "lstm-reverse-batch-first-clip": (
        "LSTM",
        {"direction": "reverse", "layout": 1, "states": True, "clip": 0.7},
    ),
    "lstm-input-forget": ("LSTM", {"input_forget": 1, "states": True}),
    "lstm-activations": (
        "LSTM",
        {
            "activations": ["HardSigmoid", "Elu", "Softsign"],
            "activation_alpha": [0.3, 0.8],
            "activation_beta": [0.4],
        },
    ),
    "gru-linear-before-reset": ("GRU", {"linear_before_reset": 1, "states": True}),
    "gru-bidirectional-batch-first": ("GRU", {"dirs": 2, "layout": 1}),
    "gru-activations": (
        "GRU",
        {"activations": ["Sigmoid", "ScaledTanh"], "activation_alpha": [0.9], "activation_beta": [1.5]},
    ),
    "rnn-leaky": ("RNN", {"activations": ["LeakyRelu"], "activation_alpha": [0.2]}),
    "rnn-affine-bidirectional": (
        "RNN",
        {
            "dirs": 2,
            "activations": ["Affine", "ThresholdedRelu"],
            "activation_alpha": [0.5, 0.1],
            "activation_beta": [0.25],
        },
    ),
}


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_matches_onnxruntime(case, config):
    op, options = CASES[case]
    model, x = layer(op, **options)
    same_as_onnxruntime(model, x, config)


def test_an_activation_byoc_lacks_is_refused():
    model, _ = layer("RNN", activations=["Gelu"])
    with pytest.raises(ByocError, match=r"\(RNN '', opset 14\): byoc does not support the activation 'Gelu'"):
        backend_for("json").prepare(model)


def test_a_wrong_number_of_activations_is_an_error():
    model, _ = layer("LSTM", dirs=2, activations=["Sigmoid", "Tanh", "Tanh"])
    with pytest.raises(ByocError, match="it lists 3 activations; a bidirectional LSTM takes 6"):
        backend_for("json").prepare(model)


def test_shorter_sequence_lengths_are_refused():
    model, _ = layer("GRU")
    model.graph.initializer.append(numpy_helper.from_array(np.asarray([STEPS, 2], np.int32), "lens"))
    model.graph.node[0].input[4] = "lens"
    with pytest.raises(ByocError, match=r"sequence_lens \[5, 2\] shorter than the sequence") as info:
        backend_for("json").prepare(model)
    assert "(GRU '', opset 14)" in str(info.value)
