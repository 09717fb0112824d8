"""The output dtypes of shape rules: one dtype for all inputs, or inputs that hold indices."""

from __future__ import annotations

from collections.abc import Sequence

from .ir import TensorType
from .shape_rule_model import RuleError

INDEX_DTYPES = ("int32", "int64")
"""The dtypes of an index input (``gather``'s indices)."""


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


def data_with_indices(types: Sequence[TensorType]) -> str:
    """The first input's dtype; the second input holds indices."""
    _index_dtype(types[1].dtype)
    return types[0].dtype


def _index_dtype(dtype: str, what: str = "indices") -> None:
    if dtype not in INDEX_DTYPES:
        raise RuleError(
            f"the {what} are {dtype}, not an integer type",
            hint=f"{what} must be {' or '.join(INDEX_DTYPES)}",
        )


def scattered(types: Sequence[TensorType]) -> str:
    """The data's dtype (input 0); input 1 holds indices, input 2 updates of the data's dtype."""
    _index_dtype(types[1].dtype)
    if types[2].dtype != types[0].dtype:
        raise RuleError(
            f"the updates are {types[2].dtype}, the data {types[0].dtype}",
            hint="the updates (the third input) must have the data's dtype",
        )
    return types[0].dtype


def int64_result(types: Sequence[TensorType]) -> str:
    """An index result: int64, whatever the input."""
    return "int64"


def values_and_indices(types: Sequence[TensorType]) -> tuple[str, str]:
    """The input's dtype for the values, int64 for their indices."""
    return types[0].dtype, "int64"


def numeric_indices(types: Sequence[TensorType]) -> str:
    """The second input's dtype (one_hot's values); the first holds indices of any
    numeric dtype (a float is truncated)."""
    if types[0].dtype == "bool":
        raise RuleError("the indices are bool, not a number", hint="give integer (or float) indices")
    return types[1].dtype
