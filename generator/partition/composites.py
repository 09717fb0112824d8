"""Step 0 of partitioning (:mod:`byoc.generator.partition`): the matches of the
backends' composite patterns that are taken, each collapsed into a composite call node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

from byoc.catalog import Catalog, RuleError
from byoc.errors import ByocError
from byoc.ir import ANON_PREFIX, CALL_OP, Function, Node, Param
from byoc.spec.backend import BackendSpec
from byoc.spec.lowerings import LoweringBinding, lowered

from ..composite import GraphView, Match, match_pattern, matches_ops, why_not_implementable
from .annotate import supports, why_not_taken
from .names import fresh_name, rename_anonymous, substitute


@dataclass(frozen=True, slots=True)
class Refusal:
    """A pattern of ``backend`` that matched at a node by its ops, but was not taken:
    ``reason`` says why (for ``--explain``)."""

    backend: str
    pattern: str
    reason: str


def find_composites(
    fn: Function,
    specs: Sequence[BackendSpec],
    catalog: Catalog,
    refusals: dict[str, list[Refusal]] | None = None,
) -> dict[int, tuple[BackendSpec, Match]]:
    """The matches :func:`merge_composites` takes, by their result node's index.

    Patterns are tried largest first, then in the order of ``specs`` and of each spec's
    patterns; each at every node in node order. A node joins at most one match (but a
    shared one, see :class:`~byoc.generator.composite.Match`, joins each match that
    computes it again, and stays for its other users), and a match is only taken when
    the backend can take every node's tensors and generate the composite, and no
    backend earlier in ``specs`` would run one of its nodes (the order of ``specs`` is
    the user's preference, for composites as for single ops). ``refusals``, when
    given, receives by result node's name each pattern whose ops matched there but
    that was not taken, and why."""
    tried = sorted(
        ((-p.size, s, i), spec, p)
        for s, spec in enumerate(specs)
        for i, p in enumerate(spec.patterns.values())
    )
    if not tried:
        return {}
    view = GraphView.of(fn)
    preferred = [
        next((s for s, spec in enumerate(specs) if supports(spec, node, view.types, catalog)), len(specs))
        for node in fn.nodes
    ]
    taken: set[int] = set()  # nodes a match removes from the graph (not the shared ones)
    matches: dict[int, tuple[BackendSpec, Match]] = {}
    for (_, s, _), spec, pattern in tried:
        result_op = pattern.nodes[-1].op
        for k, node in enumerate(fn.nodes):
            if k in taken or node.op != result_op:
                continue
            found = match_pattern(pattern, view, k, catalog)
            why = _why_match_not_taken(spec, s, found, view, catalog, taken, preferred, specs)
            if why is None:
                assert isinstance(found, Match)
                taken.update(j for j in found.nodes if j not in found.shared)
                matches[k] = (spec, found)
            elif refusals is not None and matches_ops(pattern, view, k):
                refusals.setdefault(node.name, []).append(Refusal(spec.name, pattern.name, why))
    return matches


def _why_match_not_taken(
    spec: BackendSpec, s: int, found: Match | str, view: GraphView, catalog: Catalog, taken, preferred, specs
) -> str | None:
    """Why ``found`` (a match of a pattern of ``spec``, the ``s``-th backend) is not
    taken, or None when it is (see :func:`find_composites`)."""
    if isinstance(found, str):
        return found
    nodes = [view.nodes[j] for j in found.nodes]
    if taken.intersection(found.nodes):
        return "one of its ops is in a larger or earlier composite already"
    for j in found.nodes:
        if preferred[j] < s:
            return f"{view.nodes[j].op} {view.nodes[j].name} goes to {specs[preferred[j]].name}, preferred"
    for node in nodes:
        why = why_not_taken(spec, node, view.types, catalog)
        if why is not None:
            return f"{node.op} {node.name}: {why}"
    if isinstance(found.pattern.binding, LoweringBinding):
        return _why_not_lowered(spec, found, view, catalog)
    return why_not_implementable(spec, found, view, catalog)


def _lowering(found: Match, view: GraphView, catalog: Catalog, fresh) -> list[Node]:
    """The nodes that replace the match of a pattern with a lowering (:mod:`byoc.spec.lowerings`)."""
    binding = found.pattern.binding
    assert isinstance(binding, LoweringBinding)
    matched = [view.nodes[j] for j in found.nodes]
    return lowered(found.pattern, binding, matched, found.inputs, view.types, catalog, fresh)


def _why_not_lowered(spec: BackendSpec, found: Match, view: GraphView, catalog: Catalog) -> str | None:
    """Why the lowering of ``found`` cannot replace it: it does not type on this match,
    or the backend would not take one of its nodes."""
    try:
        nodes = _lowering(found, view, catalog, lambda base: f"%trial:{base}")  # names no graph value has
    except (ByocError, RuleError) as exc:
        return f"its lowering does not apply here: {exc.message}"
    types = dict(view.types)
    for node in nodes:
        types.update(zip(node.outputs, node.types))
        why = why_not_taken(spec, node, types, catalog)
        if why is not None:
            return f"its lowering's {node.op}: {why}"
    return None


def merge_composites(
    fn: Function,
    specs: Sequence[BackendSpec],
    catalog: Catalog,
    refusals: dict[str, list[Refusal]] | None = None,
) -> Function:
    """Collapse every match of :func:`find_composites` into a composite call node.

    A composite's result keeps its name (an anonymous one gets a readable name, so
    that the printed text reads back the same) and the nested calls of its body are
    numbered afresh, as the DSL numbers those of a nested block.
    """
    matches = find_composites(fn, specs, catalog, refusals)
    if not matches:
        return fn
    taken = {j for _, found in matches.values() for j in found.nodes if j not in found.shared}
    # A composite's result and the values it reads get readable names: its body numbers
    # its own anonymous values afresh, which must not meet an anonymous input's name.
    inner = {j: k for k, (_, found) in matches.items() for j in found.nodes}
    producer = {out: k for k, node in enumerate(fn.nodes) for out in node.outputs}
    read = {
        name
        for j, k in inner.items()
        for name in fn.nodes[j].inputs
        if inner.get(producer.get(name, -1)) != k
    }
    before = fn
    fn = rename_anonymous(fn, {fn.nodes[k].name for k in matches} | read)
    renamed = {a: b for n, m in zip(before.nodes, fn.nodes) for a, b in zip(n.outputs, m.outputs)}
    types = fn.types()
    view = GraphView.of(fn)
    names = set(types)
    fresh = partial(fresh_name, taken=names)
    nodes: list[Node] = []
    for k, node in enumerate(fn.nodes):
        if k in matches:
            spec, found = matches[k]
            if isinstance(found.pattern.binding, LoweringBinding):
                inputs = tuple(renamed.get(name, name) for name in found.inputs)
                nodes += _lowering(replace(found, inputs=inputs), view, catalog, fresh)
            else:
                nodes.append(_composite_node(spec, found, fn.nodes, types))
        elif k not in taken:
            nodes.append(node)
    shared = {fn.nodes[j].name for _, found in matches.values() for j in found.shared}
    if shared:  # one whose every other user went into a composite too is no longer used
        used = {name for node in nodes for name in node.inputs} | set(fn.outputs)
        nodes = [n for n in nodes if n.name not in shared or n.name in used]
    return replace(fn, nodes=tuple(nodes))


def _composite_node(spec: BackendSpec, found: Match, nodes: Sequence[Node], types) -> Node:
    """The call node of a composite: its callee holds the matched nodes, in graph order.
    A shared node's value is anonymous in it, so that its name stays the outer node's."""
    members = [nodes[j] for j in sorted(found.nodes)]
    root = nodes[found.root]
    shared = {nodes[j].name for j in found.shared}
    nested = [n.name for n in members if n.name.startswith(ANON_PREFIX) or n.name in shared]
    anon = {name: f"{ANON_PREFIX}{i}" for i, name in enumerate(nested, 1)}
    members = [
        replace(n, outputs=substitute(n.outputs, anon), inputs=substitute(n.inputs, anon)) for n in members
    ]
    inner = {n.name for n in members}
    captured = list(dict.fromkeys(name for n in members for name in n.inputs if name not in inner))
    callee = Function(
        None,
        tuple(Param(name, types[name], None) for name in captured),
        (),
        tuple(members),
        root.outputs,
        spec.name,
        root.loc,
        found.pattern.name,
    )
    return Node(root.outputs, CALL_OP, tuple(captured), root.types, (), callee, root.loc)
