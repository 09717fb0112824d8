"""Shape rules made from a shape function (the shape_* modules of the reference kernels),
and the check of a fill value against the output's dtype."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import MappingProxyType

import numpy as np

from .ir import TensorType, is_integer
from .shape_rule_dtypes import same_dtype
from .shape_rule_model import OUTPUT_COUNT, Kwargs, RuleError, ShapeRule


def fill_checked(rule: ShapeRule, key: str) -> ShapeRule:
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


ATTRIBUTE_TYPES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "Flag": "bool",
    "Sequence[int]": "ints",
    "Sequence[int] | None": "ints",
}
"""A shape function's annotation of an attribute parameter -> the attribute's type in
``ops.yaml`` (:class:`~byoc.shape_checks.Flag` is a bool passed as 0 or 1)."""


def function_attrs(function: Callable[..., object], several: bool | int = False) -> dict[str, str]:
    """The attributes a shape function reads, from its signature: every parameter but the
    input shapes (positional, named ``<input>_shape``, or ``*shapes``) and
    :data:`OUTPUT_COUNT`, typed by its annotation (:data:`ATTRIBUTE_TYPES`). The op that
    names the rule declares them in ``ops.yaml``; nothing else lists them."""
    attrs: dict[str, str] = {}
    for p in inspect.signature(function).parameters.values():
        is_input = p.kind is inspect.Parameter.VAR_POSITIONAL or (
            p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.name.endswith("_shape")
        )
        if is_input or (several and p.name == OUTPUT_COUNT):
            continue
        annotation = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        if annotation not in ATTRIBUTE_TYPES:
            raise TypeError(f"shape function {function.__name__}: parameter {p.name} has no attribute type")
        attrs[p.name] = ATTRIBUTE_TYPES[annotation]
    return attrs


def wrap(
    name: str,
    function: Callable[..., tuple[int, ...]],
    doc: str,
    dtype: Callable[[Sequence[TensorType]], str | tuple[str, ...]] = same_dtype,
    several: bool | int = False,
) -> ShapeRule:
    """A rule computing the shape by ``function`` (a shape function, as of
    :mod:`byoc.shape_conv_pool`), called with the input shapes and the attributes
    ``attrs`` as keyword arguments, and the dtype by ``dtype``. With ``several``, the function also takes :data:`OUTPUT_COUNT`
    and returns one shape per output, and the rule gives one output or more (an int:
    exactly that many, and ``dtype`` may give one dtype per output). The attributes it
    reads come from ``function``'s signature (:func:`function_attrs`)."""
    attrs = function_attrs(function, several)
    read = (*attrs, OUTPUT_COUNT) if several else tuple(attrs)

    def infer(types: Sequence[TensorType], kwargs: Kwargs) -> TensorType | tuple[TensorType, ...]:
        out_dtype = dtype(types)
        try:
            shape = function(*(t.shape for t in types), **{a: kwargs[a] for a in read})
        except ValueError as exc:
            key = getattr(exc, "attr", None)
            # A shape function names itself first (``max_pool: ``), which may not be the
            # op's name (avg_pool's rule is max_pool's): the op's error names the op.
            raise RuleError(
                str(exc).removeprefix(f"{function.__name__}: "),
                hint=getattr(exc, "hint", None),
                key=key if key in attrs else None,
            ) from None
        if several:
            dtypes = out_dtype if isinstance(out_dtype, tuple) else (out_dtype,) * len(shape)
            return tuple(TensorType(tuple(s), d) for s, d in zip(shape, dtypes, strict=True))
        return TensorType(tuple(shape), str(out_dtype))

    positional = [p for p in inspect.signature(function).parameters.values() if p.name not in read]
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
