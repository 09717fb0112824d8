"""ONNX normalisations, pools and layout ops that the catalog has no op for, composed
at import from the catalog ops it has (the row's ``op`` and ``roles`` in
ops.yaml).

* LpNormalization: x divided by its L1 or L2 norm along one axis (0 where the norm is 0).
* LpPool: the sum over each window of ``|x|^p``, which is an average pool that counts
  the zero padding, times the window's size; then its ``1/p`` power.
* Compress, CenterCropPad, ReverseSequence and Col2Im move elements to places that
  depend only on sizes and on inputs byoc needs as constants (the condition, the
  target shape, the sequence lengths, the image and block shapes), so their indices
  are computed at import with numpy: a gather, a slice and a pad, a gather of index
  pairs, and a scatter that adds.
* Dropout in inference: the input itself and, when the model reads it, a mask of
  all true.

A constant input given as a model input makes the importer ask for its value
(``NeedsValue``): the model is then built for the values it is given.

NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, MeanVarianceNormalization,
GroupNormalization, DepthToSpace, SpaceToDepth and SwiGLU need nothing here: ONNX
defines them as functions of ops byoc imports, and byoc/onnx/expand.py imports them
so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..ir import dtype_name
from .layers import auto_pads
from .tensors import checked_axis

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp

MAX_INDEX_ELEMENTS = 1 << 24
"""The most elements a constant index tensor of Col2Im or ReverseSequence may have."""


def _floats_only(imp: Importer, name: str) -> None:
    """Refuse a non-float input: these ops' ONNX types are floats."""
    dtype = imp.dtype(name)
    kind = dtype_name(np.dtype(dtype)) if dtype is not None else None
    if kind not in ("float16", "bfloat16", "float32", "float64"):
        raise imp.unsupported(
            f"{imp.node.op_type} of {kind or 'an unknown dtype'}", hint="its input is a float"
        )


def _ints(imp: Importer, k: int, what: str, count: int | None = None) -> list[int]:
    """Input ``k``, a constant 1-D integer tensor (``count`` values, when given)."""
    given = imp.const_input(k, what)
    if (
        given is None
        or np.ndim(given) != 1
        or np.asarray(given).dtype.kind not in "iu"
        or (count is not None and len(given) != count)
    ):
        shown = (
            "absent" if given is None else f"{np.asarray(given).tolist()!r} (shape {list(np.shape(given))})"
        )
        wanted = f"{count} integers" if count is not None else "a 1-D integer tensor"
        raise imp.invalid(f"its {what} is {shown}, not {wanted}", hint=f"{what} is a 1-D int64 tensor")
    return [int(v) for v in given]


def lp_normalization(imp: Importer, node, e: OnnxOp) -> None:
    """LpNormalization: x / ||x||_p along ``axis`` (p 1: the sum of ``magnitude``s; p 2:
    the ``root`` of the sum of squares), and 0 where the norm is 0, as ONNX's tests
    define it (``choose`` between x / norm and 0 where the norm ``zero`` equals 0)."""
    imp.check_attrs(node, {"axis", "p"})
    _floats_only(imp, node.input[0])
    r = e.roles
    shape = imp.shape(node.input[0])
    axis = checked_axis(imp, int(imp.attr("axis", -1)), len(shape), "its axis")
    p = int(imp.attr("p", 2))
    if p not in (1, 2):
        raise imp.invalid(f"its p is {p}", hint="LpNormalization takes p 1 or 2")
    x = imp.value(node.input[0])
    each = imp.emit(r["magnitude"], [x]) if p == 1 else imp.emit(r["times"], [x, x])
    norm = imp.emit(e.op, [each], {"axes": [axis], "keepdims": True})
    if p == 2:
        norm = imp.emit(r["root"], [norm])
    zero = imp.scalar(0.0, node.input[0])
    ratio = imp.emit(r["over"], [x, norm])
    imp.emit(r["choose"], [imp.emit(r["zero"], [norm, zero]), zero, ratio], out=node.output[0])


def lp_pool(imp: Importer, node, e: OnnxOp) -> None:
    """LpPool: (sum over each window of |x|^p)^(1/p), the padding adding zeros. The sum
    is ``op`` (an average pool that counts the padding) times the window's size;
    ``ceil_mode`` becomes more zero padding at the end, enough for ONNX's last
    windows (each starts within the input or its begin padding), so that every window
    divides by the whole kernel."""

    imp.check_attrs(node, {"auto_pad", "kernel_shape", "strides", "pads", "ceil_mode", "dilations", "p"})
    _floats_only(imp, node.input[0])
    r = e.roles
    kernel = [int(k) for k in imp.attr("kernel_shape", [])]
    shape = imp.shape(node.input[0])
    rank = len(kernel)
    if rank == 0 or rank != len(shape) - 2 or any(k < 1 for k in kernel):
        raise imp.invalid(
            f"its kernel_shape {kernel} does not fit an input of shape {list(shape)}",
            hint="LpPool's kernel_shape holds a positive size per spatial axis",
        )
    strides = [int(s) for s in imp.attr("strides", [1] * rank)]
    dilations = [int(d) for d in imp.attr("dilations", [1] * rank)]
    if len(strides) != rank or len(dilations) != rank or min(strides + dilations) < 1:
        raise imp.invalid(f"its strides {strides} or dilations {dilations} are not {rank} positive values")
    pads = [int(v) for v in auto_pads(imp, kernel, strides, dilations)]
    if len(pads) != 2 * rank or min(pads) < 0:
        raise imp.invalid(f"its pads {pads} are not {2 * rank} non-negative values")
    p = float(imp.attr("p", 2))
    if not p > 0:
        raise imp.invalid(f"its p is {p}", hint="LpPool's p is a positive integer")
    if int(imp.attr("ceil_mode", 0)):
        for k, size in enumerate(shape[2:]):
            reach = dilations[k] * (kernel[k] - 1) + 1
            span = size + pads[k] + pads[k + rank]
            count = -(-(span - reach) // strides[k]) + 1
            if (count - 1) * strides[k] >= size + pads[k]:
                count -= 1
            pads[k + rank] += max(0, (count - 1) * strides[k] + reach - span)
    x = imp.emit(r["magnitude"], [imp.value(node.input[0])])
    if p != 1:
        x = imp.emit(r["raise"], [x, imp.scalar(p, node.input[0])])
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "ceil_mode": False,
        "count_include_pad": True,
    }
    mean = imp.emit(e.op, [x], attrs)
    last = node.output[0] if p == 1 else None
    total = imp.emit(r["times"], [mean, imp.scalar(float(math.prod(kernel)), node.input[0])], out=last)
    if p != 1:
        imp.emit(r["raise"], [total, imp.scalar(1.0 / p, node.input[0])], out=node.output[0])


def compress(imp: Importer, node, e: OnnxOp) -> None:
    """Compress by a constant condition: ``op`` (gather) of the positions where it is
    true along ``axis``, or of the input flattened (role ``flat``) without one. A
    condition shorter than the axis drops the positions beyond it."""
    imp.check_attrs(node, {"axis"})
    shape = imp.shape(node.input[0])
    condition = imp.const_input(1, "Compress condition")
    if condition is None or np.ndim(condition) != 1:
        raise imp.invalid(
            "its condition is not a 1-D tensor", hint="Compress's condition is a 1-D bool tensor"
        )
    x = imp.value(node.input[0])
    axis = imp.attr("axis")
    if axis is None:
        x = imp.emit(e.roles["flat"], [x], {"newshape": [math.prod(shape)]})
        size, axis = math.prod(shape), 0
    else:
        axis = checked_axis(imp, int(axis), len(shape), "its axis")
        size = shape[axis]
    chosen = np.flatnonzero(np.asarray(condition).astype(bool))
    if chosen.size and chosen[-1] >= size:
        raise imp.invalid(
            f"its condition selects position {int(chosen[-1])}, beyond the {size} of the axis it compresses",
            hint="Compress's condition has at most one entry per position of the axis",
        )
    indices = imp.constant(chosen.astype(np.int64), imp.names.fresh("chosen"))
    imp.emit(e.op, [x, indices], {"axis": axis}, node.output[0])


def center_crop_pad(imp: Importer, node, e: OnnxOp) -> None:
    """CenterCropPad to a constant shape: each listed axis larger than its target is
    cut to its centre (``op``, a slice: the larger half of the excess goes from the
    end), each smaller one padded with zeros around it (role ``grow``, a pad: the
    larger half at the end)."""
    imp.check_attrs(node, {"axes"})
    shape = imp.shape(node.input[0])
    rank = len(shape)
    axes = [checked_axis(imp, int(a), rank, "its axis") for a in imp.attr("axes", range(rank))]
    if len(set(axes)) != len(axes):
        raise imp.invalid(f"its axes {axes} repeat an axis")
    wanted = _ints(imp, 1, "CenterCropPad shape", len(axes))
    if min(wanted, default=0) < 0:
        raise imp.invalid(f"its shape {wanted} has a negative size")
    starts, ends, cut, pads = [], [], [], [0] * (2 * rank)
    for a, size in zip(axes, wanted):
        if size < shape[a]:
            start = (shape[a] - size) // 2
            cut.append(a)
            starts.append(start)
            ends.append(start + size)
        elif size > shape[a]:
            pads[a] = (size - shape[a]) // 2
            pads[a + rank] = size - shape[a] - pads[a]
    x = imp.value(node.input[0])
    if not cut and not any(pads):
        imp.alias(node.output[0], x)
        return
    if cut:
        x = imp.emit(
            e.op, [x], {"starts": starts, "ends": ends, "axes": cut}, None if any(pads) else node.output[0]
        )
    if any(pads):
        imp.emit(e.roles["grow"], [x], {"pads": pads, "mode": "constant", "value": 0.0}, node.output[0])


def dropout(imp: Importer, node, e: OnnxOp) -> None:
    """Dropout in inference: the output is the input, and the optional mask all true
    (role ``spread``, a one expanded to the input's shape). A ``training_mode`` that is
    true with a ratio above 0 would draw a random mask: refused. ``is_test`` (before
    opset 7) is not read: byoc compiles models for inference."""
    imp.check_attrs(node, {"ratio", "seed", "is_test"})
    training = imp.const_input(2, "Dropout training_mode")
    if training is not None and bool(np.ravel(training)[0]):
        ratio = imp.const_input(1, "Dropout ratio")
        if ratio is None or float(np.ravel(ratio)[0]) != 0.0:
            raise imp.unsupported("Dropout in training mode (a random mask)")
    x = imp.value(node.input[0])
    imp.alias(node.output[0], x)
    if len(node.output) > 1 and node.output[1] and node.output[1] in imp.used:
        dtype = imp.dtype(node.output[1])
        one = imp.constant(
            np.ones((), np.dtype(dtype) if dtype is not None else bool), imp.names.fresh("kept")
        )
        imp.emit(e.roles["spread"], [one], {"newshape": list(imp.shape(node.input[0]))}, node.output[1])


def reverse_sequence(imp: Importer, node, e: OnnxOp) -> None:
    """ReverseSequence by constant lengths: for each batch entry b, the first
    ``lens[b]`` steps along the time axis reversed, the rest kept. ``op`` (gather_nd)
    reads, for each (time, batch) position in the input's order of the two axes, the
    pair of the position it comes from."""
    imp.check_attrs(node, {"batch_axis", "time_axis"})
    shape = imp.shape(node.input[0])
    if len(shape) < 2:
        raise imp.invalid(f"its input has rank {len(shape)}, not 2 or more")
    batch_axis, time_axis = int(imp.attr("batch_axis", 1)), int(imp.attr("time_axis", 0))
    if {batch_axis, time_axis} != {0, 1}:
        raise imp.invalid(
            f"its batch_axis {batch_axis} and time_axis {time_axis} are not 0 and 1",
            hint="ReverseSequence's batch and time axes are the first two, one each",
        )
    batch, steps = shape[batch_axis], shape[time_axis]
    lens = _ints(imp, 1, "ReverseSequence sequence_lens", batch)
    if any(not 0 <= n <= steps for n in lens):
        raise imp.invalid(f"its sequence_lens {lens} are not each within 0..{steps}, the time axis's size")
    t, b = np.meshgrid(np.arange(steps), np.arange(batch), indexing="ij")  # [time, batch]
    n = np.asarray(lens)[b]
    source = np.where(t < n, n - 1 - t, t)
    pairs = np.stack([source, b] if time_axis == 0 else [b.T, source.T], axis=-1)
    if pairs.size > MAX_INDEX_ELEMENTS:
        raise imp.unsupported(f"a ReverseSequence of {batch} x {steps} steps (its index table is too large)")
    indices = imp.constant(pairs.astype(np.int64), imp.names.fresh("reversed"))
    imp.emit(e.op, [imp.value(node.input[0]), indices], {"batch_dims": 0}, node.output[0])


def col2im(imp: Importer, node, e: OnnxOp) -> None:
    """Col2Im: the columns [N, C * prod(block), L] of an im2col added back into images
    [N, C, *image_shape]. Where each (block offset, block position) column lands is
    computed at import; ``op`` (a scatter with the ``fixed`` reduction that adds)
    adds the columns, reshaped to [N, C, prod(block) * L], into zeros (role ``spread``, expanded)
    with one more position that collects what lands in the padding, then sliced off
    (role ``part``) and reshaped (role ``reshape``) to the image."""
    imp.check_attrs(node, {"dilations", "pads", "strides"})
    r = e.roles
    shape = imp.shape(node.input[0])
    image = _ints(imp, 1, "Col2Im image_shape")
    block = _ints(imp, 2, "Col2Im block_shape", len(image))
    rank = len(image)
    dilations = [int(v) for v in imp.attr("dilations", [1] * rank)]
    strides = [int(v) for v in imp.attr("strides", [1] * rank)]
    pads = [int(v) for v in imp.attr("pads", [0] * (2 * rank))]
    if (
        len(shape) != 3
        or rank == 0
        or min(image + block, default=0) < 1
        or len(dilations) != rank
        or len(strides) != rank
        or len(pads) != 2 * rank
        or min(dilations + strides) < 1
        or min(pads) < 0
    ):
        raise imp.invalid(
            f"its input of shape {list(shape)}, image_shape {image}, block_shape {block}, "
            f"dilations {dilations}, strides {strides} and pads {pads} do not fit together",
            hint="Col2Im takes [N, C * prod(block_shape), L] and positive sizes, one per image axis",
        )
    blocks = [
        (image[k] + pads[k] + pads[k + rank] - dilations[k] * (block[k] - 1) - 1) // strides[k] + 1
        for k in range(rank)
    ]
    kernel, count, size = math.prod(block), math.prod(blocks), math.prod(image)
    if min(blocks) < 1 or shape[1] % kernel or shape[2] != count:
        raise imp.invalid(
            f"its input of shape {list(shape)} is not [N, C * {kernel}, {count}] for image_shape {image}, "
            f"block_shape {block}, dilations {dilations}, strides {strides} and pads {pads}",
            hint="Col2Im's input has prod(block_shape) columns per channel and one row per block position",
        )
    if kernel * count > MAX_INDEX_ELEMENTS:
        raise imp.unsupported(
            f"a Col2Im of {kernel * count} columns per channel (its index table is too large)"
        )
    offsets = np.indices(block).reshape(rank, kernel, 1)
    where = np.indices(blocks).reshape(rank, 1, count)
    spot = [
        (where[k] * strides[k] - pads[k] + offsets[k] * dilations[k]).astype(np.int64) for k in range(rank)
    ]
    inside = np.all([(s >= 0) & (s < image[k]) for k, s in enumerate(spot)], axis=0)
    within = [np.clip(s, 0, image[k] - 1) for k, s in enumerate(spot)]  # those outside: replaced next
    target = np.where(inside, np.ravel_multi_index(within, image), size)
    batch, channels = shape[0], shape[1] // kernel
    cols = imp.emit(r["reshape"], [imp.value(node.input[0])], {"newshape": [batch, channels, kernel * count]})
    where_to = imp.constant(target.reshape(1, 1, kernel * count).astype(np.int64), imp.names.fresh("col2im"))
    where_to = imp.emit(r["spread"], [where_to], {"newshape": [batch, channels, kernel * count]})
    zeros = imp.emit(r["spread"], [imp.scalar(0, node.input[0])], {"newshape": [batch, channels, size + 1]})
    added = imp.emit(e.op, [zeros, where_to, cols], {"axis": 2, **e.fixed})  # the reduction that adds
    inner = imp.emit(r["part"], [added], {"starts": [0], "ends": [size], "axes": [2]})
    imp.emit(r["reshape"], [inner], {"newshape": [batch, channels, *image]}, node.output[0])


def max_unpool(imp: Importer, node, e: OnnxOp) -> None:
    """MaxUnpool: each value of X written into zeros at its index of I, a flat index
    into the output that the pooling attributes imply (``op``: scatter_elements over
    the flattened zeros), then padded with zeros at the end of each spatial axis to
    ``output_shape`` when that is given and larger, as ONNX's reference places it."""
    imp.check_attrs(node, {"kernel_shape", "pads", "strides"})
    r = e.roles
    x_shape = imp.shape(node.input[0])
    kernel = [int(k) for k in imp.attr("kernel_shape")]
    rank = len(kernel)
    strides = [int(s) for s in imp.attr("strides", [1] * rank)]
    pads = [int(p) for p in imp.attr("pads", [0] * (2 * rank))]
    if len(x_shape) != rank + 2 or len(strides) != rank or len(pads) != 2 * rank:
        raise imp.invalid(
            f"its kernel_shape {kernel}, strides {strides} and pads {pads} do not fit an input of rank {len(x_shape)}"
        )
    implied = [*x_shape[:2]] + [
        (x_shape[2 + k] - 1) * strides[k] - (pads[k] + pads[rank + k]) + kernel[k] for k in range(rank)
    ]
    given = imp.const_input(2, "MaxUnpool output_shape")
    wanted = implied if given is None else [int(v) for v in np.ravel(given)]
    if len(wanted) != len(implied) or any(w < i for w, i in zip(wanted, implied)):
        raise imp.unsupported(
            f"an output_shape {wanted} smaller than the shape {implied} its attributes imply",
            hint="MaxUnpool's output_shape may only add room at the end of each axis",
        )
    zeros = imp.constant(np.zeros(math.prod(implied), imp.dtype(node.input[0])), imp.names.fresh("zeros"))
    flat = [imp.emit(r["reshape"], [imp.value(name)], {"newshape": [-1]}) for name in node.input[:2]]
    written = imp.emit(
        r["reshape"], [imp.emit(e.op, [zeros, flat[1], flat[0]], {"axis": 0})], {"newshape": implied}
    )
    if wanted == implied:
        imp.emit(r["single"], [written], out=node.output[0])
        return
    ends = [w - i for w, i in zip(wanted, implied)]
    imp.emit(r["grow"], [written], {"pads": [0] * len(implied) + ends}, out=node.output[0])


def tensor_scatter(imp: Importer, node, e: OnnxOp) -> None:
    """TensorScatter, a KV cache's update: ``update`` written into ``past_cache`` along
    ``axis`` from each batch entry's write index on (0 without ``write_indices``), the
    position taken modulo the cache's length in mode ``circular``. One ``op``
    (scatter_elements) whose indices are the write index plus the step, spread over
    the other axes; the write indices may be computed at run time."""
    imp.check_attrs(node, {"axis", "mode"})
    past, update = imp.shape(node.input[0]), imp.shape(node.input[1])
    rank = len(past)
    axis = int(imp.attr("axis", -2))
    axis = axis + rank if axis < 0 else axis
    if not 1 <= axis < rank:
        raise imp.invalid(
            f"its axis {imp.attr('axis', -2)} is not a sequence axis of a rank-{rank} cache",
            hint="the axis is 1 or more (0 is the batch) and below the cache's rank",
        )
    mode = imp.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise imp.invalid(f"its mode {mode!r} is not 'linear' or 'circular'")
    if len(update) != rank or any(u != p for k, (u, p) in enumerate(zip(update, past)) if k != axis):
        raise imp.invalid(
            f"its update of shape {list(update)} does not match the cache's {list(past)} but along axis {axis}"
        )
    if update[axis] > past[axis]:
        raise imp.invalid(f"its update holds {update[axis]} steps, more than the cache's {past[axis]}")
    along = [1] * rank
    along[axis] = update[axis]
    index = imp.constant(np.arange(update[axis], dtype=np.int64).reshape(along), imp.names.fresh("steps"))
    if len(node.input) > 2 and node.input[2]:
        (batch,) = imp.shape(node.input[2]) or (None,)
        if batch != past[0]:
            raise imp.invalid(
                f"its write_indices have shape {list(imp.shape(node.input[2]))}, not [{past[0]}]"
            )
        start = imp.emit(
            e.roles["reshape"], [imp.value(node.input[2])], {"newshape": [batch] + [1] * (rank - 1)}
        )
        index = imp.emit(e.roles["plus"], [start, index])
        if mode == "circular":
            length = imp.constant(np.asarray(past[axis], np.int64), imp.names.fresh("k"))
            index = imp.emit(e.roles["wrap"], [index, length])
    index = imp.emit(e.roles["spread"], [index], {"newshape": list(update)})
    imp.emit(
        e.op, [imp.value(node.input[0]), index, imp.value(node.input[1])], {"axis": axis}, node.output[0]
    )


COMPOSED_KINDS = {
    "max_unpool": max_unpool,
    "lp_normalized": lp_normalization,
    "lp_pool": lp_pool,
    "compress": compress,
    "center_crop_pad": center_crop_pad,
    "dropout": dropout,
    "reverse_sequence": reverse_sequence,
    "col2im": col2im,
    "tensor_scatter": tensor_scatter,
}
"""The handlers of this module that ops.yaml's ``kind`` names."""
