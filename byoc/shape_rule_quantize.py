"""The inferences and checks of the quantize and dequantize shape rules."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ir import TensorType, is_float
from .shape_rule_elementwise import broadcast_types
from .shape_rule_model import Kwargs, RuleError

QUANTIZED = ("int8", "uint8", "int16", "uint16")
"""The integer types ``quantize_linear`` gives (its zero point's)."""


def dequantize(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    x, scale, zero = types
    if x.dtype not in (*QUANTIZED, "int32"):
        raise RuleError(
            f"x (the first input) is {x.dtype}, not a quantized integer type",
            hint=f"dequantize_linear reads {', '.join(QUANTIZED)} or int32",
        )
    if zero.dtype != x.dtype:
        raise RuleError(
            f"the zero point (the third input) is {zero.dtype}, not x's {x.dtype}",
            hint="a zero point has the type of the values it offsets",
        )
    if not is_float(scale.dtype) or scale.dtype == "float64":
        raise RuleError(
            f"the scale (the second input) is {scale.dtype}",
            hint="a scale is float32, float16 or bfloat16, and the result has its type",
        )
    return TensorType(broadcast_types(types), scale.dtype)


def quantize(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    x, scale, zero = types
    if x.dtype != "float32" or scale.dtype != "float32":
        raise RuleError(
            f"x and the scale (the first two inputs) are {x.dtype} and {scale.dtype}, not float32",
            hint="quantize_linear divides in float32; cast a float16 or bfloat16 x first "
            "(the ONNX importer composes that case from other ops)",
        )
    if zero.dtype not in QUANTIZED:
        raise RuleError(
            f"the zero point (the third input) is {zero.dtype}",
            hint=f"the zero point's type is the result's: {', '.join(QUANTIZED)}",
        )
    return TensorType(broadcast_types(types), zero.dtype)


def nonzero_scale(index: int, values: np.ndarray) -> RuleError | None:
    """quantize_linear divides by its scale (input 1): a constant scale that is 0 or
    not finite makes every result the saturated end of the range."""
    if index != 1:
        return None
    bad = np.flatnonzero(~np.isfinite(values) | (values == 0))
    if not bad.size:
        return None
    at = int(bad[0])
    where = f" at element {at}" if values.size > 1 else ""
    return RuleError(
        f"the scale (the second input) is {values[at].item()!r}{where}, a divisor that must be finite and not 0",
        hint="every scale is finite and not 0; a calibration that saw only one value "
        "(a constant tensor) should give a scale of 1",
    )


def one_step(constants: Sequence[np.ndarray | None], steps: Sequence[float]) -> float:
    """quantize_linear's result may be one step off: see :mod:`byoc.output_steps`."""
    return 1.0


def scaled_step(constants: Sequence[np.ndarray | None], steps: Sequence[float]) -> float:
    """dequantize_linear carries a step of x as one scale (the largest, where it is a
    constant; a scale computed at run time gives no bound, so no step)."""
    scale = constants[1]
    if not steps[0] or scale is None or not scale.size:
        return 0.0
    return steps[0] * float(np.max(np.abs(scale.astype(np.float64))))
