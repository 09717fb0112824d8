"""The strategies of the elementwise shape rules: broadcast arithmetic, comparisons,
predicates, where, casts and quantization (inputs of one shape, or broadcast)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from byoc.ir import is_integer
from byoc.shape_rules import SHAPE_RULES

from .statements import Proposal

if TYPE_CHECKING:
    from byoc.catalog import OpDef

    from .draft import Draft, Strategy


def _elementwise(d: Draft, op: OpDef) -> Proposal:
    x = d.data()
    inputs = [x]
    for _ in range(op.min_inputs - 1):
        same = [v for v in d.values if v.type.shape == x.type.shape]
        choice = d.integers(0, 2)
        if choice == 0 and same:
            inputs.append(d.choice(same))
        else:
            inputs.append(d.fresh(x.type.shape if choice == 1 else d.broadcastable(x.type.shape)))
    return Proposal(d.permutation(inputs))


def _unidirectional(d: Draft, op: OpDef) -> Proposal:
    x = d.data(1)
    return Proposal([x, *(d.fresh(d.broadcastable(x.type.shape)) for _ in range(op.min_inputs - 1))])


def _one(d: Draft, op: OpDef) -> Proposal:
    """One input of any shape (a predicate's float, a cast's anything; cast's `to` is
    drawn from its choices)."""
    return Proposal([d.data()])


def _fresh_one(d: Draft, op: OpDef) -> Proposal:
    """One new parameter (a bitcast's: it shows every bit of its input, and a computed
    float may be an ulp from the reference's, which as an integer is a mismatch)."""
    return Proposal([d.fresh(d.shape(d.any_rank()))])


def _select(d: Draft, op: OpDef) -> Proposal:
    """where: a bool condition (a comparison's result in scope, or a new parameter) and
    two values, all broadcast."""
    x = d.data()
    conditions = [v for v in d.values if v.type.dtype == "bool"]
    if conditions and d.maybe():
        condition = d.choice(conditions)
    else:
        condition = d.fresh(d.broadcastable(x.type.shape), "bool")
    other = d.fresh(d.broadcastable(x.type.shape)) if d.maybe() else x
    return Proposal([condition, *d.permutation([x, other])])


def _quantize(d: Draft, op: OpDef) -> Proposal:
    """quantize_linear: x, a positive scale and an 8-bit zero point, broadcast. In a
    float graph x is of its dtype (float32 only is accepted; another is redrawn) and
    the zero point int8 or uint8; at an integer dtype, x is float32 and the zero point
    of that dtype."""
    integer = is_integer(d.dtype)
    x = d.fresh(d.shape(d.any_rank()), "float32", -4.0, 4.0) if integer else d.data()
    scale = d.fresh(d.broadcastable(x.type.shape), x.type.dtype, 0.01, 0.5)
    zero_dtype = d.dtype if integer else d.choice(["int8", "uint8"])
    zero = d.fresh(d.broadcastable(x.type.shape), zero_dtype, 0, 9)
    return Proposal([x, scale, zero])


def _dequantize(d: Draft, op: OpDef) -> Proposal:
    """dequantize_linear: an integer x (int8 in a float graph: new, or a
    quantize_linear's result in scope; at an integer dtype, of that dtype), a positive
    scale (of the float graph's dtype, else float32) and a zero point of x's type,
    broadcast."""
    if is_integer(d.dtype):
        x = d.fresh(d.shape(d.any_rank()), d.dtype, 0, 100)
        scale_dtype = "float32"
    else:
        quantized = [v for v in d.values if v.type.dtype == "int8"]
        x = (
            d.choice(quantized)
            if quantized and d.maybe()
            else d.fresh(d.shape(d.any_rank()), "int8", -100, 100)
        )
        scale_dtype = d.dtype
    scale = d.fresh(d.broadcastable(x.type.shape), scale_dtype, 0.01, 0.5)
    zero = d.fresh(d.broadcastable(x.type.shape), x.type.dtype, 0, 9)
    return Proposal([x, scale, zero])


NEW_RULES: dict[str, Strategy] = {
    "compare": _elementwise,
    "mod": _elementwise,  # a float mod without fmod=true is rejected, and redrawn
    "predicate": _one,
    "cast": _one,
    "bitcast": _fresh_one,
    "select": _select,
    "quantize": _quantize,
    "dequantize": _dequantize,
}
"""The rules of comparisons, where, cast, ... (where the catalog has them)."""

ELEMENTWISE_RULES: dict[str, Strategy] = {
    "elementwise": _elementwise,
    "unidirectional": _unidirectional,
    **{rule: strategy for rule, strategy in NEW_RULES.items() if rule in SHAPE_RULES},
}
