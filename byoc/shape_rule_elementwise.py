"""The inferences of elementwise shape rules: inputs broadcast by numpy's rule, casts and
selects."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ir import DTYPES, TensorType, is_float
from .shape_checks import broadcast
from .shape_rule_dtypes import same_dtype
from .shape_rule_model import Kwargs, RuleError


def _shape_text(shape: tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, shape))}]"


def broadcast_types(types: Sequence[TensorType]) -> tuple[int, ...]:
    """The inputs' shapes broadcast by numpy's rule (:func:`byoc.shape_checks.broadcast`,
    the one implementation); raises RuleError when they do not broadcast."""
    shapes = [t.shape for t in types]
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    try:
        return broadcast(*shapes)
    except ValueError:
        raise RuleError(
            f"shapes {' and '.join(_shape_text(s) for s in shapes)} do not broadcast",
            hint="each axis must have equal sizes, or size 1 (numpy broadcasting)",
        ) from None


def elementwise(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    dtype = same_dtype(types)
    return TensorType(broadcast_types(types), dtype)


def compare(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    same_dtype(types)
    return TensorType(broadcast_types(types), "bool")


def predicate(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    if not is_float(types[0].dtype):
        raise RuleError(f"the input is {types[0].dtype}, not a float type", hint="the op tests float values")
    return TensorType(types[0].shape, "bool")


def select(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    condition = types[0].dtype
    if condition != "bool":
        raise RuleError(
            f"the condition (the first input) is {condition}; where's condition must be bool",
            hint='cast it, `cast(c, to="bool")` (non-zero is true), or compare it, `not_equal(c, z)`',
        )
    dtype = same_dtype(types[1:])
    return TensorType(broadcast_types(types), dtype)


def cast(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    to = kwargs["to"]
    if to not in DTYPES:  # the op's `choices:` normally catches it first
        raise RuleError(f"cannot cast to {to!r}", hint=f"byoc's dtypes: {', '.join(DTYPES)}", key="to")
    return TensorType(types[0].shape, str(to))


def bitcast(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    out = cast(types, kwargs)
    source, target = types[0].dtype, out.dtype
    if target == "bool" and source != "bool":  # a byte of 2 is no bool (C's bool holds 0 or 1)
        raise RuleError(
            f"cannot reinterpret {source} as bool", hint='`cast(x, to="bool")` tests x != 0', key="to"
        )
    width, other = np.dtype(source).itemsize, np.dtype(target).itemsize
    if other != width:
        same = [d for d in DTYPES if np.dtype(d).itemsize == width and d not in (source, "bool")]
        raise RuleError(
            f"cannot reinterpret {source} ({8 * width} bits) as {target} ({8 * other} bits)",
            hint=f"bitcast keeps the width: {source} to {' or '.join(same)}; `cast` converts values",
            key="to",
        )
    return out


def unidirectional(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    dtype = same_dtype(types)
    first = types[0].shape
    if broadcast_types(types) != first:
        raise RuleError(
            f"shapes {' and '.join(_shape_text(t.shape) for t in types)}: the others do not broadcast "
            f"to the first input's {_shape_text(first)}",
            hint="the output has the first input's shape; every other input broadcasts to it",
        )
    return TensorType(first, dtype)
