"""MaxPool's second output, the indices of the maxima, composed from catalog ops.

ONNX numbers an input element by its place in the flattened input: ``(n * C + c)``
times the spatial size, plus the spatial position row-major (``storage_order`` 0) or
column-major (1). Each window's maximum is the first one in the window's row-major
order, padding never counted. The composition, all of whose index tables are
constants of the node's geometry:

1. the input with its spatial axes flattened; a window's slot in the padding (of
   ``pads`` or ``ceil_mode``'s overhang) reads the window's first element inside the
   input instead, which leaves the maximum and its first place as they are;
2. one ``gather`` of every window's elements, ``[N, C, windows, K]`` for K the
   kernel's size, then ``argmax`` over K (the first maximum, as ONNX's);
3. the chosen slot looked up in a table of each slot's ONNX number within a channel
   (``gather_elements``), plus the channel's offset ``(n * C + c) * spatial``.

The window's values come from ``max_pool`` itself, as without indices.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .importer import Importer
    from .ops import OnnxOp

MAX_TABLE_ELEMENTS = 1 << 24
"""The most entries the window table (windows times the kernel's size) may have."""


def wants_indices(imp: Importer, node) -> bool:
    """Whether a MaxPool node's indices are asked for (its second output is used)."""
    return any(o in imp.used for o in node.output[1:])


def values_only(node):
    """A copy of MaxPool ``node`` without its indices output and storage_order, for
    the handler of its values."""
    proxy = type(node)()
    proxy.CopyFrom(node)
    del proxy.output[1:]
    kept = [a for a in proxy.attribute if a.name != "storage_order"]
    del proxy.attribute[:]
    proxy.attribute.extend(kept)
    return proxy


def _geometry(imp: Importer) -> tuple[list[int], list[int], list[int], list[int]]:
    """The node's kernel, strides, dilations and begin pads (auto_pad resolved)."""
    from .layers import auto_pads

    kernel = [int(k) for k in imp.attr("kernel_shape")]
    rank = len(kernel)
    strides = [int(s) for s in imp.attr("strides", [1] * rank)]
    dilations = [int(d) for d in imp.attr("dilations", [1] * rank)]
    pads = [int(p) for p in auto_pads(imp, kernel, strides, dilations)]
    return kernel, strides, dilations, pads[:rank]


def max_pool_indices(imp: Importer, node, e: OnnxOp) -> None:
    """Write ``node.output[1]``, the int64 indices of the maxima ``node.output[0]`` holds."""
    shape = imp.shape(node.input[0])
    n, c, spatial = shape[0], shape[1], tuple(shape[2:])
    out_spatial = tuple(imp.shape(node.output[0])[2:])
    kernel, strides, dilations, begins = _geometry(imp)
    for name, values in (("kernel_shape", kernel), ("strides", strides), ("dilations", dilations)):
        if len(values) != len(spatial):
            raise imp.invalid(
                f"its {name} has {len(values)} entries for an input of {len(spatial)} spatial axes",
                hint="MaxPool's kernel_shape, strides and dilations give one entry per spatial axis",
            )
    column_major = int(imp.attr("storage_order", 0)) == 1
    windows, size = math.prod(out_spatial), math.prod(kernel)
    if windows * size > MAX_TABLE_ELEMENTS:
        raise imp.unsupported(f"MaxPool's indices over {windows} windows of {size} (the table is too large)")
    # every window's slots, as positions in the input (may lie in the padding)
    offsets = np.array(list(itertools.product(*(range(k) for k in kernel))), np.int64).reshape(size, -1)
    starts = np.array(list(itertools.product(*(range(o) for o in out_spatial))), np.int64).reshape(
        windows, -1
    )
    where = (starts * strides - begins)[:, None, :] + offsets[None, :, :] * dilations  # [windows, K, rank]
    # a padding slot stands for its window's first element inside the input: a copy
    # never changes the maximum, and is numbered as the element it copies
    inside = np.all((where >= 0) & (where < np.array(spatial)), axis=-1)  # [windows, K]
    if not inside.any(axis=1).all():
        raise imp.invalid(
            "a window of its MaxPool lies wholly in the padding", hint="pads are smaller than the kernel"
        )
    first = where[np.arange(windows), inside.argmax(axis=1)]  # [windows, rank]
    where = np.where(inside[..., None], where, first[:, None, :])
    # 1. the input (an integer one cast to float32, which holds every int8 and uint8),
    # its spatial axes flattened; 2. every window's elements, and the first maximum
    x = imp.value(node.input[0])
    if not np.issubdtype(np.dtype(imp.dtype(node.input[0]) or np.float32), np.floating):
        x = imp.emit(e.roles["cast"], [x], {"to": "float32"})
    x = imp.emit(e.roles["flat"], [x], {"newshape": [n, c, math.prod(spatial)]})
    row_major = np.ravel_multi_index(tuple(np.moveaxis(where, -1, 0)), spatial)
    table = imp.constant(row_major.reshape(-1).astype(np.int64), imp.names.fresh("windows"))
    slots = imp.emit(e.roles["pick"], [x, table], {"axis": 2})
    slots = imp.emit(e.roles["flat"], [slots], {"newshape": [n, c, windows, size]})
    best = imp.emit(e.roles["best"], [slots], {"axis": 3, "keepdims": True})
    # 3. the chosen slot's ONNX number: its spatial place, plus the channel's offset
    place = (
        np.ravel_multi_index(tuple(np.moveaxis(where, -1, 0)), spatial, order="F")
        if column_major
        else row_major
    )
    places = imp.constant(place.astype(np.int64), imp.names.fresh("places"))
    places = imp.emit(e.roles["spread"], [places], {"newshape": [n, c, windows, size]})
    chosen = imp.emit(e.roles["take"], [places, best], {"axis": 3})
    channel = np.arange(n * c, dtype=np.int64).reshape(n, c, 1, 1) * math.prod(spatial)
    numbered = imp.emit(e.roles["plus"], [chosen, imp.constant(channel, imp.names.fresh("channels"))])
    imp.emit(e.roles["flat"], [numbered], {"newshape": [n, c, *out_spatial]}, node.output[1])
