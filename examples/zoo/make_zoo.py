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

The models are built by the ``zoo_*.py`` modules beside this script (``zoo_graph.py``,
the builder; ``zoo_transformers.py``, ``zoo_convnets.py``, ``zoo_recurrent.py``), which
it finds however it is loaded: run as a script, imported, or loaded from its path.

Needs onnx and onnxruntime (``pip install 'byoc-codegen[test]'``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded from its path (tests/test_onnx_zoo.py)
    sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from zoo_convnets import mobilenet_v3, unet  # noqa: E402
from zoo_recurrent import recurrent  # noqa: E402
from zoo_transformers import bert, gpt2, llama, vit  # noqa: E402

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
