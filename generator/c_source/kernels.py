"""The kernels of a ``c_source`` function (:mod:`byoc.generator.c_source.function`).

A kernel is one use of the macro the backend spec maps an op to (or a composite's
pattern's macro), rendered once per distinct op, types, attributes and layouts with
:data:`SYMBOL` standing in for its name; nodes whose uses are the same text share it.
This module finds each node's macro (raising a located GraphError when the spec cannot
serve the node), fills in the macro's placeholders, and writes a kernel's definition
after a comment naming the nodes it serves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from byoc.catalog import Catalog
from byoc.errors import GraphError
from byoc.ir import C_TYPES, Function, Node, TensorType
from byoc.spec.backend import BackendSpec, MacroDef
from byoc.spec.bindings import MacroBinding

from ..c.text import block_comment, c_list, comment, value_label
from ..composite import GraphView, Match, composite_match, composite_values
from .layouts import kernel_macro
from .values import check_input_axes, op_values, shape_refusal

SYMBOL = "\0symbol\0"
"""Stands for ``${symbol}`` in a rendered macro use until the kernel's name replaces it:
a use is rendered once per op and type, not once per node. Rendering every node's use
afresh halves the throughput (lower + generate, 10k and 100k nodes, paired runs)."""

SHOWN_NODES = 4
"""How many of the nodes a shared kernel serves its comment names (then a count)."""


@dataclass(slots=True)
class Kernel:
    """One kernel function: its name, its macro use, its output type, the nodes it serves."""

    name: str
    use: str
    type_text: str
    nodes: list[int]
    status: bool
    """Whether the kernel returns an ``int`` status (its macro's ``status: true``)."""


def kernel_text(kernel: Kernel, what: Callable[[int], str]) -> str:
    """The kernel's definition, after a comment naming the nodes it serves (``what`` says
    where node ``k`` came from); a kernel of many nodes names the first few and counts the rest."""
    if len(kernel.nodes) == 1:
        note = comment(f"{kernel.name}: {what(kernel.nodes[0])}, {kernel.type_text}")
    else:
        lines = [f"{kernel.name}: {kernel.type_text}, for {len(kernel.nodes)} nodes:"]
        lines += [f"  {what(k)}" for k in kernel.nodes[:SHOWN_NODES]]
        if len(kernel.nodes) > SHOWN_NODES:
            lines.append(f"  ... and {len(kernel.nodes) - SHOWN_NODES} more")
        note = block_comment(lines)
    return f"{note}\n{kernel.use.replace(SYMBOL, kernel.name)}\n"


def failure_message(sym: str, kernel: Kernel, what: Callable[[int], str]) -> str:
    """The RuntimeError message of a call whose kernel reported a failure: the kernel and
    the first node it serves (``what`` says where node ``k`` came from)."""
    more = len(kernel.nodes) - 1
    serves = what(kernel.nodes[0]) + (f" and {more} more node(s)" if more else "")
    return f"{sym}: kernel {kernel.name} reported a failure; it computes {serves}"


def node_macro(
    node: Node, spec: BackendSpec, catalog: Catalog, input_types: Sequence[TensorType]
) -> MacroDef:
    """The spec macro for ``node``; raises GraphError when it cannot serve the node.

    The inputs of an elementwise op must have its output's shape, unless the macro
    declares ``broadcast: true``, and be shaped as the macro reads them
    (:func:`~byoc.generator.c_source.values.shape_refusal`); a macro of another rule
    reads each input's extents itself."""
    t = node.type
    macro = kernel_macro(spec, node, None)
    if macro is None:
        raise GraphError(
            f"backend {spec.name} has no macro for {node.op} at rank {t.rank}",
            node.loc,
            hint=f"move {node.op} out of the @{spec.name} region, or map it in the backend spec",
        )
    name = macro.name
    if macro.inputs is not None and macro.inputs != len(node.inputs):
        raise GraphError(
            f"macro {name} of backend {spec.name} takes {macro.inputs} input(s), but {node.op} has {len(node.inputs)}",
            node.loc,
        )
    check_input_axes(node, macro, input_types, spec.name)
    opdef = catalog[node.op]
    for name_in, given in zip(node.inputs, input_types):
        # (a comparison's, where's condition and a cast's dtypes differ: shapes only)
        if opdef.rule.elementwise and given.shape != t.shape and not macro.broadcast:
            raise GraphError(
                f"{node.op} on backend {spec.name} needs every input to have the shape of its result {t},"
                f" but {value_label(name_in)} is {given}",
                node.loc,
                hint=f"macro {name} does not broadcast: make the shapes equal before the region, run the op "
                "on the host, or map it to a macro that declares `broadcast: true` (and reads ${in<k>_strides})",
            )
    why = shape_refusal(macro, node, opdef, input_types, range(len(input_types)))
    if why is not None:  # a broadcast the macro takes, but inputs it reads otherwise
        raise GraphError(
            f"{node.op} on backend {spec.name}: {why}",
            node.loc,
            hint=f"run {node.op} on the host, or map it to a macro that reads its inputs' shapes or strides",
        )
    return macro


def macro_values(
    common: Mapping[str, object],
    spec: BackendSpec,
    catalog: Catalog,
    node: Node,
    input_types: Sequence[TensorType],
) -> dict[str, object]:
    """Every placeholder of a macro argument for ``node``: byoc's own names win over an
    attribute of the same name (``lrn``'s ``size`` is ``${size}``, the element count)."""
    values = dict(common)
    values.update(op_values(node, catalog[node.op], input_types))
    values.update(spec.ops[node.op].vars)
    return fixed_values(values, node.type)


def fixed_values(values: dict[str, object], t: TensorType) -> dict[str, object]:
    """``values`` with byoc's own placeholders of a kernel whose output is ``t``."""
    values.update(
        symbol=SYMBOL, ctype=C_TYPES[t.dtype], dtype=t.dtype, rank=t.rank, size=t.size, shape=c_list(t.shape)
    )
    values.update((f"dim{a}", extent) for a, extent in enumerate(t.shape))
    return values


# ---------------------------------------------------------------------- composites


def composite_of(node: Node, spec: BackendSpec, region: Function, catalog: Catalog) -> Match:
    """The match of a composite of ``region`` against its pattern (lowering checked it)."""
    found = composite_match(node, spec, region, catalog)
    if isinstance(found, str):
        raise GraphError(f"composite @{spec.name}.{node.callee.composite} does not match: {found}", node.loc)
    return found


def composite_use(
    node: Node, found: Match, spec: BackendSpec, catalog: Catalog, common: Mapping[str, object]
) -> tuple[str, str, MacroDef]:
    """The use of a composite's macro: the pattern's vars, its inputs' extents and its
    nodes' attributes (``${conv.strides0}``), and byoc's names for its result."""
    binding = found.pattern.binding
    macro = kernel_macro(spec, node, found)
    assert isinstance(binding, MacroBinding) and macro is not None and node.callee is not None
    values = dict(common)
    values.update(composite_values(found, GraphView.of(node.callee), catalog))
    values.update(binding.vars)
    args = macro.arguments(fixed_values(values, node.type))
    return f"{macro.name}({', '.join(args)})", str(node.type), macro


def composite_origin(node: Node, found: Match) -> str:
    """Where a composite came from, for a comment: its pattern and ops."""
    assert node.callee is not None
    ops = ", ".join(n.op for n in node.callee.nodes)
    where = f" at {node.loc}" if node.loc is not None else ""
    return f"{node.name} = composite {found.pattern.name} of {ops}{where}"
