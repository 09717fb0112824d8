"""Write tiny_cnn.onnx, a small image classifier, and its ONNX test data.

    python examples/onnx/make_tiny_cnn.py [DIR]      # default: this script's directory

The model: conv 3->8 (3x3) -> batch norm -> relu -> max pool 2x2 -> conv 8->16 (3x3)
-> relu -> average pool 2x2 -> flatten -> gemm 256->10 -> softmax, on one 3x16x16
image. Its weights come from integer arithmetic and IEEE float32 products (no
platform random numbers, no libm), so the model and its input are the same bytes on
every machine; the test suite regenerates them and compares. ``test_data_set_0/`` holds the input
(``input_0.pb``) and the output that onnxruntime computes for it (``output_0.pb``):
ONNX's test-data layout, which ``byoc run --inputs`` reads.

Needs onnx and onnxruntime (``pip install 'byoc-codegen[test]'``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IMAGE = (1, 3, 16, 16)


def values(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> np.ndarray:
    """Deterministic values in [-scale, scale): integers of a linear congruential
    sequence, times scale/128 in float32."""
    count = int(np.prod(shape))
    state, out = seed, []
    for _ in range(count):
        state = (1103515245 * state + 12345) % 2**31
        out.append((state >> 16) % 256 - 128)
    return (np.asarray(out, np.float32) * np.float32(scale / 128)).reshape(shape)


def model() -> onnx.ModelProto:
    weights = {
        "conv1.w": values((8, 3, 3, 3), 1, 0.5),
        "conv1.b": values((8,), 2, 0.1),
        "bn.scale": 1 + values((8,), 3, 0.25),
        "bn.bias": values((8,), 4, 0.1),
        "bn.mean": values((8,), 5, 0.1),
        "bn.var": 1 + values((8,), 6, 0.25) ** 2,
        "conv2.w": values((16, 8, 3, 3), 7, 0.25),
        "conv2.b": values((16,), 8, 0.1),
        "fc.w": values((10, 256), 9, 0.125),
        "fc.b": values((10,), 10, 0.1),
    }
    node = helper.make_node
    nodes = [
        node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["n1"], name="bn"),
        node("Relu", ["n1"], ["r1"], name="relu1"),
        node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        node("Relu", ["c2"], ["r2"], name="relu2"),
        node("AveragePool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        node("Flatten", ["p2"], ["f"], name="flatten"),
        node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, IMAGE)],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, (1, 10))],
        [numpy_helper.from_array(array, name) for name, array in weights.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="byoc example")
    m.ir_version = 8  # what onnxruntime of 2023 and later reads
    onnx.checker.check_model(m, full_check=True)
    return m


def write(directory: Path) -> list[Path]:
    """Write the model and its test data into ``directory``; the paths written."""
    import onnxruntime

    m = model()
    image = values(IMAGE, 11, 2.0)
    session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    (probs,) = session.run(None, {"image": image})
    data = directory / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    files = {
        directory / "tiny_cnn.onnx": m.SerializeToString(),
        data / "input_0.pb": numpy_helper.from_array(image, "image").SerializeToString(),
        data / "output_0.pb": numpy_helper.from_array(probs, "probs").SerializeToString(),
    }
    for path, content in files.items():
        path.write_bytes(content)
    return list(files)


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
