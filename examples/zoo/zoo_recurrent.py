"""The zoo's recurrent networks (examples/zoo/make_zoo.py): a bidirectional LSTM and a GRU."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from zoo_graph import Graph

STEPS, FEATURES, UNITS = 12, 8, 16


def recurrent(kind: str) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """A bidirectional LSTM (with initial states and peepholes) or a GRU (linear
    before reset) over [STEPS, 1, FEATURES], then a linear head of the last state."""
    g = Graph(kind.lower(), 13 if kind == "LSTM" else 14, 14)
    gates = 4 if kind == "LSTM" else 3
    dirs = 2 if kind == "LSTM" else 1
    w = g.weight((dirs, gates * UNITS, FEATURES), 0.4)
    r = g.weight((dirs, gates * UNITS, UNITS), 0.3)
    b = g.weight((dirs, 2 * gates * UNITS), 0.1)
    if kind == "LSTM":
        h0, c0 = g.weight((dirs, 1, UNITS), 0.2), g.weight((dirs, 1, UNITS), 0.2)
        p = g.weight((dirs, 3 * UNITS), 0.1)
        y, y_h, _ = g.op(
            "LSTM",
            ["sequence", w, r, b, "", h0, c0, p],
            n_out=3,
            direction="bidirectional",
            hidden_size=UNITS,
        )
    else:
        y, y_h = g.op("GRU", ["sequence", w, r, b], n_out=2, hidden_size=UNITS, linear_before_reset=1)
    last = g.op("Reshape", [y_h, g.ints([1, dirs * UNITS])])
    g.op("Gemm", [last, g.weight((dirs * UNITS, 4)), g.weight((4,), 0.1)], out="scores")
    # Y feeds a second output, so that every step's state is checked (opset 14: axes an attribute)
    g.op("ReduceMean", [y], out="mean_state", axes=[0], keepdims=0)
    feeds = [np.random.RandomState(15).standard_normal((STEPS, 1, FEATURES)).astype(np.float32)]
    inputs = [helper.make_tensor_value_info("sequence", TensorProto.FLOAT, [STEPS, 1, FEATURES])]
    outputs = [
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 4]),
        helper.make_tensor_value_info("mean_state", TensorProto.FLOAT, [dirs, 1, UNITS]),
    ]
    return g.model(inputs, outputs), feeds
