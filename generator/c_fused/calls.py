"""The nest of an op of a *kernel* rule (:data:`byoc.spec.kind_c_fused.KERNEL_RULES`): a
function of the spec's support code computes one block of the output, its last two axes,
per call; the nest loops over the output's other (batch) axes and calls it once for each.

The rule fixes the call's arguments. ``attention`` (q, k, v, scale and an optional bias):

    NAME(q, k, v, scale, bias, bias_row, bias_col, out, rows, keys, depth, width)

each array a pointer to its block for the current batch index (numpy broadcasting: an
operand of extent 1 along a batch axis is the same block for every index), the bias
``NULL`` when there is none, and its element (i, j) at ``bias[i * bias_row + j * bias_col]``
(a stride of 0 along an axis it broadcasts along). ``fused_attention.h`` beside the fused
spec documents the computation.

The nest writes the value it computes straight into the array that stores it (an output
or an intermediate buffer); no elementwise op joins it (:func:`~.nests.plan_nests` starts a
new nest after it). Large outputs run on the thread pool, one chunk of batch indices each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from byoc.ir import Node, TensorType
from byoc.spec.kind_c_fused import CallBinding
from byoc.spec.template import render

from ..c.text import comment, origin
from .loops import Loops, plan_loops
from .outline import Outliner, Written
from .placement import Placement


class Writer(Protocol):
    """What a call's nest needs of the function's nest writer (``nests._NestWriter``)."""

    threshold: int
    """Option openmp_threshold: a nest of this many outputs runs on the thread pool."""
    heavy: int
    """Option openmp_reduction_threshold: so does one of this many points in all."""
    outline: Outliner


def _batch(shape: Sequence[int]) -> tuple[int, ...]:
    """The batch axes of an operand of ``shape``: all but its last two."""
    return tuple(shape[: max(0, len(shape) - 2)])


def _block(shape: Sequence[int]) -> tuple[int, int]:
    """An operand's last two extents, 1 for an axis it lacks."""
    padded = (1, 1, *shape)
    return padded[-2], padded[-1]


def _at(t: TensorType, array: str, loops: Loops) -> str:
    """``array``'s block for the current batch index of ``loops``."""
    rows, cols = _block(t.shape)
    index = loops.index(_batch(t.shape))
    return array if index == "0" else f"{array} + ({index}) * {rows * cols}"


def attention_arguments(
    ins: Sequence[tuple[TensorType, str]], out: tuple[TensorType, str], loops: Loops
) -> list[str]:
    """The arguments of an attention call (see the module doc)."""
    (q, _), (kt, _), (v, _) = ins[:3]
    if len(ins) > 4:
        rows, cols = _block(ins[4][0].shape)
        bias = [_at(*ins[4], loops), str(cols if rows != 1 else 0), str(1 if cols != 1 else 0)]
    else:
        bias = ["NULL", "0", "0"]
    sizes = (q.shape[-2], kt.shape[-1], q.shape[-1], v.shape[-1])
    return [*(_at(*i, loops) for i in ins[:3]), ins[3][1], *bias, _at(*out, loops), *map(str, sizes)]


ARGUMENTS = {"attention": attention_arguments}
"""The arguments of each kernel rule's call (see the module doc)."""
POINTS = {"attention": lambda ins: ins[1][0].shape[-1]}
"""The points each output element of a kernel rule sums over (attention: the keys), which
decides with the outputs whether its nest runs on the thread pool."""


def call_nest(
    node: Node,
    rule: str,
    binding: object,
    ins: Sequence[tuple[TensorType, str]],
    dests: Sequence[str],
    writer: Writer,
    label: str,
) -> Written:
    """The nest of ``node`` (inputs ``ins``: type and C array each): one call of the
    binding's function per batch index, the result written to ``dests[0]`` and copied to
    the others; on the thread pool when it is large."""
    assert isinstance(binding, CallBinding)
    out = node.type
    batch = _batch(out.shape)
    loops = plan_loops(batch, [_batch(t.shape) for t, _ in ins if t.rank > 2])
    placed = Placement(loops)
    name = render(binding.function, {"dtype": out.dtype})
    args = ARGUMENTS[rule](ins, (out, dests[0]), loops)
    placed.add(f"{name}({', '.join(args)});", comment(origin(node)))
    block = math.prod(out.shape[-2:])
    index = loops.index(batch)
    start = "0" if index == "0" else f"({index}) * {block}"
    for dest in dests[1:]:  # a value stored twice (two outputs): copied from the first
        placed.add(
            f"for (int64_t e = 0; e < {block}; ++e) {dest}[{start} + e] = {dests[0]}[{start} + e];", ""
        )
    size = math.prod(out.shape)
    heavy = 0 < writer.heavy <= size * POINTS[rule](ins)
    parallel = bool(loops.axes) and (0 < writer.threshold <= size or heavy) and placed.outer_count() > 1
    how = f"{len(loops.axes)} loop(s) {list(loops.extents)} of calls" if loops.axes else "one call"
    lines = placed.lines(f"{label}: {list(out.shape)}, {how}", parallel, False)
    if parallel:
        lines = writer.outline(label, lines, placed.outer_count())
    return Written(label, [], lines, False, parallel, [node])
