"""ONNX's QuantizeLinear and DequantizeLinear onto the catalog's ``quantize_linear``
and ``dequantize_linear``, which follow ONNX's arithmetic (its reference
implementation's, step by step; spec/README.md):

- ``DequantizeLinear``: ``(float32(x) - float32(zero_point)) * scale`` in float32, of
  the scale's type; an ``output_dtype`` of another type is computed in float32 and
  cast to it once;
- ``QuantizeLinear``: ``x / scale`` in float32, rounded half to even, plus the zero
  point, saturated to the target's range: the target is the zero point's type, else
  ``output_dtype``, else uint8 (an absent zero point is a 0 of it). Where the division
  runs in float16 or bfloat16 (x's type, or ``precision``'s) it is composed from other
  ops: divide, round, cast to float32, add the zero point, clamp and cast. The sum and
  the saturation run in float32, which holds every value of the 8- and 16-bit targets
  and their zero points exactly (ONNX's reference adds in int32 first: the same result
  wherever int32 does not overflow).

A constant's dequantization is not folded here: the build folds it after the
backends' patterns had their pick, so an int8 backend's pattern receives the int8
weight (generator/folding.py).

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

from ..ir import dtype_name, numpy_dtype
from ..shape_rule_quantize import QUANTIZED
from .indexing import dtype_text
from .values import element_dtype

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp

RANGES = {t: (int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in QUANTIZED}
"""The integer types QuantizeLinear produces that byoc has (the catalog's), and their ranges."""


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


def spread(
    imp: Importer,
    node,
    k: int,
    e: OnnxOp,
    to: str,
    like: tuple[int, ...] | None = None,
    axis: int | None = None,
) -> str:
    """Input ``k`` (a scale or zero point) cast to ``to`` and shaped to broadcast to x
    (or to a tensor of shape ``like``): one value as is, a vector along ``axis`` (by
    default the node's attribute), a blocked tensor gathered along it. A constant one
    is cast and shaped now, so that it stays a constant (which a backend's pattern may
    require of a scale)."""
    x_shape = imp.shape(node.input[0]) if like is None else tuple(like)
    rank = len(x_shape)
    shape = imp.shape(node.input[k])
    constant = imp.consts.get(node.input[k])
    if constant is not None:
        array = np.asarray(constant).astype(numpy_dtype(to))

        def reshaped(newshape: list[int]) -> str:
            return imp.constant(array.reshape(newshape), imp.names.fresh(node.input[k]))

        def gathered(index: np.ndarray, axis: int) -> str:
            return imp.constant(np.take(array, index, axis=axis), imp.names.fresh(node.input[k]))

        if not shape and dtype_text(imp, node.input[k]) == to:
            return imp.value(node.input[k])
    else:
        value = imp.value(node.input[k])
        if dtype_text(imp, node.input[k]) != to:
            value = imp.emit(e.roles["cast"], [value], {"to": to})

        def reshaped(newshape: list[int]) -> str:
            return imp.emit(e.roles["reshape"], [value], {"newshape": newshape})

        def gathered(index: np.ndarray, axis: int) -> str:
            table = imp.constant(index, imp.names.fresh("blocks"))
            return imp.emit(e.roles["spread"], [value, table], {"axis": axis})

        if not shape:
            return value
    if int(np.prod(shape)) == 1:
        return reshaped([])
    axis = int(imp.attr("axis", 1)) if axis is None else axis
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
        return reshaped(along)
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
    return gathered(np.arange(x_shape[axis], dtype=np.int64) // block, axis)


def _zero_point(imp: Importer, node, e: OnnxOp, dtype: str) -> str:
    """The zero point (input 2) shaped to broadcast, or a 0 of ``dtype`` where it is absent."""
    if len(node.input) > 2 and node.input[2]:
        return spread(imp, node, 2, e, dtype)
    return imp.constant(np.zeros((), dtype), imp.names.fresh("zero"))


SCALE_TYPES = ("float32", "float16", "bfloat16")
"""The types ONNX gives a scale (byoc's: float8's power-of-two scales are not among them)."""


def _scale_type(imp: Importer, node) -> str:
    """The dtype of the node's scale (input 1), which must be a float type."""
    scale_type = dtype_text(imp, node.input[1])
    if scale_type not in SCALE_TYPES:
        raise imp.invalid(
            f"its scale is {scale_type or 'of an unknown type'}",
            hint="a scale is float32, float16 or bfloat16",
        )
    return scale_type


def dequantize_linear(imp: Importer, node, e: OnnxOp) -> None:
    """The catalog's ``dequantize_linear``: of the scale's dtype, or (``output_dtype``
    naming another) in float32 and cast once to the target."""
    imp.check_attrs(node, {"axis", "block_size", "output_dtype"})
    source = dtype_text(imp, node.input[0])
    if source not in (*RANGES, "int32"):
        raise imp.unsupported(
            f"dequantizing {source or 'an unknown dtype'}",
            hint="byoc dequantizes int8, uint8, int16, uint16 and int32",
        )
    if len(node.input) > 2 and node.input[2] and dtype_text(imp, node.input[2]) != source:
        raise imp.invalid(f"its zero point is {dtype_text(imp, node.input[2])}, not x's {source}")
    scale_type = _scale_type(imp, node)
    target = _attr_dtype(imp, "output_dtype") or scale_type
    within = scale_type if target == scale_type else "float32"
    inputs = [imp.value(node.input[0]), spread(imp, node, 1, e, within), _zero_point(imp, node, e, source)]
    if within == target:
        imp.emit(e.op, inputs, out=node.output[0])
    else:
        imp.emit(e.roles["cast"], [imp.emit(e.op, inputs)], {"to": target}, node.output[0])


def quantize_linear(imp: Importer, node, e: OnnxOp) -> None:
    """The catalog's ``quantize_linear`` where x divides in float32; a float16 or
    bfloat16 division (x's type, or ``precision``'s) composed from other ops."""
    imp.check_attrs(node, {"axis", "block_size", "output_dtype", "saturate", "precision"})
    has_zero = len(node.input) > 2 and bool(node.input[2])
    wanted = _attr_dtype(imp, "output_dtype")
    target = dtype_text(imp, node.input[2]) if has_zero else wanted or "uint8"
    if has_zero and wanted and wanted != target:
        raise imp.invalid(f"its output_dtype {wanted} is not its zero point's type {target}")
    if target not in RANGES:
        raise imp.unsupported(f"quantizing to {target}", hint=f"byoc quantizes to {', '.join(RANGES)}")
    _scale_type(imp, node)
    within = _attr_dtype(imp, "precision") or dtype_text(imp, node.input[0])
    x = imp.value(node.input[0])
    if dtype_text(imp, node.input[0]) != within:
        x = imp.emit(e.roles["cast"], [x], {"to": within})
    scale = spread(imp, node, 1, e, within)
    if within == "float32":
        imp.emit(e.op, [x, scale, _zero_point(imp, node, e, target)], out=node.output[0])
        return
    q = imp.emit(
        e.roles["cast"],
        [imp.emit(e.roles["nearest"], [imp.emit(e.roles["over"], [x, scale])])],
        {"to": "float32"},
    )
    if has_zero:
        q = imp.emit(e.roles["plus"], [q, spread(imp, node, 2, e, "float32")])
    saturated(imp, e, q, "float32", target, node.output[0])


def saturated(imp: Importer, e: OnnxOp, q: str, within: str, target: str, out: str) -> None:
    """``out`` = ``q`` (of the float dtype ``within``, integral) clamped to the range of
    ``target`` (roles ``above`` and ``below``: maximum, then minimum) and cast to it."""
    low, high = (imp.constant(np.asarray(v, within), imp.names.fresh("k")) for v in RANGES[target])
    q = imp.emit(e.roles["below"], [imp.emit(e.roles["above"], [q, low]), high])
    imp.emit(e.roles["cast"], [q], {"to": target}, out)


QUANTIZE_KINDS = {"quantize": quantize_linear, "dequantize": dequantize_linear}
"""The handlers of this module that ops.yaml's ``kind`` names."""

FOLDED_AT_BUILD = frozenset({"dequantize"})
"""Kinds the importer does not fold when their inputs are constants (see the module
docstring)."""
