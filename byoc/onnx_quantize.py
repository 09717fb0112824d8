"""ONNX's QuantizeLinear and DequantizeLinear composed from catalog ops, with ONNX's
arithmetic (its reference implementation's, step by step):

- ``DequantizeLinear``: ``(float32(x) - float32(zero_point)) * scale`` in float32, then
  the scale's type (or ``output_dtype``);
- ``QuantizeLinear``: ``x / scale`` in x's type (or ``precision``'s), rounded half to
  even, plus the zero point, saturated to the target's range and cast to it; the
  target is the zero point's type, else ``output_dtype``, else uint8. The sum and the
  saturation run in float32, which holds every value of the 8- and 16-bit targets
  and their zero points exactly (ONNX's reference adds in int32 first: the same
  result wherever int32 does not overflow).

A scale and zero point are per tensor (one value), per axis (one per entry of
``axis``) or blocked (opset 21: ``block_size`` entries of ``axis`` share one): a
per-axis one is reshaped to broadcast, a blocked one is spread with a ``gather``
along ``axis`` of the index table ``k // block_size``. They may be computed at run
time (DynamicQuantizeLinear's function computes both). The 2-, 4-bit and float8
types byoc lacks are refused by the importer's input types or here, by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .ir import dtype_name
from .onnx_import import element_dtype
from .onnx_indexing import dtype_text

if TYPE_CHECKING:
    from .onnx_ops import Importer, OnnxOp

RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}
"""The integer types QuantizeLinear produces that byoc has, and their ranges."""


def _attr_dtype(imp: Importer, attr: str) -> str | None:
    """The byoc dtype an ONNX element-type attribute names (None when absent)."""
    elem = imp.attr(attr)
    if not elem:
        return None
    try:
        name = dtype_name(element_dtype(imp.onnx, int(elem)))
    except Exception:
        name = None
    if name is None:
        shown = (
            imp.onnx.TensorProto.DataType.Name(int(elem))
            if int(elem) in imp.onnx.TensorProto.DataType.values()
            else elem
        )
        raise imp.unsupported(f"its {attr} {shown}")
    return name


def _spread(imp: Importer, node, k: int, e: OnnxOp, to: str) -> str:
    """Input ``k`` (a scale or zero point) cast to ``to`` and shaped to broadcast to x:
    one value as is, a vector along ``axis``, a blocked tensor gathered along it."""
    x_shape = imp.shape(node.input[0])
    rank = len(x_shape)
    shape = imp.shape(node.input[k])
    value = imp.value(node.input[k])
    if dtype_text(imp, node.input[k]) != to:
        value = imp.emit(e.roles["cast"], [value], {"to": to})
    if int(np.prod(shape)) == 1:
        return value if not shape else imp.emit(e.roles["reshape"], [value], {"newshape": []})
    axis = int(imp.attr("axis", 1))
    if not -rank <= axis < rank:
        raise imp.invalid(f"its axis {axis} is out of range for an input of rank {rank}")
    axis %= rank
    block = int(imp.attr("block_size", 0) or 0)
    if not block:
        if len(shape) != 1 or shape[0] != x_shape[axis]:
            raise imp.invalid(
                f"its input {k} has shape {list(shape)}, not [{x_shape[axis]}] (one per entry of axis {axis})",
                hint="a scale or zero point holds one value, one per entry of the axis, or one per block",
            )
        along = [1] * rank
        along[axis] = x_shape[axis]
        return imp.emit(e.roles["reshape"], [value], {"newshape": along})
    blocks = -(-x_shape[axis] // block)
    if (
        len(shape) != rank
        or shape[axis] != blocks
        or any(s != x for a, (s, x) in enumerate(zip(shape, x_shape)) if a != axis)
    ):
        raise imp.invalid(
            f"its input {k} has shape {list(shape)}, not x's {list(x_shape)} with {blocks} blocks of "
            f"{block} along axis {axis}"
        )
    index = imp.constant(np.arange(x_shape[axis], dtype=np.int64) // block, imp.names.fresh("blocks"))
    return imp.emit(e.roles["spread"], [value, index], {"axis": axis})


def dequantize_linear(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis", "block_size", "output_dtype"})
    source = dtype_text(imp, node.input[0])
    if source not in (*RANGES, "int32"):
        raise imp.unsupported(
            f"dequantizing {source or 'an unknown dtype'}",
            hint="byoc dequantizes int8, uint8, int16, uint16 and int32",
        )
    target = _attr_dtype(imp, "output_dtype") or dtype_text(imp, node.input[1])
    x = imp.emit(e.roles["cast"], [imp.value(node.input[0])], {"to": "float32"})
    if len(node.input) > 2 and node.input[2]:
        if dtype_text(imp, node.input[2]) != source:
            raise imp.invalid(f"its zero point is {dtype_text(imp, node.input[2])}, not x's {source}")
        x = imp.emit(e.roles["minus"], [x, _spread(imp, node, 2, e, "float32")])
    y = imp.emit(e.op, [x, _spread(imp, node, 1, e, "float32")])
    if target == "float32":
        imp.alias(node.output[0], y)
    else:
        imp.emit(e.roles["cast"], [y], {"to": target}, node.output[0])


def quantize_linear(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis", "block_size", "output_dtype", "saturate", "precision"})
    has_zero = len(node.input) > 2 and bool(node.input[2])
    wanted = _attr_dtype(imp, "output_dtype")
    target = dtype_text(imp, node.input[2]) if has_zero else wanted or "uint8"
    if has_zero and wanted and wanted != target:
        raise imp.invalid(f"its output_dtype {wanted} is not its zero point's type {target}")
    if target not in RANGES:
        raise imp.unsupported(f"quantizing to {target}", hint=f"byoc quantizes to {', '.join(RANGES)}")
    within = _attr_dtype(imp, "precision") or dtype_text(imp, node.input[0])
    x = imp.value(node.input[0])
    if dtype_text(imp, node.input[0]) != within:
        x = imp.emit(e.roles["cast"], [x], {"to": within})
    q = imp.emit(e.roles["nearest"], [imp.emit(e.op, [x, _spread(imp, node, 1, e, within)])])
    if within != "float32":
        q = imp.emit(e.roles["cast"], [q], {"to": "float32"})
    if has_zero:
        q = imp.emit(e.roles["plus"], [q, _spread(imp, node, 2, e, "float32")])
    low, high = (imp.constant(np.asarray(v, np.float32), imp.names.fresh("k")) for v in RANGES[target])
    q = imp.emit(e.roles["below"], [imp.emit(e.roles["above"], [q, low]), high])  # saturated
    imp.emit(e.roles["cast"], [q], {"to": target}, node.output[0])


QUANTIZE_KINDS = {"quantize_linear": quantize_linear, "dequantize_linear": dequantize_linear}
"""The handlers of this module that onnx_ops.yaml's ``kind`` names."""
