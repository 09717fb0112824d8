"""The shape rules of the op catalog: a small named vocabulary, implemented once.

An op of ``spec/ops.yaml`` names its rule (``shape: conv``); the rule computes the op's
output type from its input types and attributes. Most rules wrap a function of
:mod:`byoc.shape_functions` (the shape half of the reference kernels), so an op's
inferred shape is exactly the shape its kernel computes. A rule reads the attributes
it lists in :attr:`ShapeRule.attrs`, each of a fixed value type; an op of the rule must
declare them (the catalog loader checks), with any defaults it likes.

A rule's failure is a :class:`RuleError`; when one attribute is at fault (a
:class:`~byoc.shape_functions.AttributeProblem`) its ``key`` names the attribute, so the
graph DSL puts the caret on that attribute rather than on the op.

This is the one Python module that knows rule names; no op name appears in Python.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from . import shape_functions as sf
from .ir import DTYPES, TensorType, is_float, is_integer

INDEX_DTYPES = ("int32", "int64")
"""The dtypes of an index input (``gather``'s indices)."""


class RuleError(Exception):
    """A shape rule, attribute or reference check failed; the caller adds a location."""

    def __init__(
        self, message: str, hint: str | None = None, column: int = 0, key: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.column = column
        self.key = key
        """The attribute the error is about, when there is one."""


Kwargs = Mapping[str, object]
"""Attribute values as rules and kernels receive them (see :meth:`byoc.catalog.OpDef.kwargs`)."""
Infer = Callable[[Sequence[TensorType], Kwargs], TensorType | tuple[TensorType, ...]]
"""A rule's inference: one type, or for a rule of several outputs a tuple of them."""

OUTPUT_COUNT = "num_outputs"
"""The keyword that tells a rule of several outputs, and its reference kernel, how many
outputs the node has (a node's output count comes from the names the text binds)."""


def count_text(low: int, high: int | None) -> str:
    """A count range in words: ``2``, ``2 or more``, ``1 to 3``."""
    if high is None:
        return f"{low} or more"
    return str(low) if low == high else f"{low} to {high}"


def count_within(low: int, high: int | None, outer_low: int, outer_high: int | None) -> bool:
    """Whether the count range ``low``..``high`` lies inside ``outer_low``..``outer_high``
    (``None``: no upper bound)."""
    if low < outer_low:
        return False
    return outer_high is None or (high is not None and high <= outer_high)


@dataclass(frozen=True, slots=True)
class ShapeRule:
    """How an op's output type follows from its inputs."""

    name: str
    infer: Infer
    elementwise: bool
    """True when each output element comes from the input elements at its index, the
    inputs broadcast to the output's shape (numpy's rule): an input of another shape
    than the output is broadcast, and one C expression per element computes the op."""
    attrs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """The attributes the rule reads: name -> value type name (``ints``, ``int``, ...)."""
    doc: str = ""
    min_inputs: int = 1
    max_inputs: int | None = None
    """The inputs the rule takes; ``None`` means any number."""
    parameters: tuple[int, ...] = ()
    """Inputs that are the op's parameters, not its data: one value or one per entry of
    an axis, shaped to broadcast (quantize_linear's scale and zero point). They keep
    their own shape on every backend, whatever its ``broadcast:`` says."""
    check_constant: Callable[[int, np.ndarray], RuleError | None] | None = None
    """A check of an input's values where that input is a constant: (the input's
    index, its values, flat) -> what is wrong with them, or None. The graph builder
    runs it on every such node and reports the problem at the node (quantize_linear's
    scale: a zero would divide by zero)."""
    step: Callable[[Sequence[np.ndarray | None], Sequence[float]], float] | None = None
    """How far the op's result may lie from the numpy reference, in its own units,
    given its constant inputs (None where an input is not a constant) and how far each
    input may lie (:mod:`byoc.output_steps`); None: as far as its inputs' dtype
    tolerances allow, no step."""
    min_outputs: int = 1
    max_outputs: int | None = 1
    """The outputs the rule gives. A rule of several outputs (``max_outputs`` not 1) is
    told their number as the keyword :data:`OUTPUT_COUNT` and infers a tuple of types."""

    def takes(self, min_inputs: int, max_inputs: int | None) -> bool:
        """Whether an op of ``min_inputs`` to ``max_inputs`` inputs fits the rule."""
        return count_within(min_inputs, max_inputs, self.min_inputs, self.max_inputs)

    def gives(self, min_outputs: int, max_outputs: int | None) -> bool:
        """Whether an op of ``min_outputs`` to ``max_outputs`` outputs fits the rule."""
        return count_within(min_outputs, max_outputs, self.min_outputs, self.max_outputs)

    def arity_text(self) -> str:
        return count_text(self.min_inputs, self.max_inputs)

    def infer_outputs(
        self, types: Sequence[TensorType], kwargs: Kwargs, count: int
    ) -> tuple[TensorType, ...]:
        """The types of a node's ``count`` outputs."""
        if self.max_outputs == 1:
            return (self.infer(types, kwargs),)  # type: ignore[return-value]
        return self.infer(types, {**kwargs, OUTPUT_COUNT: count})  # type: ignore[return-value]


# --------------------------------------------------------------------------- dtypes


def _shape_text(shape: tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, shape))}]"


def same_dtype(types: Sequence[TensorType]) -> str:
    """The one dtype of all inputs; raises RuleError when they differ."""
    dtype = types[0].dtype
    for t in types[1:]:
        if t.dtype != dtype:
            raise RuleError(
                f"dtype mismatch: {' and '.join(sorted({x.dtype for x in types}))}",
                hint="all inputs of this op must have the same dtype",
            )
    return dtype


def _data_with_indices(types: Sequence[TensorType]) -> str:
    """The first input's dtype; the second input holds indices."""
    _index_dtype(types[1].dtype)
    return types[0].dtype


def _index_dtype(dtype: str, what: str = "indices") -> None:
    if dtype not in INDEX_DTYPES:
        raise RuleError(
            f"the {what} are {dtype}, not an integer type",
            hint=f"{what} must be {' or '.join(INDEX_DTYPES)}",
        )


def _scattered(types: Sequence[TensorType]) -> str:
    """The data's dtype (input 0); input 1 holds indices, input 2 updates of the data's dtype."""
    _index_dtype(types[1].dtype)
    if types[2].dtype != types[0].dtype:
        raise RuleError(
            f"the updates are {types[2].dtype}, the data {types[0].dtype}",
            hint="the updates (the third input) must have the data's dtype",
        )
    return types[0].dtype


def _int64(types: Sequence[TensorType]) -> str:
    """An index result: int64, whatever the input."""
    return "int64"


def _values_and_indices(types: Sequence[TensorType]) -> tuple[str, str]:
    """The input's dtype for the values, int64 for their indices."""
    return types[0].dtype, "int64"


def _numeric_indices(types: Sequence[TensorType]) -> str:
    """The second input's dtype (one_hot's values); the first holds indices of any
    numeric dtype (a float is truncated)."""
    if types[0].dtype == "bool":
        raise RuleError("the indices are bool, not a number", hint="give integer (or float) indices")
    return types[1].dtype


# --------------------------------------------------------------------------- shapes


def broadcast_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy's broadcasting rule (:func:`byoc.shape_functions.broadcast`, the one
    implementation); raises RuleError when the shapes do not broadcast."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    try:
        return sf.broadcast(*shapes)
    except ValueError:
        raise RuleError(
            f"shapes {' and '.join(_shape_text(s) for s in shapes)} do not broadcast",
            hint="each axis must have equal sizes, or size 1 (numpy broadcasting)",
        ) from None


def _elementwise(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    dtype = same_dtype(types)
    return TensorType(broadcast_shapes([t.shape for t in types]), dtype)


def _compare(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    same_dtype(types)
    return TensorType(broadcast_shapes([t.shape for t in types]), "bool")


def _predicate(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    if not is_float(types[0].dtype):
        raise RuleError(f"the input is {types[0].dtype}, not a float type", hint="the op tests float values")
    return TensorType(types[0].shape, "bool")


def _select(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    condition = types[0].dtype
    if condition != "bool":
        raise RuleError(
            f"the condition (the first input) is {condition}; where's condition must be bool",
            hint='cast it, `cast(c, to="bool")` (non-zero is true), or compare it, `not_equal(c, z)`',
        )
    dtype = same_dtype(types[1:])
    return TensorType(broadcast_shapes([t.shape for t in types]), dtype)


def _cast(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    to = kwargs["to"]
    if to not in DTYPES:  # the op's `choices:` normally catches it first
        raise RuleError(f"cannot cast to {to!r}", hint=f"byoc's dtypes: {', '.join(DTYPES)}", key="to")
    return TensorType(types[0].shape, str(to))


def _bitcast(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    out = _cast(types, kwargs)
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


QUANTIZED = ("int8", "uint8", "int16", "uint16")
"""The integer types ``quantize_linear`` gives (its zero point's)."""


def _dequantize(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
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
    return TensorType(broadcast_shapes([t.shape for t in types]), scale.dtype)


def _quantize(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
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
    return TensorType(broadcast_shapes([t.shape for t in types]), zero.dtype)


def _nonzero_scale(index: int, values: np.ndarray) -> RuleError | None:
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


def _one_step(constants: Sequence[np.ndarray | None], steps: Sequence[float]) -> float:
    """quantize_linear's result may be one step off: see :mod:`byoc.output_steps`."""
    return 1.0


def _scaled_step(constants: Sequence[np.ndarray | None], steps: Sequence[float]) -> float:
    """dequantize_linear carries a step of x as one scale (the largest, where it is a
    constant; a scale computed at run time gives no bound, so no step)."""
    scale = constants[1]
    if not steps[0] or scale is None or not scale.size:
        return 0.0
    return steps[0] * float(np.max(np.abs(scale.astype(np.float64))))


def _unidirectional(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType:
    dtype = same_dtype(types)
    first = types[0].shape
    if broadcast_shapes([t.shape for t in types]) != first:
        raise RuleError(
            f"shapes {' and '.join(_shape_text(t.shape) for t in types)}: the others do not broadcast "
            f"to the first input's {_shape_text(first)}",
            hint="the output has the first input's shape; every other input broadcasts to it",
        )
    return TensorType(first, dtype)


def _fill_checked(rule: ShapeRule, key: str) -> ShapeRule:
    """``rule``, also checking that its float attribute ``key`` (a fill value) is
    representable in the output's dtype: an integer in range for an integer tensor.
    C converts an out-of-range float to an integer type with undefined behaviour, and
    numpy wraps or rounds; neither is a result to offer."""
    inner = rule.infer

    def infer(types: Sequence[TensorType], kwargs: Kwargs):
        out = inner(types, kwargs)
        dtype = out[0].dtype if isinstance(out, tuple) else out.dtype
        value = kwargs[key]
        if dtype == "bool" and value not in (0, 1):
            raise RuleError(
                f"{key} {value!r} cannot fill a bool tensor", hint="give 0 (false) or 1 (true)", key=key
            )
        if is_integer(dtype):
            info = np.iinfo(dtype)
            low, high = int(info.min), int(info.max)
            fits = isinstance(value, (int, float)) and math.isfinite(value) and value == int(value)
            if not fits or not low <= int(value) <= high:
                raise RuleError(
                    f"{key} {value!r} cannot fill a {dtype} tensor",
                    hint=f"give a whole number in [{low}, {high}] for {dtype} data",
                    key=key,
                )
        return out

    return replace(rule, infer=infer)


_OP_PREFIX = re.compile(r"[a-z_]+: ")


def _wrap(
    name: str,
    function: Callable[..., tuple[int, ...]],
    attrs: Mapping[str, str],
    doc: str,
    dtype: Callable[[Sequence[TensorType]], str | tuple[str, ...]] = same_dtype,
    several: bool | int = False,
) -> ShapeRule:
    """A rule computing the shape by ``function`` (of :mod:`byoc.shape_functions`), called
    with the input shapes and the attributes ``attrs`` as keyword arguments, and the
    dtype by ``dtype``. With ``several``, the function also takes :data:`OUTPUT_COUNT`
    and returns one shape per output, and the rule gives one output or more (an int:
    exactly that many, and ``dtype`` may give one dtype per output)."""
    read = (*attrs, OUTPUT_COUNT) if several else tuple(attrs)

    def infer(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType | tuple[TensorType, ...]:
        out_dtype = dtype(types)
        try:
            shape = function(*(t.shape for t in types), **{a: kwargs[a] for a in read})
        except ValueError as exc:
            key = getattr(exc, "attr", None)
            # The function's own name (``max_pool: ``) may not be the op's: drop it.
            raise RuleError(
                _OP_PREFIX.sub("", str(exc), count=1),
                hint=getattr(exc, "hint", None),
                key=key if key in attrs else None,
            ) from None
        if several:
            dtypes = out_dtype if isinstance(out_dtype, tuple) else (out_dtype,) * len(shape)
            return tuple(TensorType(tuple(s), d) for s, d in zip(shape, dtypes, strict=True))
        return TensorType(tuple(shape), str(out_dtype))

    positional = [
        p
        for p in inspect.signature(function).parameters.values()
        if p.name not in read and p.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in positional)
    count = len(positional) - variadic
    return ShapeRule(
        name,
        infer,
        False,
        MappingProxyType(dict(attrs)),
        doc,
        max(count, 1),
        None if variadic else count,
        min_outputs=several if several is not True and several else 1,
        max_outputs=(None if several is True else several) if several else 1,
    )


_SPATIAL = {"strides": "ints", "pads": "ints", "dilations": "ints"}

SHAPE_RULES: Mapping[str, ShapeRule] = MappingProxyType(
    {
        rule.name: rule
        for rule in (
            ShapeRule(
                "elementwise", _elementwise, True, doc="numpy broadcasting of the inputs, all of one dtype"
            ),
            ShapeRule(
                "compare",
                _compare,
                True,
                doc="numpy broadcasting of the inputs, all of one dtype; the output is bool",
            ),
            ShapeRule(
                "predicate",
                _predicate,
                True,
                doc="the input's shape; a float input, a bool output",
                max_inputs=1,
            ),
            ShapeRule(
                "select",
                _select,
                True,
                doc="a bool condition and two values of one dtype, all three broadcast (numpy's rule)",
                min_inputs=3,
                max_inputs=3,
            ),
            ShapeRule(
                "cast",
                _cast,
                True,
                MappingProxyType({"to": "str"}),
                doc="the input's shape, of the dtype named by the attribute to",
                max_inputs=1,
            ),
            ShapeRule(
                "bitcast",
                _bitcast,
                True,
                MappingProxyType({"to": "str"}),
                doc="the input's shape, of the dtype named by the attribute to, which has the input's width",
                max_inputs=1,
            ),
            ShapeRule(
                "dequantize",
                _dequantize,
                True,
                doc="x (an 8-, 16- or 32-bit integer), a float scale and a zero point of x's type, all "
                "three broadcast; the scale's dtype",
                min_inputs=3,
                max_inputs=3,
                parameters=(1, 2),
                step=_scaled_step,
            ),
            ShapeRule(
                "quantize",
                _quantize,
                True,
                doc="x and a scale (float32) and an 8- or 16-bit integer zero point, all three broadcast; "
                "the zero point's dtype",
                min_inputs=3,
                max_inputs=3,
                parameters=(1, 2),
                check_constant=_nonzero_scale,
                step=_one_step,
            ),
            ShapeRule(
                "mod",
                _elementwise,
                True,
                MappingProxyType({"fmod": "bool"}),
                doc="numpy broadcasting of inputs of one dtype; fmod picks C's fmod over the divisor's sign",
            ),
            ShapeRule(
                "unidirectional",
                _unidirectional,
                True,
                doc="the first input's shape; the other inputs broadcast to it (numpy's rule)",
            ),
            _wrap(
                "concatenate",
                sf.concatenate,
                {"axis": "int"},
                "inputs of one rank >= 1, equal but along axis, where sizes add up",
            ),
            _wrap(
                "conv",
                sf.conv,
                {**_SPATIAL, "groups": "int"},
                "x (N, C, D...), w (M, C/groups, k...) -> (N, M, O...); 1-D to N-D by x's rank",
            ),
            _wrap(
                "conv_transpose",
                sf.conv_transpose,
                {**_SPATIAL, "output_padding": "ints", "groups": "int"},
                "x (N, C, D...), w (C, M/groups, k...) -> (N, M, O...)",
            ),
            _wrap(
                "pool",
                sf.max_pool,
                {"kernel_shape": "ints", **_SPATIAL, "ceil_mode": "bool"},
                "x (N, C, D...) -> (N, C, O...) over windows of kernel_shape",
            ),
            _wrap("global_pool", sf.global_pool, {}, "x (N, C, D...) -> (N, C, 1...)"),
            _wrap("dense", sf.dense, {}, "x (..., in), w (units, in) -> (..., units)"),
            _wrap("matmul", sf.matmul, {}, "numpy.matmul's shapes (batch axes broadcast)"),
            _wrap("bias_add", sf.bias_add, {"axis": "int"}, "x, and a bias of shape (x[axis],) -> x's shape"),
            _wrap(
                "batch_norm",
                sf.batch_norm,
                {"epsilon": "float"},
                "x (N, C, ...) and four parameters of shape (C,) -> x's shape",
            ),
            _wrap("lrn", sf.lrn, {"size": "int"}, "x (N, C, ...) -> x's shape; a window of size channels"),
            _wrap("softmax", sf.softmax, {"axis": "int"}, "x's shape; axis in range"),
            _wrap(
                "reduce",
                sf.reduce,
                {"axes": "ints", "keepdims": "bool"},
                "x without axes (every axis when empty), or with them as 1 when keepdims",
            ),
            _wrap(
                "reshape",
                sf.reshape,
                {"newshape": "ints", "allowzero": "bool"},
                "newshape; one -1 is inferred, 0 copies the input's size unless allowzero",
            ),
            _wrap("flatten", sf.flatten, {"axis": "int"}, "(prod(x[:axis]), prod(x[axis:]))"),
            _wrap("transpose", sf.transpose, {"perm": "ints"}, "x's axes permuted by perm (empty: reversed)"),
            _wrap("squeeze", sf.squeeze, {"axes": "ints"}, "x without axes of size 1 (empty: all of them)"),
            _wrap("unsqueeze", sf.unsqueeze, {"axes": "ints"}, "x with size-1 axes inserted at axes"),
            _wrap("expand", sf.expand, {"newshape": "ints"}, "x and newshape broadcast both ways"),
            _fill_checked(
                _wrap(
                    "pad",
                    sf.pad,
                    {"pads": "ints", "mode": "str", "value": "float"},
                    "x grown by pads (begins, then ends); value must fit the dtype",
                ),
                "value",
            ),
            _wrap(
                "slice",
                sf.slice,
                {"starts": "ints", "ends": "ints", "axes": "ints", "steps": "ints"},
                "ONNX Slice's shape: clamped starts and ends along axes, with steps",
            ),
            _wrap(
                "split",
                sf.split,
                {"axis": "int", "sizes": "ints"},
                "one part per output along axis: of sizes, or equal parts (the last smaller)",
                several=True,
            ),
            _wrap(
                "gather",
                sf.gather,
                {"axis": "int"},
                "x[:axis] + indices + x[axis+1:]; x's dtype, integer indices",
                dtype=_data_with_indices,
            ),
            _wrap(
                "arg_reduce",
                sf.arg_reduce,
                {"axis": "int", "keepdims": "bool", "select_last_index": "bool"},
                "x without axis (as 1 when keepdims); int64 indices; axis not empty",
                dtype=_int64,
            ),
            _wrap(
                "gather_elements",
                sf.gather_elements,
                {"axis": "int"},
                "the indices' shape (of x's rank); x's dtype, integer indices",
                dtype=_data_with_indices,
            ),
            _wrap(
                "scatter_elements",
                sf.scatter_elements,
                {"axis": "int", "reduction": "str"},
                "x's shape; indices and updates of one shape and x's rank, updates of x's dtype",
                dtype=_scattered,
            ),
            _wrap(
                "gather_nd",
                sf.gather_nd,
                {"batch_dims": "int"},
                "indices[:-1] + x[batch_dims + indices[-1]:]; x's dtype, integer indices",
                dtype=_data_with_indices,
            ),
            _wrap(
                "scatter_nd",
                sf.scatter_nd,
                {"reduction": "str"},
                "x's shape; updates of shape indices[:-1] + x[indices[-1]:] and x's dtype",
                dtype=_scattered,
            ),
            _wrap(
                "cumulative",
                sf.cumulative,
                {"axis": "int", "exclusive": "bool", "reverse": "bool"},
                "x's shape (rank >= 1); axis in range",
            ),
            _wrap(
                "top_k",
                sf.top_k,
                {"k": "int", "axis": "int", "largest": "bool", "sorted": "bool"},
                "two outputs, x with axis cut to k: values of x's dtype, int64 indices",
                dtype=_values_and_indices,
                several=2,
            ),
            _wrap(
                "one_hot",
                sf.one_hot,
                {"depth": "int", "axis": "int"},
                "the indices' shape with depth inserted at axis; the values' ([off, on]) dtype",
                dtype=_numeric_indices,
            ),
        )
    }
)
"""Every shape rule that ops.yaml may name, by name."""
