"""The values of the op placeholders of a macro argument (:mod:`byoc.spec.macro_args`)
for one node, as C text: its inputs' extents (and their broadcast strides) and its
attributes as the kernel uses them (:func:`byoc.attr_values.resolve`); and what a
macro reads of its inputs, which decides the inputs it can take (:func:`shape_refusal`).

Numbers are C literals: an int as it is, a float as an exact C double literal
(Python's ``repr``, which always has a ``.`` or an exponent and reads back as the same
double; the catalog's attributes are finite), a bool as ``1`` or ``0``. A list (a
shape, an ints attribute) is one parenthesised argument, ``(1, 1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from byoc.attr_values import resolve
from byoc.catalog import OpDef
from byoc.errors import GraphError
from byoc.ir import C_TYPES, Node, TensorType
from byoc.spec.backend import MacroDef
from byoc.spec.macro_args import WHOLE_SHAPE, InputRef, input_ref
from byoc.spec.template import placeholder_names

from ..c.text import c_list, c_value


def op_values(node: Node, op: OpDef, inputs: Sequence[TensorType]) -> dict[str, str]:
    """``${in<k>_...}`` of every input and ``${<attr>}``, ``${<attr><j>}`` of every
    attribute, each also as a pattern's node would name it, ``${<op>.<attr>}`` and
    ``${<op>.<attr><j>}``: one macro may serve the op and a pattern of it."""
    values = input_values(inputs, node.type)
    for name, value in resolve(op, inputs, node.attrs).items():
        for key in (name, f"{op.name}.{name}"):
            values[key] = c_value(value)
            if isinstance(value, tuple):
                values.update((f"{key}{j}", str(v)) for j, v in enumerate(value))
    return values


def input_values(inputs: Sequence[TensorType], out: TensorType) -> dict[str, str]:
    """``${in<k>_dim<j>}``, ``${in<k>_rank}``, ... of every input, and the strides of
    each one that broadcasts to ``out`` (the result's type)."""
    values: dict[str, str] = {}
    for k, t in enumerate(inputs):
        strides = broadcast_strides(t.shape, out.shape)
        if strides is not None:
            values.update((f"in{k}_stride{j}", str(s)) for j, s in enumerate(strides))
            values[f"in{k}_strides"] = c_list(strides)
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


def broadcast_strides(shape: Sequence[int], out: Sequence[int]) -> tuple[int, ...] | None:
    """``${in<k>_stride<j>}`` of an input of ``shape`` read at each index of ``out``
    (numpy's rule, the shapes aligned at their last axes): the input's row-major
    element stride along each axis of ``out``, 0 where the input lacks the axis or has
    extent 1 there; None when ``shape`` does not broadcast to ``out``."""
    lead = len(out) - len(shape)
    if lead < 0:
        return None
    strides = [0] * len(out)
    step = 1
    for j in range(len(out) - 1, lead - 1, -1):
        extent = shape[j - lead]
        if extent not in (1, out[j]):
            return None
        strides[j] = 0 if extent == 1 else step
        step *= extent
    return tuple(strides)


def check_input_axes(node: Node, macro: MacroDef, inputs: Sequence[TensorType], backend: str) -> None:
    """Every ``${in<k>_dim<j>}`` of ``macro``'s arguments names an axis of input k, and
    every ``${in<k>_stride<j>}`` an input that broadcasts to the result."""
    for param, name, ref in input_refs(macro):
        if not _readable(ref, inputs[ref.index], node.type):
            raise GraphError(
                f"macro {macro.name} of backend {backend} reads ${{{name}}} (argument {param}), "
                f"but input {ref.index} of {node.op} is {inputs[ref.index]}"
                + ("" if ref.what == "dim" else f", which does not broadcast to its result {node.type}"),
                node.loc,
                hint=f"run {node.op} on the host, or map its rank to a macro for these input ranks",
            )


def input_refs(macro: MacroDef) -> tuple[tuple[str, str, InputRef], ...]:
    """Each input placeholder of ``macro``'s arguments: (parameter, name, what it names).
    Partitioning asks this of every node, so it is worked out once per macro text."""
    return _input_refs(tuple(macro.params.items()))


@lru_cache(maxsize=1024)
def _input_refs(params: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str, InputRef], ...]:
    found = ((param, name, input_ref(name)) for param, arg in params for name in placeholder_names(arg))
    return tuple((param, name, ref) for param, name, ref in found if ref is not None)


def _readable(ref: InputRef, t: TensorType, out: TensorType) -> bool:
    """Whether ``${in<k>_...}`` has a value for input k of type ``t`` and a result ``out``."""
    if ref.what == "dim":
        return ref.axis is not None and ref.axis < t.rank
    if ref.what in ("stride", "strides"):
        return broadcast_strides(t.shape, out.shape) is not None
    return True


def macro_reads(macro: MacroDef) -> dict[int, list[InputRef]]:
    """What ``macro``'s arguments read of each kernel input, by input index."""
    reads: dict[int, list[InputRef]] = {}
    for _, _, ref in input_refs(macro):
        reads.setdefault(ref.index, []).append(ref)
    return reads


def shape_refusal(
    macro: MacroDef,
    node: Node,
    op: OpDef,
    inputs: Sequence[TensorType],
    ports: Sequence[int | None],
    aligned: bool = True,
) -> str | None:
    """Why ``macro``'s kernel cannot read the inputs of ``node`` (an op that it runs
    alone or inside a composite) as they are shaped, or None when it can. ``ports[k]``
    is the kernel input that node input k is (``in<p>``), None for a value the kernel
    computes itself (inside a composite); ``aligned`` says that the node's result is
    read at the kernel result's indices (an op's; a composite's epilogue, below).

    Only an elementwise op's data inputs (not its rule's parameters) are checked:

    - one of another shape than the result is broadcast: the macro must declare
      ``broadcast: true``, and read the input's shape or strides when it is a kernel input;
    - where ``aligned``, a kernel input of which the macro reads extents
      (``${in<p>_dim<j>}``) but not its rank, shape or strides is taken as a tensor of
      rank j + 1 for the last j read (a bias vector's ``${in2_dim0}``): an input of a
      higher rank is refused, since the kernel would index it as that lower-rank tensor
      where it reads it at the result's indices. (A composite's other nodes, such as
      the ``dequantize_linear`` of a weight, read their inputs as the kernel defines.)
    """
    if not op.rule.elementwise:
        return None
    out = node.type
    reads = macro_reads(macro)
    for k, (name, t) in enumerate(zip(node.inputs, inputs)):
        port = ports[k]
        if k in op.rule.parameters:
            continue
        refs = reads.get(port, []) if port is not None else []
        if t.shape != out.shape:
            if not macro.broadcast:
                return f"input {k} ({name}) is {t}, broadcast to {out}, and macro {macro.name} does not broadcast"
            if port is not None and not refs:
                return (
                    f"input {k} ({name}) is {t}, broadcast to {out}, and macro {macro.name} reads "
                    f"neither its shape nor its strides (${{in{port}_strides}})"
                )
        if not aligned or any(r.what in WHOLE_SHAPE for r in refs):
            continue
        read = max((r.axis for r in refs if r.what == "dim" and r.axis is not None), default=None)
        if read is not None and t.rank > read + 1:
            return (
                f"input {k} ({name}) is {t}, but macro {macro.name} reads it as a rank-{read + 1} tensor "
                f"(${{in{port}_dim{read}}} is the last extent it reads, and it reads neither its rank nor its shape)"
            )
    return None
