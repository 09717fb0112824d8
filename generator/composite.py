"""Composite patterns in graphs: matching them, and what a match gives a kernel.

A backend spec's patterns (:mod:`byoc.spec.patterns`) are matched here, by one matcher
for both uses:

- **partitioning** (:func:`byoc.generator.partition.composites.merge_composites`) looks
  for a pattern at each node of a graph, and collapses every match into a composite
  call node (TVM's MergeComposite);
- **lowering and generation** match a composite's own body against its pattern, to
  check a composite written by hand and to learn which value is which input of the
  kernel.

A match maps each pattern node to a graph node of the same op and arity, position by
position from the pattern's result, and each pattern input to a graph value; distinct
pattern inputs take distinct values. It also needs every value a pattern node other
than the result defines to be used by the match alone (not by another node, not as an
output: TVM's rule), except where the node is elementwise and reads pattern inputs
only (a ``dequantize_linear`` of an activation that a residual add also reads): such
a node is *shared*, computed again inside the composite, and kept for its other
users. Every condition must hold (:mod:`byoc.spec.conditions`: on the attributes as
the kernels use them, and on the shapes, ranks and dtypes of the nodes and inputs),
the ``constants`` must be constants, and the result's dtype one of the pattern's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from byoc.attr_values import resolve
from byoc.catalog import Catalog
from byoc.ir import Function, Node, TensorType
from byoc.spec.backend import BackendSpec
from byoc.spec.bindings import MacroBinding
from byoc.spec.conditions import Facts, NodeFacts
from byoc.spec.macro_args import input_ref
from byoc.spec.patterns import Pattern
from byoc.spec.template import placeholder_names

from .c.text import c_value
from .c_source.values import input_values, shape_refusal


@dataclass(frozen=True, slots=True)
class Match:
    """Where ``pattern`` matched: the graph node of each pattern node (in the pattern's
    order, the result last), and the graph value of each pattern input."""

    pattern: Pattern
    nodes: tuple[int, ...]
    inputs: tuple[str, ...]
    shared: frozenset[int] = frozenset()
    """Graph nodes of the match whose value is also used outside it: elementwise
    nodes of pattern inputs, which the composite computes again."""

    @property
    def root(self) -> int:
        return self.nodes[-1]


@dataclass(frozen=True, slots=True)
class GraphView:
    """What the matcher reads of a function: its nodes, who defines and who reads each
    value, its outputs, its types, and which values are constants."""

    nodes: Sequence[Node]
    producer: Mapping[str, int]
    consumers: Mapping[str, Sequence[int]]
    outputs: frozenset[str]
    types: Mapping[str, TensorType]
    is_constant: Callable[[str], bool]

    @classmethod
    def of(cls, fn: Function, is_constant: Callable[[str], bool] | None = None) -> GraphView:
        producer: dict[str, int] = {}
        consumers: dict[str, list[int]] = {}
        for k, node in enumerate(fn.nodes):
            producer.update((out, k) for out in node.outputs)
            for name in node.inputs:
                consumers.setdefault(name, []).append(k)
        constants = {c.name for c in fn.constants}
        return cls(
            fn.nodes,
            producer,
            consumers,
            frozenset(fn.outputs),
            fn.types(),
            is_constant or constants.__contains__,
        )


def matches_ops(pattern: Pattern, view: GraphView, root: int) -> bool:
    """Whether the ops of ``pattern`` are where it would match at node ``root`` (each of
    the same op and arity as the pattern's): a match only the other rules may refuse."""
    return not isinstance(_bind(pattern, view, root), str)


def _bind(pattern: Pattern, view: GraphView, root: int) -> tuple[dict[int, int], dict[str, str]] | str:
    """The graph node of each pattern node and the graph value of each pattern input,
    from the result ``root`` up, or why the ops do not line up."""
    index = {n.name: k for k, n in enumerate(pattern.nodes)}
    inputs = set(pattern.inputs)
    node_of: dict[int, int] = {}
    value_of: dict[str, str] = {}
    todo = [(len(pattern.nodes) - 1, root)]
    while todo:
        pk, gk = todo.pop()
        pnode, gnode = pattern.nodes[pk], view.nodes[gk]
        if pk in node_of:
            if node_of[pk] != gk:
                return f"{pnode.op} of the pattern would be two different nodes"
            continue
        if gnode.op != pnode.op or len(gnode.inputs) != len(pnode.inputs) or len(gnode.outputs) != 1:
            return (
                f"the pattern has {pnode.op} of {len(pnode.inputs)} input(s) where the graph has {gnode.op}"
            )
        if gk in node_of.values():
            return f"{gnode.op} would be two nodes of the pattern"
        node_of[pk] = gk
        for pin, gin in zip(pnode.inputs, gnode.inputs):
            if pin in inputs:
                if value_of.setdefault(pin, gin) != gin:
                    return f"pattern input {pin} would be two different values"
            elif gin not in view.producer:
                return f"{gin} is an input of the graph where the pattern has {pattern.nodes[index[pin]].op}"
            else:
                todo.append((index[pin], view.producer[gin]))
    return node_of, value_of


def match_pattern(pattern: Pattern, view: GraphView, root: int, catalog: Catalog) -> Match | str:
    """The match of ``pattern`` whose result is node ``root`` of ``view``, or why there
    is none (a sentence, for messages about a composite written by hand)."""
    bound = _bind(pattern, view, root)
    if isinstance(bound, str):
        return bound
    node_of, value_of = bound
    if len(set(value_of.values())) != len(value_of):
        return "two inputs of the pattern would be one value"
    nodes = tuple(node_of[k] for k in range(len(pattern.nodes)))
    members = set(nodes)
    inner = next((v for v in value_of.values() if view.producer.get(v) in members), None)
    if inner is not None:
        return f"{inner}, an input of the pattern, is computed inside the match"
    shared = set()
    for pk, gk in enumerate(nodes[:-1]):
        out = view.nodes[gk].name
        if out in view.outputs or any(c not in members for c in view.consumers.get(out, ())):
            if not _recomputable(pattern, pk, view.nodes[gk], catalog):
                return f"{out} is used outside the match"
            shared.add(gk)
    result = view.nodes[root].type
    if result.dtype not in pattern.dtypes:
        return f"the result is {result.dtype}; the pattern takes {', '.join(pattern.dtypes)}"
    for name in pattern.constants:
        if not view.is_constant(value_of[name]):
            return f"pattern input {name} must be a constant, but {value_of[name]} is not"
    if pattern.when:
        facts = Facts(
            tuple(NodeFacts.of(view.nodes[k], view.types, catalog) for k in nodes),
            {name: view.types[value_of[name]] for name in pattern.inputs},
        )
        why = pattern.refusal(facts)
        if why is not None:
            return why
    return Match(pattern, nodes, tuple(value_of[name] for name in pattern.inputs), frozenset(shared))


def _recomputable(pattern: Pattern, pk: int, node: Node, catalog: Catalog) -> bool:
    """Whether the match may compute pattern node ``pk`` (graph node ``node``) again
    although its value is used outside: an elementwise op of pattern inputs only,
    which costs a pass over its elements where the composite would otherwise not
    match at all."""
    return catalog[node.op].rule.elementwise and all(p in pattern.inputs for p in pattern.nodes[pk].inputs)


def composite_values(match: Match, view: GraphView, catalog: Catalog) -> dict[str, str]:
    """The placeholders a composite's kernel may use besides byoc's fixed ones: each
    pattern input's extents, types and strides along the result's axes (``${in0_dim0}``,
    ``${in2_stride1}``, ...) and each named node's attributes as its kernel uses them
    (``${conv.groups}``, ``${conv.strides0}``), an attribute that one node alone has also
    by its name alone (``${strides0}``, as an op's macro names it)."""
    pattern = match.pattern
    values = input_values([view.types[name] for name in match.inputs], view.nodes[match.root].type)
    for k, index in enumerate(match.nodes):
        node = view.nodes[index]
        handles = [h for h, at in pattern.handles.items() if at == k]
        attrs = resolve(catalog[node.op], [view.types[n] for n in node.inputs], node.attrs)
        for name, value in attrs.items():
            alone = [name] if pattern.sole_holder(name) == k else []  # ${strides0} of the one conv
            for key in [f"{h}.{name}" for h in handles] + alone:
                values[key] = c_value(value)
                if isinstance(value, tuple):
                    values.update((f"{key}{j}", str(v)) for j, v in enumerate(value))
    return values


def implementable(spec: BackendSpec, match: Match, view: GraphView, catalog: Catalog) -> bool:
    """Whether ``spec`` can generate the composite of ``match`` (see :func:`why_not_implementable`)."""
    return why_not_implementable(spec, match, view, catalog) is None


def why_not_implementable(spec: BackendSpec, match: Match, view: GraphView, catalog: Catalog) -> str | None:
    """Why ``spec`` cannot generate the composite of ``match``, or None when it can: a
    construct must serve the result's rank, and (c_source) every attribute value and
    input axis its macro reads must exist (a macro reading ``${in0_dim1}`` cannot take
    a vector as input 0, as a single op's cannot:
    :func:`byoc.generator.partition.annotate.supports`), and every elementwise node's
    inputs must be shaped as the macro reads them
    (:func:`~byoc.generator.c_source.values.shape_refusal`: broadcasting only with the
    macro's ``broadcast: true``; a bias vector's macro takes no full-shape tensor)."""
    binding = match.pattern.binding
    result = view.nodes[match.root].type
    if result.rank not in spec.ranks or not binding.supports(result.rank):
        return f"no kernel of the pattern takes a result of rank {result.rank} ({result})"
    if not isinstance(binding, MacroBinding):
        return None
    macro = spec.macros[binding.construct(result.rank) or ""]
    values = composite_values(match, view, catalog)
    for arg in macro.params.values():
        for name in placeholder_names(arg):
            ref = input_ref(name)
            # ${in<k>_dim<j>} and strides: the others come later (layouts)
            shaped = ref is not None and ref.what in ("dim", "stride", "strides")
            if ("." in name or shaped) and name not in values:
                what = (
                    f"input {ref.index} of the pattern ({match.pattern.inputs[ref.index]}) is "
                    f"{view.types[match.inputs[ref.index]]}"
                    if ref is not None and ref.index < len(match.inputs)
                    else "the match has no such value"
                )
                if ref is not None and ref.what != "dim" and ref.index < len(match.inputs):
                    what += f", which does not broadcast to the result {result}"
                return f"macro {macro.name} reads ${{{name}}}, but {what}"
    port = {name: p for p, name in enumerate(match.inputs)}
    epilogue = _epilogue(match, view, catalog)
    for k in match.nodes:
        node = view.nodes[k]
        ins = [view.types[name] for name in node.inputs]
        ports = [port.get(name) for name in node.inputs]
        why = shape_refusal(macro, node, catalog[node.op], ins, ports, k in epilogue)
        if why is not None:
            return f"{node.op} {node.name}: {why}"
    return None


def _epilogue(match: Match, view: GraphView, catalog: Catalog) -> set[int]:
    """The graph nodes of ``match`` whose value reaches its result through elementwise
    ops only (the result included): the kernel reads their inputs at its result's
    indices (``add(dense(x, w), b)``: b at each (i, j) of the result)."""
    members = set(match.nodes)
    epilogue = {match.root}
    for k in reversed(match.nodes):  # the pattern's order is topological, the result last
        if k in epilogue and catalog[view.nodes[k].op].rule.elementwise:
            epilogue.update(j for j in (view.producer.get(n) for n in view.nodes[k].inputs) if j in members)
    return epilogue


def composite_match(call: Node, spec: BackendSpec, region: Function, catalog: Catalog) -> Match | str:
    """The match of a composite call ``call`` of ``region`` (a region of ``spec``'s
    backend) against its pattern, which ``spec`` has: its body must be exactly the pattern."""
    callee = call.callee
    assert callee is not None and callee.composite is not None
    pattern = spec.patterns[callee.composite]
    region_constants = {c.name for c in region.constants}
    view = GraphView.of(callee, lambda name: name in region_constants)
    if len(callee.outputs) != 1 or callee.outputs[0] not in view.producer:
        return "a composite returns the value of its last op"
    found = match_pattern(pattern, view, view.producer[callee.outputs[0]], catalog)
    if isinstance(found, Match) and len(found.nodes) != len(callee.nodes):
        return f"the composite has {len(callee.nodes)} ops; pattern {pattern.name} has {pattern.size}"
    return found
