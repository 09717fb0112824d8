"""ONNX's indexing and ordering ops as catalog ops: CumSum and CumProd (their axis an
input), TopK (two outputs; k an input from opset 10), OneHot (depth an input) and
Hardmax (an argmax spread back out by a one-hot); and the integer and mixed-dtype
forms of Div, Pow and Clip, which the catalog's float ops do not take.

ArgMax, ArgMin, GatherElements, ScatterElements, Scatter, GatherND and ScatterND need
no handler of their own: each is one catalog op whose attributes are ONNX's (kind
``attributed`` in ops.yaml). The handlers here read what ONNX gives as inputs
but the catalog takes as attributes: a constant, or a model input whose value
specialises the model (:meth:`Importer.const_input`). Which catalog ops they emit is
the row's ``op`` and ``roles``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtype_name, is_float
from ..shape_rule_model import RuleError
from .pool_indices import max_pool_indices, values_only, wants_indices
from .tensors import checked_axis
from .values import dsl_string, number

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp


def _one_int(imp: Importer, k: int, what: str) -> int | None:
    """Input ``k`` as one integer (None when absent); several values, or a fraction,
    are an invalid node."""
    given = imp.const_input(k, what)
    if given is None:
        return None
    flat = np.ravel(given)
    if flat.size != 1 or not np.issubdtype(flat.dtype, np.number) or flat[0] != int(flat[0]):
        raise imp.invalid(
            f"its {what} is {np.asarray(given).tolist()!r}, not one integer",
            hint=f"{what} is a scalar (or 1-element) integer tensor",
        )
    return int(flat[0])


def _attr_text(value) -> str:
    if isinstance(value, str):
        return dsl_string(value)
    return number(value)


def _emit_outputs(imp: Importer, op: str, inputs: list[str], attrs: dict, outputs: list[str]) -> None:
    """``a, b = op(inputs, attrs)``, binding ONNX outputs ``outputs`` (an absent one, "",
    gets a fresh name), each typed by the catalog's rule."""
    from ..catalog import infer_types, normalize_attrs
    from .importer import shipped_catalog

    targets = [imp.names(o) if o else imp.names.fresh("t") for o in outputs]
    args = list(inputs) + [f"{k}={_attr_text(v)}" for k, v in attrs.items()]
    imp.lines.append(f"  {', '.join(targets)} = {op}({', '.join(args)})")
    for o, t in zip(outputs, targets):
        if o:
            imp.alias(o, t)
    opdef = shipped_catalog()[op]
    types = [imp.typed.get(i) for i in inputs]
    if None in types:
        return
    try:
        inferred = infer_types(opdef, types, normalize_attrs(opdef, list(attrs.items())), len(targets))
    except (RuleError, ValueError, TypeError):  # the parser reports it, located
        return
    for t, typed in zip(targets, inferred):
        imp.typed[t] = typed


def cumulative(imp: Importer, node, e: OnnxOp) -> None:
    """CumSum and CumProd: the axis is input 1, a constant (or a model input that
    specialises the model); ``exclusive`` and ``reverse`` are the catalog's flags."""
    imp.check_attrs(node, {"exclusive", "reverse"})
    rank = len(imp.shape(node.input[0]))
    if rank == 0:
        raise imp.invalid("its input is a scalar; it needs an axis", hint="give an input of rank 1 or more")
    axis = _one_int(imp, 1, f"{node.op_type} axis")
    if axis is None:
        raise imp.invalid("it has no axis input", hint=f"{node.op_type} takes the axis as its second input")
    attrs = {
        "axis": checked_axis(imp, axis, rank, "its axis"),
        "exclusive": bool(int(imp.attr("exclusive", 0))),
        "reverse": bool(int(imp.attr("reverse", 0))),
    }
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def top_k(imp: Importer, node, e: OnnxOp) -> None:
    """TopK: the values and int64 indices of the k largest (or smallest) elements along
    ``axis``, sorted, equal ones by lower index first. k is an attribute before opset
    10, then input 1."""
    imp.check_attrs(node, {"k", "axis", "largest", "sorted"})
    shape = imp.shape(node.input[0])
    if not shape:
        raise imp.invalid("its input is a scalar; it needs an axis", hint="give an input of rank 1 or more")
    axis = checked_axis(imp, int(imp.attr("axis", -1)), len(shape), "its axis")
    k = imp.attr("k") if imp.opset < 10 else _one_int(imp, 1, "TopK k")
    if k is None or not 0 <= int(k) <= shape[axis]:
        raise imp.invalid(
            f"its k {k} is not in 0..{shape[axis]}, the size of axis {axis}",
            hint="k counts elements of the axis: at least 0, at most its size",
        )
    attrs = {
        "k": int(k),
        "axis": axis,
        "largest": bool(int(imp.attr("largest", 1))),
        "sorted": bool(int(imp.attr("sorted", 1))),
    }
    outputs = list(node.output) + [""] * (2 - len(node.output))
    _emit_outputs(imp, e.op, [imp.value(node.input[0])], attrs, outputs[:2])


def one_hot(imp: Importer, node, e: OnnxOp) -> None:
    """OneHot(indices, depth, values): depth is a constant (or a specialising model
    input), values [off, on] any value; negative indices count from the end, any
    outside [-depth, depth) give an all-off row."""
    imp.check_attrs(node, {"axis"})
    rank = len(imp.shape(node.input[0]))
    given = imp.const_input(1, "OneHot depth")
    if given is None or np.size(given) != 1:
        raise imp.invalid(
            f"its depth is {'absent' if given is None else np.asarray(given).tolist()}, not one number",
            hint="OneHot's depth is a scalar (or 1-element) tensor",
        )
    depth = int(np.ravel(given)[0])  # ONNX: a float depth is truncated
    if depth < 1:
        raise imp.invalid(f"its depth {depth} is not positive", hint="depth counts the classes: 1 or more")
    if imp.shape(node.input[2]) != (2,):
        raise imp.invalid(
            f"its values have shape {list(imp.shape(node.input[2]))}, not [2]",
            hint="OneHot's values are [off_value, on_value]",
        )
    axis = checked_axis(imp, int(imp.attr("axis", -1)), rank + 1, "its axis")
    attrs = {"depth": depth, "axis": axis}
    imp.emit(e.op, [imp.value(node.input[0]), imp.value(node.input[2])], attrs, node.output[0])


def hardmax(imp: Importer, node, e: OnnxOp) -> None:
    """Hardmax: 1 at the first maximum along ``axis``, 0 elsewhere, in the input's dtype:
    the index of the maximum (``op``, argmax) spread back over the axis as a one-hot
    (``roles.spread``) of the constant values [0, 1]. Before opset 13 the input is
    flattened to 2-D at ``axis`` (default 1) around it (``roles.flat``)."""
    imp.check_attrs(node, {"axis"})
    r = e.roles
    shape = imp.shape(node.input[0])
    if not shape:
        raise imp.invalid("its input is a scalar; it needs an axis", hint="give an input of rank 1 or more")
    x = imp.value(node.input[0])
    axis = checked_axis(imp, int(imp.attr("axis", -1 if imp.opset >= 13 else 1)), len(shape), "its axis")
    flat = imp.opset < 13 and axis != len(shape) - 1
    if flat:
        x = imp.emit(r["flat"], [x], {"newshape": [math.prod(shape[:axis]), math.prod(shape[axis:])]})
        axis = 1
    size = math.prod(shape[axis:]) if flat else shape[axis]
    if size == 0:
        raise imp.unsupported(f"Hardmax along an empty axis (input shape {list(shape)})")
    dtype = imp.dtype(node.input[0])
    values = imp.constant(np.array([0, 1], dtype=dtype), imp.names.fresh("k"))
    index = imp.emit(e.op, [x], {"axis": axis, "keepdims": False})
    y = imp.emit(
        r["spread"], [index, values], {"depth": size, "axis": axis}, None if flat else node.output[0]
    )
    if flat:
        imp.emit(r["flat"], [y], {"newshape": list(shape)}, node.output[0])


# ---------------------------------------------------------------- integer forms of Div, Pow, Clip

EXACT_INTEGERS = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
"""The integer dtypes whose every value float64 holds exactly: Div and Pow of them are
computed through float64 and converted back."""


SHAPE_LIKE = 8
"""The most elements of an operand that is shape arithmetic (one value per axis):
an integer Div or Pow byoc cannot compute at run time specialises the model to the
inputs it is computed from when its operands are no larger (CenterCropPad's function
halves the crop's margins so)."""


def _base_handler(kind: str):
    """The handler ops.py has for ``kind``: the float forms of Div, Pow and Clip."""
    from .handlers import KINDS

    return KINDS[kind]


def dtype_text(imp: Importer, name: str) -> str:
    """The byoc dtype name of value ``name`` ("" when unknown)."""
    dtype = imp.dtype(name)
    return "" if dtype is None else dtype_name(np.dtype(dtype)) or str(dtype)


def _floating(dtype: str) -> bool:
    """A float dtype, or an unknown one (the float handlers report it)."""
    return not dtype or is_float(dtype)


def _through_float64(imp: Importer, node, e: OnnxOp, what: str) -> None:
    """``e.op`` of two integer inputs computed in float64 and cast back to the first
    input's dtype (``roles.cast``; a float to integer cast truncates toward zero)."""
    imp.check_attrs(node, set())
    dtype = dtype_text(imp, node.input[0])
    if dtype not in EXACT_INTEGERS:
        varying = [i for i in node.input[:2] if i and i not in imp.consts]
        shape_like = all(math.prod(imp.shape(i)) <= SHAPE_LIKE and imp.inputs_behind(i) for i in varying)
        if varying and shape_like:  # shape arithmetic on model inputs: folded once they are bound
            raise imp.not_constant(varying[0], f"{dtype} operand (byoc folds such a {what} at import)")
        raise imp.unsupported(
            f"{what} of {dtype}",
            hint=f"byoc computes an integer {what} in float64, exact for {', '.join(EXACT_INTEGERS)}",
        )
    wide = [imp.emit(e.roles["cast"], [imp.value(i)], {"to": "float64"}) for i in node.input[:2]]
    result = imp.emit(e.op, wide)
    imp.emit(e.roles["cast"], [result], {"to": dtype}, node.output[0])


def divide(imp: Importer, node, e: OnnxOp) -> None:
    """Div: of floats the catalog's divide (handler ``binary``); of integers truncated
    toward zero, as ONNX (and C) divide them: the quotient in float64, whose
    conversion back truncates (exact for integers of up to 32 bits)."""
    if _floating(dtype_text(imp, node.input[0])):
        _base_handler("binary")(imp, node, e)
        return
    _through_float64(imp, node, e, "division")


def power(imp: Importer, node, e: OnnxOp) -> None:
    """Pow, whose exponent may have another dtype than its base: a float base takes the
    exponent cast to its dtype (``roles.cast``); an integer base (of up to 32 bits) is
    raised in float64 and the result cast back to its dtype, truncated."""
    base, exponent = (dtype_text(imp, i) for i in node.input[:2])
    if _floating(base):
        if exponent and exponent != base:
            imp.check_attrs(node, set())
            y = imp.emit(e.roles["cast"], [imp.value(node.input[1])], {"to": base})
            imp.emit(e.op, [imp.value(node.input[0]), y], out=node.output[0])
            return
        _base_handler("binary")(imp, node, e)
        return
    _through_float64(imp, node, e, "exponentiation")


def clamp(imp: Importer, node, e: OnnxOp) -> None:
    """Clip: of floats the ``bounded`` handler; of integers (opset 12 on, the bounds
    optional inputs of the same dtype) the elementwise maximum with the lower bound
    (``roles.low``) and minimum with the upper (``roles.high``), as constants."""
    dtype = dtype_text(imp, node.input[0])
    if _floating(dtype):
        _base_handler("bounded")(imp, node, e)
        return
    imp.check_attrs(node, set())
    x = imp.value(node.input[0])
    steps = []
    for k, role in ((1, "low"), (2, "high")):
        given = imp.const_input(k, f"Clip {'lower' if k == 1 else 'upper'} bound")
        if given is None:
            continue
        if np.size(given) != 1:
            raise imp.invalid(f"its bound (input {k}) holds {np.size(given)} values, not one")
        steps.append((role, imp.constant(np.asarray(np.ravel(given)[0], dtype), imp.names.fresh("k"))))
    if not steps:
        imp.alias(node.output[0], x)
        return
    for n, (role, bound) in enumerate(steps):
        x = imp.emit(e.roles[role], [x, bound], out=node.output[0] if n == len(steps) - 1 else None)


def _on_float32(imp: Importer, node, e: OnnxOp, kind: str) -> str:
    """The handler of ``kind`` run on ``node`` with input 0 cast to float32 (``roles.cast``):
    a copy of the node reads the cast and writes a value of its own, whose identifier
    this returns (output 0 is the caller's to write)."""
    proxy = type(node)()
    proxy.CopyFrom(node)
    proxy.input[0], proxy.output[0] = f"{node.input[0]}\0float32", f"{node.output[0]}\0float32"
    imp.alias(proxy.input[0], imp.emit(e.roles["cast"], [imp.value(node.input[0])], {"to": "float32"}))
    outer, imp.node = imp.node, proxy
    try:
        _base_handler(kind)(imp, proxy, e)
    finally:
        imp.node = outer
    return imp.value(proxy.output[0])


def window_max(imp: Importer, node, e: OnnxOp) -> None:
    """MaxPool: of floats the ``window_max`` handler; of int8 and uint8 (ONNX's other
    types) that handler's max_pool on the input cast to float32, which holds every value,
    and the result cast back (every window holds an input element). Its indices, when
    asked for, are composed by :mod:`byoc.onnx.pool_indices`."""
    dtype = dtype_text(imp, node.input[0])
    if not _floating(dtype) and dtype not in ("int8", "uint8"):
        raise imp.unsupported(f"MaxPool of {dtype}", hint="ONNX's MaxPool takes floats, int8 and uint8")
    indices = wants_indices(imp, node)
    values = values_only(node) if indices else node  # the indices are composed apart
    outer, imp.node = imp.node, values
    try:
        if _floating(dtype):
            _base_handler("window_max")(imp, values, e)
        else:
            pooled = _on_float32(imp, values, e, "window_max")
            imp.emit(e.roles["cast"], [pooled], {"to": dtype}, node.output[0])
    finally:
        imp.node = outer
    if indices:
        max_pool_indices(imp, node, e)


def bool_reduce(imp: Importer, node, e: OnnxOp) -> None:
    """ReduceMax and ReduceMin: of bools (any and all) the ``reduce`` handler's op on the
    input cast to float32, then whether the result is above 0 (``roles.positive``):
    an empty maximum (-inf) is false and an empty minimum (+inf) true, as ONNX says."""
    dtype = dtype_text(imp, node.input[0])
    if dtype != "bool":
        _base_handler("reduce")(imp, node, e)
        return
    reduced = _on_float32(imp, node, e, "reduce")
    zero = imp.constant(np.asarray(0.0, np.float32), imp.names.fresh("k"))
    imp.emit(e.roles["positive"], [reduced, zero], out=node.output[0])


INDEXING_KINDS = {
    "integer_window_max": window_max,
    "bool_reduce": bool_reduce,
    "cumulative": cumulative,
    "top_k": top_k,
    "one_hot": one_hot,
    "hardmax": hardmax,
    "integer_divide": divide,
    "mixed_power": power,
    "integer_clip": clamp,
}
"""The handlers of this module, by the ``kind`` that ops.yaml names."""
