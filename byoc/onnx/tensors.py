"""The handlers of ONNX's tensor ops: Reshape, Flatten, Transpose, Squeeze, Expand,
Pad, Slice, Split, Gather, Concat, the reductions, Tile and Trilu, each read from its
inputs and attributes at the model's opset."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..ir import TensorType, dtype_name
from .signal import wrap_pad
from .values import attr_text

if TYPE_CHECKING:
    from .handlers import Handler
    from .importer import Importer
    from .ops import OnnxOp


def one_value(imp: Importer, given: np.ndarray, what: str) -> float:
    """A scalar input (Clip's bounds, Pad's value) as a float: it must hold one value."""
    if np.size(given) != 1:
        raise imp.invalid(
            f"its {what} input holds {np.size(given)} values{f' (shape {list(np.shape(given))})' if np.ndim(given) else ''}, not one",
            hint=f"{what} is a scalar (or leave the input out, with an empty name)",
        )
    return float(np.ravel(given)[0])


def checked_axis(imp: Importer, axis: int, rank: int, what: str) -> int:
    """``axis`` of a rank-``rank`` input, in ONNX's range [-rank, rank - 1], as 0..rank - 1."""
    if not -rank <= axis < rank:
        raise imp.invalid(
            f"{what} {axis} is out of range for an input of rank {rank}",
            hint=f"ONNX takes an axis in [{-rank}, {rank - 1}] here",
        )
    return axis % rank


def _reshape(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"allowzero", "shape"})
    shape = imp.attr("shape") if imp.opset < 5 else imp.const_input(1, "Reshape shape")
    attrs = {"newshape": [int(v) for v in np.ravel(shape)], "allowzero": bool(imp.attr("allowzero", 0))}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _flatten(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis"})
    axis = int(imp.attr("axis", 1))
    axis += len(imp.shape(node.input[0])) if axis < 0 else 0  # -r..r; -1 is r - 1
    imp.emit(e.op, [imp.value(node.input[0])], {"axis": axis}, node.output[0])


def _transpose(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"perm"})
    perm = imp.attr("perm")
    attrs = {"perm": list(perm)} if perm is not None else {}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _axes(imp: Importer, node, since: int) -> list[int] | None:
    """Axes from the attribute (before opset ``since``) or the second input."""
    if imp.opset < since:
        axes = imp.attr("axes")
    else:
        axes = imp.const_input(1, "axes")
    return None if axes is None else [int(a) for a in np.ravel(axes)]


def _squeeze(imp: Importer, node, e: OnnxOp) -> None:
    """Squeeze and Unsqueeze: axes as an attribute before opset 13, an input from it."""
    imp.check_attrs(node, {"axes"})
    axes = _axes(imp, node, 13)
    attrs = {"axes": axes} if axes is not None else {}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _expand(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, set())
    given = imp.const_input(1, "Expand shape")
    if given is None or np.ndim(given) != 1:
        raise imp.invalid(
            f"its shape input is {'absent' if given is None else f'of rank {np.ndim(given)}'}, not a 1-D tensor",
            hint="Expand's shape is a 1-D int64 tensor, one value per output dimension",
        )
    shape = [int(v) for v in given]
    imp.emit(e.op, [imp.value(node.input[0])], {"newshape": shape}, node.output[0])


def _pad(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"mode", "pads", "value", "paddings"})
    mode = imp.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise imp.unsupported(f"Pad mode {mode!r}")
    if imp.opset < 11:
        pads, value = imp.attr("pads", imp.attr("paddings")), float(imp.attr("value", 0.0))
    else:
        pads = imp.const_input(1, "Pad pads")
        given = imp.const_input(2, "Pad value")
        value = one_value(imp, given, "Pad constant_value") if given is not None else 0.0
        axes = imp.const_input(3, "Pad axes")
        if axes is not None:  # opset 18: pads for these axes only (begins, then ends); 0 elsewhere
            rank = len(imp.shape(node.input[0]))
            listed = [int(a) for a in np.ravel(axes)]
            if len(np.ravel(pads)) != 2 * len(listed) or any(not -rank <= a < rank for a in listed):
                raise imp.invalid(
                    f"its pads {np.ravel(pads).tolist()} and axes {listed} do not match a rank-{rank} input",
                    hint="Pad's pads hold a begin and an end for each of its axes, in range",
                )
            full = [0] * (2 * rank)
            for k, a in enumerate(listed):
                full[a % rank], full[a % rank + rank] = (
                    int(np.ravel(pads)[k]),
                    int(np.ravel(pads)[k + len(listed)]),
                )
            pads = full
    if mode == "wrap":  # a gather per padded axis (byoc/onnx/signal.py)
        wrap_pad(imp, node, e, [int(p) for p in np.ravel(pads)])
        return
    attrs = {"pads": [int(p) for p in np.ravel(pads)], "mode": mode, "value": value}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _slice(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"starts", "ends", "axes"})
    shape = imp.shape(node.input[0])
    if imp.opset < 10:
        starts, ends, axes, steps = imp.attr("starts"), imp.attr("ends"), imp.attr("axes"), None
    else:
        starts, ends = imp.const_input(1, "Slice starts"), imp.const_input(2, "Slice ends")
        axes, steps = imp.const_input(3, "Slice axes"), imp.const_input(4, "Slice steps")
    axes = list(range(len(np.ravel(starts)))) if axes is None else [int(a) for a in np.ravel(axes)]
    sizes = [shape[a % len(shape)] for a in axes]
    # ONNX clamps starts and ends to the axis; clamp them here so that INT64_MAX fits every dtype
    starts = [int(min(max(int(s), -d - 1), d)) for s, d in zip(np.ravel(starts), sizes)]
    ends = [int(min(max(int(e), -d - 1), d)) for e, d in zip(np.ravel(ends), sizes)]
    attrs = {"starts": starts, "ends": ends, "axes": axes}
    if steps is not None:
        attrs["steps"] = [int(s) for s in np.ravel(steps)]
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _split(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis", "split", "num_outputs"})
    axis = int(imp.attr("axis", 0))
    checked_axis(imp, axis, len(imp.shape(node.input[0])), "axis")  # checked; written as ONNX gives it
    sizes = imp.attr("split") if imp.opset < 13 else imp.const_input(1, "Split sizes")
    attrs = {"axis": axis}
    if sizes is not None:
        attrs["sizes"] = [int(s) for s in np.ravel(sizes)]
    elif imp.attr("num_outputs") is None or imp.shape(node.input[0])[axis] % len(node.output):
        attrs["sizes"] = _even_split(imp.shape(node.input[0])[axis], len(node.output))
    targets = [imp.names(o) for o in node.output]
    args = ", ".join([imp.value(node.input[0])] + [f"{k}={attr_text(v)}" for k, v in attrs.items()])
    imp.lines.append(f"  {', '.join(targets)} = {e.op}({args})")
    shape, dtype = imp.shape(node.input[0]), imp.dtype(node.input[0])
    parts = attrs.get("sizes") or [shape[axis] // len(node.output)] * len(node.output)
    for o, t, size in zip(node.output, targets, parts):
        imp.alias(o, t)
        part = tuple(size if k == axis % len(shape) else d for k, d in enumerate(shape))
        imp.typed[t] = TensorType(part, dtype_name(np.dtype(dtype)))  # byoc's type of each part


def _even_split(size: int, parts: int) -> list[int]:
    """ONNX's parts of ``size`` in ``parts``: equal, the last one smaller."""
    each = math.ceil(size / parts)
    return [min(each, size - k * each) for k in range(parts)]


def _gather(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis"})
    inputs = [imp.value(node.input[0]), imp.value(node.input[1])]
    imp.emit(e.op, inputs, {"axis": int(imp.attr("axis", 0))}, node.output[0])


def _concat(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axis"})
    inputs = [imp.value(i) for i in node.input]
    imp.emit(e.op, inputs, {"axis": int(imp.attr("axis"))}, node.output[0])


def _reduce(imp: Importer, node, e: OnnxOp) -> None:
    imp.check_attrs(node, {"axes", "keepdims", "noop_with_empty_axes"})
    axes = _axes(imp, node, e.axes_input_since)
    if not axes and imp.attr("noop_with_empty_axes", 0):
        imp.alias(node.output[0], imp.value(node.input[0]))
        return
    attrs = {"axes": axes or [], "keepdims": bool(imp.attr("keepdims", 1))}
    imp.emit(e.op, [imp.value(node.input[0])], attrs, node.output[0])


def _tile(imp: Importer, node, e: OnnxOp) -> None:
    """Tile by constant repeats: a size-1 axis before each repeated one, expanded to
    the repeat count, then merged into it (row-major order makes that a tiling)."""
    imp.check_attrs(node, set())
    shape = imp.shape(node.input[0])
    given = imp.const_input(1, "Tile repeats")
    if given is None or np.ndim(given) != 1 or len(given) != len(shape) or np.any(given < 0):
        shown = "absent" if given is None else f"{np.asarray(given).tolist()} (shape {list(np.shape(given))})"
        raise imp.invalid(
            f"its repeats input is {shown}, not {len(shape)} non-negative counts, one per axis of its input",
            hint="Tile's repeats is a 1-D int64 tensor with one count per input dimension",
        )
    repeats = [int(r) for r in given]
    spread, expanded, merged = [], [], []
    for size, r in zip(shape, repeats):
        spread += [1, size] if r != 1 else [size]
        expanded += [r, size] if r != 1 else [size]
        merged.append(size * r)
    x = imp.value(node.input[0])
    spread_x = imp.emit(e.roles["reshape"], [x], {"newshape": spread})
    wide = imp.emit(e.op, [spread_x], {"newshape": expanded})
    imp.emit(e.roles["reshape"], [wide], {"newshape": merged}, node.output[0])


def _reduce_composed(imp: Importer, node, e: OnnxOp) -> None:
    """ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp as the
    catalog's sum between elementwise ops: ``roles.before`` maps each element first
    (abs, square, exp), ``roles.after`` the sums (sqrt, log). LogSumExp subtracts the
    maximum over the same axes first (``roles.peak``) and adds it back after the log
    (``roles.plus``), so that exp cannot overflow; with keepdims 0 the kept axes are
    then squeezed (``roles.drop``)."""
    imp.check_attrs(node, {"axes", "keepdims", "noop_with_empty_axes"})
    r = e.roles
    axes = _axes(imp, node, e.axes_input_since)
    out = node.output[0]
    x = imp.value(node.input[0])
    if not axes and imp.attr("noop_with_empty_axes", 0):
        # each element is its own reduction: L1 |x|, L2 sqrt(x^2), LogSumExp x, ...
        steps = [] if "peak" in r else [r[k] for k in ("before", "after") if k in r]
        if not steps:
            imp.alias(out, x)
        for k, op in enumerate(steps):
            x = imp.emit(op, [x], out=out if k == len(steps) - 1 else None)
        return
    keep = bool(imp.attr("keepdims", 1))
    over = {"axes": axes or []}
    shape = imp.shape(node.input[0])
    if any(not -len(shape) <= a < len(shape) for a in axes or ()):
        raise imp.invalid(f"its axes {axes} are out of range for a rank-{len(shape)} input")
    empty = any(shape[a] == 0 for a in (axes or range(len(shape))))  # no maximum to take out
    if "peak" in r and not empty:
        peak = imp.emit(r["peak"], [x], {**over, "keepdims": True})
        sums = imp.emit(
            e.op, [imp.emit(r["before"], [imp.emit(r["minus"], [x, peak])])], {**over, "keepdims": True}
        )
        logged = imp.emit(r["plus"], [imp.emit(r["after"], [sums]), peak], out=out if keep else None)
        if not keep:
            rank = len(shape)
            imp.emit(
                r["drop"],
                [logged],
                {"axes": sorted(a % rank for a in axes) if axes else list(range(rank))},
                out=out,
            )
        return
    if "before" in r:
        x = imp.emit(r["before"], [x])
    if "after" in r:
        imp.emit(r["after"], [imp.emit(e.op, [x], {**over, "keepdims": keep})], out=out)
    else:
        imp.emit(e.op, [x], {**over, "keepdims": keep}, out=out)


def _mean_of(imp: Importer, node, e: OnnxOp) -> None:
    """Mean of several inputs, broadcast: their sum, divided by how many there are."""
    imp.check_attrs(node, set())
    names = [imp.value(i) for i in node.input]
    total = names[0]
    for other in names[1:]:
        total = imp.emit(e.op, [total, other])
    count = imp.scalar(float(len(names)), node.input[0])
    imp.emit(e.roles["over"], [total, count], out=node.output[0])


def _trilu(imp: Importer, node, e: OnnxOp) -> None:
    """Trilu: the upper (``upper`` 1) or lower triangle of the last two axes, from the
    diagonal ``k`` (an input: a model input's value specialises the model), zero
    elsewhere: ``op`` (where) between a constant mask and zero."""
    imp.check_attrs(node, {"upper"})
    shape = imp.shape(node.input[0])
    if len(shape) < 2:
        raise imp.invalid(f"its input has rank {len(shape)}, not 2 or more")
    given = imp.const_input(1, "Trilu k")
    if given is not None and np.size(given) != 1:
        raise imp.invalid(f"its k holds {np.size(given)} values, not one")
    k = 0 if given is None else int(np.ravel(given)[0])
    rows, cols = np.indices(shape[-2:])
    mask = cols - rows >= k if int(imp.attr("upper", 1)) else cols - rows <= k
    zero = imp.scalar(0, node.input[0])
    imp.emit(
        e.op,
        [imp.constant(mask, imp.names.fresh("mask")), imp.value(node.input[0]), zero],
        out=node.output[0],
    )


TENSOR_KINDS: dict[str, Handler] = {
    "triangle": _trilu,
    "reduce_composed": _reduce_composed,
    "mean_of": _mean_of,
    "reshape": _reshape,
    "flatten": _flatten,
    "transpose": _transpose,
    "squeeze": _squeeze,
    "expand": _expand,
    "pad": _pad,
    "slice": _slice,
    "split": _split,
    "gather": _gather,
    "concat": _concat,
    "reduce": _reduce,
    "tile": _tile,
}
"""The handlers of this module, by the ``kind`` that ops.yaml names."""
