"""The zoo's model builder (examples/zoo/make_zoo.py): an ONNX graph under construction,
its seeded random weights and its fresh value names."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper


class Graph:
    """A model under construction: nodes, weights and value names."""

    def __init__(self, name: str, seed: int, opset: int = 17) -> None:
        self.name = name
        self.opset = opset
        self.rng = np.random.RandomState(seed)  # a stream numpy keeps stable across versions
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.count = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, out: str | None = None, **attrs):
        """One node; its output name (or names, with ``n_out`` > 1); ``out`` names a
        single output (a model output)."""
        outputs = [out] if out else [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=outputs[0], **attrs))
        return outputs[0] if n_out == 1 else outputs

    def const(self, array, hint: str = "c") -> str:
        name = self.fresh(hint)
        self.weights.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, shape, scale: float | None = None, hint: str = "w") -> str:
        scale = scale if scale is not None else 1 / math.sqrt(shape[0] if len(shape) > 1 else 4)
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), hint)

    def mean_last(self, x: str) -> str:
        """ReduceMean over the last axis, keeping it: axes an attribute before opset 18,
        an input from it."""
        if self.opset < 18:
            return self.op("ReduceMean", [x], axes=[-1])
        return self.op("ReduceMean", [x, self.ints([-1])])

    def ints(self, values) -> str:
        return self.const(np.asarray(values, np.int64), "i")

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        """x @ W + b, as exporters write a Linear layer on 3-D activations."""
        return self.op(
            "Add", [self.op("MatMul", [x, self.weight((n_in, n_out))]), self.weight((n_out,), 0.1)]
        )

    def model(self, inputs, outputs) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, self.weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 10
        onnx.checker.check_model(model, full_check=True)
        return model
