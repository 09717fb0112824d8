"""Fixtures of make_fixtures.py: ONNX models for ``byoc import``'s cases (truncated or
garbage files, unsupported ops, attributes and types, dynamic dimensions, absent external
data), and ``--test-data`` directories that do not fit their model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from make_weights import _bfloat16

FIXTURES: dict[str, Callable[[Path], None]] = {}


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def _onnx_model(
    d: Path,
    nodes,
    inputs=(("x", [2, 3]),),
    initializers=(),
    opset: int = 13,
    check: bool = True,
    output=(1, None),
):
    """m.onnx: a graph of ``nodes`` from float inputs to the last node's first output,
    of ``output`` (an ONNX element type and a shape; None: inferred)."""
    import onnx
    from onnx import helper

    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, 1, s) for n, s in inputs],
        [helper.make_tensor_value_info(nodes[-1].output[0], *output)],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if check:
        model = onnx.shape_inference.infer_shapes(model)
    (d / "m.onnx").write_bytes(model.SerializeToString())


def _node(op: str, inputs=("x",), outputs=("y",), name: str = "n0", **attrs):
    from onnx import helper

    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def _int64(values, name: str):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _float(values, name: str):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, np.float32), name)


@fixture
def onnx_truncated(d: Path) -> None:
    _onnx_model(d, [_node("Relu")])
    data = (d / "m.onnx").read_bytes()
    (d / "m.onnx").write_bytes(data[: len(data) // 2])


@fixture
def onnx_garbage(d: Path) -> None:
    (d / "m.onnx").write_bytes(b"\xff" * 64)


@fixture
def onnx_unsupported_op(d: Path) -> None:
    _onnx_model(d, [_node("Relu", outputs=("r",), name="first"), _node("Unique", ("r",), name="hm")])


@fixture
def onnx_unsupported_attribute(d: Path) -> None:
    params = [_float([1.0, 1.0, 1.0], name) for name in ("scale", "bias", "mean", "var")]
    node = _node("BatchNormalization", ("x", "scale", "bias", "mean", "var"), spatial=0)
    _onnx_model(d, [node], initializers=params, opset=7)


@fixture
def onnx_dynamic_dimension(d: Path) -> None:
    _onnx_model(d, [_node("Relu")], inputs=(("x", ["batch", 3]),))


@fixture
def onnx_custom_domain(d: Path) -> None:
    from onnx import helper

    node = helper.make_node("Fancy", ["x"], ["y"], name="custom", domain="com.example")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_value_info("y", 1, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]
    )
    (d / "m.onnx").write_bytes(model.SerializeToString())


@fixture
def onnx_runtime_reshape_shape(d: Path) -> None:
    _onnx_model(d, [_node("Reshape", ("x", "s"))], inputs=(("x", [2, 3]), ("s", [2])), output=(1, [3, 2]))


@fixture
def onnx_training_batchnorm(d: Path) -> None:
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.ones(3, np.float32), n) for n in ("s", "b", "m", "v")]
    _onnx_model(
        d,
        [_node("BatchNormalization", ("x", "s", "b", "m", "v"), ("y", "mean", "var"), training_mode=1)],
        inputs=(("x", [2, 3]),),
        initializers=inits,
        opset=15,
    )


@fixture
def onnx_runtime_cast(d: Path) -> None:
    """A Cast at run time to a type byoc lacks (float8); a Cast between byoc's dtypes
    imports, and this case's Cast to int32 did not before byoc had run-time casts."""
    from onnx import TensorProto

    _onnx_model(
        d, [_node("Cast", to=TensorProto.FLOAT8E5M2)], output=(TensorProto.FLOAT8E5M2, [2, 3]), opset=19
    )


@fixture
def onnx_complex_input(d: Path) -> None:
    """A complex64 input (bool, this case's dtype before, is one of byoc's now)."""
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="copy")],
        "g",
        [helper.make_tensor_value_info("x", 14, [2])],
        [helper.make_tensor_value_info("y", 14, [2])],
    )
    (d / "m.onnx").write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    )


@fixture
def onnx_invalid_graph(d: Path) -> None:
    _onnx_model(d, [_node("Relu", ("nowhere",))], check=False)


@fixture
def onnx_dropout_in_training(d: Path) -> None:
    from onnx import numpy_helper

    _onnx_model(
        d,
        [_node("Dropout", ("x", "r", "t"), ("y", "mask"))],
        initializers=[
            numpy_helper.from_array(np.float32(0.5), "r"),
            numpy_helper.from_array(np.array(True), "t"),
        ],
        opset=12,
    )


@fixture
def onnx_shape_for_unknown_input(d: Path) -> None:
    _onnx_model(d, [_node("Relu")])


@fixture
def onnx_empty_file(d: Path) -> None:
    (d / "m.onnx").write_bytes(b"")


@fixture
def onnx_opset_too_old(d: Path) -> None:
    _onnx_model(d, [_node("Relu")], opset=5, output=(1, [2, 3]))


def _onnx_io_model(d: Path, inputs, outputs, nodes) -> None:
    """m.onnx of the given value infos (any ONNX type), unchecked."""
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (d / "m.onnx").write_bytes(model.SerializeToString())


@fixture
def onnx_sequence_input(d: Path) -> None:
    from onnx import helper

    seq = helper.make_tensor_sequence_value_info
    _onnx_io_model(d, [seq("x", 1, [2])], [seq("y", 1, [2])], [_node("Identity")])


@fixture
def onnx_sequence_output(d: Path) -> None:
    from onnx import helper

    _onnx_io_model(
        d,
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_sequence_value_info("y", 1, [2])],
        [_node("SequenceConstruct")],
    )


@fixture
def onnx_string_input(d: Path) -> None:
    from onnx import helper

    _onnx_io_model(
        d,
        [helper.make_tensor_value_info("x", 8, [2])],
        [helper.make_tensor_value_info("y", 8, [2])],
        [_node("Identity")],
    )


def _external_weights(d: Path, location: str) -> None:
    """m.onnx whose initializer 'w' keeps its data in the file ``location`` (not written)."""
    from onnx import TensorProto, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "24")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    _onnx_model(d, [_node("Add", ("x", "w"))], initializers=[w], output=(1, [2, 3]), check=False)


@fixture
def onnx_external_data_missing(d: Path) -> None:
    _external_weights(d, "weights.bin")


@fixture
def onnx_external_data_outside(d: Path) -> None:
    _external_weights(d, "../weights.bin")


@fixture
def onnx_softmax_with_spec_path(d: Path) -> None:
    """A softmax model, and specs/json.yaml: a json backend without softmax."""
    _onnx_model(d, [_node("Softmax")])
    shipped = Path(__file__).resolve().parents[3] / "spec" / "backends" / "json.yaml"
    lines = shipped.read_text().splitlines(keepends=True)
    ops = lines.index("ops:\n")
    (d / "specs").mkdir()
    (d / "specs" / "json.yaml").write_text("".join(lines[: ops + 1]) + "  add: {kernel: add}\n")


def _tensor_file(path: Path, array) -> None:
    from onnx import numpy_helper

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(numpy_helper.from_array(np.asarray(array)).SerializeToString())


def _test_data(d: Path, files: dict[str, object]) -> None:
    """m.onnx (relu of float32[2, 3]) and data/NAME for each ``files`` entry: an array
    (a TensorProto file) or bytes (written as they are)."""
    _onnx_model(d, [_node("Relu")])
    (d / "data").mkdir()
    for name, content in files.items():
        if isinstance(content, bytes):
            (d / "data" / name).write_bytes(content)
        else:
            _tensor_file(d / "data" / name, content)


X23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2


@fixture
def onnx_test_data_empty(d: Path) -> None:
    _test_data(d, {"notes.txt": b"no tensors here"})


@fixture
def onnx_test_data_truncated(d: Path) -> None:
    from onnx import numpy_helper

    data = numpy_helper.from_array(X23).SerializeToString()
    _test_data(d, {"input_0.pb": data[: len(data) - 5]})


@fixture
def onnx_test_data_garbage(d: Path) -> None:
    _test_data(d, {"input_0.pb": b"\xff" * 32})


@fixture
def onnx_test_data_too_many(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23, "input_1.pb": X23})


@fixture
def onnx_test_data_gap(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23, "input_2.pb": X23})


@fixture
def onnx_test_data_wrong_shape(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23.T.copy()})


@fixture
def onnx_test_data_wrong_dtype(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23.astype(np.float64)})


@fixture
def onnx_test_data_string_tensor(d: Path) -> None:
    _test_data(d, {"input_0.pb": np.array(["a", "b"], dtype=object)})


@fixture
def onnx_test_data_output_shape(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23, "output_0.pb": X23.ravel()})


@fixture
def onnx_test_data_external(d: Path) -> None:
    from onnx import TensorProto, numpy_helper

    t = numpy_helper.from_array(X23)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", "/dev/zero"
    _test_data(d, {"input_0.pb": t.SerializeToString()})


@fixture
def onnx_test_data_float16_for_float32(d: Path) -> None:
    _test_data(d, {"input_0.pb": X23.astype(np.float16)})


@fixture
def onnx_test_data_bfloat16_for_float32(d: Path) -> None:
    _test_data(d, {"input_0.pb": _bfloat16(X23)})


@fixture
def onnx_test_data_float8(d: Path) -> None:
    import ml_dtypes

    _test_data(d, {"input_0.pb": X23.astype(ml_dtypes.float8_e4m3fn)})
