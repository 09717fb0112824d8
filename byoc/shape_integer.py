"""The shapes and dtypes of the integer products ``conv_integer`` and ``matmul_integer``
(ONNX's ConvInteger and MatMulInteger): the shape half of their reference kernels.

Both take 8-bit codes and their zero points, and give the exact int32 sum of the
products of the codes less their zero points. x's zero point is one value (a
per-tensor quantisation of the activations, as ONNX's ConvInteger requires); w's (b's)
is one value or one per output channel (per column of b), as a per-channel
quantisation of weights writes it. A zero point has the type of the codes it offsets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .ir import TensorType
from .shape_checks import Shape
from .shape_conv_pool import conv
from .shape_linear_norm import matmul
from .shape_rule_model import RuleError

CODES = ("int8", "uint8")
"""The types of the codes an integer product multiplies."""


def _one_value(shape: Sequence[int], op: str, which: str) -> None:
    if math.prod(shape) != 1:
        raise ValueError(f"{op}: {which} has shape {list(shape)}, not one value")


def _per_channel(shape: Sequence[int], channels: int, op: str, which: str, per: str) -> None:
    if math.prod(shape) != 1 and tuple(shape) != (channels,):
        raise ValueError(
            f"{op}: {which} has shape {list(shape)}, not one value or [{channels}] (one per {per})"
        )


def conv_integer(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    x_zero_shape: Sequence[int],
    w_zero_shape: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
) -> Shape:
    """conv's shape: x (N, C, D...), w (M, C/groups, k...) -> (N, M, O...); x's zero
    point one value, w's one value or one per output channel (M,)."""
    out = conv(x_shape, w_shape, strides=strides, pads=pads, dilations=dilations, groups=groups)
    _one_value(x_zero_shape, "conv_integer", "x's zero point (input 2)")
    _per_channel(w_zero_shape, w_shape[0], "conv_integer", "w's zero point (input 3)", "output channel")
    return out


def matmul_integer(
    a_shape: Sequence[int], b_shape: Sequence[int], a_zero_shape: Sequence[int], b_zero_shape: Sequence[int]
) -> Shape:
    """numpy.matmul's shape; a's zero point one value, b's one value or one per column
    of a b of rank 2 or more."""
    out = matmul(a_shape, b_shape)
    _one_value(a_zero_shape, "matmul_integer", "a's zero point (input 2)")
    if len(b_shape) >= 2:
        _per_channel(b_zero_shape, b_shape[-1], "matmul_integer", "b's zero point (input 3)", "column of b")
    else:
        _one_value(b_zero_shape, "matmul_integer", "b's zero point (input 3)")
    return out


def int32_product(types: Sequence[TensorType]) -> str:
    """int32, for 8-bit codes with zero points of their own types; raises RuleError."""
    for k in (0, 1):
        codes, zero = types[k], types[k + 2]
        if codes.dtype not in CODES:
            raise RuleError(
                f"input {k} is {codes.dtype}, not 8-bit codes",
                hint=f"an integer product multiplies {' or '.join(CODES)} codes",
            )
        if zero.dtype != codes.dtype:
            raise RuleError(
                f"the zero point of input {k} (input {k + 2}) is {zero.dtype}, not {codes.dtype}",
                hint="a zero point has the type of the codes it offsets",
            )
    return "int32"
