"""Fixtures of make_fixtures.py: hostile ONNX models (tests/test_onnx_hostile.py uses some
too): external data at bad offsets or in special files, raw data of a partial element,
names that are not UTF-8, and attributes out of range."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from make_onnx_models import _float, _int64, _node, _onnx_model

FIXTURES: dict[str, Callable[[Path], None]] = {}


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def _external_extent(d: Path, offset: str, length: str, location: str | None = "weights.bin") -> None:
    """m.onnx whose initializer 'w' (float32[2, 3], 24 bytes) is at ``offset`` and
    ``length`` of ``location``, a 24-byte file beside it."""
    (d / "weights.bin").write_bytes(np.ones(6, np.float32).tobytes())
    from onnx import TensorProto, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, value
    _onnx_model(d, [_node("Add", ("x", "w"))], initializers=[w], output=(1, [2, 3]), check=False)


@fixture
def onnx_external_data_no_location(d: Path) -> None:
    _external_extent(d, "0", "24", location=None)


@fixture
def onnx_external_data_nul_in_location(d: Path) -> None:
    _external_extent(d, "0", "24", location="weights.bin\0x")


@fixture
def onnx_external_offset_negative(d: Path) -> None:
    _external_extent(d, "-4", "24")


@fixture
def onnx_external_offset_not_a_number(d: Path) -> None:
    _external_extent(d, "abc", "24")


@fixture
def onnx_external_offset_overflow(d: Path) -> None:
    _external_extent(d, "99999999999999999999999", "24")


@fixture
def onnx_external_length_negative(d: Path) -> None:
    _external_extent(d, "0", "-1")


@fixture
def onnx_external_length_overflow(d: Path) -> None:
    _external_extent(d, "0", "99999999999999999999999")


@fixture
def onnx_external_data_fifo(d: Path) -> None:
    """External data in a FIFO: opening it would block until a writer comes."""
    import os

    _external_extent(d, "0", "24", location="pipe")
    os.mkfifo(d / "pipe")


@fixture
def onnx_external_data_directory(d: Path) -> None:
    _external_extent(d, "0", "24", location="data")
    (d / "data").mkdir()


@fixture
def onnx_raw_data_not_whole_elements(d: Path) -> None:
    """An initializer's raw_data one byte longer than its 6 float32 values: 25 bytes."""
    w = _float(np.ones((2, 3)), "w")
    w.raw_data = w.raw_data + b"\0"
    _onnx_model(d, [_node("Add", ("x", "w"))], initializers=[w], output=(1, [2, 3]), check=False)


def _non_utf8(d: Path, placeholder: bytes) -> None:
    """m.onnx with ``placeholder`` (a name or string of the model) replaced by bytes
    that are not UTF-8."""
    data = (d / "m.onnx").read_bytes()
    assert data.count(placeholder) >= 1, placeholder
    (d / "m.onnx").write_bytes(data.replace(placeholder, placeholder[:1] + b"\xff\xfe" + placeholder[3:]))


@fixture
def onnx_non_utf8_node_name(d: Path) -> None:
    _onnx_model(d, [_node("Relu", name="NODENAME")])
    _non_utf8(d, b"NODENAME")


@fixture
def onnx_non_utf8_input_name(d: Path) -> None:
    _onnx_model(d, [_node("Relu", ("XINPUT",))], inputs=(("XINPUT", [2, 3]),))
    _non_utf8(d, b"XINPUT")


@fixture
def onnx_non_utf8_initializer_name(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Add", ("x", "WEIGHTS"))],
        initializers=[_float(np.ones((2, 3)), "WEIGHTS")],
        output=(1, [2, 3]),
    )
    _non_utf8(d, b"WEIGHTS")


@fixture
def onnx_non_utf8_attribute(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Pad", ("x", "pads"), mode="constant")],
        initializers=[_int64([0, 1, 0, 1], "pads")],
        output=(1, [2, 5]),
        check=False,
    )
    _non_utf8(d, b"constant")


def _conv_model(d: Path, x_shape, w_shape, output, op: str = "Conv", **attrs) -> None:
    inits = [_float(np.ones(w_shape), "W")] if op == "Conv" else []
    inputs = ("x", "W") if op == "Conv" else ("x",)
    _onnx_model(
        d,
        [_node(op, inputs, name="c", **attrs)],
        inputs=(("x", x_shape),),
        initializers=inits,
        output=output,
        check=False,
    )


@fixture
def onnx_same_upper_zero_stride(d: Path) -> None:
    _conv_model(d, [1, 1, 4, 4], [1, 1, 3, 3], (1, [1, 1, 4, 4]), auto_pad="SAME_UPPER", strides=[0, 0])


@fixture
def onnx_same_lower_zero_stride_pool(d: Path) -> None:
    _conv_model(
        d,
        [1, 1, 4, 4],
        None,
        (1, [1, 1, 4, 4]),
        op="MaxPool",
        auto_pad="SAME_LOWER",
        strides=[1, 0],
        kernel_shape=[2, 2],
    )


@fixture
def onnx_conv_kernel_shape_mismatch(d: Path) -> None:
    _conv_model(d, [1, 1, 4, 4], [1, 1, 3, 3], (1, [1, 1, 3, 3]), kernel_shape=[2, 2])


@fixture
def onnx_conv_zero_stride(d: Path) -> None:
    """strides=[0, 0] without auto_pad: the importer writes them, and the parser of the
    imported text refuses them (an error in the text, reported at the ONNX node)."""
    _conv_model(d, [1, 1, 4, 4], [1, 1, 3, 3], (1, [1, 1, 2, 2]), strides=[0, 0])


@fixture
def onnx_cast_unknown_type(d: Path) -> None:
    """A Cast to element type 77, which no ONNX version defines (the output declared so)."""
    _onnx_model(d, [_node("Cast", to=77)], output=(77, [2, 3]), check=False)


@fixture
def onnx_cast_unknown_type_folded(d: Path) -> None:
    """The same Cast of a constant, which the importer folds."""
    _onnx_model(
        d,
        [_node("Cast", ("w",), ("c",), to=77), _node("Add", ("x", "c"), name="n1")],
        initializers=[_float(np.ones((2, 3)), "w")],
        output=(1, [2, 3]),
        check=False,
    )


@fixture
def onnx_split_axis_out_of_range(d: Path) -> None:
    _onnx_model(d, [_node("Split", outputs=("a", "b"), axis=5)], opset=11, output=(1, [2, 2]), check=False)


@fixture
def onnx_split_axis_out_of_range_num_outputs(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Split", outputs=("a", "b"), axis=-3, num_outputs=2)],
        opset=18,
        output=(1, [1, 3]),
        check=False,
    )


@fixture
def onnx_clip_empty_bound(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Clip", ("x", "lo"))],
        initializers=[_float(np.zeros(0), "lo")],
        output=(1, [2, 3]),
        check=False,
    )


@fixture
def onnx_clip_bound_of_two_values(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Clip", ("x", "", "hi"))],
        initializers=[_float([1.0, 2.0], "hi")],
        output=(1, [2, 3]),
        check=False,
    )


@fixture
def onnx_pad_empty_value(d: Path) -> None:
    _onnx_model(
        d,
        [_node("Pad", ("x", "pads", "v"))],
        initializers=[_int64([0, 1, 0, 1], "pads"), _float(np.zeros(0), "v")],
        output=(1, [2, 5]),
        check=False,
    )


@fixture
def onnx_expand_scalar_shape(d: Path) -> None:
    _onnx_model(
        d, [_node("Expand", ("x", "s"))], initializers=[_int64(3, "s")], output=(1, [2, 3]), check=False
    )


@fixture
def onnx_softmax_axis_out_of_range(d: Path) -> None:
    _onnx_model(d, [_node("Softmax", axis=5)], opset=11, output=(1, [2, 3]), check=False)


@fixture
def onnx_opset_too_new(d: Path) -> None:
    _onnx_model(d, [_node("Relu")], opset=99, output=(1, [2, 3]), check=False)
