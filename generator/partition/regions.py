"""Step 3 of partitioning (:mod:`byoc.generator.partition`): each region's outputs, names
for the values that cross regions, and the function rewritten with a call per region."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import replace

from byoc.ir import ANON_PREFIX, CALL_OP, Constant, Function, Node, Param

from .names import rename_anonymous


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


def oversized_regions(fn, chosen, regions, by_name) -> set[int]:
    """The regions with more outputs than their backend's kind allows."""
    limits = {r: by_name[b].kind.max_outputs for r, b in zip(regions, chosen) if r is not None}
    return {
        r for r, outs in _outputs_of(fn, regions).items() if limits[r] is not None and len(outs) > limits[r]
    }


def name_crossing_values(fn: Function, regions: Sequence[int | None]) -> Function:
    """Give anonymous values that cross a region boundary a readable, unique name."""
    owner = {out: r for node, r in zip(fn.nodes, regions) for out in node.outputs}
    crossing = {
        name
        for node, r in zip(fn.nodes, regions)
        for name in node.inputs
        if name.startswith(ANON_PREFIX) and owner.get(name) != r
    }
    crossing |= {name for name in fn.outputs if name.startswith(ANON_PREFIX) and owner.get(name) is not None}
    return rename_anonymous(fn, crossing)


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


def build_regions(fn: Function, chosen, regions, by_name) -> Function:
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
        # Used by several regions, one or more with a composite that needs it constant:
        # each region gets a copy (as a parameter it would not be one, and the pattern
        # would not match), when all of them embed constants. Not when the host keeps it
        # too: a region's copy would shadow it.
        pinning = any(c.name in names for names in pinned.values())
        embedding = {u[1] for u in users if u[0] == "region" and by_name[backend[u[1]]].kind.constants}
        if pinning and users == {("region", r) for r in embedding}:
            for r in sorted(embedding):
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
