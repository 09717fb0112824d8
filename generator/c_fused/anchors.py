"""Where each element of an *anchor* comes from: the index algebra of the ``c_fused``
codegen for the non-elementwise shape rules.

An anchor is a node whose output element at index ``o`` reads its inputs at other
indices. For each rule, :data:`RULES` says, in C, for one output element:

- reduction rules (conv, pool, dense, reduce, softmax, ...): the reduction loops
  (:class:`~.index.Level`: a counter ``r<k>``, its extent, and the index locals
  and ``continue`` guards of that loop, such as a convolution tap that falls on the
  padding), where each input is read at a point of the reduction space, and
  ``${window}``. What is accumulated, and how the result follows, is the op's data
  (``reduce`` and ``result`` in the backend spec);
- movement rules (reshape, transpose, slice, pad, gather, concatenate, split, ...):
  index locals, and the C value of the element (an input element, or a pad value).
  A rule of several outputs (split) is asked for one output at a time.

Output index ``o`` is given per axis as the C name of its loop counter (``"0"`` for an
axis of extent 1, which has no loop); inputs by the C names of their arrays, which are
contiguous and row-major. Shapes and attributes are static, so every extent, stride
and bound is a number, and bounds checks that can never fail are left out.

The rules of each family are in :mod:`.reduction_rules` and
:mod:`.movement_rules`, on the types and C index text of :mod:`.index`.
These modules know rule names (the vocabulary of :mod:`byoc.shape_rules`), never op names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from byoc.attr_values import AttrView
from byoc.ir import AttrValue, TensorType

from .index import Anchor, Site, float_literal
from .movement_rules import MOVEMENT_ANCHORS
from .reduction_rules import REDUCTION_ANCHORS

RULES: Mapping[str, Callable[[Site], Anchor]] = {**REDUCTION_ANCHORS, **MOVEMENT_ANCHORS}
"""The index algebra of every anchor rule of the c_fused kind."""


def loop_order(rule: str, out: TensorType, attrs: AttrView) -> tuple[int, ...]:
    """The output axes of an anchor's loops, outermost first: row-major, but softmax's
    axis innermost, so its reductions are computed once per row, outside that loop."""
    axes = tuple(range(out.rank))
    if rule == "softmax":
        axis = attrs.integer("axis")
        return (*(a for a in axes if a != axis), axis)
    return axes


def operand_shapes(rule: str, ins: Sequence[TensorType], attrs: AttrView) -> tuple[tuple[int, ...], ...]:
    """The shape each input of an expression op broadcasts from, numpy's way: its own,
    but a channel-wise parameter (bias_add's bias, batch_norm's four) placed on its axis,
    ``(C,) + (1,) * (rank - 1 - axis)``, so that it is indexed by that axis's counter."""
    rank = ins[0].rank
    axis = 1 if rule == "batch_norm" else attrs.integer("axis") if rule == "bias_add" else None
    if axis is None:
        return tuple(t.shape for t in ins)
    placed = (ins[0].shape[axis],) + (1,) * (rank - 1 - axis)
    return (ins[0].shape, *(placed for _ in ins[1:]))


def c_attributes(attrs: Mapping[str, AttrValue]) -> dict[str, str]:
    """The scalar attributes as C literals, for templates: a bool as 1 or 0, a float as
    a double literal that reads back exactly."""
    out = {}
    for name, value in attrs.items():
        if isinstance(value, bool):
            out[name] = "1" if value else "0"
        elif isinstance(value, int):
            out[name] = str(value)
        elif isinstance(value, float):
            out[name] = float_literal(value)
        elif isinstance(value, str) and re.fullmatch(r"[A-Za-z_]\w*", value):
            out[name] = value  # a choice that is a C identifier (bit_shift's LEFT, RIGHT)
    return out
