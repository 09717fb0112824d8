"""dnnl's int8 (QDQ) patterns: conv_q8_bias_relu, conv_q8_bias, conv_q8_relu, conv_q8 and
matmul_q8 (spec/backends/dnnl/dnnl.yaml), each one oneDNN int8 primitive: a u8 or s8
source, s8 weights (w - wz, packed once at init), an f32 bias (the int32 bias
dequantized as ONNX does), a u8 or s8 result, with oneDNN's scales (source, weights
per tensor or per output channel, result) and zero points (source, result).

A quantization's scale and zero point are its parameters (the shape rules'
``parameters``): they keep their own shape, one value or one per channel, on a
backend that does not broadcast, so these patterns match on dnnl.

Exactness: oneDNN sums (x - xz) * (w - wz) exactly in int32, then in float32
multiplies by xs * ws[m], adds the bias, applies the relu, divides by ys (as a
multiplication by its reciprocal, in its own order), adds yz and rounds half to
even, saturated. ``integer_reference`` computes the same in numpy; a result may
differ from it by 1 where oneDNN's float order differs and the value lies near a
rounding tie.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, run_threads
from dnnl_support import dnnl_copy, int8_refusal
from libraries import missing_library

import byoc
from byoc.api import evaluate, load_backend, load_catalog, parse, print_program
from byoc.errors import RuntimeFailure
from byoc.generator import generator_for
from byoc.generator.artifacts import Role
from byoc.generator.lowering import lower
from byoc.generator.partition import partition

if missing_library("dnnl"):
    pytest.skip(missing_library("dnnl"), allow_module_level=True)

INT8_REFUSED = int8_refusal()
exact_int8 = pytest.mark.skipif(INT8_REFUSED is not None, reason=INT8_REFUSED or "")
"""The tests that build an int8 region on dnnl: only where its probe says oneDNN's int8
sums are exact (a CPU with VNNI)."""

QUANTIZED = EXAMPLES / "quantized"
QDQ_MODELS = ["cnn_qdq", "cnn_qdq_per_channel", "mlp_qdq", "mlp_qdq_per_channel"]


def composites(program) -> list[str]:
    return sorted(set(re.findall(r"@dnnl\.(\w+)", print_program(program))))


def qdq_graph(kind: str, seed: int = 3, channels: tuple[int, int] = (8, 16)) -> tuple[str, dict]:
    """A QDQ conv (``kind``: bias, bias_relu, plain, relu; u8 source and result, per
    channel weights; ``channels`` its input and output channels) or a QDQ matmul
    (``matmul``: s8 source and result, per tensor) as DSL, and its constants."""
    rng = np.random.default_rng(seed)
    if kind == "matmul":
        c = {
            "w": rng.integers(-127, 128, (24, 10)).astype(np.int8),
            "ws": np.float32(0.013),
            "xs": np.float32(0.021),
            "xz": np.int8(-3),
            "ys": np.float32(0.09),
            "yz": np.int8(5),
        }
        body = "  y = quantize_linear(matmul(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz)), ys, yz)"
        head = "graph main(x: int8[4, 24]) {"
        decls = [
            f"  w = const int8[24, 10] [{', '.join(map(str, c['w'].ravel()))}]",
            "  ws = const float32[] [0.013]",
            "  wz = const int8[] [0]",
            "  xs = const float32[] [0.021]",
            "  xz = const int8[] [-3]",
            "  ys = const float32[] [0.09]",
            "  yz = const int8[] [5]",
        ]
        return "\n".join([head, *decls, body, "  return y", "}", ""]), c
    c_in, m = channels
    w = rng.integers(-127, 128, (m, c_in, 3, 3)).astype(np.int8)
    ws = rng.uniform(0.002, 0.01, m).astype(np.float32)
    xs, xz, ys, yz = np.float32(0.03), np.uint8(9), np.float32(0.06), np.uint8(0 if "relu" in kind else 120)
    b = rng.integers(-2000, 2000, m).astype(np.int32)
    bs = (xs * ws).astype(np.float32)
    c = {"w": w, "ws": ws.reshape(m, 1, 1, 1), "xs": xs, "xz": xz, "ys": ys, "yz": yz, "b": b, "bs": bs}

    def floats(a):
        return ", ".join(repr(float(v)) for v in np.ravel(a))

    decls = [
        f"  w = const int8[{m}, {c_in}, 3, 3] [{', '.join(map(str, w.ravel()))}]",
        f"  ws = const float32[{m}, 1, 1, 1] [{floats(ws)}]",
        f"  wz = const int8[{m}, 1, 1, 1] [{', '.join(['0'] * m)}]",
        f"  xs = const float32[] [{float(xs)!r}]",
        f"  xz = const uint8[] [{int(xz)}]",
        f"  ys = const float32[] [{float(ys)!r}]",
        f"  yz = const uint8[] [{int(yz)}]",
    ]
    value = "conv(dequantize_linear(x, xs, xz), dequantize_linear(w, ws, wz), pads=[1, 1, 1, 1])"
    if "bias" in kind:
        decls += [
            f"  b = const int32[{m}] [{', '.join(map(str, b))}]",
            f"  bs = const float32[{m}] [{floats(bs)}]",
            f"  bz = const int32[{m}] [{', '.join(['0'] * m)}]",
        ]
        value = f"bias_add({value}, dequantize_linear(b, bs, bz), axis=1)"
    else:
        del c["b"], c["bs"]
    if "relu" in kind:
        value = f"relu({value})"
    head = f"graph main(x: uint8[2, {c_in}, 9, 9]) {{"
    return "\n".join([head, *decls, f"  y = quantize_linear({value}, ys, yz)", "  return y", "}", ""]), c


def integer_reference(kind: str, x: np.ndarray, c: dict) -> np.ndarray:
    """oneDNN's arithmetic in numpy: exact int32 sums of (x - xz) * w, then in float32
    times xs * ws, plus the bias (b * bs: bz is 0), relu, divided by ys, rounded half
    to even, plus yz, saturated to the result's type."""
    xi = x.astype(np.int64) - np.int64(c["xz"])
    if kind == "matmul":
        acc = xi @ c["w"].astype(np.int64)
        scale = np.float32(c["xs"]) * np.float32(c["ws"])
    else:
        n, ch, h, wd = xi.shape
        padded = np.zeros((n, ch, h + 2, wd + 2), np.int64)
        padded[:, :, 1:-1, 1:-1] = xi
        cols = np.stack([padded[:, :, i : i + h, j : j + wd] for i in range(3) for j in range(3)], axis=2)
        acc = np.einsum("nckhw,mck->nmhw", cols, c["w"].astype(np.int64).reshape(c["w"].shape[0], ch, 9))
        scale = (np.float32(c["xs"]) * c["ws"].reshape(-1)).astype(np.float32).reshape(1, -1, 1, 1)
    assert np.abs(acc).max() < 2**31
    y = acc.astype(np.float32) * scale
    if "b" in c:
        y = y + (c["b"].astype(np.float32) * c["bs"]).reshape(1, -1, 1, 1)
    if "relu" in kind:
        y = np.maximum(y, np.float32(0))
    dtype = np.asarray(c["yz"]).dtype
    q = np.rint(y / np.float32(c["ys"])) + np.float32(c["yz"])
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


PATTERN_OF = {
    "bias": "conv_q8_bias",
    "bias_relu": "conv_q8_bias_relu",
    "plain": "conv_q8",
    "relu": "conv_q8_relu",
    "matmul": "matmul_q8",
}


def test_the_shipped_partitioner_matches_them():
    """dequantize_linear's scale broadcasts, which a composite member may, as a parameter."""
    text, _ = qdq_graph("bias")
    program = partition(parse(text, "graph"), [load_backend("dnnl")], load_catalog())
    assert "conv_q8_bias" in composites(program)


@exact_int8
@pytest.mark.parametrize("kind", PATTERN_OF)
def test_the_int8_kernel_computes_the_integer_reference(kind):
    _check_integer_reference(kind, (8, 16))


def without_onednn_reorders(tmp_path: Path) -> list[str]:
    """The search path of a copy of the dnnl spec, named dnnlbare, whose int8 kernels
    fail where they would run oneDNN's reorder of their source or result."""

    def bare(text: str) -> str:
        for step in ("to_src", "to_dst"):
            old = f"ok = dnnl_byoc_execute_args(q->{step},"
            assert text.count(old) == 1, f"the int8 run's {step} reorder no longer matches dnnl_support.c"
            text = text.replace(old, f"ok = 0 && dnnl_byoc_execute_args(q->{step},")
        return text

    return [str(dnnl_copy(tmp_path, "dnnlbare", bare))]


@exact_int8
@pytest.mark.parametrize("channels", [(24, 16), (16, 80)], ids=["24-16", "16-80"])
def test_byocs_transposes_move_the_int8_data(tmp_path, channels):
    """With 16 or more channels and pixels, byoc's own transposes move the data
    between nchw and the conv's nhwc (16x16 tiles of bytes, 16x64 with AVX-512BW), not
    oneDNN's reorders (which fail in dnnlbare): 24 input channels leave a part tile of
    rows, 81 pixels part tiles of 17 and 1 columns, 80 output channels a wide tile and
    a 16-column one."""
    _check_integer_reference("bias_relu", channels, without_onednn_reorders(tmp_path))


@exact_int8
def test_fewer_than_16_channels_take_onednns_reorders(tmp_path):
    """8 input channels: no whole tile, so oneDNN reorders the source (dnnlbare fails)."""
    with pytest.raises(RuntimeFailure, match="kernel dnnl_0_0 reported a failure"):
        _check_integer_reference("bias_relu", (8, 16), without_onednn_reorders(tmp_path))


def _check_integer_reference(
    kind: str, channels: tuple[int, int], spec_path: list[str] | None = None
) -> None:
    text, c = qdq_graph(kind, channels=channels)
    name = "dnnlbare" if spec_path else "dnnl"
    program = partition(parse(text, "graph"), [load_backend(name, spec_path)], load_catalog())
    assert sorted(set(re.findall(rf"@{name}\.(\w+)", print_program(program)))) == [PATTERN_OF[kind]]
    model = byoc.build(program, spec_path=spec_path)
    fn = program.functions[0]
    (param,) = fn.params
    info = np.iinfo(np.dtype(param.type.dtype))
    rng = np.random.default_rng(11)
    x = rng.integers(info.min, info.max + 1, param.type.shape).astype(param.type.dtype)
    (got,) = model(x=x)
    want = integer_reference(kind, x, c)
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1, kind
    assert np.count_nonzero(diff) <= max(1, diff.size // 1000), (kind, np.count_nonzero(diff))
    # byoc's numpy reference (the float QDQ path op by op): within one quantum too
    (ref,) = evaluate(fn, {"x": x})
    assert np.abs(got.astype(np.int32) - ref.astype(np.int32)).max() <= 1


def test_where_onednns_int8_sums_are_not_exact_the_int8_nodes_go_to_the_next_backend(monkeypatch):
    """On a CPU without VNNI the probe says dnnl computes no int8 or uint8 (forced here,
    so that every machine runs this): automatic partitioning leaves the QDQ conv to
    fused, which computes byoc's reference; an explicit int8 region on dnnl is a usage
    error at the region that names the probe's reason."""
    from byoc.errors import UsageError
    from byoc.runtime import probe

    real = probe.machine_computes

    def without_int8(spec, dtype):
        return False if spec.name == "dnnl" and dtype in ("int8", "uint8") else real(spec, dtype)

    monkeypatch.setattr(probe, "machine_computes", without_int8)
    text, _ = qdq_graph("bias_relu")
    fn = parse(text, "graph").functions[0]
    model = byoc.build(parse(text, "graph"), backends=["dnnl", "fused"])
    # the source's dequantize and the result's quantize run on fused (the weights' and
    # the bias's are folded at build); dnnl may take the float conv between them
    # (conv_bias_relu), so the result is within one quantum
    assert model.placement["fused"] == 2
    x = np.random.default_rng(4).integers(0, 256, fn.params[0].type.shape).astype(np.uint8)
    (got,) = model(x=x)
    (want,) = evaluate(fn, {"x": x})
    assert got.dtype == want.dtype and np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
    program = partition(parse(text, "graph"), [load_backend("dnnl")], load_catalog())
    with pytest.raises(UsageError) as info:
        byoc.build(program)
    message = str(info.value)
    assert "backend dnnl does not compute uint8 on this machine" in message
    assert "exact (a CPU with VNNI)" in info.value.hint


@exact_int8
def test_threads_calling_one_int8_kernel_each_get_their_own_result():
    """A call takes the kernel's kept stream, scratch and memories, and a call made
    while another thread holds them makes its own: four threads at once, six calls
    each on arrays of their own, each get what one call alone computes."""
    text, _ = qdq_graph("bias_relu")
    model = byoc.build(partition(parse(text, "graph"), [load_backend("dnnl")], load_catalog()))
    rng = np.random.default_rng(5)
    threads, rounds = 4, 6
    inputs = [
        [rng.integers(0, 256, (2, 8, 9, 9)).astype(np.uint8) for _ in range(rounds)] for _ in range(threads)
    ]
    alone = [[model(x=x)[0] for x in row] for row in inputs]
    got: dict[tuple[int, int], np.ndarray] = {}

    def call(k: int) -> None:
        for r, x in enumerate(inputs[k]):
            got[k, r] = model(x=x)[0]

    run_threads(call, threads)
    for k in range(threads):
        for r in range(rounds):
            np.testing.assert_array_equal(got[k, r], alone[k][r])
    assert len({a.tobytes() for row in alone for a in row}) == threads * rounds  # the inputs differ


def test_a_non_constant_weight_scale_does_not_match():
    text, _ = qdq_graph("bias")
    text = text.replace(
        "graph main(x: uint8[2, 8, 9, 9]) {", "graph main(x: uint8[2, 8, 9, 9], ws: float32[16, 1, 1, 1]) {"
    )
    text = re.sub(r"\n  ws = const [^\n]*", "", text)
    program = partition(parse(text, "graph"), [load_backend("dnnl")], load_catalog())
    assert not [p for p in composites(program) if "q8" in p]


def test_golden_qdq_conv(golden):
    text, _ = qdq_graph("bias_relu")
    program = partition(parse(text, "graph", file="qdq_conv.graph"), [load_backend("dnnl")], load_catalog())
    spec = load_backend("dnnl")
    externals = lower(program, load_backend, load_catalog()).externals_for("dnnl")
    artifacts = generator_for(spec.kind)(externals, spec, load_catalog(), {})
    (source,) = [a for a in artifacts if a.role is Role.MODULE]
    assert source.text == golden("c")


onnx = pytest.importorskip("onnx")


@exact_int8
@pytest.mark.parametrize("name", QDQ_MODELS)
def test_the_example_models_match_onnxruntime(name):
    """cnn_qdq*.onnx and mlp_qdq*.onnx on dnnl,fused with the int8 patterns: every
    conv (the block's second one too, whose dequantized source the skip add also
    reads) and the matmuls are int8 primitives; the outputs (dequantized) equal ONNX
    Runtime's on the committed input and three seeded ones, or lie within one quantum
    of the output scale."""
    pytest.importorskip("onnxruntime")
    from test_quantized_models import inputs, make_models

    from byoc.onnx.backend import backend_for
    from byoc.onnx.model_import import import_program

    m = onnx.load(QUANTIZED / f"{name}.onnx")
    program = partition(import_program(m), [load_backend("dnnl"), load_backend("fused")], load_catalog())
    found = composites(program)
    assert "matmul_q8" in found
    if name.startswith("cnn"):
        assert len(re.findall(r"@dnnl\.conv_q8_bias\b", print_program(program))) == 3
    rep = backend_for("dnnl,fused").prepare(m)
    reference = make_models().reference
    (last,) = [n for n in m.graph.node if n.output[0] == m.graph.output[0].name]
    assert last.op_type == "DequantizeLinear"
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    scale = float(inits[last.input[1]])  # one quantum of the output
    for k, x in enumerate(inputs(name)):
        want = reference(m, x)
        (got,) = rep.run([x])
        differ = int(np.count_nonzero(got != want))
        assert np.abs(got - want).max() <= scale * 1.001, (name, k, differ)
        assert differ == 0, f"{name}, input {k}: {differ} of {got.size} elements differ by one quantum"


@exact_int8
@pytest.mark.parametrize("relu", [False, True], ids=["bias", "bias-relu"])
def test_qdq_gemm_is_one_int8_matmul(relu):
    """A QDQ Gemm (its bias a bias_add) is dense_q8_bias(_relu): one oneDNN int8 matmul
    by the transposed (N, K) weights, packed at init; within one step of the integer
    reference and of ONNX Runtime."""
    ort = pytest.importorskip("onnxruntime")
    from test_ccompiler_int8 import dense_integer_reference, qdq_gemm_model

    from byoc.onnx.model_import import import_program

    model, c = qdq_gemm_model(relu)
    program = partition(import_program(model), [load_backend("dnnl")], load_catalog())
    assert composites(program) == ["dense_q8_bias_relu" if relu else "dense_q8_bias"]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    built = byoc.build(program)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = rng.integers(0, 256, (5, 24)).astype(np.uint8)
        (got,) = built(x=x)
        for want in (dense_integer_reference(x, c, relu), session.run(None, {"x": x})[0]):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
