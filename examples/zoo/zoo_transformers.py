"""The zoo's transformers (examples/zoo/make_zoo.py): BERT in two exporter styles, GPT-2,
Llama with decomposed and with opset-23 ops, and ViT, built from shared parts (layer
and RMS norms, Gelu, attention heads, causal masks, rotary embeddings).

Each builder takes its sizes (:class:`Sizes`): the zoo's are small (:data:`ZOO`), so
that the test suite runs them in seconds; the benchmarks build the same graphs at the
sizes of the models people deploy (:data:`BERT_BASE`, :data:`GPT2_SMALL`,
:data:`LLAMA_STYLE`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper
from zoo_graph import Graph


@dataclass(frozen=True)
class Sizes:
    """A transformer's sizes: the hidden width, attention heads (``kv_heads`` of them
    for keys and values, Llama's grouped-query attention), layers, the sequence length
    (batch 1), the vocabulary, and the feed-forward width (None: 4 x hidden, or 2 x
    hidden for Llama's SwiGLU)."""

    hidden: int
    heads: int
    layers: int
    seq: int
    vocab: int
    kv_heads: int = 2
    ffn: int | None = None


ZOO = Sizes(hidden=64, heads=4, layers=2, seq=16, vocab=96)
"""The zoo's models (examples/zoo): small enough to run on every backend in seconds."""
BERT_BASE = Sizes(hidden=768, heads=12, layers=12, seq=128, vocab=30522)
GPT2_SMALL = Sizes(hidden=768, heads=12, layers=12, seq=128, vocab=50257)
LLAMA_STYLE = Sizes(hidden=1024, heads=16, layers=8, seq=128, vocab=32000, kv_heads=4, ffn=2816)


def feed_forward(s: Sizes, gated: bool) -> int:
    """The feed-forward width: ``s.ffn``, else 4 x hidden (BERT, GPT-2), or 2 x hidden
    for a gated (SwiGLU) one (the zoo's Llama)."""
    return s.ffn or (2 if gated else 4) * s.hidden


class SizedGraph(Graph):
    """A model under construction with its transformer's sizes."""

    def __init__(self, name: str, seed: int, opset: int, sizes: Sizes) -> None:
        super().__init__(name, seed, opset)
        self.sizes = sizes


def layer_norm(g: SizedGraph, x: str, decomposed: bool) -> str:
    s = g.sizes
    scale, bias = (
        g.const(1 + 0.1 * g.rng.standard_normal(s.hidden).astype(np.float32)),
        g.weight((s.hidden,), 0.1),
    )
    if not decomposed:
        return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-12)
    centred = g.op("Sub", [x, g.mean_last(x)])
    var = g.mean_last(g.op("Pow", [centred, g.const(np.float32(2))]))
    std = g.op("Sqrt", [g.op("Add", [var, g.const(np.float32(1e-12))])])
    return g.op("Add", [g.op("Mul", [g.op("Div", [centred, std]), scale]), bias])


def rms_norm(g: SizedGraph, x: str) -> str:
    s = g.sizes
    scale = g.const(1 + 0.1 * g.rng.standard_normal(s.hidden).astype(np.float32))
    mean_square = g.mean_last(g.op("Pow", [x, g.const(np.float32(2))]))
    rms = g.op("Sqrt", [g.op("Add", [mean_square, g.const(np.float32(1e-6))])])
    return g.op("Mul", [g.op("Div", [x, rms]), scale])


def gelu(g: SizedGraph, x: str, form: str) -> str:
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


def heads(g: SizedGraph, x: str, n_heads: int, shape_chain: str | None) -> str:
    """[1, s.seq, n_heads * d] -> [1, n_heads, s.seq, d]; with ``shape_chain`` (the input
    whose Shape gives the batch and sequence sizes) the target shape is computed as
    opset-13 exporters compute it."""
    s = g.sizes
    d = s.hidden // s.heads
    if shape_chain is None:
        target = g.ints([1, s.seq, n_heads, d])
    else:
        shape = g.op("Shape", [shape_chain])
        dims = [
            g.op("Unsqueeze", [g.op("Gather", [shape, g.const(np.int64(k))], axis=0), g.ints([0])])
            for k in (0, 1)
        ]
        target = g.op("Concat", [*dims, g.ints([n_heads]), g.ints([d])], axis=0)
    return g.op("Transpose", [g.op("Reshape", [x, target])], perm=[0, 2, 1, 3])


def merge_heads(g: SizedGraph, x: str) -> str:
    s = g.sizes
    return g.op("Reshape", [g.op("Transpose", [x], perm=[0, 2, 1, 3]), g.ints([1, s.seq, s.hidden])])


def attention(g: SizedGraph, q: str, k: str, v: str, bias: str | None) -> str:
    """softmax(q k^T / sqrt(d) + bias) v over [1, heads, s.seq, d] tensors."""
    s = g.sizes
    d = s.hidden // s.heads
    scores = g.op(
        "Div",
        [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), g.const(np.float32(math.sqrt(d)))],
    )
    if bias is not None:
        scores = g.op("Add", [scores, bias])
    return g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])


def causal_bias(g: SizedGraph) -> str:
    """0 on and below the diagonal, -inf above, as a folded Trilu of ones gives."""
    s = g.sizes
    ones = g.const(np.ones((s.seq, s.seq), np.float32))
    lower = g.op("Trilu", [ones], upper=0)
    keep = g.op("Cast", [lower], to=TensorProto.BOOL)
    return g.op("Where", [keep, g.const(np.float32(0)), g.const(np.float32(-np.inf))])


def bert(decomposed: bool, s: Sizes = ZOO) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = SizedGraph("bert", 1, 20 if decomposed else 17, s)
    ffn = feed_forward(s, gated=False)
    ids, segments, mask = "input_ids", "token_type_ids", "attention_mask"
    positions = g.ints(np.arange(s.seq)[None, :])
    x = g.op(
        "Add",
        [
            g.op(
                "Add",
                [
                    g.op("Gather", [g.weight((s.vocab, s.hidden), 0.5), ids]),
                    g.op("Gather", [g.weight((2, s.hidden), 0.5), segments]),
                ],
            ),
            g.op("Gather", [g.weight((s.seq, s.hidden), 0.5), positions]),
        ],
    )
    x = layer_norm(g, x, decomposed)
    # the int64 mask [1, s.seq] -> an additive bias [1, 1, 1, s.seq]: (1 - mask) * -10000
    m = g.op(
        "Cast",
        [g.op("Unsqueeze", [g.op("Unsqueeze", [mask, g.ints([1])]), g.ints([2])])],
        to=TensorProto.FLOAT,
    )
    bias = g.op("Mul", [g.op("Sub", [g.const(np.float32(1)), m]), g.const(np.float32(-10000))])
    for _ in range(s.layers):
        chain = x if decomposed else None
        q, k, v = (heads(g, g.linear(x, s.hidden, s.hidden), s.heads, chain) for _ in range(3))
        context = merge_heads(g, attention(g, q, k, v, bias))
        x = layer_norm(g, g.op("Add", [x, g.linear(context, s.hidden, s.hidden)]), decomposed)
        hidden = gelu(g, g.linear(x, s.hidden, ffn), "op" if decomposed else "erf")
        x = layer_norm(g, g.op("Add", [x, g.linear(hidden, ffn, s.hidden)]), decomposed)
    first = g.op("Gather", [x, g.const(np.int64(0))], axis=1)  # [1, s.hidden]: a scalar index
    dense = g.op("Gemm", [first, g.weight((s.hidden, s.hidden)), g.weight((s.hidden,), 0.1)], transB=1)
    g.op("Tanh", [dense], out="pooled")
    rng = np.random.RandomState(2)
    feeds = [
        rng.randint(0, s.vocab, (1, s.seq)).astype(np.int64),
        (np.arange(s.seq)[None, :] >= s.seq // 2).astype(np.int64),
        (np.arange(s.seq)[None, :] < s.seq - 3).astype(np.int64),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, s.seq]) for n in (ids, segments, mask)]
    outputs = [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, s.hidden])]
    return g.model(inputs, outputs), feeds


def gpt2(s: Sizes = ZOO) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = SizedGraph("gpt2", 3, 17, s)
    ffn = feed_forward(s, gated=False)
    embedding = g.weight((s.vocab, s.hidden), 0.5)
    x = g.op("Add", [g.op("Gather", [embedding, "input_ids"]), g.weight((1, s.seq, s.hidden), 0.5)])
    bias = causal_bias(g)
    for _ in range(s.layers):
        h = layer_norm(g, x, False)
        q, k, v = g.op(
            "Split", [g.linear(h, s.hidden, 3 * s.hidden), g.ints([s.hidden] * 3)], n_out=3, axis=-1
        )
        q, k, v = (heads(g, t, s.heads, None) for t in (q, k, v))
        x = g.op("Add", [x, g.linear(merge_heads(g, attention(g, q, k, v, bias)), s.hidden, s.hidden)])
        h = gelu(g, g.linear(layer_norm(g, x, False), s.hidden, ffn), "tanh")
        x = g.op("Add", [x, g.linear(h, ffn, s.hidden)])
    g.op("MatMul", [layer_norm(g, x, False), g.op("Transpose", [embedding], perm=[1, 0])], out="logits")
    feeds = [np.random.RandomState(4).randint(0, s.vocab, (1, s.seq)).astype(np.int64)]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, s.seq])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, s.seq, s.vocab])]
    return g.model(inputs, outputs), feeds


def rotary_tables(g: SizedGraph) -> tuple[str, str]:
    s = g.sizes
    d = s.hidden // s.heads
    inverse = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    angles = np.arange(s.seq)[:, None] * inverse[None, :]
    full = np.concatenate([angles, angles], axis=-1)
    return g.const(np.cos(full).astype(np.float32)), g.const(np.sin(full).astype(np.float32))


def rotate(g: SizedGraph, x: str, cos: str, sin: str) -> str:
    """x * cos + rotate_half(x) * sin, rotate_half as Llama exporters write it."""
    s = g.sizes
    d = s.hidden // s.heads
    first = g.op("Slice", [x, g.ints([0]), g.ints([d // 2]), g.ints([3])])
    second = g.op("Slice", [x, g.ints([d // 2]), g.ints([d]), g.ints([3])])
    half = g.op("Concat", [g.op("Neg", [second]), first], axis=-1)
    return g.op("Add", [g.op("Mul", [x, cos]), g.op("Mul", [half, sin])])


def repeat_kv(g: SizedGraph, x: str) -> str:
    """[1, s.kv_heads, s.seq, d] -> [1, s.heads, s.seq, d], each key/value head repeated."""
    s = g.sizes
    d, groups = s.hidden // s.heads, s.heads // s.kv_heads
    spread = g.op("Expand", [g.op("Unsqueeze", [x, g.ints([2])]), g.ints([1, s.kv_heads, groups, s.seq, d])])
    return g.op("Reshape", [spread, g.ints([1, s.heads, s.seq, d])])


def llama(ops: bool, s: Sizes = ZOO) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = SizedGraph("llama", 5, 23 if ops else 17, s)
    ffn = feed_forward(s, gated=True)
    d = s.hidden // s.heads
    x = g.op("Gather", [g.weight((s.vocab, s.hidden), 0.5), "input_ids"])
    cos, sin = rotary_tables(g)
    bias = causal_bias(g)
    for _ in range(s.layers):
        if ops:
            h = g.op(
                "RMSNormalization",
                [x, g.const(1 + 0.1 * g.rng.standard_normal(s.hidden).astype(np.float32))],
                axis=-1,
                epsilon=1e-6,
            )
        else:
            h = rms_norm(g, x)
        q = g.op("MatMul", [h, g.weight((s.hidden, s.hidden))])
        k, v = (g.op("MatMul", [h, g.weight((s.hidden, s.kv_heads * d))]) for _ in range(2))
        if ops:
            half = g.op("Slice", [cos, g.ints([0]), g.ints([d // 2]), g.ints([1])])
            sine = g.op("Slice", [sin, g.ints([0]), g.ints([d // 2]), g.ints([1])])
            ids = g.ints(np.arange(s.seq)[None, :])
            q = g.op("RotaryEmbedding", [q, half, sine, ids], num_heads=s.heads)
            k = g.op("RotaryEmbedding", [k, half, sine, ids], num_heads=s.kv_heads)
            context = g.op("Attention", [q, k, v], q_num_heads=s.heads, kv_num_heads=s.kv_heads, is_causal=1)
        else:
            q = rotate(g, heads(g, q, s.heads, None), cos, sin)
            k = repeat_kv(g, rotate(g, heads(g, k, s.kv_heads, None), cos, sin))
            v = repeat_kv(g, heads(g, v, s.kv_heads, None))
            context = merge_heads(g, attention(g, q, k, v, bias))
        x = g.op("Add", [x, g.op("MatMul", [context, g.weight((s.hidden, s.hidden))])])
        h = rms_norm(g, x)
        gate = g.op("MatMul", [h, g.weight((s.hidden, ffn))])
        swish = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
        up = g.op("MatMul", [h, g.weight((s.hidden, ffn))])
        x = g.op("Add", [x, g.op("MatMul", [g.op("Mul", [swish, up]), g.weight((ffn, s.hidden))])])
    g.op("MatMul", [rms_norm(g, x), g.weight((s.hidden, s.vocab))], out="logits")
    feeds = [np.random.RandomState(6).randint(0, s.vocab, (1, s.seq)).astype(np.int64)]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, s.seq])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, s.seq, s.vocab])]
    return g.model(inputs, outputs), feeds


def vit(s: Sizes = ZOO) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    g = SizedGraph("vit", 7, 17, s)
    patches = g.op(
        "Conv",
        ["pixel_values", g.weight((s.hidden, 3, 16, 16), 0.05), g.weight((s.hidden,), 0.1)],
        strides=[16, 16],
    )  # [1, s.hidden, 4, 4]
    tokens = g.op("Transpose", [g.op("Reshape", [patches, g.ints([1, s.hidden, 16])])], perm=[0, 2, 1])
    x = g.op("Concat", [g.weight((1, 1, s.hidden), 0.5), tokens], axis=1)
    x = g.op("Add", [x, g.weight((1, 17, s.hidden), 0.5)])
    d = s.hidden // s.heads
    for _ in range(s.layers):
        h = layer_norm(g, x, False)
        q, k, v = (
            g.op(
                "Transpose",
                [g.op("Reshape", [g.linear(h, s.hidden, s.hidden), g.ints([1, 17, s.heads, d])])],
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
        context = g.op(
            "Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), g.ints([1, 17, s.hidden])]
        )
        x = g.op("Add", [x, g.linear(context, s.hidden, s.hidden)])
        x = g.op(
            "Add",
            [
                x,
                g.linear(
                    gelu(g, g.linear(layer_norm(g, x, False), s.hidden, 2 * s.hidden), "erf"),
                    2 * s.hidden,
                    s.hidden,
                ),
            ],
        )
    cls = g.op("Gather", [layer_norm(g, x, False), g.const(np.int64(0))], axis=1)
    g.op("Gemm", [cls, g.weight((s.hidden, 10)), g.weight((10,), 0.1)], out="logits")
    feeds = [np.random.RandomState(8).standard_normal((1, 3, 64, 64)).astype(np.float32)]
    inputs = [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, 64, 64])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])]
    return g.model(inputs, outputs), feeds
