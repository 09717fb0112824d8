"""Step 1 of partitioning (:mod:`byoc.generator.partition`): whether, and why not, a
backend's spec runs a node, and the backend chosen for each node of a function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from byoc.catalog import Catalog
from byoc.errors import GraphError
from byoc.ir import CALL_OP, Function, Node, TensorType
from byoc.spec.backend import BackendSpec
from byoc.spec.bindings import MacroBinding
from byoc.spec.conditions import Facts, NodeFacts
from byoc.spec.kind_macros import MacroKind


def supports(spec: BackendSpec, node: Node, types: Mapping[str, TensorType], catalog: Catalog) -> bool:
    """Whether ``spec`` can run ``node`` (see :mod:`byoc.generator.partition`, step 1)."""
    return why_not_supported(spec, node, types, catalog) is None


def why_not_supported(
    spec: BackendSpec, node: Node, types: Mapping[str, TensorType], catalog: Catalog
) -> str | None:
    """Why ``spec`` does not run ``node``, as one clause (``it does not map conv``,
    ``when: in1.shape[2] <= 11 is false (in1.shape[2] = 13)``), or None when it does:
    the first of the checks of step 1 of :mod:`byoc.generator.partition` that fails."""
    if node.op == CALL_OP:
        return "a region or a composite is not an op"
    binding = spec.ops.get(node.op)
    if binding is None:
        return f"it does not map {node.op}"
    for k, t in enumerate(node.types):
        what = f"output {k}" if len(node.types) > 1 else "the output"
        why = _type_refusal(spec, what, t)
        if why is not None:
            return why
        if not binding.takes(t.dtype):
            return f"{what} is {t}, and its mapping of {node.op} does not take {t.dtype}"
        if not binding.supports(t.rank):
            return f"{what} is {t}, and its mapping of {node.op} has nothing for rank {t.rank}"
    why = why_not_taken(spec, node, types, catalog) or _macro_refusal(spec, node, types, catalog)
    if why is None and binding.when:
        why = binding.refusal(Facts((NodeFacts.of(node, types, catalog),)))
    return why


def _type_refusal(spec: BackendSpec, what: str, t: TensorType) -> str | None:
    """Why ``spec`` cannot hold tensor ``what`` of type ``t`` (its dtype or rank), or None."""
    if t.dtype not in spec.dtypes:
        return f"{what} is {t}, and it takes {', '.join(spec.dtypes)}"
    if t.rank not in spec.ranks:
        return f"{what} is {t}, and it takes ranks {', '.join(map(str, spec.ranks))}"
    return None


def _macro_refusal(
    spec: BackendSpec, node: Node, types: Mapping[str, TensorType], catalog: Catalog
) -> str | None:
    """Why the macro of a macro backend cannot take ``node``: it reads an axis the
    node's inputs lack (a rank-2 matmul macro reading the second input's
    ``${in1_dim1}`` cannot take a vector), or (c_source) the node's inputs are broadcast
    and the macro does not say it broadcasts, or they are shaped otherwise than it reads
    them (:func:`~byoc.generator.c_source.values.shape_refusal`); other bindings always fit."""
    if not isinstance(spec.ops.get(node.op), MacroBinding):
        return None
    from ..c_source.layouts import kernel_macro
    from ..c_source.values import check_input_axes, shape_refusal

    macro = kernel_macro(spec, node, None)
    if macro is None:
        return None  # lowering says which rank has no macro
    inputs = [types[n] for n in node.inputs]
    try:
        check_input_axes(node, macro, inputs, spec.name)
    except GraphError as exc:
        return exc.message
    if not _macros_broadcast(spec):
        return None
    return shape_refusal(macro, node, catalog[node.op], inputs, range(len(inputs)))


def _macros_broadcast(spec: BackendSpec) -> bool:
    """Whether ``spec``'s macros each say whether they broadcast (c_source), so that
    broadcasting is checked against the macro that runs a node, not the spec."""
    return isinstance(spec.kind, MacroKind) and spec.kind.macro_broadcast


def takes_types(spec: BackendSpec, node: Node, types: Mapping[str, TensorType], catalog: Catalog) -> bool:
    """Whether ``spec``'s code can take the tensors of ``node`` (see :func:`why_not_taken`)."""
    return why_not_taken(spec, node, types, catalog) is None


def why_not_taken(
    spec: BackendSpec, node: Node, types: Mapping[str, TensorType], catalog: Catalog
) -> str | None:
    """Why ``spec``'s code cannot take the tensors of ``node`` (an op node, which it
    runs alone or inside a composite): their dtypes and ranks, and broadcasting; None
    when it can. A backend whose macros each say whether they broadcast (c_source)
    leaves broadcasting to the macro that runs the node (:func:`_macro_refusal`, and
    :func:`~byoc.generator.composite.why_not_implementable` for a composite)."""
    out, opdef = node.type, catalog.get(node.op)
    if opdef is None:
        return f"{node.op} is not in the op catalog"
    for k, t in enumerate(node.types):
        why = _type_refusal(spec, f"output {k}" if len(node.types) > 1 else "the output", t)
        if why is not None:
            return why
    # an input of another shape than the output is broadcast
    broadcasts = opdef.rule.elementwise and not spec.broadcast and not _macros_broadcast(spec)
    for k, name in enumerate(node.inputs):
        t = types[name]
        why = _type_refusal(spec, f"input {k} ({name})", t)
        if why is not None:
            return why
        if t.shape != out.shape and broadcasts and k not in opdef.rule.parameters:
            return f"input {k} ({name}) is {t}, broadcast to {out}, and it does not broadcast"
    if node.attrs and not spec.kind.attrs:
        return f"{node.op} has attributes, which a {spec.kind.name} backend cannot carry"
    return None


def annotate(fn: Function, specs: Sequence[BackendSpec], catalog: Catalog) -> list[str | None]:
    """The backend chosen for each node of ``fn`` (None: the host); a composite goes to
    the backend whose pattern it is."""
    types = fn.types()
    return [
        node.callee.backend
        if node.callee is not None and node.callee.composite is not None
        else next((s.name for s in specs if supports(s, node, types, catalog)), None)
        for node in fn.nodes
    ]
