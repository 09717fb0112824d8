"""Write byoc's quantised example models, as ONNX Runtime's ``quantize_static`` makes
them from two small float models, and their ONNX test data.

    python examples/quantized/make_models.py [DIR]   # default: this script's directory

The float models (seeded weights from numpy's RandomState, a stream numpy keeps stable):

- the CNN: one 3x16x16 image -> conv 3->16 (3x3) -> relu -> a basic residual block
  (conv 16->16, relu, conv 16->16, the skip add, relu) -> global average pool ->
  flatten -> MatMul 16->10 + bias (the head as MatMul and Add rather than Gemm: see
  the QOperator model below);
- the MLP: x [4, 16] -> MatMul 16->32 + bias -> relu -> MatMul 32->10 + bias.

Each is calibrated (MinMax) on a fixed set of seeded inputs and quantised with int8
weights and uint8 activations:

- ``cnn_qdq.onnx``, ``mlp_qdq.onnx``: QDQ format, per tensor: QuantizeLinear and
  DequantizeLinear pairs around float ops (ORT drops the relus that follow a conv:
  a uint8 range that starts at 0 clips what they would);
- ``cnn_qdq_per_channel.onnx``, ``mlp_qdq_per_channel.onnx``: the same with one
  weight scale per output channel (``per_channel=True``);
- ``cnn_qoperator.onnx``: QOperator format: QLinearConv and QLinearMatMul on uint8
  activations and int8 weights. Only Conv, MatMul and Relu are quantised
  (``op_types_to_quantize``): ORT's QOperator forms of Add, GlobalAveragePool and
  Gemm are the ``com.microsoft`` ops QLinearAdd, QLinearGlobalAveragePool and QGemm,
  outside the ONNX standard, so those ops stay float between a DequantizeLinear and
  a QuantizeLinear, and the model uses the default ONNX domain only. Quantising Relu
  lets ORT fold each relu after a conv into that QLinearConv's output range.

Every model gets ``DIR/NAME/test_data_set_0/`` (ONNX's test-data layout, which
``byoc run NAME.onnx --inputs DIR/NAME/test_data_set_0`` reads): ``input_0.pb``, a
seeded input that is not one of the calibration inputs, and ``output_0.pb``, ONNX's
result for it (:func:`reference`): what ONNX Runtime computes with its graph
optimisations off (``ORT_DISABLE_ALL``), so that the QDQ pairs run as written rather
than fused into ORT's integer kernels; for the QOperator model, whose QLinearConv and
QLinearMatMul run on those kernels whatever the level, what ONNX's own reference
evaluator computes. The models are the same bytes on every run with the same numpy,
onnx and onnxruntime (the test suite regenerates them and compares); another
onnxruntime version may quantise differently.

Needs onnx and onnxruntime (``pip install 'byoc-codegen[test]'``).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13  # per-channel QDQ needs 13 (DequantizeLinear's axis)
IMAGE = (1, 3, 16, 16)
CHANNELS = 16
CLASSES = 10
MLP_INPUT = (4, 16)
MLP_HIDDEN = 32
CALIBRATION_BATCHES = 16


class Graph:
    """A float model under construction: nodes and seeded weights."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.RandomState(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []

    def op(self, op_type: str, inputs: list[str], out: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def weight(self, name: str, shape: tuple[int, ...], fan_in: int) -> str:
        values = self.rng.standard_normal(shape) * np.sqrt(2 / fan_in)
        self.weights.append(numpy_helper.from_array(values.astype(np.float32), name))
        return name

    def bias(self, name: str, n: int) -> str:
        values = self.rng.standard_normal(n) * 0.1
        self.weights.append(numpy_helper.from_array(values.astype(np.float32), name))
        return name

    def conv(self, x: str, n_in: int, out: str) -> str:
        w = self.weight(f"{out}.w", (CHANNELS, n_in, 3, 3), 9 * n_in)
        return self.op("Conv", [x, w, self.bias(f"{out}.b", CHANNELS)], out, pads=[1, 1, 1, 1])

    def linear(self, x: str, n_in: int, n_out: int, out: str) -> str:
        """x @ W + b, as MatMul and Add."""
        product = self.op("MatMul", [x, self.weight(f"{out}.w", (n_in, n_out), n_in)], f"{out}.matmul")
        return self.op("Add", [product, self.bias(f"{out}.b", n_out)], out)

    def model(self, name: str, x: tuple[str, tuple[int, ...]], y: tuple[str, tuple[int, ...]]):
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info(x[0], TensorProto.FLOAT, x[1])],
            [helper.make_tensor_value_info(y[0], TensorProto.FLOAT, y[1])],
            self.weights,
        )
        m = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="byoc example"
        )
        m.ir_version = 8  # what onnxruntime of 2023 and later reads
        onnx.checker.check_model(m, full_check=True)
        return m


def float_cnn() -> onnx.ModelProto:
    g = Graph(seed=1)
    r1 = g.op("Relu", [g.conv("image", 3, "conv1")], "relu1")
    r2 = g.op("Relu", [g.conv(r1, CHANNELS, "conv2")], "relu2")
    skip = g.op("Add", [g.conv(r2, CHANNELS, "conv3"), r1], "skip")
    r3 = g.op("Relu", [skip], "relu3")
    pooled = g.op("GlobalAveragePool", [r3], "pool")
    flat = g.op("Flatten", [pooled], "flatten")
    g.linear(flat, CHANNELS, CLASSES, "logits")
    return g.model("cnn", ("image", IMAGE), ("logits", (1, CLASSES)))


def float_mlp() -> onnx.ModelProto:
    g = Graph(seed=2)
    hidden = g.op("Relu", [g.linear("x", MLP_INPUT[1], MLP_HIDDEN, "fc1")], "relu")
    g.linear(hidden, MLP_HIDDEN, CLASSES, "y")
    return g.model("mlp", ("x", MLP_INPUT), ("y", (MLP_INPUT[0], CLASSES)))


def samples(shape: tuple[int, ...], seed: int, count: int) -> list[np.ndarray]:
    """``count`` seeded standard-normal arrays of ``shape``."""
    rng = np.random.RandomState(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(count)]


FLOAT_MODELS: dict[str, tuple[Callable[[], onnx.ModelProto], str, tuple[int, ...]]] = {
    "cnn": (float_cnn, "image", IMAGE),
    "mlp": (float_mlp, "x", MLP_INPUT),
}
"""The float models: their builder, input name and input shape."""

CALIBRATION_SEED = {"cnn": 10, "mlp": 20}
INPUT_SEED = {"cnn": 11, "mlp": 21}

QUANTISED = {
    "cnn_qdq": ("cnn", "QDQ", False, None),
    "cnn_qdq_per_channel": ("cnn", "QDQ", True, None),
    "cnn_qoperator": ("cnn", "QOperator", False, ["Conv", "MatMul", "Relu"]),
    "mlp_qdq": ("mlp", "QDQ", False, None),
    "mlp_qdq_per_channel": ("mlp", "QDQ", True, None),
}
"""Each quantised model: its float model, quant format, per channel or not, and the op
types it quantises (None: ORT's default, every op it knows)."""


def quantise(name: str) -> onnx.ModelProto:
    """The model ``name`` of :data:`QUANTISED`, as ``quantize_static`` writes it."""
    from onnxruntime import quantization

    base, form, per_channel, op_types = QUANTISED[name]
    build, input_name, shape = FLOAT_MODELS[base]
    batches = iter([{input_name: a} for a in samples(shape, CALIBRATION_SEED[base], CALIBRATION_BATCHES)])

    class Calibration(quantization.CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_static's advice to run its pre-processing first
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source, target = Path(tmp) / "float.onnx", Path(tmp) / "quantised.onnx"
            onnx.save(build(), source)
            quantization.quantize_static(
                str(source),
                str(target),
                Calibration(),
                quant_format=getattr(quantization.QuantFormat, form),
                op_types_to_quantize=op_types,
                per_channel=per_channel,
                activation_type=quantization.QuantType.QUInt8,
                weight_type=quantization.QuantType.QInt8,
                calibrate_method=quantization.CalibrationMethod.MinMax,
            )
            m = onnx.load(target)
    finally:
        root.setLevel(level)
    onnx.checker.check_model(m, full_check=True)
    assert all(n.domain in ("", "ai.onnx") for n in m.graph.node), name  # no com.microsoft ops
    return m


def model_input(name: str) -> np.ndarray:
    """The input of ``name``'s test data (no calibration input)."""
    base = QUANTISED[name][0]
    return samples(FLOAT_MODELS[base][2], INPUT_SEED[base], 1)[0]


INTEGER_OPS = frozenset({"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"})
"""ONNX's ops whose sums are integers, which ONNX Runtime computes on its integer kernels."""

REFERENCE_OPSET = 21
"""The opset at which ONNX's reference evaluator reads a model: it implements
DequantizeLinear from opset 19 on, and the version converter keeps these models'
arithmetic (scales, zero points and axes mean the same from 13 to 21)."""


def reference(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """ONNX's result for ``m`` on ``x``, the same on every CPU.

    A model with integer ops (:data:`INTEGER_OPS`): what ONNX's reference evaluator
    computes. ONNX Runtime's uint8-by-int8 kernels add pairs of products into a
    saturating int16 on an x86 CPU without VNNI (AVX2's ``vpmaddubsw``; its
    quantization documentation says so), where its QLinearConv then differs from the
    exact int32 sum: the QOperator CNN by one step of its output in 4 of 10 values on
    an AMD EPYC with AVX2 only, while on a CPU with VNNI it gives the reference's
    bits. Any other model: what ONNX Runtime computes with its graph optimisations off
    (its QDQ pairs then run as written, in float), which is exact on every CPU."""
    if any(node.op_type in INTEGER_OPS for node in m.graph.node):
        from onnx import version_converter
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(version_converter.convert_version(m, REFERENCE_OPSET))
        (y,) = evaluator.run(None, {m.graph.input[0].name: x})
        return y
    return onnxruntime_result(m, x)


def onnxruntime_result(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """What ONNX Runtime computes for ``m`` on ``x`` with its graph optimisations off."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {session.get_inputs()[0].name: x})
    return y


def write(directory: Path, name: str) -> Path:
    """Write ``directory/name.onnx`` and ``directory/name/test_data_set_0/``; the
    model's path."""
    m = quantise(name)
    x = model_input(name)
    y = reference(m, x)
    data = directory / name / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.onnx"
    path.write_bytes(m.SerializeToString())
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, m.graph.input[0].name).SerializeToString())
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(y, m.graph.output[0].name).SerializeToString())
    return path


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else Path(__file__).resolve().parent
    directory.mkdir(parents=True, exist_ok=True)
    for name in QUANTISED:
        path = write(directory, name)
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
