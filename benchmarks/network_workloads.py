"""The networks suite's workloads (data only): each one's byoc graph, the same graph as
an ONNX model for the peers, its inputs and its numpy reference output.

The byoc graph takes every tensor as an input (as a network layer offloaded by a
framework does); the ONNX model holds the weights as initializers (a matmul's b only
where it is a layer's weights, not attention's keys), so that ONNX Runtime and TVM
may prepack or fold them (their best configuration). The conv, dense and basic-block
workloads also have that ONNX model imported into byoc
(``constant_program``: the weights are constants, as an inference graph has them), so
that a library backend may prepack them too, like oneDNN's format_any floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_JSON = "benchmarks/results/networks.json"
LIGHT = ("light_resnet50", "light_squeezenet")
ZOO = REPO / "examples" / "zoo"
TRANSFORMERS = (
    ("bert_base", "BERT (post-norm, erf Gelu, an additive mask)", "bert", (False,), "BERT_BASE"),
    ("gpt2_small", "GPT-2 (pre-norm, tanh Gelu, causal, tied embeddings)", "gpt2", (), "GPT2_SMALL"),
    (
        "llama_style",
        "Llama (RMSNorm, rotary, grouped-query attention, SwiGLU)",
        "llama",
        (False,),
        "LLAMA_STYLE",
    ),
)
"""(key, title, the zoo's builder in examples/zoo/zoo_transformers.py, its arguments
before the sizes (BERT's and Llama's decomposed forms), its sizes): whole transformers
with seeded random weights; at :data:`TINY_TRANSFORMER` with --tiny."""
TINY_TRANSFORMER = {"hidden": 32, "heads": 2, "layers": 1, "seq": 8, "vocab": 50, "kv_heads": 1}
"""The transformers' sizes with --tiny, on ``fused`` alone: gcc takes 25-30 s to compile
even one such layer on a 2-core machine (the zoo's two layers: 60-100 s, on each
--backend choice), which the smoke test cannot afford for every choice."""
LARGE_NETWORKS = (*LIGHT, *(key for key, *_ in TRANSFORMERS))
"""The whole networks that untuned TVM takes seconds per call to run (--tvm-networks)."""
TINY_NETWORK = REPO / "examples" / "onnx" / "tiny_cnn.onnx"
QDQ_NETWORK = REPO / "examples" / "quantized" / "cnn_qdq.onnx"
KERNEL_BACKENDS = ("dnnl", "cblas", "fused", "ccompiler")
"""Single-kernel workloads: every backend, alone, through its prepared call."""
NETWORK_BACKENDS = (("dnnl", "fused"), ("cblas", "fused"), ("fused",))
"""Whole networks: these --backend choices, in order of preference (the rest on the host)."""
BLOCK_BACKENDS = (*NETWORK_BACKENDS, ("ccompiler",))
FUSED_DOUBLE = ("fused", "fused.float32_dots=false")
"""``fused`` with its dot products summed in double (its option float32_dots off): the
reference's bits at half the speed, beside ``fused`` as shipped, on the single kernels."""
KERNEL_CHOICES = (*((b,) for b in KERNEL_BACKENDS), FUSED_DOUBLE)
"""Single float kernels: every backend alone, and fused with double sums."""
ONNX_OPSET = 17


@dataclass
class Workload:
    key: str
    title: str
    kind: str  # conv | conv_q8 | dense | matmul | network (run through the graph executor)
    program: Any  # the byoc Program (one graph)
    inputs: dict[str, np.ndarray]  # byoc parameter name -> array
    onnx_model: Any  # the same computation for ONNX Runtime and TVM
    onnx_inputs: dict[str, np.ndarray]  # ONNX input name -> array (the rest are initializers)
    backends: tuple[tuple[str, ...], ...]
    flops: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)  # what the native harness needs
    expected: np.ndarray | None = None
    constant_program: Any = None  # the ONNX model imported: the weights as constants


def _onnx(
    nodes: list,
    inputs: dict[str, np.ndarray],
    out_shape: tuple[int, ...],
    weights: dict[str, np.ndarray],
    out_dtype: type = np.float32,
):
    import onnx
    from onnx import helper, numpy_helper

    def value(name: str, dtype: Any, shape: tuple[int, ...]) -> Any:
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)
        )

    graph = helper.make_graph(
        nodes,
        "main",
        [value(n, a.dtype, a.shape) for n, a in inputs.items()],
        [value("out", out_dtype, out_shape)],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _imported(model, key: str) -> Any:
    """The ONNX model imported into byoc: its initializers become constants."""
    from byoc.onnx.model_import import import_program

    return import_program(model, where=f"{key}.onnx")


def conv_workload(rng: np.random.Generator, c: int, size: int) -> Workload:
    """conv2d 3x3, c -> c channels, size x size, batch 1, pads 1, + bias + relu."""
    from onnx import helper

    import byoc

    x = rng.standard_normal((1, c, size, size)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, c).astype(np.float32)
    text = (
        f"graph main(x: float32[1, {c}, {size}, {size}], w: float32[{c}, {c}, 3, 3], b: float32[{c}]) {{\n"
        "  return relu(bias_add(conv(x, w, pads=[1, 1, 1, 1]), b))\n}\n"
    )
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["out"]),
    ]
    model = _onnx(nodes, {"x": x}, x.shape, {"w": w, "b": b})
    geometry = [1, c, size, size, c, 3, 3, size, size, 1, 1, 1, 1, 1, 1]
    return Workload(
        "conv3x3",
        f"conv2d 3x3 {c}->{c}, {size}x{size}, pads 1, + bias + relu",
        "conv",
        byoc.parse(text, "graph"),
        {"x": x, "w": w, "b": b},
        model,
        {"x": x},
        KERNEL_CHOICES,
        flops=2 * c * size * size * c * 9,
        attrs={"geometry": geometry, "relu": True, "fused": True, "out_shape": x.shape},
        constant_program=_imported(model, "conv3x3"),
    )


def conv_q8_workload(rng: np.random.Generator, c: int, size: int) -> Workload:
    """The int8 conv3x3: conv2d 3x3, c -> c channels, size x size, batch 1, pads 1, +
    bias + relu in ONNX's QDQ form, as ``quantize_static`` writes a ResNet stage
    (uint8 activations, int8 weights per output channel with their int32 bias), its
    uint8 source and result the graph's input and output (the int8 tensors that flow
    between two quantised layers). byoc runs the ONNX model imported (its weights
    constants, which an int8 kernel packs at init)."""
    from onnx import helper

    x = rng.integers(0, 256, (1, c, size, size)).astype(np.uint8)
    w = rng.integers(-127, 128, (c, c, 3, 3)).astype(np.int8)
    xs, xz = np.float32(0.02), np.uint8(128)
    # weight scales that make the float weights He-initialised: (w * ws) has std sqrt(2 / 9c)
    ws = (np.sqrt(2.0 / (9 * c)) / 73.0 * rng.uniform(0.8, 1.25, c)).astype(np.float32)
    b = rng.integers(-2000, 2000, c).astype(np.int32)
    ys, yz = np.float32(6.0 / 255), np.uint8(0)
    weights = {
        "xs": xs,
        "xz": xz,
        "w": w,
        "ws": ws,
        "wz": np.zeros(c, np.int8),
        "b": b,
        "bs": (xs * ws).astype(np.float32),
        "bz": np.zeros(c, np.int32),
        "ys": ys,
        "yz": yz,
    }
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"], axis=0),
        helper.make_node("Conv", ["xf", "wf", "bf"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["out"]),
    ]
    model = _onnx(nodes, {"x": x}, x.shape, weights, np.uint8)
    geometry = [1, c, size, size, c, 3, 3, size, size, 1, 1, 1, 1, 1, 1]
    q8 = {
        "w": w,
        "ws": ws,
        "b": (b * weights["bs"]).astype(np.float32),
        "xs": xs,
        "xz": xz,
        "ys": ys,
        "yz": yz,
    }
    program = _imported(model, "conv3x3_int8")
    return Workload(
        "conv3x3_int8",
        f"int8 (QDQ) conv2d 3x3 {c}->{c}, {size}x{size}, pads 1, + bias + relu: uint8 in and out",
        "conv_q8",
        program,
        {"x": x},
        model,
        {"x": x},
        tuple((b,) for b in KERNEL_BACKENDS),
        flops=2 * c * size * size * c * 9,
        attrs={"geometry": geometry, "relu": True, "out_shape": x.shape, "out_dtype": np.uint8, "q8": q8},
    )


def dense_workload(rng: np.random.Generator, key: str, n: int) -> Workload:
    """dense: x (n, n) @ w (n, n).T, no bias."""
    from onnx import helper

    import byoc

    x = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    w = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    text = f"graph main(x: float32[{n}, {n}], w: float32[{n}, {n}]) {{\n  return dense(x, w)\n}}\n"
    nodes = [helper.make_node("Gemm", ["x", "w"], ["out"], transB=1)]
    model = _onnx(nodes, {"x": x}, (n, n), {"w": w})
    return Workload(
        key,
        f"dense {n}x{n}x{n}: x @ w.T",
        "dense",
        byoc.parse(text, "graph"),
        {"x": x, "w": w},
        model,
        {"x": x},
        KERNEL_CHOICES,
        flops=2 * n * n * n,
        attrs={"out_shape": (n, n)},
        constant_program=_imported(model, key),
    )


def matmul_workload(
    rng: np.random.Generator,
    key: str,
    what: str,
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    weights: bool,
) -> Workload:
    """matmul(a, b) as numpy has it (batch dims broadcast), a single kernel on the
    --backend choices (NETWORK_BACKENDS). With ``weights`` b is a layer's weights: an
    initializer of the ONNX model (which ONNX Runtime may prepack); without, both are
    activations (attention's queries and keys), both inputs of the ONNX model."""
    from onnx import helper

    import byoc

    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    b = rng.uniform(-1, 1, b_shape).astype(np.float32)
    out_shape = (*np.broadcast_shapes(a_shape[:-2], b_shape[:-2]), a_shape[-2], b_shape[-1])
    text = f"graph main(a: float32{list(a_shape)}, b: float32{list(b_shape)}) {{\n  return matmul(a, b)\n}}\n"
    nodes = [helper.make_node("MatMul", ["a", "b"], ["out"])]
    onnx_inputs = {"a": a} if weights else {"a": a, "b": b}
    model = _onnx(nodes, onnx_inputs, out_shape, {"b": b} if weights else {})
    return Workload(
        key,
        f"{what}: float32{list(a_shape)} @ float32{list(b_shape)}",
        "matmul",
        byoc.parse(text, "graph"),
        {"a": a, "b": b},
        model,
        onnx_inputs,
        (*NETWORK_BACKENDS, FUSED_DOUBLE),
        flops=2 * int(np.prod(out_shape)) * a_shape[-1],
        attrs={"out_shape": out_shape},
    )


def basic_block_workload(rng: np.random.Generator, c: int, size: int) -> Workload:
    """examples/resnet_basic_block.graph's statements at c channels, size x size."""
    from onnx import helper

    import byoc

    shape = (1, c, size, size)
    x = rng.standard_normal(shape).astype(np.float32)
    arrays = {"x": x}
    for k in (1, 2):
        arrays[f"w{k}"] = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
    for k in (1, 2):
        arrays[f"scale{k}"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
        arrays[f"bias{k}"] = rng.uniform(-0.1, 0.1, c).astype(np.float32)
    stats = {f"mean{k}": rng.uniform(-0.3, 0.3, c).astype(np.float32) for k in (1, 2)}
    stats.update({f"var{k}": rng.uniform(0.5, 2.5, c).astype(np.float32) for k in (1, 2)})
    t, v = f"float32[{c}]", f"float32[{c}, {c}, 3, 3]"
    consts = "".join(
        f"  {name} = const {t} [{', '.join(repr(float(e)) for e in a)}]\n" for name, a in stats.items()
    )
    text = (
        f"graph basic_block(x: float32[{', '.join(map(str, shape))}], w1: {v}, w2: {v},\n"
        f"                  scale1: {t}, bias1: {t}, scale2: {t}, bias2: {t}) {{\n{consts}"
        "  h = relu(batch_norm(conv(x, w1, pads=[1, 1, 1, 1]), scale1, bias1, mean1, var1, epsilon=1e-5))\n"
        "  y = batch_norm(conv(h, w2, strides=[1, 1], pads=[1, 1, 1, 1]), scale2, bias2, mean2, var2)\n"
        "  return relu(add(y, x))\n}\n"
    )
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c1", "scale1", "bias1", "mean1", "var1"], ["n1"], epsilon=1e-5
        ),
        helper.make_node("Relu", ["n1"], ["h"]),
        helper.make_node("Conv", ["h", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c2", "scale2", "bias2", "mean2", "var2"], ["y"], epsilon=1e-5
        ),
        helper.make_node("Add", ["y", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["out"]),
    ]
    weights = {k: a for k, a in arrays.items() if k != "x"} | stats
    model = _onnx(nodes, {"x": x}, shape, weights)
    return Workload(
        "basic_block",
        f"ResNet basic block (examples/resnet_basic_block.graph) at {c} channels, {size}x{size}",
        "network",
        byoc.parse(text, "graph"),
        arrays,
        model,
        {"x": x},
        BLOCK_BACKENDS,
        flops=2 * 2 * c * size * size * c * 9,
        constant_program=_imported(model, "basic_block"),
    )


def onnx_network(
    rng: np.random.Generator,
    path: Path,
    workdir: Path,
    randomise: bool,
    backends: tuple[tuple[str, ...], ...] = NETWORK_BACKENDS,
) -> Workload:
    """An ONNX model end to end; with ``randomise`` its ConstantOfShape weights (the
    light models' weights are constants, which makes every class score alike and the
    check vacuous) become seeded random initializers of the same shapes."""
    import onnx

    import byoc

    model = onnx.load(path)
    if randomise:
        _randomise(model, rng)
        path = workdir / path.name
        onnx.save(model, path)
    program = byoc.parse_file(path)
    (param,) = program.functions[0].params
    initialised = {i.name for i in model.graph.initializer}
    (onnx_input,) = [i.name for i in model.graph.input if i.name not in initialised]
    x = rng.standard_normal(param.type.shape).astype(np.float32)
    return Workload(
        path.stem,
        f"{path.stem} end to end" + (" (weights made random)" if randomise else ""),
        "network",
        program,
        {param.name: x},
        model,
        {onnx_input: x},
        backends,
    )


def transformer_network(key: str, title: str, builder: str, args: tuple, sizes: str, tiny: bool) -> Workload:
    """One of :data:`TRANSFORMERS`, built by the zoo's builder (the same graphs as
    tests/test_onnx_zoo.py checks against ONNX Runtime), at its deployed sizes on every
    --backend choice or, with ``tiny``, at :data:`TINY_TRANSFORMER` on ``fused``; its
    inputs the builder's seeded ones."""
    import byoc

    zoo = zoo_transformers()
    s = zoo.Sizes(**TINY_TRANSFORMER) if tiny else getattr(zoo, sizes)
    model, feeds = getattr(zoo, builder)(*args, s)
    program = byoc.parse(model.SerializeToString(), "onnx")
    fn = program.functions[0]
    names = [i.name for i in model.graph.input]
    assert len(names) == len(fn.params) == len(feeds), key
    gated = builder == "llama"  # grouped-query attention and SwiGLU
    heads = f"{s.heads} heads" + (f" ({s.kv_heads} for keys and values)" if gated else "")
    ffn = zoo.feed_forward(s, gated)
    sizes_text = (
        f"hidden {s.hidden}, {heads}, {s.layers} layers, feed-forward {ffn}, sequence {s.seq}, "
        f"vocabulary {s.vocab}"
    )
    return Workload(
        key,
        f"{title}: {sizes_text}" + (" (tiny sizes)" if tiny else "") + "; seeded random weights",
        "network",
        program,
        {p.name: x for p, x in zip(fn.params, feeds)},
        model,
        dict(zip(names, feeds)),
        (("fused",),) if tiny else NETWORK_BACKENDS,
    )


def zoo_transformers():
    """examples/zoo/zoo_transformers.py, the zoo's transformer builders (importable from
    examples/zoo, which is put on ``sys.path`` once)."""
    import sys

    if str(ZOO) not in sys.path:
        sys.path.insert(0, str(ZOO))
    import zoo_transformers

    return zoo_transformers


def attention_workload(tiny: bool) -> Workload:
    """Attention alone, as each of GPT-2's layers computes it: softmax(Q K^T / sqrt(d)
    + causal mask) V over the heads (the zoo's ``attention`` and ``causal_bias``, at
    GPT-2-small's sizes or :data:`TINY_TRANSFORMER`'s), Q, K and V as inputs."""
    from onnx import TensorProto, helper

    import byoc

    zoo = zoo_transformers()
    s = zoo.Sizes(**TINY_TRANSFORMER) if tiny else zoo.GPT2_SMALL
    shape = [1, s.heads, s.seq, s.hidden // s.heads]
    g = zoo.SizedGraph("attention", 5, ONNX_OPSET, s)
    g.op("Identity", [zoo.attention(g, "q", "k", "v", zoo.causal_bias(g))], out="context")
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"]
    model = g.model(inputs, [helper.make_tensor_value_info("context", TensorProto.FLOAT, shape)])
    rng = np.random.RandomState(6)
    feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in "qkv"}
    program = byoc.parse(model.SerializeToString(), "onnx")
    names = [p.name for p in program.functions[0].params]
    return Workload(
        "attention",
        f"GPT-2's causal attention alone: {s.heads} heads, sequence {s.seq}, head size {shape[-1]}"
        + (" (tiny sizes)" if tiny else ""),
        "network",
        program,
        dict(zip(names, feeds.values())),
        model,
        feeds,
        NETWORK_BACKENDS,
    )


def _randomise(model: Any, rng: np.random.Generator) -> None:
    from onnx import TensorProto, helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    replaced = [n for n in model.graph.node if n.op_type == "ConstantOfShape" and n.input[0] in inits]
    for node in replaced:
        shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
        if len(shape) >= 2:  # conv weights: He initialisation; the classifier small (soft scores)
            fan_in = int(np.prod(shape[1:]))
            values = rng.standard_normal(shape) * np.sqrt((2.0 if len(shape) > 2 else 1e-4) / fan_in)
        else:  # biases and batch-norm parameters: positive, so that every variance is
            values = rng.uniform(0.5, 1.0, shape)
        model.graph.initializer.append(numpy_helper.from_array(values.astype(np.float32), node.output[0]))
        # IR version 3 (these models) lists every initializer among the graph's inputs
        model.graph.input.append(
            helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, list(shape))
        )
        model.graph.node.remove(node)
    used = {name for node in model.graph.node for name in node.input}
    shapes = {n.input[0] for n in replaced} - used  # the replaced nodes' shape inputs
    for init in [i for i in model.graph.initializer if i.name in shapes]:
        model.graph.initializer.remove(init)
    for value in [i for i in model.graph.input if i.name in shapes]:
        model.graph.input.remove(value)


def make_workloads(tiny: bool, workdir: Path) -> list[Workload]:
    """Every workload, with its reference output computed (numpy, byoc's evaluator);
    ``workdir`` receives the randomised light models."""
    import onnx

    import byoc

    rng = np.random.default_rng(0)
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    result = [
        conv_workload(rng, 8, 8) if tiny else conv_workload(rng, 64, 56),
        dense_workload(rng, "dense", 16 if tiny else 1024),
        dense_workload(rng, "dense_10", 10),
        basic_block_workload(rng, 8, 16) if tiny else basic_block_workload(rng, 64, 56),
        conv_q8_workload(rng, 8, 8) if tiny else conv_q8_workload(rng, 64, 56),
        onnx_network(rng, QDQ_NETWORK, workdir, randomise=False, backends=BLOCK_BACKENDS),
    ]
    if tiny:
        result.append(onnx_network(rng, TINY_NETWORK, workdir, randomise=False))
    else:
        result += [onnx_network(rng, light / f"{name}.onnx", workdir, randomise=True) for name in LIGHT]
    attention = ((2, 8, 4), (2, 4, 8)) if tiny else ((12, 128, 64), (12, 64, 128))
    linear = ((1, 8, 16), (16, 32)) if tiny else ((1, 128, 768), (768, 3072))
    result += [
        matmul_workload(rng, "matmul_attention", "attention's Q @ K^T, batched per head", *attention, False),
        matmul_workload(rng, "matmul_linear", "a transformer FFN's first product", *linear, True),
        attention_workload(tiny),
    ]
    result += [transformer_network(*entry, tiny) for entry in TRANSFORMERS]
    for w in result:
        w.expected = byoc.evaluate(w.program.functions[0], w.inputs)[0]
    return result
