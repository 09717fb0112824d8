"""Automatic partitioning, IR to IR: annotate, merge regions, partition.

0. **Composites.** The backends' composite patterns are matched first, largest
   first (:func:`merge_composites`, :mod:`byoc.generator.composite`); each match
   becomes a composite call node, which goes to the backend of its pattern, when
   every condition of the pattern holds (``when:``, on shapes too). Then
   every other node of constants only is folded to a constant
   (:mod:`byoc.generator.folding`): what no pattern took is computed once, at build.
1. **Annotate.** Each op node goes to the first backend, in the user's order, whose
   spec supports it: the op at its output dtype and rank, its inputs' dtypes and
   ranks, broadcasting (of ops whose catalog shape rule is elementwise) only if
   the spec declares ``broadcast: true`` (c_source: the macro that runs the node),
   attributes only if the backend's kind can carry them, and only where the
   conditions of its mapping hold (``when:``, :mod:`byoc.spec.conditions`).
   :func:`why_not_supported` says why a backend refuses a node. Nodes no backend
   takes stay on the host. Explicit ``@backend { }`` regions are kept as they are.
2. **Merge.** Walking the nodes in topological order, a node joins the region of
   one of its producers with the same backend, unless that would create a cycle
   through the host: it may not join region R if another of its inputs, outside R,
   depends on R. (Bit sets of the regions each value depends on make the check
   cheap.) Otherwise it starts a region. A region may have several inputs and
   outputs; one whose backend kind allows fewer outputs is split into single ops,
   and the other regions are merged again around them.
3. **Partition.** Each region becomes a call node whose callee is a Function with
   the backend set: its parameters are the values it captures, its outputs the
   values used after it. Constants used only inside one region move into it (when
   the backend's kind embeds constants); one that only regions use, each with a
   composite whose pattern needs it constant (`constants:`), is copied into each. Anonymous values (nested calls) that cross
   a region boundary get readable names. The result prints as DSL with explicit
   regions, and lowering gives the regions their symbols.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from byoc.catalog import Catalog
from byoc.errors import GraphError
from byoc.ir import ANON_PREFIX, CALL_OP, Constant, Function, Node, Param, Program, TensorType
from byoc.spec.backend import BackendSpec
from byoc.spec.bindings import MacroBinding
from byoc.spec.conditions import Facts, NodeFacts
from byoc.spec.kind_macros import MacroKind

from .composite import GraphView, Match, match_pattern, matches_ops, why_not_implementable
from .folding import fold_constants, foldable_nodes


def partition(program: Program, specs: Sequence[BackendSpec], catalog: Catalog | None = None) -> Program:
    """Offload every node some backend of ``specs`` supports, in that order of
    preference. ``catalog`` defaults to the shipped op catalog."""
    if catalog is None:
        from byoc.spec import load_catalog

        catalog = load_catalog()
    return Program(tuple(partition_function(fn, specs, catalog) for fn in program.functions))


def supports(spec: BackendSpec, node: Node, types: Mapping[str, TensorType], catalog: Catalog) -> bool:
    """Whether ``spec`` can run ``node`` (see the module docstring, step 1)."""
    return why_not_supported(spec, node, types, catalog) is None


def why_not_supported(
    spec: BackendSpec, node: Node, types: Mapping[str, TensorType], catalog: Catalog
) -> str | None:
    """Why ``spec`` does not run ``node``, as one clause (``it does not map conv``,
    ``when: in1.shape[2] <= 11 is false (in1.shape[2] = 13)``), or None when it does:
    the first of the checks of the module docstring's step 1 that fails."""
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
    them (:func:`~byoc.generator.c_source_values.shape_refusal`); other bindings always fit."""
    if not isinstance(spec.ops.get(node.op), MacroBinding):
        return None
    from .c_source_layouts import kernel_macro
    from .c_source_values import check_input_axes, shape_refusal

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
    return why_not_implementable(spec, found, view, catalog)


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
    fn = _rename_anonymous(fn, {fn.nodes[k].name for k in matches} | read)
    types = fn.types()
    nodes: list[Node] = []
    for k, node in enumerate(fn.nodes):
        if k in matches:
            spec, found = matches[k]
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
    members = [replace(n, outputs=_sub(n.outputs, anon), inputs=_sub(n.inputs, anon)) for n in members]
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


def merge(fn: Function, chosen: Sequence[str | None], single: Set[int] = frozenset()) -> list[int | None]:
    """The region of each node (None: the host); regions never form a cycle.
    The nodes at the indices in ``single`` each stay alone in their region.

    Regions are classes of a union-find. ``deps[v]`` is the bit set of region ids
    value ``v`` depends on, ``mask[c]`` the ids in class ``c``, and ``ext[c]`` what
    the inputs entering class ``c`` from outside depend on. A node joins (and so
    merges) the classes of its same-backend producers when no other input depends
    on them and no two of them reach each other through the outside.

    A region runs as a whole, so a value that depends on one id of a class depends
    on everything entering the class; as classes merge, ``deps`` recorded earlier
    miss those paths. ``closure`` adds them back before every check.
    """
    parent: list[int] = []
    mask: list[int] = []
    ext: list[int] = []
    backend_of: list[str] = []
    closed: list[bool] = []
    region_of_value: dict[str, int] = {}
    deps: dict[str, int] = {}
    regions: list[int | None] = []

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    def root_of(name: str) -> int | None:
        r = region_of_value.get(name)
        return None if r is None else find(r)

    def closure(bits: int) -> int:
        """Every region id ``bits`` depends on, through whole classes and their inputs."""
        seen = 0
        todo = bits
        while todo:
            low = todo & -todo
            todo ^= low
            if seen & low:
                continue
            c = find(low.bit_length() - 1)
            seen |= mask[c]
            todo |= (mask[c] | ext[c]) & ~seen
        return seen

    for k, (node, backend) in enumerate(zip(fn.nodes, chosen)):
        reach = 0
        for name in node.inputs:
            reach |= deps.get(name, 0)
        region = None
        if backend is not None:
            joined: list[int] = []
            for name in () if k in single else node.inputs:
                c = root_of(name)
                if c is None or c in joined or backend_of[c] != backend or closed[c]:
                    continue
                trial = 0
                for j in (*joined, c):
                    trial |= mask[j]
                outside_ok = all(
                    not closure(deps.get(q, 0)) & trial for q in node.inputs if root_of(q) not in (*joined, c)
                )
                pairs_ok = all(
                    not closure(ext[c]) & mask[j] and not closure(ext[j]) & mask[c] for j in joined
                )
                if outside_ok and pairs_ok:
                    joined.append(c)
            if joined:
                region = joined[0]
                for c in joined[1:]:
                    parent[c] = region
                    mask[region] |= mask[c]
                    ext[region] |= ext[c]
            else:
                region = len(parent)
                parent.append(region)
                mask.append(1 << region)
                ext.append(0)
                backend_of.append(backend)
                closed.append(k in single)
            for q in node.inputs:
                if root_of(q) != region:
                    ext[region] |= deps.get(q, 0)
            reach |= mask[region]
            for out in node.outputs:
                region_of_value[out] = region
        for out in node.outputs:
            deps[out] = reach
        regions.append(region)
    roots = [None if r is None else find(r) for r in regions]
    renumber: dict[int, int] = {}
    return [None if r is None else renumber.setdefault(r, len(renumber)) for r in roots]


@dataclass(frozen=True)
class Placed:
    """A function with its composites merged and its constants folded (steps 0 and 1),
    and the backend of each of its nodes (None: the host)."""

    function: Function
    chosen: list[str | None]
    folded: tuple[Node, ...] = ()
    """The nodes folded into constants at build, as they were."""
    refusals: Mapping[str, list[Refusal]] = field(default_factory=dict)
    """Patterns whose ops matched at a node (by its name) but that were not taken,
    when asked for."""


def placed_function(
    fn: Function, specs: Sequence[BackendSpec], catalog: Catalog, *, explain: bool = False
) -> Placed:
    """Steps 0 and 1 on ``fn``; with ``explain``, also what :class:`Placed` records for
    :mod:`byoc.generator.explain`."""
    refusals: dict[str, list[Refusal]] | None = {} if explain else None
    fn = merge_composites(fn, specs, catalog, refusals)
    fn = _rename_anonymous(fn, {name for node in foldable_nodes(fn) for name in node.outputs})
    folded = tuple(foldable_nodes(fn)) if explain else ()
    fn = fold_constants(fn, catalog)
    return Placed(fn, annotate(fn, specs, catalog), folded, refusals or {})


def partition_function(fn: Function, specs: Sequence[BackendSpec], catalog: Catalog) -> Function:
    placed = placed_function(fn, specs, catalog)
    fn, chosen = placed.function, placed.chosen
    if not any(chosen):
        return fn
    by_name = {s.name: s for s in specs}
    single: set[int] = set()
    while True:
        regions = merge(fn, chosen, single)
        too_big = _oversized(fn, chosen, regions, by_name)
        if not too_big:
            break
        # Those regions' nodes go alone, and the others merge again without them:
        # the regions they formed may have kept other backends' regions apart.
        single |= {k for k, r in enumerate(regions) if r in too_big}
    fn = _name_crossing_values(fn, regions)
    return _build(fn, chosen, regions, by_name)


def _outputs_of(fn: Function, regions: Sequence[int | None]) -> dict[int, list[str]]:
    """Values each region defines that are used outside it, in definition order.

    A region of unused nodes only (dead code) returns its last value, so that every
    call defines something and every name of the source stays defined.
    """
    region_of = {out: r for node, r in zip(fn.nodes, regions) if r is not None for out in node.outputs}
    used_outside: set[str] = set(fn.outputs)
    for node, r in zip(fn.nodes, regions):
        used_outside.update(n for n in node.inputs if region_of.get(n) not in (None, r))
    outputs: dict[int, list[str]] = {}
    last: dict[int, Node] = {}
    for node, r in zip(fn.nodes, regions):
        if r is not None:
            outputs.setdefault(r, [])
            outputs[r] += [o for o in node.outputs if o in used_outside]
            last[r] = node
    for r, outs in outputs.items():
        if not outs:
            outs.extend(last[r].outputs)
    return outputs


def _oversized(fn, chosen, regions, by_name) -> set[int]:
    """The regions with more outputs than their backend's kind allows."""
    limits = {r: by_name[b].kind.max_outputs for r, b in zip(regions, chosen) if r is not None}
    return {
        r for r, outs in _outputs_of(fn, regions).items() if limits[r] is not None and len(outs) > limits[r]
    }


def _name_crossing_values(fn: Function, regions: Sequence[int | None]) -> Function:
    """Give anonymous values that cross a region boundary a readable, unique name."""
    owner = {out: r for node, r in zip(fn.nodes, regions) for out in node.outputs}
    crossing = {
        name
        for node, r in zip(fn.nodes, regions)
        for name in node.inputs
        if name.startswith(ANON_PREFIX) and owner.get(name) != r
    }
    crossing |= {name for name in fn.outputs if name.startswith(ANON_PREFIX) and owner.get(name) is not None}
    return _rename_anonymous(fn, crossing)


def _rename_anonymous(fn: Function, names: Set[str]) -> Function:
    """Give the anonymous values among ``names`` readable, unique names (``relu_0``)."""
    crossing = {name for name in names if name.startswith(ANON_PREFIX)}
    if not crossing:
        return fn
    taken = set(fn.types())
    ops = {out: node.op for node in fn.nodes for out in node.outputs}
    rename: dict[str, str] = {}
    for name in sorted(crossing, key=lambda n: int(n[len(ANON_PREFIX) :])):
        k = 0
        while f"{ops[name]}_{k}" in taken:
            k += 1
        rename[name] = f"{ops[name]}_{k}"
        taken.add(rename[name])
    nodes = tuple(
        replace(n, outputs=_sub(n.outputs, rename), inputs=_sub(n.inputs, rename)) for n in fn.nodes
    )
    return replace(fn, nodes=nodes, outputs=_sub(fn.outputs, rename))


def _pinned_constants(members: Mapping[int, list[Node]], backend, by_name) -> dict[int, set[str]]:
    """Per region (of a kind that embeds constants), the values its composites read
    whose pattern requires constants (``constants:``): those must be constants in it."""
    pinned: dict[int, set[str]] = {}
    for r, nodes in members.items():
        spec = by_name[backend[r]]
        if not spec.kind.constants:
            continue
        for n in nodes:
            pattern = spec.patterns.get(n.callee.composite) if n.callee is not None else None
            if pattern is not None and pattern.constants:
                pinned.setdefault(r, set()).update(n.inputs)
    return pinned


def _sub(names: tuple[str, ...], rename: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(rename.get(n, n) for n in names)


def _build(fn: Function, chosen, regions, by_name) -> Function:
    types = fn.types()
    outputs = _outputs_of(fn, regions)
    members: dict[int, list[Node]] = {}
    for node, r in zip(fn.nodes, regions):
        if r is not None:
            members.setdefault(r, []).append(node)
    backend = {r: b for r, b in zip(regions, chosen) if r is not None}

    consumers: dict[str, set[object]] = {}
    for node, r in zip(fn.nodes, regions):
        for name in node.inputs:
            consumers.setdefault(name, set()).add(("region", r) if r is not None else ("host", id(node)))
    for name in fn.outputs:
        consumers.setdefault(name, set()).add(("output",))
    pinned = _pinned_constants(members, backend, by_name)
    moved: dict[int, list[Constant]] = {}
    moved_names: set[str] = set()
    for c in fn.constants:
        users = consumers.get(c.name, set())
        if len(users) == 1:
            (user,) = users
            if user[0] == "region" and by_name[backend[user[1]]].kind.constants:
                moved.setdefault(user[1], []).append(c)
                moved_names.add(c.name)
            continue
        # Used by several regions, each with a composite that needs it constant: each
        # gets a copy (as a parameter it would not be one, and the pattern would not
        # match). Not when the host keeps it too: a region's copy would shadow it.
        holders = [r for r in sorted(pinned) if c.name in pinned[r]]
        if holders and users == {("region", r) for r in holders}:
            for r in holders:
                moved.setdefault(r, []).append(c)
            moved_names.add(c.name)

    calls: dict[int, Node] = {}
    for r, nodes in members.items():
        inner = {o for n in nodes for o in n.outputs}
        own_constants = {c.name for c in moved.get(r, [])}
        captured: list[str] = []
        for n in nodes:
            for name in n.inputs:
                if name not in inner and name not in own_constants and name not in captured:
                    captured.append(name)
        callee = Function(
            None,
            tuple(Param(name, types[name], None) for name in captured),
            tuple(moved.get(r, [])),
            tuple(nodes),
            tuple(outputs[r]),
            backend[r],
            nodes[0].loc,
        )
        calls[r] = Node(
            tuple(outputs[r]), CALL_OP, tuple(captured), callee.output_types, (), callee, nodes[0].loc
        )

    ordered = _order(fn, regions, calls)
    return replace(
        fn, constants=tuple(c for c in fn.constants if c.name not in moved_names), nodes=tuple(ordered)
    )


def _order(fn: Function, regions, calls: dict[int, Node]) -> list[Node]:
    """Host nodes and region calls in a topological order close to the source order."""
    units: list[Node] = []
    first_index: list[int] = []
    seen_regions: set[int] = set()
    for k, (node, r) in enumerate(zip(fn.nodes, regions)):
        if r is None:
            units.append(node)
            first_index.append(k)
        elif r not in seen_regions:
            seen_regions.add(r)
            units.append(calls[r])
            first_index.append(k)
    producer = {out: u for u, unit in enumerate(units) for out in unit.outputs}
    waiting = [0] * len(units)
    readers: dict[int, list[int]] = {}
    for u, unit in enumerate(units):
        for dep in {producer[n] for n in unit.inputs if n in producer}:
            waiting[u] += 1
            readers.setdefault(dep, []).append(u)
    ready = [(first_index[u], u) for u in range(len(units)) if waiting[u] == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(units[u])
        for v in readers.get(u, []):
            waiting[v] -= 1
            if waiting[v] == 0:
                heapq.heappush(ready, (first_index[v], v))
    assert len(order) == len(units), "merging never creates a cycle"
    return order
