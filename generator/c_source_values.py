"""The values of the op placeholders of a macro argument (:mod:`byoc.spec.macro_args`)
for one node, as C text: its inputs' extents and its attributes as the kernel uses
them (:func:`byoc.attr_values.resolve`).

Numbers are C literals: an int as it is, a float as an exact C double literal
(Python's ``repr``, which always has a ``.`` or an exponent and reads back as the same
double; the catalog's attributes are finite), a bool as ``1`` or ``0``. A list (a
shape, an ints attribute) is one parenthesised argument, ``(1, 1)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from byoc.attr_values import resolve
from byoc.catalog import OpDef
from byoc.errors import GraphError
from byoc.ir import C_TYPES, AttrValue, Node, TensorType
from byoc.spec.backend import MacroDef
from byoc.spec.macro_args import input_ref
from byoc.spec.template import placeholder_names


def c_value(value: AttrValue) -> str:
    """One attribute value as C text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return c_list(value)
    return str(value)


def c_list(items: Sequence[int]) -> str:
    """``(a, b, c)``: a list as one macro argument."""
    return "(" + ", ".join(map(str, items)) + ")"


def op_values(node: Node, op: OpDef, inputs: Sequence[TensorType]) -> dict[str, str]:
    """``${in<k>_...}`` of every input and ``${<attr>}``, ``${<attr><j>}`` of every attribute."""
    values = input_values(inputs)
    for name, value in resolve(op, inputs, node.attrs).items():
        values[name] = c_value(value)
        if isinstance(value, tuple):
            values.update((f"{name}{j}", str(v)) for j, v in enumerate(value))
    return values


def input_values(inputs: Sequence[TensorType]) -> dict[str, str]:
    """``${in<k>_dim<j>}``, ``${in<k>_rank}``, ... of every input."""
    values: dict[str, str] = {}
    for k, t in enumerate(inputs):
        values.update((f"in{k}_dim{j}", str(d)) for j, d in enumerate(t.shape))
        values.update(
            {
                f"in{k}_rank": str(t.rank),
                f"in{k}_size": str(t.size),
                f"in{k}_shape": c_list(t.shape),
                f"in{k}_ctype": C_TYPES[t.dtype],
                f"in{k}_dtype": t.dtype,
            }
        )
    return values


def check_input_axes(node: Node, macro: MacroDef, inputs: Sequence[TensorType], backend: str) -> None:
    """Every ``${in<k>_dim<j>}`` of ``macro``'s arguments names an axis of input k."""
    for param, arg in macro.params.items():
        for name in placeholder_names(arg):
            ref = input_ref(name)
            if ref is None or ref.axis is None or ref.axis < inputs[ref.index].rank:
                continue
            raise GraphError(
                f"macro {macro.name} of backend {backend} reads ${{{name}}} (argument {param}), "
                f"but input {ref.index} of {node.op} is {inputs[ref.index]}",
                node.loc,
                hint=f"run {node.op} on the host, or map its rank to a macro for these input ranks",
            )
