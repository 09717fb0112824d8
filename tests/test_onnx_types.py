"""ONNX import of the dtypes of issue 29: bool, float16, bfloat16, int16, uint16, uint32
and uint64 inputs, initializers and outputs; Cast at run time by byoc's rule; and a
cast to a dtype byoc lacks as a clean error naming the node.

The oracle is ONNX's reference evaluator (``onnx.reference``), which runs every dtype;
the cast rule's saturation (which ONNX leaves undefined) is checked against a
per-element Python definition.
"""

from __future__ import annotations

import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from byoc.errors import GraphError  # noqa: E402
from byoc.onnx.backend import backend_for  # noqa: E402

JSON = backend_for("json", host_fallback=False)
SHAPE = [3, 4]
NEW = {
    "bool": TensorProto.BOOL,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "int16": TensorProto.INT16,
    "uint16": TensorProto.UINT16,
    "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
}


def _model(nodes, inputs, outputs, initializers=(), opset: int = 21) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "types",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _data(rng, dtype: str, shape) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("float16", "bfloat16"):
        return rng.uniform(-4, 4, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=dtype)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if str(want.dtype) in ("float16", "bfloat16"):
        eps = float(ml_dtypes.finfo(want.dtype).eps)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=eps, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


def test_inputs_initializers_and_outputs_of_every_new_dtype(rng):
    """Per dtype: an input, an initializer of more elements than are written inline (the
    weights file) and a scalar one (inline), combined by an op of that dtype."""
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for dtype, code in NEW.items():
        op = {"bool": "Xor", "float16": "Mul", "bfloat16": "Max"}.get(dtype, "BitwiseXor")
        nodes += [
            helper.make_node(op, [f"x_{dtype}", f"w_{dtype}"], [f"a_{dtype}"]),
            helper.make_node(op, [f"a_{dtype}", f"k_{dtype}"], [f"y_{dtype}"]),
        ]
        inputs.append((f"x_{dtype}", code, SHAPE))
        outputs.append((f"y_{dtype}", code, SHAPE))
        inits.append(numpy_helper.from_array(_data(rng, dtype, SHAPE), f"w_{dtype}"))
        inits.append(numpy_helper.from_array(_data(rng, dtype, ()), f"k_{dtype}"))
        feeds[f"x_{dtype}"] = _data(rng, dtype, SHAPE)
    model = _model(nodes, inputs, outputs, inits)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = JSON.prepare(model).run(feeds)
    assert len(got) == len(want) == len(NEW)
    for g, w in zip(got, want):
        _same(np.asarray(g), np.asarray(w))


def test_bool_constants_are_written_true_and_false(tmp_path):
    from byoc.onnx.model_import import import_program

    mask = numpy_helper.from_array(np.array([True, False, True]), "mask")
    nodes = [helper.make_node("And", ["x", "mask"], ["y"])]
    model = _model(nodes, [("x", TensorProto.BOOL, [3])], [("y", TensorProto.BOOL, [3])], [mask])
    program = import_program(model, {})
    (const,) = program.functions[0].constants
    assert const.type.dtype == "bool" and const.array.tolist() == [True, False, True]
    got = JSON.prepare(model).run([np.array([True, True, False])])
    assert got[0].tolist() == [True, False, False]


def _cast_rule(v: float, dtype: str) -> int:
    """byoc's float -> integer rule for one value: NaN 0, else truncated and saturated."""
    if math.isnan(v):
        return 0
    info = np.iinfo(dtype)
    if math.isinf(v):
        return int(info.max) if v > 0 else int(info.min)
    return min(max(math.trunc(v), int(info.min)), int(info.max))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64", "uint64", "int8"])
def test_runtime_cast_of_floats_saturates(dtype):
    """Cast of a float input at run time: truncation toward zero, NaN to 0, and values
    beyond the target's range saturated (ONNX leaves them undefined)."""
    values = np.array([np.nan, 1e10, -1e10, 2.7, -2.7, 300.0, -300.0, np.inf, -np.inf, 1e30], np.float32)
    code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=code)]
    model = _model(nodes, [("x", TensorProto.FLOAT, [10])], [("y", code, [10])])
    (got,) = JSON.prepare(model).run([values])
    assert got.dtype == np.dtype(dtype)
    assert got.tolist() == [_cast_rule(float(v), dtype) for v in values]


def test_runtime_cast_and_castlike_between_the_new_dtypes(rng):
    """float16 -> bfloat16 -> uint16 (CastLike) -> bool -> float32, each at run time, as
    ONNX's reference computes it (the values stay within every range)."""
    nodes = [
        helper.make_node("Cast", ["x"], ["b16"], to=TensorProto.BFLOAT16),
        helper.make_node("Abs", ["b16"], ["a16"]),
        helper.make_node("CastLike", ["a16", "like"], ["u16"]),
        helper.make_node("Cast", ["u16"], ["flag"], to=TensorProto.BOOL),
        helper.make_node("Cast", ["flag"], ["y"], to=TensorProto.FLOAT),
    ]
    like = numpy_helper.from_array(np.zeros(1, np.uint16), "like")
    model = _model(
        nodes,
        [("x", TensorProto.FLOAT16, SHAPE)],
        [("y", TensorProto.FLOAT, SHAPE), ("u16", TensorProto.UINT16, SHAPE)],
        [like],
    )
    x = rng.uniform(-3, 3, SHAPE).astype(np.float16)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = JSON.prepare(model).run([x])
    for g, w in zip(got, want):
        _same(np.asarray(g), np.asarray(w))
    assert 0 < want[0].sum() < want[0].size  # some values truncate to 0, some do not


@pytest.mark.parametrize("target", ["FLOAT8E4M3FN", "STRING", "INT4"])
def test_a_cast_to_a_dtype_byoc_lacks_names_the_node(target):
    code = getattr(TensorProto, target)
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=code, name="narrow")]
    model = _model(nodes, [("x", TensorProto.FLOAT, [2])], [("y", code, [2])])
    with pytest.raises(GraphError, match=rf"ONNX node 0 \(Cast 'narrow'.*a Cast to {target}") as info:
        JSON.prepare(model)
    assert "byoc's dtypes" in (info.value.hint or "")


def test_the_command_line_reports_it_without_a_traceback(tmp_path):
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E5M2, name="to_f8")]
    model = _model(nodes, [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT8E5M2, [2])])
    onnx.save(model, tmp_path / "m.onnx")
    out = subprocess.run(
        [sys.executable, "-m", "byoc", "import", str(tmp_path / "m.onnx"), "-o", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "Cast 'to_f8'" in out.stderr and "FLOAT8E5M2" in out.stderr


def test_a_bfloat16_initializer_given_as_uint16_bits_is_read_as_bfloat16(monkeypatch, rng):
    """Older onnx versions return a bfloat16 TensorProto's values as their uint16 bits."""
    values = _data(rng, "bfloat16", SHAPE)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    model = _model(
        nodes,
        [("x", TensorProto.BFLOAT16, SHAPE)],
        [("y", TensorProto.BFLOAT16, SHAPE)],
        [numpy_helper.from_array(values, "w")],
    )
    x = _data(rng, "bfloat16", SHAPE)
    want = JSON.prepare(model).run([x])[0]
    real = numpy_helper.to_array

    def as_bits(tensor, *args, **kwargs):
        array = real(tensor, *args, **kwargs)
        return array.view(np.uint16) if str(array.dtype) == "bfloat16" else array

    monkeypatch.setattr(numpy_helper, "to_array", as_bits)
    got = JSON.prepare(model).run([x])[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(
        want.astype(np.float32),
        (x.astype(np.float32) + values.astype(np.float32)).astype(x.dtype).astype(np.float32),
    )
