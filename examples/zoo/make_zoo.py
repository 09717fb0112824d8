"""Write byoc's zoo of today's architectures: small ONNX models with the exact node
structure that exporters emit, random (seeded) weights, and ONNX Runtime's outputs.

    python examples/zoo/make_zoo.py [DIR] [NAME ...]   # default: this script's directory

Each model is ``DIR/NAME/model.onnx`` with ``DIR/NAME/test_data_set_0/`` (ONNX's
test-data layout: ``input_K.pb``, and ``output_K.pb`` as ONNX Runtime computes them),
which ``byoc run DIR/NAME/model.onnx --inputs DIR/NAME/test_data_set_0`` reads and
compares. The models are small enough to run in seconds (hidden size 64, two layers,
sequences of 16) but keep the structure of the real ones:

- ``bert``: token, position and segment embeddings (Gather), LayerNormalization,
  an int64 attention mask turned into an additive bias (Cast, Sub, Mul), multi-head
  self-attention (MatMul, Reshape, Transpose, Softmax), Gelu by Erf, and the pooler
  (Gather of token 0 by a scalar index, Gemm, Tanh);
- ``bert_decomposed``: the same network as older exporters write it: layer norm as
  ReduceMean/Sub/Pow/Sqrt/Div, the head shapes computed by Shape/Gather/Concat chains
  (opset 13), and Gelu as the opset-20 op;
- ``gpt2``: a fused QKV projection split in three, a causal mask (Trilu folded into an
  additive -inf bias), tanh-approximated Gelu, and the LM head tied to the token
  embedding (MatMul by its transpose);
- ``llama``: RMS norm (opset-13 style: Pow, ReduceMean, Add, Sqrt, Div), rotary
  embeddings with precomputed cos/sin tables (Slice, Neg, Concat), grouped-query
  attention (two key/value heads for four query heads: Unsqueeze, Expand, Reshape),
  a causal mask, and a SwiGLU feed-forward (Sigmoid, Mul);
- ``llama_ops``: the same block with the opset-23 ops RMSNormalization,
  RotaryEmbedding and Attention;
- ``vit``: a 16x16 patch convolution (stride 16), a class token (Concat), position
  embeddings, pre-norm encoder layers, and the class token's head (Gather);
- ``mobilenet_v3``: depthwise convolutions, HardSwish, squeeze-and-excite
  (GlobalAveragePool, 1x1 convolutions, Relu, HardSigmoid, Mul) and a residual add;
- ``lstm``, ``gru``: a bidirectional LSTM and a GRU over 12 steps with a linear head;
- ``unet``: two down steps (Conv, Relu, MaxPool), two up steps (Resize and
  ConvTranspose) with skip connections (Concat).

Needs onnx and onnxruntime (``pip install 'byoc-codegen[test]'``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN, HEADS, LAYERS, SEQ, VOCAB = 64, 4, 2, 16, 96


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


# ---------------------------------------------------------------- transformer parts


def layer_norm(g: Graph, x: str, decomposed: bool) -> str:
    scale, bias = (
        g.const(1 + 0.1 * g.rng.standard_normal(HIDDEN).astype(np.float32)),
        g.weight((HIDDEN,), 0.1),
    )
    if not decomposed:
        return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-12)
    centred = g.op("Sub", [x, g.mean_last(x)])
    var = g.mean_last(g.op("Pow", [centred, g.const(np.float32(2))]))
    std = g.op("Sqrt", [g.op("Add", [var, g.const(np.float32(1e-12))])])
    return g.op("Add", [g.op("Mul", [g.op("Div", [centred, std]), scale]), bias])


def rms_norm(g: Graph, x: str) -> str:
    scale = g.const(1 + 0.1 * g.rng.standard_normal(HIDDEN).astype(np.float32))
    mean_square = g.mean_last(g.op("Pow", [x, g.const(np.float32(2))]))
    rms = g.op("Sqrt", [g.op("Add", [mean_square, g.const(np.float32(1e-6))])])
    return g.op("Mul", [g.op("Div", [x, rms]), scale])


def gelu(g: Graph, x: str, form: str) -> str:
    if form == "erf":
        inner = g.op("Erf", [g.op("Div", [x, g.const(np.float32(math.sqrt(2)))])])
        return g.op(
            "Mul", [g.op("Mul", [x, g.op("Add", [inner, g.const(np.float32(1))])]), g.const(np.float32(0.5))]
        )
    if form == "op":
        return g.op("Gelu", [x])
    cube = g.op("Pow", [x, g.const(np.float32(3))])
    inner = g.op(
        "Mul",
        [
            g.op("Add", [x, g.op("Mul", [cube, g.const(np.float32(0.044715))])]),
            g.const(np.float32(math.sqrt(2 / math.pi))),
        ],
    )
    return g.op(
        "Mul",
        [
            g.op("Mul", [x, g.const(np.float32(0.5))]),
            g.op("Add", [g.op("Tanh", [inner]), g.const(np.float32(1))]),
        ],
    )


def heads(g: Graph, x: str, n_heads: int, shape_chain: str | None) -> str:
    """[1, SEQ, n_heads * d] -> [1, n_heads, SEQ, d]; with ``shape_chain`` (the input
    whose Shape gives the batch and sequence sizes) the target shape is computed as
    opset-13 exporters compute it."""
    d = HIDDEN // HEADS
    if shape_chain is None:
        target = g.ints([1, SEQ, n_heads, d])
    else:
        shape = g.op("Shape", [shape_chain])
        dims = [
            g.op("Unsqueeze", [g.op("Gather", [shape, g.const(np.int64(k))], axis=0), g.ints([0])])
            for k in (0, 1)
        ]
        target = g.op("Concat", [*dims, g.ints([n_heads]), g.ints([d])], axis=0)
    return g.op("Transpose", [g.op("Reshape", [x, target])], perm=[0, 2, 1, 3])


def merge_heads(g: Graph, x: str) -> str:
    return g.op("Reshape", [g.op("Transpose", [x], perm=[0, 2, 1, 3]), g.ints([1, SEQ, HIDDEN])])


def attention(g: Graph, q: str, k: str, v: str, bias: str | None) -> str:
    """softmax(q k^T / sqrt(d) + bias) v over [1, heads, SEQ, d] tensors."""
    d = HIDDEN // HEADS
    scores = g.op(
        "Div",
        [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), g.const(np.float32(math.sqrt(d)))],
    )
    if bias is not None:
        scores = g.op("Add", [scores, bias])
    return g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])


def causal_bias(g: Graph) -> str:
    """0 on and below the diagonal, -inf above, as a folded Trilu of ones gives."""
    ones = g.const(np.ones((SEQ, SEQ), np.float32))
    lower = g.op("Trilu", [ones], upper=0)
    keep = g.op("Cast", [lower], to=TensorProto.BOOL)
    return g.op("Where", [keep, g.const(np.float32(0)), g.const(np.float32(-np.inf))])


def bert(decomposed: bool) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = Graph("bert", 1, 20 if decomposed else 17)
    ids, segments, mask = "input_ids", "token_type_ids", "attention_mask"
    positions = g.ints(np.arange(SEQ)[None, :])
    x = g.op(
        "Add",
        [
            g.op(
                "Add",
                [
                    g.op("Gather", [g.weight((VOCAB, HIDDEN), 0.5), ids]),
                    g.op("Gather", [g.weight((2, HIDDEN), 0.5), segments]),
                ],
            ),
            g.op("Gather", [g.weight((SEQ, HIDDEN), 0.5), positions]),
        ],
    )
    x = layer_norm(g, x, decomposed)
    # the int64 mask [1, SEQ] -> an additive bias [1, 1, 1, SEQ]: (1 - mask) * -10000
    m = g.op(
        "Cast",
        [g.op("Unsqueeze", [g.op("Unsqueeze", [mask, g.ints([1])]), g.ints([2])])],
        to=TensorProto.FLOAT,
    )
    bias = g.op("Mul", [g.op("Sub", [g.const(np.float32(1)), m]), g.const(np.float32(-10000))])
    for _ in range(LAYERS):
        chain = x if decomposed else None
        q, k, v = (heads(g, g.linear(x, HIDDEN, HIDDEN), HEADS, chain) for _ in range(3))
        context = merge_heads(g, attention(g, q, k, v, bias))
        x = layer_norm(g, g.op("Add", [x, g.linear(context, HIDDEN, HIDDEN)]), decomposed)
        hidden = gelu(g, g.linear(x, HIDDEN, 4 * HIDDEN), "op" if decomposed else "erf")
        x = layer_norm(g, g.op("Add", [x, g.linear(hidden, 4 * HIDDEN, HIDDEN)]), decomposed)
    first = g.op("Gather", [x, g.const(np.int64(0))], axis=1)  # [1, HIDDEN]: a scalar index
    dense = g.op("Gemm", [first, g.weight((HIDDEN, HIDDEN)), g.weight((HIDDEN,), 0.1)], transB=1)
    g.op("Tanh", [dense], out="pooled")
    rng = np.random.RandomState(2)
    feeds = [
        rng.randint(0, VOCAB, (1, SEQ)).astype(np.int64),
        (np.arange(SEQ)[None, :] >= SEQ // 2).astype(np.int64),
        (np.arange(SEQ)[None, :] < SEQ - 3).astype(np.int64),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, SEQ]) for n in (ids, segments, mask)]
    outputs = [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, HIDDEN])]
    return g.model(inputs, outputs), feeds


def gpt2() -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = Graph("gpt2", 3)
    embedding = g.weight((VOCAB, HIDDEN), 0.5)
    x = g.op("Add", [g.op("Gather", [embedding, "input_ids"]), g.weight((1, SEQ, HIDDEN), 0.5)])
    bias = causal_bias(g)
    for _ in range(LAYERS):
        h = layer_norm(g, x, False)
        q, k, v = g.op("Split", [g.linear(h, HIDDEN, 3 * HIDDEN), g.ints([HIDDEN] * 3)], n_out=3, axis=-1)
        q, k, v = (heads(g, t, HEADS, None) for t in (q, k, v))
        x = g.op("Add", [x, g.linear(merge_heads(g, attention(g, q, k, v, bias)), HIDDEN, HIDDEN)])
        h = gelu(g, g.linear(layer_norm(g, x, False), HIDDEN, 4 * HIDDEN), "tanh")
        x = g.op("Add", [x, g.linear(h, 4 * HIDDEN, HIDDEN)])
    g.op("MatMul", [layer_norm(g, x, False), g.op("Transpose", [embedding], perm=[1, 0])], out="logits")
    feeds = [np.random.RandomState(4).randint(0, VOCAB, (1, SEQ)).astype(np.int64)]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, SEQ])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, SEQ, VOCAB])]
    return g.model(inputs, outputs), feeds


KV_HEADS = 2


def rotary_tables(g: Graph) -> tuple[str, str]:
    d = HIDDEN // HEADS
    inverse = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    angles = np.arange(SEQ)[:, None] * inverse[None, :]
    full = np.concatenate([angles, angles], axis=-1)
    return g.const(np.cos(full).astype(np.float32)), g.const(np.sin(full).astype(np.float32))


def rotate(g: Graph, x: str, cos: str, sin: str) -> str:
    """x * cos + rotate_half(x) * sin, rotate_half as Llama exporters write it."""
    d = HIDDEN // HEADS
    first = g.op("Slice", [x, g.ints([0]), g.ints([d // 2]), g.ints([3])])
    second = g.op("Slice", [x, g.ints([d // 2]), g.ints([d]), g.ints([3])])
    half = g.op("Concat", [g.op("Neg", [second]), first], axis=-1)
    return g.op("Add", [g.op("Mul", [x, cos]), g.op("Mul", [half, sin])])


def repeat_kv(g: Graph, x: str) -> str:
    """[1, KV_HEADS, SEQ, d] -> [1, HEADS, SEQ, d], each key/value head repeated."""
    d, groups = HIDDEN // HEADS, HEADS // KV_HEADS
    spread = g.op("Expand", [g.op("Unsqueeze", [x, g.ints([2])]), g.ints([1, KV_HEADS, groups, SEQ, d])])
    return g.op("Reshape", [spread, g.ints([1, HEADS, SEQ, d])])


def llama(ops: bool) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = Graph("llama", 5, 23 if ops else 17)
    d = HIDDEN // HEADS
    x = g.op("Gather", [g.weight((VOCAB, HIDDEN), 0.5), "input_ids"])
    cos, sin = rotary_tables(g)
    bias = causal_bias(g)
    for _ in range(LAYERS):
        if ops:
            h = g.op(
                "RMSNormalization",
                [x, g.const(1 + 0.1 * g.rng.standard_normal(HIDDEN).astype(np.float32))],
                axis=-1,
                epsilon=1e-6,
            )
        else:
            h = rms_norm(g, x)
        q = g.op("MatMul", [h, g.weight((HIDDEN, HIDDEN))])
        k, v = (g.op("MatMul", [h, g.weight((HIDDEN, KV_HEADS * d))]) for _ in range(2))
        if ops:
            half = g.op("Slice", [cos, g.ints([0]), g.ints([d // 2]), g.ints([1])])
            sine = g.op("Slice", [sin, g.ints([0]), g.ints([d // 2]), g.ints([1])])
            ids = g.ints(np.arange(SEQ)[None, :])
            q = g.op("RotaryEmbedding", [q, half, sine, ids], num_heads=HEADS)
            k = g.op("RotaryEmbedding", [k, half, sine, ids], num_heads=KV_HEADS)
            context = g.op("Attention", [q, k, v], q_num_heads=HEADS, kv_num_heads=KV_HEADS, is_causal=1)
        else:
            q = rotate(g, heads(g, q, HEADS, None), cos, sin)
            k = repeat_kv(g, rotate(g, heads(g, k, KV_HEADS, None), cos, sin))
            v = repeat_kv(g, heads(g, v, KV_HEADS, None))
            context = merge_heads(g, attention(g, q, k, v, bias))
        x = g.op("Add", [x, g.op("MatMul", [context, g.weight((HIDDEN, HIDDEN))])])
        h = rms_norm(g, x)
        gate = g.op("MatMul", [h, g.weight((HIDDEN, 2 * HIDDEN))])
        swish = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
        up = g.op("MatMul", [h, g.weight((HIDDEN, 2 * HIDDEN))])
        x = g.op("Add", [x, g.op("MatMul", [g.op("Mul", [swish, up]), g.weight((2 * HIDDEN, HIDDEN))])])
    g.op("MatMul", [rms_norm(g, x), g.weight((HIDDEN, VOCAB))], out="logits")
    feeds = [np.random.RandomState(6).randint(0, VOCAB, (1, SEQ)).astype(np.int64)]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, SEQ])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, SEQ, VOCAB])]
    return g.model(inputs, outputs), feeds


def vit() -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = Graph("vit", 7)
    patches = g.op(
        "Conv",
        ["pixel_values", g.weight((HIDDEN, 3, 16, 16), 0.05), g.weight((HIDDEN,), 0.1)],
        strides=[16, 16],
    )  # [1, HIDDEN, 4, 4]
    tokens = g.op("Transpose", [g.op("Reshape", [patches, g.ints([1, HIDDEN, 16])])], perm=[0, 2, 1])
    x = g.op("Concat", [g.weight((1, 1, HIDDEN), 0.5), tokens], axis=1)
    x = g.op("Add", [x, g.weight((1, 17, HIDDEN), 0.5)])
    d = HIDDEN // HEADS
    for _ in range(LAYERS):
        h = layer_norm(g, x, False)
        q, k, v = (
            g.op(
                "Transpose",
                [g.op("Reshape", [g.linear(h, HIDDEN, HIDDEN), g.ints([1, 17, HEADS, d])])],
                perm=[0, 2, 1, 3],
            )
            for _ in range(3)
        )
        scores = g.op(
            "Mul",
            [
                g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                g.const(np.float32(1 / math.sqrt(d))),
            ],
        )
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), g.ints([1, 17, HIDDEN])])
        x = g.op("Add", [x, g.linear(context, HIDDEN, HIDDEN)])
        x = g.op(
            "Add",
            [
                x,
                g.linear(
                    gelu(g, g.linear(layer_norm(g, x, False), HIDDEN, 2 * HIDDEN), "erf"), 2 * HIDDEN, HIDDEN
                ),
            ],
        )
    cls = g.op("Gather", [layer_norm(g, x, False), g.const(np.int64(0))], axis=1)
    g.op("Gemm", [cls, g.weight((HIDDEN, 10)), g.weight((10,), 0.1)], out="logits")
    feeds = [np.random.RandomState(8).standard_normal((1, 3, 64, 64)).astype(np.float32)]
    inputs = [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, 64, 64])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])]
    return g.model(inputs, outputs), feeds


# ---------------------------------------------------------------- convolutional networks


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


# ---------------------------------------------------------------- recurrent networks

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


MODELS: dict[str, Callable[[], tuple[onnx.ModelProto, list[np.ndarray]]]] = {
    "bert": lambda: bert(decomposed=False),
    "bert_decomposed": lambda: bert(decomposed=True),
    "gpt2": gpt2,
    "llama": lambda: llama(ops=False),
    "llama_ops": lambda: llama(ops=True),
    "vit": vit,
    "mobilenet_v3": mobilenet_v3,
    "unet": unet,
    "lstm": lambda: recurrent("LSTM"),
    "gru": lambda: recurrent("GRU"),
}
"""The zoo: name -> a function giving the model and its inputs."""


def write(directory: Path, name: str) -> Path:
    """Write ``directory/name/model.onnx`` and its test data; the model's path."""
    import onnxruntime

    model, feeds = MODELS[name]()
    folder = directory / name
    data = folder / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    outputs = session.run(None, dict(zip(names, feeds)))
    for k, array in enumerate(feeds):
        (data / f"input_{k}.pb").write_bytes(numpy_helper.from_array(array, names[k]).SerializeToString())
    for k, array in enumerate(outputs):
        (data / f"output_{k}.pb").write_bytes(numpy_helper.from_array(np.asarray(array)).SerializeToString())
    return path


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else Path(__file__).resolve().parent
    for name in argv[1:] or list(MODELS):
        path = write(directory, name)
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
