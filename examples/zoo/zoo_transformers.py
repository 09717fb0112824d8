"""The zoo's transformers (examples/zoo/make_zoo.py): BERT in two exporter styles, GPT-2,
Llama with decomposed and with opset-23 ops, and ViT, built from shared parts (layer
and RMS norms, Gelu, attention heads, causal masks, rotary embeddings)."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper
from zoo_graph import Graph

HIDDEN, HEADS, LAYERS, SEQ, VOCAB = 64, 4, 2, 16, 96


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
