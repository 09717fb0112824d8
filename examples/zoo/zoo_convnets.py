"""The zoo's convolutional networks (examples/zoo/make_zoo.py): MobileNetV3 and a U-Net."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper
from zoo_graph import Graph


def conv(g: Graph, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1) -> str:
    w = g.weight((c_out, c_in // group, k, k), math.sqrt(2 / (c_in // group * k * k)))
    return g.op("Conv", [x, w, g.weight((c_out,), 0.1)], pads=[k // 2] * 4, strides=[stride] * 2, group=group)


def mobilenet_v3() -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = Graph("mobilenet_v3", 9)
    x = g.op("HardSwish", [conv(g, "image", 3, 16, 3, stride=2)])
    for c_in, expand, c_out, stride in ((16, 32, 16, 1), (16, 48, 24, 2)):
        h = g.op("HardSwish", [conv(g, x, c_in, expand, 1)])
        h = g.op("HardSwish", [conv(g, h, expand, expand, 3, stride=stride, group=expand)])  # depthwise
        squeeze = g.op("Relu", [conv(g, g.op("GlobalAveragePool", [h]), expand, expand // 4, 1)])
        excite = g.op("HardSigmoid", [conv(g, squeeze, expand // 4, expand, 1)], alpha=1 / 6, beta=0.5)
        h = conv(g, g.op("Mul", [h, excite]), expand, c_out, 1)
        x = g.op("Add", [x, h]) if stride == 1 and c_in == c_out else h
    pooled = g.op("Flatten", [g.op("GlobalAveragePool", [g.op("HardSwish", [conv(g, x, 24, 64, 1)])])])
    g.op("Gemm", [pooled, g.weight((10, 64)), g.weight((10,), 0.1)], out="logits", transB=1)
    feeds = [np.random.RandomState(10).standard_normal((1, 3, 32, 32)).astype(np.float32)]
    inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])]
    return g.model(inputs, outputs), feeds


def unet() -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = Graph("unet", 11)
    skips, x, c = [], "image", 3
    for c_out in (8, 16):
        x = g.op("Relu", [conv(g, x, c, c_out, 3)])
        skips.append(x)
        x, c = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2]), c_out
    x = g.op("Relu", [conv(g, x, c, 32, 3)])
    # up by Resize (nearest) on the deeper step, by a transposed convolution on the other
    up = g.op("Resize", [x, "", g.const(np.asarray([1, 1, 2, 2], np.float32))], mode="nearest")
    x = g.op("Relu", [conv(g, g.op("Concat", [up, skips[1]], axis=1), 32 + 16, 16, 3)])
    w = g.weight((16, 8, 2, 2), 0.35)
    up = g.op("ConvTranspose", [x, w, g.weight((8,), 0.1)], strides=[2, 2])
    x = g.op("Relu", [conv(g, g.op("Concat", [up, skips[0]], axis=1), 16, 8, 3)])
    g.op("Conv", [x, g.weight((2, 8, 1, 1), 0.35), g.weight((2,), 0.1)], out="mask")
    feeds = [np.random.RandomState(12).standard_normal((1, 3, 32, 32)).astype(np.float32)]
    inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])]
    outputs = [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 2, 32, 32])]
    return g.model(inputs, outputs), feeds
